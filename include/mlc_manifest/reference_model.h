// The reference runtime: a small CPU transformer that implements every role of the contract with
// the seed's argument shapes (embed, prefill/decode for the token and the embed pair, a KV cache,
// an audio and an image adapter), and a generator that stores it as a real converted package
// (tensor-cache.json with bf16-encoded shards, mlc-chat-config.json, both manifest halves), so
// the whole native path runs on real files. For tests and the demo; not a language model.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/runtime.h"

namespace mlc {

// The library's _metadata (functions, parameter order, artifact) beside the package.
inline constexpr const char* kReferenceLibraryFile = "reference-lib.json";
// The compiled-program document (what `--program` takes).
inline constexpr const char* kReferenceProgramFile = "compiled-program.json";
inline constexpr const char* kReferenceModelType = "mlc-reference";

// Special token ids of the reference vocabulary.
struct ReferenceTokens {
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;  // conv_template.stop_token_ids
  static constexpr int32_t kAudioStart = 3;
  static constexpr int32_t kAudioPlaceholder = 4;
  static constexpr int32_t kAudioEnd = 5;
  static constexpr int32_t kImageStart = 6;
  static constexpr int32_t kImagePlaceholder = 7;
  static constexpr int32_t kImageEnd = 8;
};

enum class ReferencePairs { kTokens, kEmbeds, kBoth };
const char* ReferencePairsName(ReferencePairs pairs);  // "tokens", "embeds", "both"

struct ReferenceModelOptions {
  uint64_t seed = 0;
  ReferencePairs pairs = ReferencePairs::kTokens;
  bool audio = false;
  bool image = false;
  bool manifest = true;  // false: a legacy package (no mlc-model-manifest.json)
  std::string image_dtype = "uint8";  // or "uint32" (adapter_dtypes)
  int64_t vocab_size = 512;
  int64_t hidden_size = 64;
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t intermediate_size = 128;
  int64_t context_window_size = 2048;
  int64_t prefill_chunk_size = 128;
  int64_t sample_rate_hz = 16000;
  int64_t audio_frame_size = 640;   // samples per adapter row (40 ms at 16 kHz)
  int64_t max_audio_samples = 480000;
  int64_t image_size = 32;          // image_decode resize height = width
  int64_t patch_size = 8;           // rows = (image_size / patch_size)^2
  uint64_t shard_bytes = 64 << 10;  // largest shard
  bool force = false;               // replace existing files
};

struct ReferenceModelReport {
  std::vector<std::string> files;  // written, relative to the folder
  int64_t parameter_count = 0;     // tensors
  int64_t parameter_bytes = 0;     // as float32 on the device
  int64_t shard_bytes = 0;         // on disk (bf16)
  std::string interface_id;
  std::string parameter_schema_id;
};

// Writes the package into dir (created when missing). Existing files are kept and reported
// (ErrorCode::kUsage) unless options.force.
Result<ReferenceModelReport> WriteReferenceModel(const std::string& dir,
                                                 const ReferenceModelOptions& options);

// The library for a reference package: its dimensions from mlc-chat-config.json's model_config,
// its exports and parameter order from reference-lib.json.
Result<std::unique_ptr<ModelLibrary>> OpenReferenceLibrary(const std::string& dir);

}  // namespace mlc
