// The built-in CPU programs: libraries that need no compiler, chosen by model_type and
// quantization of mlc-chat-config.json, running the text decoders of MLC's llama, qwen2, gemma,
// gemma2 and phi3 families straight from the converter's shards (SPEC 9); and a writer of
// random-weight packages of those families laid out exactly as the converter lays them out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"

namespace mlc {

// model_type values and quantizations the CPU program runs.
const std::vector<std::string>& CpuModelTypes();
const std::vector<std::string>& CpuQuantizations();

// The program's parameter list for a chat config: the converter's names, shapes and dtypes, in
// the order of the model's modules. Unsupported model types or quantizations and dimensions that
// disagree with each other are errors naming the model_config field.
Result<std::vector<ParamSpec>> CpuParamSpecs(const ChatConfig& config);

// The CPU program's checks of a chat config, the ones OpenCpuLibrary (so `run` and `serve`)
// makes: errors at their JSON Pointer in mlc-chat-config.json. kUnsupported: what the CPU program
// does not implement (a model_type, a quantization, a rope_scaling); kInvalid: values no model
// can have (sizes that are not positive, heads that do not divide the hidden size, ...).
Status CheckCpuRuntimeConfig(const ChatConfig& config);
// The config checks of the library OpenPackageLibrary would open for the folder: none for a
// folder a registered library claims, else CheckCpuRuntimeConfig (check's runtime_config).
Status CheckPackageRuntimeConfig(const std::string& package_dir, const ChatConfig& config);

// The compiled-program document of the CPU program (one "generation" program of kind
// token_generation exporting the embedding pair; no required features; resources from the
// parameter list as in SPEC 3) for the text chat task.
Result<CompiledProgram> CpuCompiledProgram(const ChatConfig& config);

// The CPU program for DIR/mlc-chat-config.json. Functions (with the shapes MLC libraries use):
//   embed(ids int32 [n], params) -> [n, hidden] float32
//   prefill(embeds float32 [1, total_len, hidden], kv, params) -> (logits [1, n_seq, vocab], kv)
//     (the sequences the cache's BeginForward named, laid end to end; else its only sequence)
//   decode(embeds float32 [1, 1, hidden], kv, params) -> (logits [1, 1, vocab], kv)
//   create_tir_paged_kv_cache(max_batch_size, max_total_seq_len, prefill_chunk_size, page_size,
//                             support_sliding_window) -> kv (a PagedKvState: several sequences)
Result<std::unique_ptr<ModelLibrary>> OpenCpuLibrary(const std::string& package_dir);
// The same from a chat config already read.
Result<std::unique_ptr<ModelLibrary>> OpenCpuLibrary(const ChatConfig& config);

// The library a package folder runs with: a registered kind whose marker file the folder holds
// (FindLibraryOpener: the reference runtime's reference-lib.json, when that target is linked),
// else the CPU program chosen by model_type.
Result<std::unique_ptr<ModelLibrary>> OpenPackageLibrary(const std::string& package_dir);
// The same with the folder's mlc-chat-config.json already read (the CPU program does not read it
// again; a registered kind opens from the folder).
Result<std::unique_ptr<ModelLibrary>> OpenPackageLibrary(const std::string& package_dir,
                                                         const ChatConfig& config);

// ---- Where the CPU program's time goes (MLC_CPU_PHASES=1) ----

// True when the environment has MLC_CPU_PHASES=1: the CPU program then times its phases (weight
// products, LM head, attention, norms/rotary/activations, embedding, sampling, the thread pool's
// hand-offs) for decode and prefill steps apart.
bool CpuPhaseClockOn();
// Zeroes the totals (before a turn).
void ResetCpuPhases();
// The totals since the last reset: {"decode": {steps, rows, *_ms, pool_*}, "prefill": {...}}.
OrderedJson CpuPhasesJson();

// ---- Random-weight packages of the CPU families ----

struct FamilyModelOptions {
  std::string family = "llama";         // a CpuModelTypes() value
  std::string quantization = "q4f16_1"; // a CpuQuantizations() value
  std::string shape = "tiny";           // a FamilyShapes() value
  uint64_t seed = 0;
  bool manifest = true;   // false: a legacy package (no mlc-model-manifest.json)
  bool force = false;     // replace existing files
  int64_t context_window_size = 0;   // 0: the shape's default
  int64_t prefill_chunk_size = 0;    // 0: the shape's default
  int64_t sliding_window_size = -1;  // the chat config's top-level window (-1: none)
  int64_t attention_sink_size = -1;
  bool audio = false;  // the family's audio tower too (gemma4)
};

struct FamilyModelReport {
  std::vector<std::string> files;  // written, relative to the folder
  int64_t parameter_count = 0;
  int64_t parameter_bytes = 0;     // on the device (declared dtypes)
  int64_t shard_bytes = 0;         // on disk
  std::string interface_id;
  std::string parameter_schema_id;
};

// Names of the shapes FamilyModelOptions::shape takes.
const std::vector<std::string>& FamilyShapes();

// The mlc-chat-config.json WriteFamilyModel writes for these options (nothing written).
Result<ChatConfig> FamilyChatConfig(const FamilyModelOptions& options);

// Writes a converted package with random weights: mlc-chat-config.json, tensor-cache.json and
// params_shard_*.bin (32 MiB shards, records sorted by name, f32-to-bf16 format as the converter
// writes), tokenizer.json, and mlc-model-manifest.json unless options.manifest is false. 4-bit
// weights are quantised with MLC's rule (scale = max|w| / 7 per group of 32,
// q = clamp(round(w / scale) + 7, 0, 14)). Existing files are kept and reported unless force.
Result<FamilyModelReport> WriteFamilyModel(const std::string& dir, const FamilyModelOptions& options);

}  // namespace mlc
