// Several sequences over one paged KV cache: the adapters and the plan of each prompt, prefill
// chunks of several sequences laid end to end in one call (the seed's total_len shapes), and one
// decode call per step for a whole batch. Every result a library function returns is checked.
#include <cstring>

#include "mlc_manifest/engine.h"
#include "runtime/call_checks.h"

namespace mlc {
namespace {

// Ends the KV cache's forward pass however the call went.
struct ForwardScope {
  PagedKvState* kv;
  ~ForwardScope() { kv->EndForward(); }
};

}  // namespace

BatchModel::BatchModel(const LoadedModel& model, const BatchOptions& options)
    : model_(model.bound),
      params_(model.params),
      limits_(model.limits),
      hidden_size_(model.hidden_size),
      options_(options) {}

Result<std::unique_ptr<BatchModel>> BatchModel::Create(const LoadedModel& model,
                                                       const BatchOptions& options) {
  if (options.max_batch_size < 1 || options.max_batch_size > 1024) {
    return Error{ErrorCode::kUsage, "/max_batch_size", "expected 1..1024"};
  }
  if (options.page_size < 1 || options.page_size > 4096) {
    return Error{ErrorCode::kUsage, "/page_size", "expected 1..4096"};
  }
  if (model.limits.HasSlidingWindow()) {
    return Error{ErrorCode::kUnsupported, "/sliding_window_size",
                 "batching over a sliding-window KV cache is not supported"};
  }
  std::unique_ptr<BatchModel> b(new BatchModel(model, options));
  int64_t positions = options.kv_positions;
  if (positions <= 0) {
    positions = std::min<int64_t>(model.limits.context_window_size * options.max_batch_size,
                                  int64_t{1} << 20);
  }
  b->options_.kv_positions = positions;
  std::vector<Value> args = {options.max_batch_size, positions, model.limits.prefill_chunk_size,
                             options.page_size, int64_t{0}};
  auto out = (*model.bound.create_kv_cache)(args);
  MLC_RETURN_IF_ERROR(out);
  const std::string& fn = model.bound.contract.create_kv_cache_function;
  ObjectRef kv;
  if (const ObjectRef* o = out->empty() ? nullptr : std::get_if<ObjectRef>(&out->front())) kv = *o;
  auto* paged = dynamic_cast<PagedKvState*>(kv.get());
  if (!paged) {
    return Error{ErrorCode::kUnsupported, "",
                 fn + ": returned " + (kv ? kv->TypeName() : std::string("no object")) +
                     ", expected a KV cache that holds several sequences"};
  }
  b->kv_ref_ = std::move(kv);
  b->kv_ = paged;
  return b;
}

Result<NDArray> BatchModel::Embed(std::span<const int32_t> ids) {
  NDArray input = Int32Tensor(ids, {static_cast<int64_t>(ids.size())});
  std::vector<Value> args = {input, ObjectRef(params_)};
  auto out = (*model_.embed)(args);
  MLC_RETURN_IF_ERROR(out);
  return CheckEmbedOutput(*out, static_cast<int64_t>(ids.size()), model_.contract.embed_function,
                          &hidden_size_);
}

Result<NDArray> BatchModel::RunAdapter(const MediaPiece& media, const NDArray& input) {
  auto fn = AdapterFor(model_, media);
  MLC_RETURN_IF_ERROR(fn);
  std::vector<Value> args = {input, ObjectRef(params_)};
  auto out = (**fn)(args);
  MLC_RETURN_IF_ERROR(out);
  return CheckAdapterOutput(*out, media, &hidden_size_);
}

Result<PreparedPrompt> BatchModel::Prepare(const TurnInput& input, int64_t kv_length) {
  std::vector<PromptPiece> pieces = input.pieces;
  if (pieces.empty()) return Error{ErrorCode::kUsage, "", "a prompt needs at least one segment"};
  for (const PromptPiece& p : pieces) {
    if (model_.legacy && std::holds_alternative<MediaPiece>(p.value)) {
      return Invalid(p.path, "a package without a manifest takes text only");
    }
  }
  MLC_RETURN_IF_ERROR(CheckContext(limits_, kv_length, pieces));
  PreparedPrompt prompt;
  prompt.outputs.resize(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    auto* m = std::get_if<MediaPiece>(&pieces[i].value);
    if (!m) continue;
    if (i >= input.media.size() || !input.media[i].defined()) {
      return Error{ErrorCode::kUsage, pieces[i].path,
                   std::string("no ") + MediaKindName(m->kind) + " data for " + AdapterName(*m)};
    }
    auto rows = RunAdapter(*m, input.media[i]);
    MLC_RETURN_IF_ERROR(rows);
    prompt.outputs[i] = *rows;
    if (m->kind == MediaKind::kAudio) {
      m->rows = rows->shape()[0];
      MLC_RETURN_IF_ERROR(CheckContext(limits_, kv_length, pieces));
    }
  }
  auto plan = PlanPrefill(limits_, kv_length, pieces);
  MLC_RETURN_IF_ERROR(plan);
  prompt.plan = std::move(*plan);
  return prompt;
}

Result<NDArray> BatchModel::ChunkEmbeddings(const PrefillChunk& chunk,
                                            const PreparedPrompt& prompt) {
  if (!chunk.rows) return Embed(chunk.token_ids);
  const NDArray& rows = prompt.outputs[chunk.rows->piece];
  int64_t hidden = rows.shape()[1];
  NDArray out = NDArray::Empty({chunk.rows->count, hidden}, DlFloat32());
  std::memcpy(out.data<float>(), rows.data<float>() + chunk.rows->start * hidden,
              static_cast<size_t>(chunk.rows->count * hidden) * sizeof(float));
  return out;
}

Result<std::vector<std::vector<float>>> BatchModel::Call(const PackedFunction& fn,
                                                         const std::string& name,
                                                         std::vector<Value> args,
                                                         std::span<const int64_t> seq_ids,
                                                         std::span<const int64_t> lengths) {
  MLC_RETURN_IF_ERROR(kv_->BeginForward(seq_ids, lengths));
  ForwardScope scope{kv_};
  // Constructed in place: GCC 12 takes a moved Value temporary here for uninitialized.
  args.emplace_back(std::in_place_type<ObjectRef>, kv_ref_);
  args.emplace_back(std::in_place_type<ObjectRef>, params_);
  auto out = fn(args);
  MLC_RETURN_IF_ERROR(out);
  const NDArray* logits = out->empty() ? nullptr : std::get_if<NDArray>(&out->front());
  int64_t n = static_cast<int64_t>(seq_ids.size());
  if (!logits || !logits->defined() || logits->ndim() < 1 ||
      !SameDtype(logits->dtype(), DlFloat32()) || logits->shape().back() < 1 ||
      logits->Elements() != n * logits->shape().back()) {
    return Invalid("", name + ": returned " + (logits ? logits->Describe() : std::string("no tensor")) +
                             ", expected float32 logits for " + std::to_string(n) + " sequences");
  }
  int64_t vocab = logits->shape().back();
  std::vector<std::vector<float>> result;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = logits->data<float>() + i * vocab;
    result.emplace_back(row, row + vocab);
  }
  return result;
}

Result<std::vector<std::vector<float>>> BatchModel::Prefill(std::span<const SequenceChunk> chunks) {
  if (chunks.empty()) return Error{ErrorCode::kUsage, "", "a prefill call needs a sequence"};
  int64_t total = 0, hidden = 0;
  std::vector<int64_t> ids, lengths;
  for (const SequenceChunk& c : chunks) {
    if (!c.chunk || !c.embeds.defined() || c.embeds.ndim() != 2 ||
        c.embeds.shape()[0] != c.chunk->size() || (hidden && c.embeds.shape()[1] != hidden)) {
      return Invalid("", "each sequence's chunk needs embeddings [chunk size, hidden]");
    }
    hidden = c.embeds.shape()[1];
    total += c.chunk->size();
    ids.push_back(c.seq_id);
    lengths.push_back(c.chunk->size());
  }
  NDArray embeds = NDArray::Empty({1, total, hidden}, DlFloat32());
  std::vector<int32_t> token_ids, modality_ids;
  float* dst = embeds.data<float>();
  for (const SequenceChunk& c : chunks) {
    std::memcpy(dst, c.embeds.data<float>(), c.embeds.Bytes());
    dst += c.embeds.Elements();
    token_ids.insert(token_ids.end(), c.chunk->token_ids.begin(), c.chunk->token_ids.end());
    modality_ids.insert(modality_ids.end(), c.chunk->modality_ids.begin(), c.chunk->modality_ids.end());
  }
  std::vector<Value> args = {embeds};
  if (model_.contract.pair == GenerationPair::kTokens) {
    args.push_back(Int32Tensor(token_ids, {1, total}));
    args.push_back(Int32Tensor(modality_ids, {1, total}));
  }
  return Call(*model_.prefill, model_.contract.prefill_function, std::move(args), ids, lengths);
}

Result<std::vector<std::vector<float>>> BatchModel::Decode(std::span<const int64_t> seq_ids,
                                                           std::span<const int32_t> tokens) {
  int64_t n = static_cast<int64_t>(seq_ids.size());
  if (n < 1 || tokens.size() != seq_ids.size()) {
    return Error{ErrorCode::kUsage, "", "a decode step needs one token per sequence"};
  }
  std::vector<int64_t> ones(seq_ids.size(), 1);
  if (model_.contract.pair == GenerationPair::kTokens) {
    return Call(*model_.decode, model_.contract.decode_function, {Int32Tensor(tokens, {n, 1})},
                seq_ids, ones);
  }
  auto e = Embed(tokens);
  MLC_RETURN_IF_ERROR(e);
  NDArray rows = e->Reshape({1, n, e->shape()[1]});
  if (n == 1) return Call(*model_.decode, model_.contract.decode_function, {rows}, seq_ids, ones);
  return Call(*model_.prefill, model_.contract.prefill_function, {rows}, seq_ids, ones);
}

}  // namespace mlc
