// Checking a whole package before anyone downloads it: documents, identifiers, binding,
// resources, shards and device fit, every verdict in one report; and `inspect`'s summary.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/device.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/package.h"

namespace mlc {

// ---- shards ----

// kSizeOnly: verified, but only by size (tensor-cache.json records no md5sum for it).
// kLfsPointer: the file is a Git LFS pointer in place of the shard (fetch with `git lfs pull`).
enum class ShardStatus {
  kOk, kNotVerified, kMissing, kOutside, kSizeMismatch, kMd5Mismatch, kIoError, kSizeOnly,
  kLfsPointer
};
const char* ShardStatusName(ShardStatus s);

// The message for a Git LFS pointer found where `what` (a shard) should be, or "" when the
// first bytes (`head`) are not one: names the command that fetches the real file in `dir`.
std::string GitLfsPointerNote(std::string_view head, const std::string& what, const std::string& dir);

struct ShardResult {
  std::string data_path;
  ShardStatus status = ShardStatus::kNotVerified;
  uint64_t expected_size = 0;
  uint64_t actual_size = 0;
  std::string actual_md5;  // when computed
  std::string message;
};

// Called with bytes hashed so far and the total to hash (from any worker thread, serialized).
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// Called once per hashed shard as it finishes (serialized): its result, how many shards have
// finished and how many are hashed in all.
using ShardDoneFn = std::function<void(const ShardResult& shard, size_t finished, size_t count)>;

struct ShardCheckOptions {
  bool verify_md5 = false;  // read every byte and compare md5sum
  int threads = 0;          // 0: one per core
  ProgressFn progress;
  ShardDoneFn on_shard;
};

// For each shard: inside the folder after following links, present, of the recorded size and,
// with verify_md5, of the recorded md5 (streamed in fixed-size blocks, shards in parallel).
std::vector<ShardResult> CheckShards(const std::string& dir, const TensorCache& cache,
                                     const ShardCheckOptions& options);

// Lowercase hex MD5 of a file (OpenForRead's rule, inside `inside` when given), streamed;
// on_bytes is told the bytes read as it goes.
Result<std::string> Md5File(const std::string& path, const std::function<void(uint64_t)>& on_bytes = {},
                            const std::string& inside = "");

// ---- check ----

enum class Verdict { kPass, kFail, kWarn, kSkip };
const char* VerdictName(Verdict v);

struct CheckItem {
  std::string name;     // "manifest", "interface_id", "parameter_schema_id", "binding", ...
  Verdict verdict = Verdict::kPass;
  std::string message;  // one line for people
  // Data; "explanation" (lines for people, shown under the verdict) says why it failed and
  // what to do, with the same as data beside it.
  OrderedJson details = OrderedJson::object();
};

struct CheckReport {
  std::vector<CheckItem> items;
  bool ok() const;  // no kFail
  OrderedJson ToJson() const;
};

// A program the caller can run without a compiled library (the CLI passes the built-in CPU
// programs): what it is called, its document and its parameter list, for a chat config; an
// error saying why there is none.
struct BuiltinProgram {
  std::string name;
  CompiledProgram document;
  std::vector<ParamSpec> params;
};
using BuiltinProgramFn = std::function<Result<BuiltinProgram>(const ChatConfig&)>;

// For a package without a manifest: the preset `emit package --preset` would write for its
// model_type (none when no preset covers it), and whether the built-in program it needs exists
// and matches its weights. Lines for people and the same as data.
struct LegacyAdvice {
  std::vector<std::string> lines;
  OrderedJson data = OrderedJson::object();
};
LegacyAdvice AdviseLegacyPackage(const std::string& dir, const ChatConfig& config,
                                 const std::optional<TensorCache>& cache, const BuiltinProgramFn& builtin);

// What a package folder and a program document (when given) offer to explain id mismatches: the
// tensor cache, the chat config, the program's _metadata params, the built-in program's list.
IdEvidence GatherIdEvidence(const std::string& dir, const std::optional<Json>& program_doc,
                            const BuiltinProgramFn& builtin);

// The chat config checks of the runtime a package folder runs on (the CLI and the C API pass
// CheckPackageRuntimeConfig: the built-in CPU program's, for folders no registered library claims): errors at
// JSON Pointers into mlc-chat-config.json, kUnsupported for what that runtime does not implement.
using RuntimeConfigFn = std::function<Status(const std::string& dir, const ChatConfig& config)>;

struct CheckOptions {
  std::optional<std::string> program_path;  // compiled-program document or _metadata JSON
  std::optional<std::string> params_path;   // parameter list with symbolic dimensions
  std::string task = "chat.completions";
  bool verify_shards = false;
  std::optional<DeviceProfile> device;
  ShardCheckOptions shard_options;           // threads, progress (verify_md5 set from above)
  BuiltinProgramFn builtin_program;          // evidence for explanations and legacy advice
  // "runtime_config": a value in mlc-chat-config.json the runtime refuses fails, as `run` would;
  // a field it needs that the file lacks, or a feature it lacks (a rope_scaling), is a warning (a
  // compiled library may run the package all the same); a model_type or quantization it has no
  // program for is a skip. Null: not consulted.
  RuntimeConfigFn runtime_config;
};

CheckReport CheckPackage(const std::string& dir, const CheckOptions& options);

// ---- inspect ----

// What the package is: tasks, inputs, processors, ids, parameters (count, bytes by dtype, the
// largest), shards, context and prefill sizes, resources. Errors only when nothing is readable.
// A legacy package (no manifest) gets "legacy": AdviseLegacyPackage's data.
Result<OrderedJson> InspectPackage(const std::string& dir, const BuiltinProgramFn& builtin = {});

}  // namespace mlc
