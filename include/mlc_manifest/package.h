// A converted-model directory: mlc-chat-config.json (the fields we use, type-checked; the rest
// kept), tensor-cache.json (or the legacy ndarray-cache.json) with its shards, and the
// resources the parameters need (SPEC 3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc {

// The manifest of a package folder (DIR/mlc-model-manifest.json), or the path itself when it is
// a file.
std::string ManifestPath(const std::string& dir_or_file);

// The parameter list of a document: a JSON array of {name, shape, dtype}, or a tensor cache.
Result<std::vector<ParamSpec>> ParamSpecsOfDocument(const Json& doc);

// ---- mlc-chat-config.json ----

struct ChatConfig {
  Json raw;  // the whole document; unknown fields are kept and ignored
  std::string model_type;
  std::string quantization;
  Json model_config = Json::object();
  std::optional<int64_t> vocab_size;
  std::optional<int64_t> context_window_size;
  std::optional<int64_t> prefill_chunk_size;
  std::optional<int64_t> sliding_window_size;   // -1 or absent: none
  std::optional<int64_t> attention_sink_size;
  std::optional<int64_t> tensor_parallel_shards;
  // The generation defaults MLC writes beside the model (numbers; absent or null: not set).
  struct Sampling {
    std::optional<double> temperature;
    std::optional<double> top_p;
    std::optional<double> repetition_penalty;
    std::optional<double> presence_penalty;
    std::optional<double> frequency_penalty;
  } sampling;

  // A named dimension: top-level first, then model_config (SPEC 3). Integers only.
  std::optional<int64_t> Dimension(const std::string& name) const;
  // True when a sliding window is configured (> 0).
  bool HasSlidingWindow() const { return sliding_window_size && *sliding_window_size > 0; }
};

Result<ChatConfig> ParseChatConfig(const Json& doc);
Result<ChatConfig> ReadChatConfig(const std::string& path);

// ---- tensor-cache.json ----

struct TensorRecord {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;   // declared dtype (what the device holds)
  std::string format;  // "raw" or "f32-to-bf16"
  uint64_t nbytes = 0;
  uint64_t byte_offset = 0;

  // Bytes per element on disk: 2 for a float32 record stored as bfloat16, else the dtype's size.
  uint64_t StoredItemSize() const;
  uint64_t Elements() const;
};

struct TensorShard {
  std::string data_path;  // relative to the cache file's folder
  std::string format;     // "raw-shard"
  uint64_t nbytes = 0;
  std::string md5sum;     // lowercase hex, may be empty when absent
  std::vector<TensorRecord> records;
};

struct TensorCache {
  std::string file;  // the file it was read from
  bool legacy_name = false;  // read from ndarray-cache.json
  std::optional<int64_t> param_size;   // metadata.ParamSize
  std::optional<int64_t> param_bytes;  // metadata.ParamBytes
  std::vector<TensorShard> shards;
};

// Parses and validates the document: data paths relative without "..", records inside their
// shard without overlaps, unique names, nbytes = elements x stored itemsize.
Result<TensorCache> ParseTensorCache(const Json& doc);
// DIR/tensor-cache.json, else DIR/ndarray-cache.json (legacy: current runtimes only look for the
// new name; `legacy_name` says so).
Result<TensorCache> ReadTensorCache(const std::string& dir);

// Every record as {name, shape, dtype} (integer dimensions).
std::vector<ParamSpec> ParamSpecsOf(const TensorCache& cache);

// Lays parameters out as MLC's converter does: records in the given order, a new shard
// ("params_shard_N.bin") whenever the next record would take the current one past shard_cap
// bytes, records contiguous, every record "f32-to-bf16" (float32 stored as bfloat16). Named
// dimensions are an error (a tensor cache holds concrete shapes). No md5sums (no data yet).
Result<TensorCache> LayoutTensorCache(const std::vector<ParamSpec>& params,
                                      uint64_t shard_cap = 32ull << 20);

// The file the converter writes: json.dump(cache, indent=4), with metadata ParamSize and
// ParamBytes (declared-dtype bytes, a float as the converter writes it).
std::string WriteTensorCache(const TensorCache& cache);

// ---- resources (SPEC 3) ----

// Size in bytes of one element of a declared dtype; nullopt for an unknown dtype.
std::optional<int64_t> DtypeItemSize(const std::string& dtype);

struct ResourceEstimate {
  int64_t parameter_count = 0;
  int64_t max_parameter_bytes = 0;  // max_storage_buffer_binding_size
  std::string largest_parameter;
  int64_t total_bytes = 0;          // estimated_device_memory_bytes
};

// Sizes from shapes x declared itemsize; named dimensions resolved from the chat config (may be
// null when every dimension is an integer). Overflow, unknown dtypes and unresolved names are
// errors naming the parameter.
Result<ResourceEstimate> EstimateResources(const std::vector<ParamSpec>& params,
                                           const ChatConfig* config);

// Resources for the program document: the estimate plus features sorted and unique.
Resources MakeResources(const ResourceEstimate& estimate, std::vector<std::string> features);

// ---- compiled programs (SPEC 3, 4) ----

// What a compiled-program document is made of.
struct ProgramParts {
  Tasks tasks;                               // -> interface_id
  std::map<std::string, Program> programs;
  std::vector<ParamSpec> params;             // -> parameter_schema_id and resources
  std::vector<std::string> features;         // required device features (any order, repeats)
  bool record_kv_state_kind = false;         // set kv_state_kind (KvStateKind of the programs)
};

// The compiled-program document of those parts: ids computed, resources estimated from the
// parameter list (named dimensions from config, which may be null when there are none).
Result<CompiledProgram> AssembleCompiledProgram(const ProgramParts& parts, const ChatConfig* config);

}  // namespace mlc
