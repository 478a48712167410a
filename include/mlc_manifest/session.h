// Generation over a bound model: a request turn's media decoded for its adapters (PrepareTurn),
// and a Session that drives create_kv_cache, embed_tokens, the adapters, prefill and decode
// (through the model runner) with a sampler, turn by turn over one KV cache; why a reply ended
// (StopReason); LoadModel opens a package with its library (OpenPackage, open_package.h, adds
// the tokenizer and template).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/library.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/sampler.h"
#include "mlc_manifest/tensor.h"

namespace mlc {

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

// A prompt ready to prefill into a sequence: its plan and the adapter outputs its chunks use.
struct PreparedPrompt {
  PrefillPlan plan;
  std::vector<NDArray> outputs;  // per piece; defined for media pieces
};

// One sequence's part of a prefill call.
struct SequenceChunk {
  int64_t seq_id = 0;
  const PrefillChunk* chunk = nullptr;
  NDArray embeds;  // [chunk size, hidden] float32
};

class ModelRunner;  // the calls into the model's functions (src/runtime/model_runner.h)

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

// Why a reply ended: one vocabulary for Session and the Engine, each face naming it its way.
enum class StopReason { kStopToken, kStopString, kLength, kCancelled, kError };
// The names of `run`, the C API and TurnResult: "stop_token", "stop_str", "length",
// "cancelled", "error".
const char* StopReasonName(StopReason reason);
// The names of the engine's stream events (as OpenAI's finish_reason, which serve sends): "stop"
// for a stop id or string, "length", "cancelled", "error".
const char* FinishReasonName(StopReason reason);

struct TurnResult {
  PrefillPlan plan;
  std::vector<int32_t> tokens;
  std::string stop_reason;  // StopReasonName: "stop_token", "stop_str" or "length"
  std::vector<float> last_logits;
  PhaseTimings timings;
};

// One conversation over one KV cache: each turn continues the cache of the previous ones. Owns
// its KV cache and shares the parameters; the library behind `model` must outlive it. One
// thread at a time.
class Session {
 public:
  // The KV cache is created lazily by the first turn, with create_kv_cache(max_batch_size 1,
  // context window, prefill chunk size, page size 16, sliding window flag).
  Session(const BoundModel& model, std::shared_ptr<ParameterSet> params, PlanLimits limits,
          std::optional<int64_t> hidden_size = std::nullopt);
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Runs the adapters, plans and prefills the turn; returns the last position's logits.
  // An image that cannot fit is rejected before its adapter runs.
  Result<PrefillResult> Prefill(const TurnInput& input);
  // Prefill, then sample and decode until a stop token, max_tokens, a full context window
  // (stop reason "length", like max_tokens) or on_token says stop. The
  // sampled stop token is not fed back; a last token cut by the limit or by on_token is fed at
  // the start of the next turn.
  Result<TurnResult> Generate(const TurnInput& input, const GenerationOptions& options);

  int64_t KvLength() const;
  const PhaseTimings& timings() const;
  int64_t adapter_calls() const;

 private:
  std::unique_ptr<ModelRunner> runner_;
  ObjectRef kv_;
  std::optional<int32_t> pending_token_;
};

// A package and a library opened together: chat config, binding, parameters, session limits.
// Borrows the library (as BoundModel does): keep it alive while this or its sessions are used.
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
// The same with the package's mlc-chat-config.json already read (OpenPackage).
Result<LoadedModel> LoadModel(const std::string& package_dir, ChatConfig config,
                              const ModelLibrary& library,
                              const std::optional<CompiledProgram>& program = std::nullopt);

// {"create_kv_ms", "embed_ms", "adapter_ms", "prefill_ms", "decode_ms", ...}: milliseconds
// rounded to the microsecond (RoundToMicroseconds), rates to 0.01 per second.
OrderedJson PhaseTimingsJson(const PhaseTimings& t);
// ms rounded to three decimals: timings are reported to the microsecond.
double RoundToMicroseconds(double ms);

}  // namespace mlc
