// The runtime boundary of the native frontend: a loaded model library exposes named functions
// taking and returning tensors (DLPack DLTensor views), integers, shape tuples and opaque objects
// (the KV cache, the parameters). Binding resolves every role and adapter the contract names
// before any call; the parameter loader maps tensor-cache.json shards; a Session drives
// create_kv_cache, embed_tokens, the adapters, prefill and decode with a sampler, turn by turn.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/request.h"

namespace mlc {

// ---- Tensors ----

DLDataType DlFloat32();
DLDataType DlInt32();
DLDataType DlUInt8();
DLDataType DlUInt32();
bool SameDtype(DLDataType a, DLDataType b);
std::string DlDtypeName(DLDataType dtype);                     // "float32", "uint8", ...
std::optional<DLDataType> ParseDlDtype(const std::string& name);  // the inverse

// A CPU tensor: owns its bytes (or keeps the owner of a view alive, e.g. a mapped shard) and
// exposes them as a DLTensor. Copies share the storage.
class NDArray {
 public:
  NDArray() = default;
  // Zero-filled.
  static NDArray Empty(std::vector<int64_t> shape, DLDataType dtype);
  // A view of data owned by `owner` (kept alive as long as the view).
  static NDArray View(std::shared_ptr<const void> owner, const void* data,
                      std::vector<int64_t> shape, DLDataType dtype);

  bool defined() const { return state_ != nullptr; }
  const DLTensor& dl() const;
  DLTensor* mutable_dl();
  const std::vector<int64_t>& shape() const;
  DLDataType dtype() const;
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t Elements() const;
  size_t Bytes() const;
  template <class T>
  T* data() { return static_cast<T*>(mutable_dl()->data); }
  template <class T>
  const T* data() const { return static_cast<const T*>(dl().data); }
  // The same bytes under another shape with as many elements (shares the storage).
  NDArray Reshape(std::vector<int64_t> shape) const;
  // "[2, 64] float32"
  std::string Describe() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// An int32 tensor of `shape` holding `values` (as many as the shape has elements).
NDArray Int32Tensor(std::span<const int32_t> values, std::vector<int64_t> shape);

// ---- Values and functions ----

class RuntimeObject {
 public:
  virtual ~RuntimeObject() = default;
  virtual std::string TypeName() const = 0;
};

// The KV cache (or hybrid state) a library creates.
class KvState : public RuntimeObject {
 public:
  virtual int64_t TotalLength() const = 0;  // positions held
};

// A KV cache holding several sequences in pages (MLC's paged KV cache and its
// kv_state_add_sequence / remove / fork / begin_forward / end_forward builtins). Between
// BeginForward and EndForward a prefill call runs the named sequences with their new positions
// laid end to end (total_len = the sum of lengths) and returns the logits of each sequence's last
// position, [1, n_seq, vocab]; decode_tokens [batch_size, 1] returns [batch_size, 1, vocab].
// Without BeginForward a call runs the only sequence (added as id 0 on first use), as a
// one-sequence cache does.
class PagedKvState : public KvState {
 public:
  virtual Status AddSequence(int64_t seq_id) = 0;
  virtual Status RemoveSequence(int64_t seq_id) = 0;
  // The child starts as a copy of the parent's positions.
  virtual Status ForkSequence(int64_t parent_id, int64_t child_id) = 0;
  // Fails (changing nothing) for an unknown or repeated id, or when the pages cannot hold them.
  virtual Status BeginForward(std::span<const int64_t> seq_ids,
                              std::span<const int64_t> append_lengths) = 0;
  virtual void EndForward() = 0;
  virtual Result<int64_t> SequenceLength(int64_t seq_id) const = 0;
  virtual int64_t PageSize() const = 0;
  virtual int64_t FreePages() const = 0;
  virtual int64_t TotalPages() const = 0;
};

// The parameters, in the order the library asked for them.
class ParameterSet : public RuntimeObject {
 public:
  std::string TypeName() const override { return "ParameterSet"; }
  std::vector<std::string> names;
  std::vector<NDArray> tensors;
  uint64_t mapped_bytes = 0;   // shard bytes mapped
  uint64_t widened_bytes = 0;  // bytes of float32 produced from bf16 records
};

struct ShapeTuple {
  std::vector<int64_t> dims;
};

using ObjectRef = std::shared_ptr<RuntimeObject>;
using Value = std::variant<std::monostate, int64_t, double, ShapeTuple, NDArray, ObjectRef>;
const char* ValueTypeName(const Value& value);

// A library function: arguments in, results out (functions returning (logits, kv) return two).
using PackedFunction = std::function<Result<std::vector<Value>>(std::span<const Value> args)>;

// What a library says about itself (an MLC library's _metadata).
struct LibraryMetadata {
  std::string model_type;
  std::string kv_state_kind = "kv_cache";
  std::vector<ParamSpec> params;  // the order parameters are passed in
  std::optional<Json> artifact;   // _metadata.artifact: the compiled-program document, if any
};

class ModelLibrary {
 public:
  virtual ~ModelLibrary() = default;
  // nullptr when the library does not export the name.
  virtual const PackedFunction* GetFunction(const std::string& name) const = 0;
  virtual std::vector<std::string> FunctionNames() const = 0;
  virtual const LibraryMetadata& Metadata() const = 0;
};

// ---- Binding roles to functions ----

struct BoundModel {
  BoundContract contract;
  bool legacy = false;  // no manifest: embed/prefill/decode as MLC libraries always worked
  std::string note;     // how it was bound, for humans
  const PackedFunction* embed = nullptr;
  const PackedFunction* create_kv_cache = nullptr;
  const PackedFunction* prefill = nullptr;
  const PackedFunction* decode = nullptr;
  const PackedFunction* audio_adapter = nullptr;
  const PackedFunction* image_adapter = nullptr;
};

// The contract for a package without mlc-model-manifest.json: the embed pair over the library's
// embed / prefill / decode and create_tir_paged_kv_cache (or create_flashinfer_paged_kv_cache),
// text only.
// (library may be null: planning without a runtime assumes create_tir_paged_kv_cache).
BoundContract LegacyContract(const ModelLibrary* library);

// The contract of a package folder without a library: the legacy contract when it has no
// manifest (*legacy set), else its manifest bound to the compiled-program document at
// program_path (a usage error when none is given).
Result<BoundContract> BindPackageFolder(const std::string& dir, const std::string& program_path,
                                        const std::string& task, bool* legacy);

// With DIR/mlc-model-manifest.json: parses it (a malformed one is an error, never a fallback),
// takes the compiled program from `program` or else the library's _metadata.artifact, binds them
// (SPEC 5, with the weights' parameter_schema_id when tensor-cache.json is readable) and resolves
// every export and adapter function; each missing one is an error naming it. Without a manifest:
// LegacyContract, with a note saying so. No function is called.
Result<BoundModel> BindModel(const std::string& package_dir, const ModelLibrary& library,
                             const std::optional<CompiledProgram>& program = std::nullopt);

// ---- Parameters ----

// Maps the shards of DIR/tensor-cache.json and returns the parameters in `order` (the library's
// metadata), checking each record's shape and dtype; "f32-to-bf16" float32 records are widened
// from bfloat16, raw records are views into the mapping.
Result<std::shared_ptr<ParameterSet>> LoadParameters(const std::string& package_dir,
                                                     const std::vector<ParamSpec>& order);

// The converter's encoding: float32 -> bfloat16 rounding to nearest even; and back.
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t value);

// ---- Sampling ----

struct SamplerConfig {
  double temperature = 0.0;  // 0: greedy
  double top_p = 1.0;        // nucleus mass in (0, 1]
  int64_t top_k = 0;         // 0: all tokens
  uint64_t seed = 0;
  // Penalties over the tokens this sampler returned before (as MLC applies them to the tokens
  // generated for a request): a logit l of such a token becomes l / r (l > 0) or l * r, then
  // l - presence - count x frequency.
  double repetition_penalty = 1.0;  // > 0; 1: none
  double presence_penalty = 0.0;    // in [-2, 2]
  double frequency_penalty = 0.0;   // in [-2, 2]
};

Status CheckSamplerConfig(const SamplerConfig& config);

class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);
  // The next token; it counts for the penalties of the following calls.
  int32_t Sample(std::span<const float> logits);

 private:
  int32_t Choose(std::span<const float> logits);
  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::map<int32_t, int64_t> counts_;  // tokens returned so far
};

// ---- Generation ----

// A turn ready to run: its planner pieces and, per piece, the media tensor its adapter takes
// (audio float32 [n]; image uint8 / uint32 [1, H, W, 3]); undefined for text and row-count-only
// pieces.
struct TurnInput {
  std::vector<PromptPiece> pieces;
  std::vector<NDArray> media;
};

// Decodes the media files of a request turn with the audio and image frontends, into the dtype
// the bound contract's adapter takes.
Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn);

struct GenerationOptions {
  int64_t max_tokens = 32;
  SamplerConfig sampler;
  std::vector<int32_t> stop_token_ids;
  // Called with each generated token (stop tokens excluded) once it is kept; returning false
  // ends the turn there with stop reason "stop_str" (a stop string was found in the text).
  std::function<bool(int32_t token)> on_token;
};

// conv_template.stop_token_ids of the chat config (empty when absent).
std::vector<int32_t> StopTokenIds(const ChatConfig& config);

struct PhaseTimings {
  double create_kv_ms = 0;
  double embed_ms = 0;
  double adapter_ms = 0;
  double prefill_ms = 0;
  double decode_ms = 0;
  int64_t prefill_positions = 0;
  int64_t prefill_calls = 0;
  int64_t decode_steps = 0;
};

struct PrefillResult {
  PrefillPlan plan;
  std::vector<float> logits;  // of the last prompt position
};

struct TurnResult {
  PrefillPlan plan;
  std::vector<int32_t> tokens;
  std::string stop_reason;  // "stop_token", "stop_str" or "length"
  std::vector<float> last_logits;
  PhaseTimings timings;
};

// One conversation over one KV cache: each turn continues the cache of the previous ones.
class Session {
 public:
  // The KV cache is created lazily by the first turn, with create_kv_cache(max_batch_size 1,
  // context window, prefill chunk size, page size 16, sliding window flag).
  Session(const BoundModel& model, std::shared_ptr<ParameterSet> params, PlanLimits limits,
          std::optional<int64_t> hidden_size = std::nullopt);

  // Runs the adapters, plans and prefills the turn; returns the last position's logits.
  // An image that cannot fit is rejected before its adapter runs.
  Result<PrefillResult> Prefill(const TurnInput& input);
  // Prefill, then sample and decode until a stop token, max_tokens, a full context window
  // (stop reason "length", like max_tokens) or on_token says stop. The
  // sampled stop token is not fed back; a last token cut by the limit or by on_token is fed at
  // the start of the next turn.
  Result<TurnResult> Generate(const TurnInput& input, const GenerationOptions& options);

  int64_t KvLength() const;
  const PhaseTimings& timings() const { return timings_; }
  int64_t adapter_calls() const { return adapter_calls_; }

 private:
  Status EnsureKvCache();
  Result<NDArray> RunAdapter(const MediaPiece& media, const NDArray& input);
  Result<NDArray> ChunkEmbeddings(const PrefillChunk& chunk, const std::vector<NDArray>& outputs);
  Result<std::vector<float>> RunPrefillChunk(const PrefillChunk& chunk, const NDArray& embeds);
  Result<std::vector<float>> DecodeStep(int32_t token);
  Result<NDArray> Embed(std::span<const int32_t> ids);
  Result<std::vector<float>> TakeLogits(std::vector<Value> results, const std::string& function);

  BoundModel model_;
  std::shared_ptr<ParameterSet> params_;
  PlanLimits limits_;
  std::optional<int64_t> hidden_size_;
  ObjectRef kv_;
  std::optional<int32_t> pending_token_;
  PhaseTimings timings_;
  int64_t adapter_calls_ = 0;
};

// A package and a library opened together: chat config, binding, parameters, session limits.
struct LoadedModel {
  ChatConfig config;
  BoundModel bound;
  std::shared_ptr<ParameterSet> params;
  PlanLimits limits;
  std::optional<int64_t> hidden_size;
  double load_ms = 0;

  Session NewSession() const { return Session(bound, params, limits, hidden_size); }
};

Result<LoadedModel> LoadModel(const std::string& package_dir, const ModelLibrary& library,
                              const std::optional<CompiledProgram>& program = std::nullopt);

// {"create_kv_ms", "embed_ms", "adapter_ms", "prefill_ms", "decode_ms", ...}: milliseconds
// rounded to the microsecond (RoundToMicroseconds), rates to 0.01 per second.
OrderedJson PhaseTimingsJson(const PhaseTimings& t);
// ms rounded to three decimals: timings are reported to the microsecond.
double RoundToMicroseconds(double ms);

}  // namespace mlc
