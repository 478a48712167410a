// The two documents of the artifact contract (SPEC 1): the model package sidecar
// (mlc-model-manifest.json, "mlc.model-package") and the compiled-program document
// (_metadata.artifact, "mlc.compiled-program"); their parsers, normalized serialization,
// identifiers (SPEC 2) and the producer's file format (SPEC 4).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc {

inline constexpr const char* kModelPackageSchema = "mlc.model-package";
inline constexpr const char* kCompiledProgramSchema = "mlc.compiled-program";
inline constexpr const char* kManifestFileName = "mlc-model-manifest.json";
inline constexpr const char* kChatConfigFileName = "mlc-chat-config.json";
inline constexpr const char* kTensorCacheFileName = "tensor-cache.json";

// processor {"kind": "audio_decode", "format": "pcm_f32", ...}
struct AudioDecode {
  int64_t sample_rate_hz = 16000;
  int64_t channels = 1;
  int64_t min_samples = 1;
  int64_t max_samples = 480000;
  bool operator==(const AudioDecode&) const = default;
};

enum class ResizeMode { kStretch, kCenterCrop };
const char* ResizeModeName(ResizeMode mode);  // "stretch" / "center_crop"

// processor {"kind": "image_decode", "format": "rgb_u8", "layout": "nhwc", ...}
struct ImageDecode {
  ResizeMode mode = ResizeMode::kStretch;
  int64_t height = 0;
  int64_t width = 0;
  int64_t num_embeddings = 0;
  bool operator==(const ImageDecode&) const = default;
};

// A named processor ("tokenizer") or one of the decode kinds.
using Processor = std::variant<std::string, AudioDecode, ImageDecode>;

struct PromptInsertion {
  std::vector<int64_t> prefix_token_ids;
  int64_t placeholder_token_id = 0;
  std::vector<int64_t> suffix_token_ids;
  bool operator==(const PromptInsertion&) const = default;
};

struct TaskInput {
  Processor processor;
  std::optional<std::string> adapter;     // declared together with prompt
  std::optional<PromptInsertion> prompt;
  bool operator==(const TaskInput&) const = default;
};

struct Task {
  std::string executor;
  std::map<std::string, TaskInput> inputs;
  std::string output;
  bool operator==(const Task&) const = default;
};

using Tasks = std::map<std::string, Task>;

struct ModelPackage {
  std::string interface_id;
  std::string parameter_schema_id;   // weights.parameter_schema_id
  Tasks tasks;
};

struct Program {
  std::string kind;
  std::map<std::string, std::string> exports;                // role -> function
  std::optional<std::map<std::string, std::string>> adapters;        // adapter -> function
  std::optional<std::map<std::string, std::string>> adapter_dtypes;  // adapter -> dtype
};

struct Resources {
  std::vector<std::string> required_features;
  int64_t max_storage_buffer_binding_size = 0;
  int64_t estimated_device_memory_bytes = 0;
  bool operator==(const Resources&) const = default;
};

struct CompiledProgram {
  std::string interface_id;
  std::string parameter_schema_id;
  std::map<std::string, Program> programs;
  Resources resources;
  // From a _metadata object: its "kv_state_kind" beside "artifact", when present.
  std::optional<std::string> kv_state_kind;
};

// The KV state a program's roles imply (SPEC 5 rule 7): "hybrid" when it exports
// create_rnn_state, else "kv_cache". Of a compiled program: "hybrid" when any program is.
std::string KvStateKind(const Program& program);
std::string KvStateKind(const std::map<std::string, Program>& programs);

// ---- Parsing (every rule of SPEC 1; all errors found, each at its JSON Pointer) ----

// Tasks objects alone (the value of "tasks"); `path` prefixes the pointers.
Result<Tasks> ParseTasks(const Json& value, const std::string& path = "");
// A whole mlc.model-package document. The interface_id is recomputed and compared.
Result<ModelPackage> ParseModelPackage(const Json& doc);
// The same in two steps: every rule of the document, with the declared interface_id kept as it
// is; then the id recomputed from the tasks and compared (an error at /interface_id).
Result<ModelPackage> ParseModelPackageFields(const Json& doc);
Status CheckInterfaceId(const ModelPackage& pkg);
// A whole mlc.compiled-program document, or a _metadata object holding it under "artifact"
// (pointers then start with /artifact).
Result<CompiledProgram> ParseCompiledProgram(const Json& doc);

// A "programs" object alone: {name: {kind, exports, adapters?, adapter_dtypes?}}.
Result<std::map<std::string, Program>> ParsePrograms(const Json& value, const std::string& path = "");

enum class DocumentKind { kModelPackage, kCompiledProgram, kMetadata, kUnknown };
// From "schema" (or an object with "artifact"); kUnknown otherwise.
DocumentKind DetectDocument(const Json& doc);

// Reads and parses files (JSON limits apply; I/O errors have code kIo).
Result<ModelPackage> ReadModelPackage(const std::string& path);
Result<CompiledProgram> ReadCompiledProgram(const std::string& path);

// ---- Normalized serialization and identifiers (SPEC 2, 4) ----

OrderedJson TasksJson(const Tasks& tasks);  // normalized: defaults filled, producer key order
OrderedJson ModelPackageJson(const ModelPackage& pkg);
OrderedJson CompiledProgramJson(const CompiledProgram& program);

// "sha256:..." of canonical({"tasks": normalized tasks}) (an I/O error when the crypto module is missing).
Result<std::string> ComputeInterfaceId(const Tasks& tasks);

// One parameter of the post-quantization parameter list.
struct ParamSpec {
  std::string name;
  std::vector<std::variant<int64_t, std::string>> shape;  // integer or symbolic dimension
  std::string dtype;
};
// "sha256:..." of canonical(sorted by name [{"name","shape","dtype"}]); names must be unique.
Result<std::string> ComputeParameterSchemaId(std::vector<ParamSpec> params);
// A JSON array of {name, shape, dtype} objects.
Result<std::vector<ParamSpec>> ParseParamSpecs(const Json& value, const std::string& path = "");

// The producer's bytes: json.dump(doc, indent=2) + "\n" (SPEC 4).
std::string WriteModelPackage(const ModelPackage& pkg);
std::string WriteCompiledProgram(const CompiledProgram& program, bool as_metadata = false);

// Looks up an input of a task: by name, else (name empty) the first audio / image input.
const TaskInput* FindInput(const Task& task, const std::string& name, bool want_audio);

// The task of a package and its audio (want_audio) or image input, by name or the first of
// that kind; a missing task or input is a usage error naming what the package has.
struct TaskAndInput {
  const Task* task;
  const TaskInput* input;
};
Result<TaskAndInput> FindMediaInput(const ModelPackage& pkg, const std::string& task,
                                    const std::string& input, bool want_audio);

}  // namespace mlc
