// The generation loop of one conversation: each turn prepared and prefilled chunk by chunk, then
// decode steps with a sampler, over one KV cache that later turns continue; the model's functions
// are called through the ModelRunner.
#include <algorithm>
#include <cmath>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/phase_clock.h"
#include "runtime/model_runner.h"

namespace mlc {
namespace {

// No position is left for another token (a sliding window never fills).
bool ContextFull(const PlanLimits& limits, int64_t kv_length) {
  return !limits.HasSlidingWindow() && kv_length >= limits.context_window_size;
}

}  // namespace

Session::Session(const BoundModel& model, std::shared_ptr<ParameterSet> params, PlanLimits limits,
                 std::optional<int64_t> hidden_size)
    : runner_(std::make_unique<ModelRunner>(model, std::move(params), limits, hidden_size)) {}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() = default;

const PhaseTimings& Session::timings() const { return runner_->timings(); }
int64_t Session::adapter_calls() const { return runner_->adapter_calls(); }

int64_t Session::KvLength() const {
  auto state = std::dynamic_pointer_cast<KvState>(kv_);
  return state ? state->TotalLength() : 0;
}

Result<PrefillResult> Session::Prefill(const TurnInput& input) {
  std::vector<PromptPiece> pieces;
  std::vector<NDArray> media;
  if (pending_token_) {  // the last token of the previous turn, cut by its limit, not yet cached
    pieces.push_back(PromptPiece{TextPiece{{*pending_token_}}, ""});
    media.emplace_back();
  }
  for (size_t i = 0; i < input.pieces.size(); ++i) {
    pieces.push_back(input.pieces[i]);
    media.push_back(i < input.media.size() ? input.media[i] : NDArray());
  }
  // The KV cache is made by the first turn that gets this far.
  if (!pieces.empty() && !kv_) {
    const PlanLimits& limits = runner_->limits();
    auto kv = runner_->CreateKvCache(KvCacheShape{
        1, limits.HasSlidingWindow() ? limits.sliding_window_size : limits.context_window_size,
        limits.prefill_chunk_size, 16, limits.HasSlidingWindow()});
    MLC_RETURN_IF_ERROR(kv);
    kv_ = std::move(*kv);
  }
  auto prompt = runner_->Prepare(std::move(pieces), media, KvLength());
  MLC_RETURN_IF_ERROR(prompt);
  PrefillResult result;
  SequenceLogits last;  // only the last chunk's logits are kept: one copy, not one per chunk
  for (const PrefillChunk& chunk : prompt->plan.chunks) {
    auto embeds = runner_->ChunkEmbeddings(chunk, *prompt);
    MLC_RETURN_IF_ERROR(embeds);
    SequenceChunk one{0, &chunk, std::move(*embeds)};
    auto logits = runner_->Prefill({&kv_, false}, std::span<const SequenceChunk>(&one, 1));
    MLC_RETURN_IF_ERROR(logits);
    last = std::move(*logits);
  }
  if (!last.empty()) result.logits.assign(last.front().begin(), last.front().end());
  pending_token_.reset();
  result.plan = std::move(prompt->plan);
  return result;
}

Result<TurnResult> Session::Generate(const TurnInput& input, const GenerationOptions& options) {
  MLC_RETURN_IF_ERROR(CheckSamplerConfig(options.sampler));
  PhaseTimings before = timings();
  auto prefill = Prefill(input);
  MLC_RETURN_IF_ERROR(prefill);
  TurnResult result;
  result.plan = std::move(prefill->plan);
  // The step's logits: the prompt's last, then each decode step's (a view of its output tensor).
  SequenceLogits step;
  std::span<const float> logits = prefill->logits;
  Sampler sampler(options.sampler);
  StopReason reason = StopReason::kLength;
  while (static_cast<int64_t>(result.tokens.size()) < options.max_tokens) {
    int32_t token;
    {
      cpu::PhaseScope clock(cpu::StepKind::kDecode, cpu::Phase::kSampling);
      token = sampler.Sample(logits);
    }
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
        options.stop_token_ids.end()) {
      reason = StopReason::kStopToken;
      break;
    }
    result.tokens.push_back(token);
    bool go_on = !options.on_token || options.on_token(token);
    if (!go_on) reason = StopReason::kStopString;
    // A full context ends the turn as max_tokens does (stop reason "length"), as chat tools do:
    // the token just sampled has no position left to be fed at.
    if (!go_on || static_cast<int64_t>(result.tokens.size()) == options.max_tokens ||
        ContextFull(runner_->limits(), KvLength())) {
      pending_token_ = token;  // fed at the start of the next turn
      break;
    }
    const int64_t seq = 0;
    auto next = runner_->Decode({&kv_, false}, std::span<const int64_t>(&seq, 1),
                                std::span<const int32_t>(&token, 1));
    MLC_RETURN_IF_ERROR(next);
    step = std::move(*next);
    logits = step.front();
  }
  result.stop_reason = StopReasonName(reason);
  result.last_logits.assign(logits.begin(), logits.end());
  // Timings of this turn only.
  result.timings = timings();
  result.timings.create_kv_ms -= before.create_kv_ms;
  result.timings.embed_ms -= before.embed_ms;
  result.timings.adapter_ms -= before.adapter_ms;
  result.timings.prefill_ms -= before.prefill_ms;
  result.timings.decode_ms -= before.decode_ms;
  result.timings.prefill_positions -= before.prefill_positions;
  result.timings.prefill_calls -= before.prefill_calls;
  result.timings.decode_steps -= before.decode_steps;
  return result;
}

std::vector<int32_t> StopTokenIds(const ChatConfig& config) {
  std::vector<int32_t> ids;
  if (!config.raw.is_object() || !config.raw.contains("conv_template")) return ids;
  const Json& t = config.raw["conv_template"];
  if (!t.is_object() || !t.contains("stop_token_ids") || !t["stop_token_ids"].is_array()) return ids;
  for (const Json& v : t["stop_token_ids"]) {
    auto id = SafeInteger(v);
    if (id && *id >= 0 && *id <= INT32_MAX) ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop_str";
    case StopReason::kLength:
      return "length";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kError:
      return "error";
  }
  return "error";
}

const char* FinishReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
    case StopReason::kStopString:
      return "stop";
    default:
      return StopReasonName(reason);
  }
}

double RoundToMicroseconds(double ms) { return std::round(ms * 1000.0) / 1000.0; }

OrderedJson PhaseTimingsJson(const PhaseTimings& t) {
  // Rates to a hundredth of a position per second.
  auto per_s = [](int64_t n, double ms) { return ms > 0 ? std::round(n * 100000.0 / ms) / 100.0 : 0.0; };
  return {{"create_kv_ms", RoundToMicroseconds(t.create_kv_ms)},
          {"embed_ms", RoundToMicroseconds(t.embed_ms)},
          {"adapter_ms", RoundToMicroseconds(t.adapter_ms)},
          {"prefill_ms", RoundToMicroseconds(t.prefill_ms)},
          {"decode_ms", RoundToMicroseconds(t.decode_ms)},
          {"prefill_positions", t.prefill_positions},
          {"prefill_calls", t.prefill_calls},
          {"decode_steps", t.decode_steps},
          {"prefill_positions_per_s", per_s(t.prefill_positions, t.prefill_ms)},
          {"decode_steps_per_s", per_s(t.decode_steps, t.decode_ms)}};
}

}  // namespace mlc
