// The calls into a bound model's functions and the checks of what they return, for one sequence
// (Session) and for several in a paged cache (BatchModel) alike; each call is timed.
#include "runtime/model_runner.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "runtime/call_checks.h"

namespace mlc {
namespace {

using Clock = std::chrono::steady_clock;

// Adds the time since construction to *ms when it goes out of scope.
struct PhaseTimer {
  double* ms;
  Clock::time_point start = Clock::now();
  ~PhaseTimer() { *ms += std::chrono::duration<double, std::milli>(Clock::now() - start).count(); }
};

// Ends a paged cache's forward pass however the call went.
struct ForwardScope {
  PagedKvState* kv;
  ~ForwardScope() {
    if (kv) kv->EndForward();
  }
};

}  // namespace

ModelRunner::ModelRunner(const BoundModel& model, std::shared_ptr<ParameterSet> params,
                         PlanLimits limits, std::optional<int64_t> hidden_size)
    : model_(model),
      params_(std::move(params)),
      limits_(limits),
      hidden_(std::make_shared<HiddenSize>()) {
  hidden_->value = hidden_size;
}

ModelRunner ModelRunner::Fork() const {
  ModelRunner fork(model_, params_, limits_);
  fork.hidden_ = hidden_;
  return fork;
}

Result<ObjectRef> ModelRunner::CreateKvCache(const KvCacheShape& shape) {
  std::vector<Value> args = {shape.max_batch_size, shape.positions, shape.prefill_chunk_size,
                             shape.page_size, int64_t{shape.sliding_window ? 1 : 0}};
  Result<std::vector<Value>> out = std::vector<Value>{};
  {
    PhaseTimer timer{&timings_.create_kv_ms};
    out = (*model_.create_kv_cache)(args);
  }
  MLC_RETURN_IF_ERROR(out);
  const ObjectRef* kv = out->empty() ? nullptr : std::get_if<ObjectRef>(&out->front());
  if (!kv || !*kv) {
    return Invalid("", model_.contract.create_kv_cache_function + ": create_kv_cache returned " +
                           std::string(out->empty() ? "nothing" : ValueTypeName(out->front())) +
                           ", expected a KV cache object");
  }
  return *kv;
}

Result<NDArray> ModelRunner::Embed(std::span<const int32_t> ids) {
  NDArray input = Int32Tensor(ids, {static_cast<int64_t>(ids.size())});
  std::vector<Value> args = {input, ObjectRef(params_)};
  Result<std::vector<Value>> out = std::vector<Value>{};
  {
    PhaseTimer timer{&timings_.embed_ms};
    out = (*model_.embed)(args);
  }
  MLC_RETURN_IF_ERROR(out);
  std::lock_guard<std::mutex> lock(hidden_->mu);
  return CheckEmbedOutput(*out, static_cast<int64_t>(ids.size()), model_.contract.embed_function,
                          &hidden_->value);
}

Result<NDArray> ModelRunner::RunAdapter(const MediaPiece& media, const NDArray& input) {
  auto fn = AdapterFor(model_, media);
  MLC_RETURN_IF_ERROR(fn);
  ++adapter_calls_;
  std::vector<Value> args = {input, ObjectRef(params_)};
  Result<std::vector<Value>> out = std::vector<Value>{};
  {
    PhaseTimer timer{&timings_.adapter_ms};
    out = (**fn)(args);
  }
  MLC_RETURN_IF_ERROR(out);
  std::lock_guard<std::mutex> lock(hidden_->mu);
  return CheckAdapterOutput(*out, media, &hidden_->value);
}

Result<PreparedPrompt> ModelRunner::Prepare(std::vector<PromptPiece> pieces,
                                            const std::vector<NDArray>& media, int64_t kv_length,
                                            AdapterMemo* memo,
                                            const std::vector<std::string>* media_keys) {
  if (pieces.empty()) return Error{ErrorCode::kUsage, "", "a turn needs at least one segment"};
  if (model_.legacy) {
    for (const PromptPiece& p : pieces) {
      if (std::holds_alternative<MediaPiece>(p.value)) {
        return Invalid(p.path, "a package without a manifest takes text only");
      }
    }
  }
  // Fixed-size media (images) and text are checked before any adapter runs.
  MLC_RETURN_IF_ERROR(CheckContext(limits_, kv_length, pieces));
  PreparedPrompt prompt;
  prompt.outputs.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto* m = std::get_if<MediaPiece>(&pieces[i].value);
    if (!m) continue;
    if (i >= media.size() || !media[i].defined()) {
      return Error{ErrorCode::kUsage, pieces[i].path,
                   std::string("no ") + MediaKindName(m->kind) + " data for " + AdapterName(*m) +
                       " (a row count alone is for planning only)"};
    }
    const std::string* key =
        memo && media_keys && i < media_keys->size() && !(*media_keys)[i].empty() ? &(*media_keys)[i] : nullptr;
    NDArray kept = key ? memo->Find(*key) : NDArray();
    if (kept.defined()) {
      prompt.outputs[i] = kept;
    } else {
      auto rows = RunAdapter(*m, media[i]);
      MLC_RETURN_IF_ERROR(rows);
      prompt.outputs[i] = *rows;
      if (key) memo->Keep(*key, *rows);
    }
    const NDArray* rows = &prompt.outputs[i];
    if (m->kind == MediaKind::kAudio) {
      m->rows = rows->shape()[0];
      Status fits = CheckContext(limits_, kv_length, pieces);
      if (!fits) return AudioInSeconds(fits.errors(), pieces, media, kv_length);
    }
  }
  auto plan = PlanPrefill(limits_, kv_length, pieces);
  MLC_RETURN_IF_ERROR(plan);
  prompt.plan = std::move(*plan);
  return prompt;
}

Errors ModelRunner::AudioInSeconds(Errors errors, const std::vector<PromptPiece>& pieces,
                                   const std::vector<NDArray>& media, int64_t kv_length) const {
  const int64_t rate = model_.contract.audio ? model_.contract.audio->processor.sample_rate_hz : 0;
  if (errors.empty() || rate <= 0 || limits_.context_window_size <= 0) return errors;
  double seconds = 0, known_seconds = 0;
  int64_t known_rows = 0, other = 0;  // other: every position but the audio rows
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto* m = std::get_if<MediaPiece>(&pieces[i].value);
    if (!m || m->kind != MediaKind::kAudio || i >= media.size()) {
      other += pieces[i].MinPositions();
      continue;
    }
    const double s = static_cast<double>(media[i].Elements()) / static_cast<double>(rate);
    seconds += s;
    other += pieces[i].MinPositions() - m->rows.value_or(1);
    if (m->rows) {
      known_rows += *m->rows;
      known_seconds += s;
    }
  }
  if (known_seconds <= 0 || known_rows <= 0) return errors;
  const double per_second = static_cast<double>(known_rows) / known_seconds;
  const double fit = std::max(0.0, static_cast<double>(limits_.context_window_size - kv_length - other) / per_second);
  char text[160];
  std::snprintf(text, sizeof(text), "; the turn's %.1f s of audio take %.1f positions a second: about %.1f s fit",
                seconds, per_second, fit);
  errors.front().message += text;
  return errors;
}

Result<NDArray> ModelRunner::ChunkEmbeddings(const PrefillChunk& chunk,
                                             const PreparedPrompt& prompt) {
  if (!chunk.rows) return Embed(chunk.token_ids);
  const NDArray& rows = prompt.outputs[chunk.rows->piece];
  int64_t hidden = rows.shape()[1];
  NDArray out = NDArray::Empty({chunk.rows->count, hidden}, DlFloat32());
  std::memcpy(out.data<float>(), rows.data<float>() + chunk.rows->start * hidden,
              static_cast<size_t>(chunk.rows->count * hidden) * sizeof(float));
  return out;
}

Result<std::vector<Value>> ModelRunner::Invoke(const PackedFunction& fn, const std::string& name,
                                               std::vector<Value> args, Target target,
                                               std::span<const int64_t> seq_ids,
                                               std::span<const int64_t> lengths) {
  PagedKvState* paged = nullptr;
  if (target.batched) {
    paged = dynamic_cast<PagedKvState*>(target.kv->get());
    if (!paged) return Invalid("", name + ": the KV cache does not hold several sequences");
    MLC_RETURN_IF_ERROR(paged->BeginForward(seq_ids, lengths));
  }
  ForwardScope scope{paged};
  // Constructed in place: GCC 12 takes a moved Value temporary here for uninitialized.
  args.emplace_back(std::in_place_type<ObjectRef>, *target.kv);
  args.emplace_back(std::in_place_type<ObjectRef>, params_);
  return fn(args);
}

void ModelRunner::TakeKv(Target target, const std::vector<Value>& out) {
  if (target.batched || out.size() < 2) return;
  if (auto* kv = std::get_if<ObjectRef>(&out[1]); kv && *kv) *target.kv = *kv;
}

Result<SequenceLogits> ModelRunner::Call(const PackedFunction& fn, const std::string& name,
                                         std::vector<Value> args, Target target,
                                         std::span<const int64_t> seq_ids,
                                         std::span<const int64_t> lengths) {
  auto out = Invoke(fn, name, std::move(args), target, seq_ids, lengths);
  MLC_RETURN_IF_ERROR(out);
  const NDArray* logits = out->empty() ? nullptr : std::get_if<NDArray>(&out->front());
  const int64_t n = static_cast<int64_t>(seq_ids.size());
  bool ok = logits && logits->defined() && logits->ndim() >= 1 &&
            SameDtype(logits->dtype(), DlFloat32()) && logits->shape().back() >= 1;
  if (target.batched && ok && logits->Elements() != n * logits->shape().back()) ok = false;
  if (!ok) {
    std::string expected = target.batched
                               ? "float32 logits for " + std::to_string(n) + " sequences"
                               : std::string("float32 logits [..., vocab_size]");
    return Invalid("", name + ": returned " +
                           (logits ? logits->Describe() : std::string("no tensor")) +
                           ", expected " + expected);
  }
  const int64_t vocab = logits->shape().back();
  if (!target.batched) {
    TakeKv(target, *out);
    return SequenceLogits(*logits, logits->Elements() / vocab - 1, 1, vocab);
  }
  return SequenceLogits(*logits, 0, n, vocab);
}

Result<ModelRunner::PrefillArgs> ModelRunner::MakePrefillArgs(Target target,
                                                              std::span<const SequenceChunk> chunks) const {
  if (chunks.empty() || (!target.batched && chunks.size() != 1)) {
    return Error{ErrorCode::kUsage, "", "a prefill call needs a sequence (one when not batched)"};
  }
  int64_t total = 0, hidden = 0;
  PrefillArgs out;
  for (const SequenceChunk& c : chunks) {
    if (!c.chunk || !c.embeds.defined() || c.embeds.ndim() != 2 ||
        c.embeds.shape()[0] != c.chunk->size() || (hidden && c.embeds.shape()[1] != hidden)) {
      return Invalid("", "each sequence's chunk needs embeddings [chunk size, hidden]");
    }
    hidden = c.embeds.shape()[1];
    total += c.chunk->size();
    out.ids.push_back(c.seq_id);
    out.lengths.push_back(c.chunk->size());
  }
  if (chunks.size() == 1) {
    out.args.push_back(chunks[0].embeds.Reshape({1, total, hidden}));
  } else {
    NDArray embeds = NDArray::Empty({1, total, hidden}, DlFloat32());
    float* dst = embeds.data<float>();
    for (const SequenceChunk& c : chunks) {
      std::memcpy(dst, c.embeds.data<float>(), c.embeds.Bytes());
      dst += c.embeds.Elements();
    }
    out.args.push_back(std::move(embeds));
  }
  if (model_.contract.pair == GenerationPair::kTokens) {
    std::vector<int32_t> token_ids, modality_ids;
    for (const SequenceChunk& c : chunks) {
      token_ids.insert(token_ids.end(), c.chunk->token_ids.begin(), c.chunk->token_ids.end());
      modality_ids.insert(modality_ids.end(), c.chunk->modality_ids.begin(),
                          c.chunk->modality_ids.end());
    }
    out.args.push_back(Int32Tensor(token_ids, {1, total}));
    out.args.push_back(Int32Tensor(modality_ids, {1, total}));
  }
  out.total = total;
  out.hidden = hidden;
  return out;
}

Result<SequenceLogits> ModelRunner::Prefill(Target target, std::span<const SequenceChunk> chunks) {
  auto p = MakePrefillArgs(target, chunks);
  MLC_RETURN_IF_ERROR(p);
  PhaseTimer timer{&timings_.prefill_ms};
  ++timings_.prefill_calls;
  timings_.prefill_positions += p->total;
  return Call(*model_.prefill, model_.contract.prefill_function, std::move(p->args), target, p->ids,
              p->lengths);
}

Result<NDArray> ModelRunner::PrefillHidden(Target target, std::span<const SequenceChunk> chunks) {
  if (!model_.hidden_states) {
    return Error{ErrorCode::kUnsupported, "",
                 std::string("this model's library has no ") + kHiddenStatesFunction + " (no embeddings)"};
  }
  auto p = MakePrefillArgs(target, chunks);
  MLC_RETURN_IF_ERROR(p);
  PhaseTimer timer{&timings_.prefill_ms};
  ++timings_.prefill_calls;
  timings_.prefill_positions += p->total;
  auto out = Invoke(*model_.hidden_states, kHiddenStatesFunction, std::move(p->args), target, p->ids, p->lengths);
  MLC_RETURN_IF_ERROR(out);
  const NDArray* hidden = out->empty() ? nullptr : std::get_if<NDArray>(&out->front());
  if (!hidden || !hidden->defined() || !SameDtype(hidden->dtype(), DlFloat32()) || hidden->ndim() != 3 ||
      hidden->shape()[0] != 1 || hidden->shape()[1] != p->total || hidden->shape()[2] < 1) {
    return Invalid("", std::string(kHiddenStatesFunction) + ": returned " +
                           (hidden ? hidden->Describe() : std::string("no tensor")) +
                           ", expected float32 hidden states [1, " + std::to_string(p->total) + ", hidden]");
  }
  TakeKv(target, *out);
  return hidden->Reshape({p->total, hidden->shape()[2]});
}

Result<SequenceLogits> ModelRunner::Decode(Target target, std::span<const int64_t> seq_ids,
                                           std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(seq_ids.size());
  if (n < 1 || tokens.size() != seq_ids.size() || (!target.batched && n != 1)) {
    return Error{ErrorCode::kUsage, "", "a decode step needs one token per sequence"};
  }
  std::vector<int64_t> ones(seq_ids.size(), 1);
  const PackedFunction* fn = model_.decode;
  const std::string* name = &model_.contract.decode_function;
  std::vector<Value> args;
  if (model_.contract.pair == GenerationPair::kTokens) {
    args.push_back(Int32Tensor(tokens, {n, 1}));
  } else {
    auto e = Embed(tokens);
    MLC_RETURN_IF_ERROR(e);
    args.push_back(e->Reshape({1, n, e->shape()[1]}));
    if (n > 1) {  // decode_embeds takes one sequence; prefill_embeds runs one position of each
      fn = model_.prefill;
      name = &model_.contract.prefill_function;
    }
  }
  PhaseTimer timer{&timings_.decode_ms};
  ++timings_.decode_steps;
  return Call(*fn, *name, std::move(args), target, seq_ids, ones);
}

}  // namespace mlc
