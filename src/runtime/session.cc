// The generation loop over bound roles: create_kv_cache, embed_tokens for text, the adapters
// for media, prefill per planned chunk, then decode steps with a sampler; turns continue the
// same KV cache. Every result a library function returns is checked before it is used.
#include <cmath>
#include <chrono>
#include <cstring>

#include "mlc_manifest/runtime.h"
#include "runtime/call_checks.h"

namespace mlc {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// No position is left for another token (a sliding window never fills).
bool ContextFull(const PlanLimits& limits, int64_t kv_length) {
  return !limits.HasSlidingWindow() && kv_length >= limits.context_window_size;
}

}  // namespace

Session::Session(const BoundModel& model, std::shared_ptr<ParameterSet> params, PlanLimits limits,
                 std::optional<int64_t> hidden_size)
    : model_(model), params_(std::move(params)), limits_(limits), hidden_size_(hidden_size) {}

int64_t Session::KvLength() const {
  auto state = std::dynamic_pointer_cast<KvState>(kv_);
  return state ? state->TotalLength() : 0;
}

Status Session::EnsureKvCache() {
  if (kv_) return Status::Ok();
  auto start = Clock::now();
  int64_t window = limits_.HasSlidingWindow() ? limits_.sliding_window_size
                                              : limits_.context_window_size;
  std::vector<Value> args = {int64_t{1}, window, limits_.prefill_chunk_size, int64_t{16},
                             int64_t{limits_.HasSlidingWindow() ? 1 : 0}};
  auto out = (*model_.create_kv_cache)(args);
  timings_.create_kv_ms += MsSince(start);
  const std::string& fn = model_.contract.create_kv_cache_function;
  MLC_RETURN_IF_ERROR(out);
  if (out->empty() || !std::holds_alternative<ObjectRef>(out->front()) ||
      !std::get<ObjectRef>(out->front())) {
    return Invalid("", fn + ": create_kv_cache returned " +
                           std::string(out->empty() ? "nothing" : ValueTypeName(out->front())) +
                           ", expected a KV cache object");
  }
  kv_ = std::get<ObjectRef>(out->front());
  return Status::Ok();
}

Result<NDArray> Session::Embed(std::span<const int32_t> ids) {
  auto start = Clock::now();
  NDArray input = Int32Tensor(ids, {static_cast<int64_t>(ids.size())});
  std::vector<Value> args = {input, ObjectRef(params_)};
  auto out = (*model_.embed)(args);
  timings_.embed_ms += MsSince(start);
  MLC_RETURN_IF_ERROR(out);
  return CheckEmbedOutput(*out, static_cast<int64_t>(ids.size()), model_.contract.embed_function,
                          &hidden_size_);
}

Result<NDArray> Session::RunAdapter(const MediaPiece& media, const NDArray& input) {
  auto fn = AdapterFor(model_, media);
  MLC_RETURN_IF_ERROR(fn);
  auto start = Clock::now();
  ++adapter_calls_;
  std::vector<Value> args = {input, ObjectRef(params_)};
  auto out = (**fn)(args);
  timings_.adapter_ms += MsSince(start);
  MLC_RETURN_IF_ERROR(out);
  return CheckAdapterOutput(*out, media, &hidden_size_);
}

Result<NDArray> Session::ChunkEmbeddings(const PrefillChunk& chunk,
                                         const std::vector<NDArray>& outputs) {
  if (!chunk.rows) {
    auto e = Embed(chunk.token_ids);
    MLC_RETURN_IF_ERROR(e);
    return e->Reshape({1, chunk.size(), e->shape()[1]});
  }
  const NDArray& rows = outputs[chunk.rows->piece];
  int64_t hidden = rows.shape()[1];
  NDArray out = NDArray::Empty({1, chunk.rows->count, hidden}, DlFloat32());
  std::memcpy(out.data<float>(), rows.data<float>() + chunk.rows->start * hidden,
              static_cast<size_t>(chunk.rows->count * hidden) * sizeof(float));
  return out;
}

Result<std::vector<float>> Session::TakeLogits(std::vector<Value> results,
                                               const std::string& function) {
  const NDArray* logits = results.empty() ? nullptr : std::get_if<NDArray>(&results.front());
  if (!logits || !logits->defined() || logits->ndim() < 1 ||
      !SameDtype(logits->dtype(), DlFloat32()) || logits->shape().back() < 1) {
    return Invalid("", function + ": returned " + (logits ? logits->Describe() : std::string("no tensor")) +
                                 ", expected float32 logits [..., vocab_size]");
  }
  if (results.size() > 1) {
    if (auto* kv = std::get_if<ObjectRef>(&results[1]); kv && *kv) kv_ = *kv;
  }
  int64_t vocab = logits->shape().back();
  const float* last = logits->data<float>() + (logits->Elements() - vocab);
  return std::vector<float>(last, last + vocab);
}

Result<std::vector<float>> Session::RunPrefillChunk(const PrefillChunk& chunk,
                                                    const NDArray& embeds) {
  std::vector<Value> args = {embeds};
  if (model_.contract.pair == GenerationPair::kTokens) {
    args.push_back(Int32Tensor(chunk.token_ids, {1, chunk.size()}));
    args.push_back(Int32Tensor(chunk.modality_ids, {1, chunk.size()}));
  }
  args.push_back(kv_);
  args.push_back(ObjectRef(params_));
  auto start = Clock::now();
  auto out = (*model_.prefill)(args);
  timings_.prefill_ms += MsSince(start);
  ++timings_.prefill_calls;
  timings_.prefill_positions += chunk.size();
  MLC_RETURN_IF_ERROR(out);
  return TakeLogits(std::move(*out), model_.contract.prefill_function);
}

Result<std::vector<float>> Session::DecodeStep(int32_t token) {
  std::vector<Value> args;
  if (model_.contract.pair == GenerationPair::kTokens) {
    args.push_back(Int32Tensor(std::span<const int32_t>(&token, 1), {1, 1}));
  } else {
    auto e = Embed(std::span<const int32_t>(&token, 1));
    MLC_RETURN_IF_ERROR(e);
    args.push_back(e->Reshape({1, 1, e->shape()[1]}));
  }
  args.push_back(kv_);
  args.push_back(ObjectRef(params_));
  auto start = Clock::now();
  auto out = (*model_.decode)(args);
  timings_.decode_ms += MsSince(start);
  ++timings_.decode_steps;
  MLC_RETURN_IF_ERROR(out);
  return TakeLogits(std::move(*out), model_.contract.decode_function);
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
  if (pieces.empty()) return Error{ErrorCode::kUsage, "", "a turn needs at least one segment"};
  if (model_.legacy) {
    for (const PromptPiece& p : pieces) {
      if (std::holds_alternative<MediaPiece>(p.value)) {
        return Invalid(p.path, "a package without a manifest takes text only");
      }
    }
  }
  MLC_RETURN_IF_ERROR(EnsureKvCache());
  int64_t kv_length = KvLength();
  // Fixed-size media (images) and text are checked before any adapter runs.
  MLC_RETURN_IF_ERROR(CheckContext(limits_, kv_length, pieces));
  std::vector<NDArray> outputs(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto* m = std::get_if<MediaPiece>(&pieces[i].value);
    if (!m) continue;
    if (!media[i].defined()) {
      return Error{ErrorCode::kUsage, pieces[i].path,
                   std::string("no ") + MediaKindName(m->kind) + " data for " + AdapterName(*m) +
                       " (a row count alone is for planning only)"};
    }
    auto rows = RunAdapter(*m, media[i]);
    MLC_RETURN_IF_ERROR(rows);
    outputs[i] = *rows;
    if (m->kind == MediaKind::kAudio) {
      m->rows = rows->shape()[0];
      MLC_RETURN_IF_ERROR(CheckContext(limits_, kv_length, pieces));
    }
  }
  auto plan = PlanPrefill(limits_, kv_length, pieces);
  MLC_RETURN_IF_ERROR(plan);
  PrefillResult result;
  for (const PrefillChunk& chunk : plan->chunks) {
    auto embeds = ChunkEmbeddings(chunk, outputs);
    MLC_RETURN_IF_ERROR(embeds);
    auto logits = RunPrefillChunk(chunk, *embeds);
    MLC_RETURN_IF_ERROR(logits);
    result.logits = std::move(*logits);
  }
  pending_token_.reset();
  result.plan = std::move(*plan);
  return result;
}

Result<TurnResult> Session::Generate(const TurnInput& input, const GenerationOptions& options) {
  MLC_RETURN_IF_ERROR(CheckSamplerConfig(options.sampler));
  PhaseTimings before = timings_;
  auto prefill = Prefill(input);
  MLC_RETURN_IF_ERROR(prefill);
  TurnResult result;
  result.plan = std::move(prefill->plan);
  std::vector<float> logits = std::move(prefill->logits);
  Sampler sampler(options.sampler);
  result.stop_reason = "length";
  while (static_cast<int64_t>(result.tokens.size()) < options.max_tokens) {
    int32_t token = sampler.Sample(logits);
    if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), token) !=
        options.stop_token_ids.end()) {
      result.stop_reason = "stop_token";
      break;
    }
    result.tokens.push_back(token);
    bool go_on = !options.on_token || options.on_token(token);
    if (!go_on) result.stop_reason = "stop_str";
    // A full context ends the turn as max_tokens does (stop reason "length"), as chat tools do:
    // the token just sampled has no position left to be fed at.
    if (!go_on || static_cast<int64_t>(result.tokens.size()) == options.max_tokens ||
        ContextFull(limits_, KvLength())) {
      pending_token_ = token;  // fed at the start of the next turn
      break;
    }
    auto next = DecodeStep(token);
    MLC_RETURN_IF_ERROR(next);
    logits = std::move(*next);
  }
  result.last_logits = std::move(logits);
  // Timings of this turn only.
  result.timings = timings_;
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
