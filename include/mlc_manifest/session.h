// Generation over a bound model: a request turn's media decoded for its adapters (PrepareTurn),
// and a Session: one conversation over the Engine (engine.h), the one generation loop, turn by
// turn over one kept sequence; why a reply ended (StopReason); LoadModel opens a package with its
// library (OpenPackage, open_package.h, adds the tokenizer and template).
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
#include "mlc_manifest/tokenizer.h"

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
// The same with the context check first (CheckContext over the turn's pieces: text and
// fixed-size media such as images at their row counts, audio at its least): a turn that cannot
// fit a KV cache holding kv_length positions is refused before any media is decoded.
Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn, const PlanLimits& limits,
                              int64_t kv_length);

// A recording cut into windows (AudioWindowEnds): the decoded samples at the processor's rate and
// the end of each window, the last samples.size().
struct WindowedAudio {
  std::vector<float> samples;
  std::vector<int64_t> ends;
  int64_t sample_rate_hz = 0;
};

// Decodes an audio segment of up to max_windows windows of the processor's max_samples (longer:
// an error saying how many windows and seconds fit) and cuts it into windows.
Result<WindowedAudio> DecodeWindowedAudio(const BoundAudio& audio, const RequestSegment& seg, int64_t max_windows);
// How many audio windows a turn of these pieces can take in a KV cache holding kv_length
// positions: what the context has left over each window's least positions (120 without a
// context window); 1 for a turn without audio.
int64_t MaxAudioWindows(const PlanLimits& limits, int64_t kv_length, const std::vector<PromptPiece>& pieces);

struct JsonConstraint;

struct GenerationOptions {
  int64_t max_tokens = 32;
  SamplerConfig sampler;
  std::vector<int32_t> stop_token_ids;
  // Cut the reply's text at the first (needs the session's tokenizer; not inside a structured
  // reply).
  std::vector<std::string> stop_strings;
  // Structured output: every token sampled among those the grammar allows.
  std::shared_ptr<const JsonConstraint> json;
  int top_logprobs = -1;  // -1: none; 0..20: each token's log-probability and alternatives
  // Called (on the engine's thread) with each generated token (stop tokens excluded) once it is
  // kept; returning false ends the turn there with stop reason "stop_str".
  std::function<bool(int32_t token)> on_token;
  // Called (on the engine's thread) with the reply's new text as it becomes safe to show.
  std::function<void(const std::string& text)> on_text;
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

// Field by field: the timings of two stretches added, or of one taken from a later total.
PhaseTimings operator+(PhaseTimings a, const PhaseTimings& b);
PhaseTimings operator-(PhaseTimings a, const PhaseTimings& b);

struct PrefillResult {
  PrefillPlan plan;
  std::vector<float> logits;  // of the last prompt position
};

// Why a reply ended: one type for every face. StopReasonName gives its one name ("stop_token",
// "stop_str", "length", "cancelled", "error"), which `run`, the C API and Python report;
// FinishReasonName maps it onto OpenAI's finish_reason, which serve sends ("stop" for a stop id or
// string).
enum class StopReason { kStopToken, kStopString, kLength, kCancelled, kError };
const char* StopReasonName(StopReason reason);
const char* FinishReasonName(StopReason reason);

struct TurnResult {
  PrefillPlan plan;  // kv_length: positions held before the turn; chunks: those prefilled
  std::vector<int32_t> tokens;
  std::string stop_reason;  // StopReasonName: "stop_token", "stop_str" or "length"
  StopReason reason = StopReason::kLength;
  std::string text;                     // with the session's tokenizer
  std::vector<TokenLogprobs> logprobs;  // per token, when asked for
  int64_t cached_tokens = 0;            // prompt positions the prefix cache held
  std::vector<float> last_logits;
  PhaseTimings timings;
};

// How an embedding request pools its prompt's final-normed hidden states: their mean over every
// position, or the last position's (the vector is then L2-normalised).
enum class EmbeddingPooling { kMean, kLast };
const char* PoolingName(EmbeddingPooling pooling);
// "mean" or "last"; kUsage naming both otherwise.
Result<EmbeddingPooling> ParsePooling(const std::string& name);

// An input's embedding (Session::Embed): the pooled, L2-normalised final hidden state.
struct EmbeddingResult {
  std::vector<float> embedding;
  int64_t prompt_tokens = 0;
  PhaseTimings timings;
};

struct SessionOptions {
  const Tokenizer* tokenizer = nullptr;  // text, stop strings (borrowed)
  bool prefix_cache = true;
};

class Engine;
struct LoadedModel;

// One conversation over its own Engine (one sequence at a time, started by the first turn): each
// turn continues the sequence of the previous ones. The library behind the model must outlive
// it. One thread at a time.
class Session {
 public:
  Session(const LoadedModel& model, SessionOptions options = {});
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;
  ~Session();

  // Runs the adapters, plans and prefills the turn; returns the last position's logits.
  // An image that cannot fit is rejected before its adapter runs.
  Result<PrefillResult> Prefill(const TurnInput& input);
  // Prefill, then sample and decode until a stop token, max_tokens, a full context window
  // (stop reason "length", like max_tokens), a stop string or on_token says stop. The
  // sampled stop token is not fed back; a last token cut by the limit or a stop is fed at the
  // start of the next turn.
  Result<TurnResult> Generate(const TurnInput& input, const GenerationOptions& options);
  // The same in a sequence of its own, from an empty cache: the conversation is untouched (each
  // window of a transcript, say), and nothing of the turn stays in the engine's prefix and
  // adapter caches.
  Result<TurnResult> GenerateApart(const TurnInput& input, const GenerationOptions& options);
  // The embedding of an input, in a sequence of its own: the conversation is untouched.
  // kUnsupported when the library has no hidden-states function.
  Result<EmbeddingResult> Embed(const TurnInput& input, EmbeddingPooling pooling = EmbeddingPooling::kMean);

  int64_t KvLength() const;
  const PhaseTimings& timings() const;  // of every turn so far
  int64_t adapter_calls() const;

 private:
  Result<TurnResult> Turn(const TurnInput& input, const GenerationOptions& options, bool in_conversation);
  struct State;
  std::unique_ptr<State> state_;
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

  Session NewSession(SessionOptions options = {}) const { return Session(*this, options); }
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
