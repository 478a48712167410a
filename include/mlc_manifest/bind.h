// Binding a model package to a compiled program (SPEC 5): the checks WebLLM enforces before it
// loads a model, and more, yielding the resolved contract a frontend drives.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"

namespace mlc {

enum class GenerationPair { kTokens, kEmbeds };
const char* GenerationPairName(GenerationPair pair);  // "tokens" / "embeds"

// An audio or image input bound to its adapter function.
struct BoundMedia {
  std::string input;     // the input's name in the task
  std::string adapter;   // adapter name (key of program.adapters)
  std::string function;  // library function implementing it
  std::string dtype;     // "float32" (audio), "uint8" or "uint32" (image)
  PromptInsertion prompt;
};

struct BoundAudio : BoundMedia {
  AudioDecode processor;
};

struct BoundImage : BoundMedia {
  ImageDecode processor;
};

struct BoundContract {
  std::string task_name;
  std::string executor;  // program name
  Program program;
  GenerationPair pair = GenerationPair::kTokens;
  std::string embed_function;            // embed_tokens
  std::string create_kv_cache_function;  // create_kv_cache
  std::string prefill_function;          // prefill_tokens or prefill_embeds
  std::string decode_function;           // decode_tokens or decode_embeds
  std::optional<std::string> create_rnn_state_function;  // hybrid KV state
  std::string kv_state_kind;             // "kv_cache" or "hybrid" (implied by the roles)
  std::string text_input = "text";
  std::optional<BoundAudio> audio;
  std::optional<BoundImage> image;
};

// What a device offers (WebGPU limits); see package.h for the shipped profiles.
struct DeviceLimits {
  std::string name;
  std::vector<std::string> features;
  int64_t max_storage_buffer_binding_size = 0;
};

// SPEC 5 rule 8, the one device-fit rule: the required features a device lacks (in the order
// required), and whether the largest storage buffer binding is within the device's limit.
struct DeviceFit {
  std::vector<std::string> missing_features;
  bool binding_fits = true;
  bool ok() const { return missing_features.empty() && binding_fits; }
};
DeviceFit FitDevice(const DeviceLimits& device, const std::vector<std::string>& required_features,
                    int64_t max_storage_buffer_binding_size);

struct BindOptions {
  std::string task = "chat.completions";
  // parameter_schema_id recomputed from the weights, when the caller has them.
  std::optional<std::string> weights_parameter_schema_id;
  // Checked when set (SPEC 5 rule 8).
  std::optional<DeviceLimits> device;
  // The names errors give the two documents (their files, when the caller knows them).
  std::string package_document = "mlc-model-manifest.json";
  std::string program_document = "compiled program";
};

// Every rule of SPEC 5 that fails is reported (document: the package's or the program's, as the
// rule is about; path: the JSON Pointer in it; the message names the rule and the documents).
Result<BoundContract> Bind(const ModelPackage& package, const CompiledProgram& compiled,
                           const BindOptions& options = {});

// The resolved contract as JSON (for `bind --json`).
OrderedJson BoundContractJson(const BoundContract& bound);

// Every library function the bound contract calls: exports, then adapters.
std::vector<std::string> RequiredFunctions(const BoundContract& bound);

}  // namespace mlc
