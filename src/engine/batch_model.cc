// Several sequences over one paged KV cache: a thin face over the ModelRunner that creates the
// cache for max_batch_size sequences and runs prefill and decode calls on the named sequences;
// or, for a cache that holds one sequence, one cache per sequence, each call on its own.
#include "mlc_manifest/engine.h"
#include "runtime/model_runner.h"

namespace mlc {

BatchModel::BatchModel(const LoadedModel& model, const BatchOptions& options)
    : runner_(std::make_unique<ModelRunner>(model.bound, model.params, model.limits,
                                            model.hidden_size)),
      options_(options) {}

BatchModel::~BatchModel() = default;

const PlanLimits& BatchModel::limits() const { return runner_->limits(); }

std::unique_ptr<ModelRunner> BatchModel::ForkRunner() const {
  return std::make_unique<ModelRunner>(runner_->Fork());
}

Result<std::unique_ptr<BatchModel>> BatchModel::Create(const LoadedModel& model,
                                                       const BatchOptions& options) {
  if (options.max_batch_size < 1 || options.max_batch_size > 1024) {
    return Error{ErrorCode::kUsage, "/max_batch_size", "expected 1..1024"};
  }
  if (options.page_size < 1 || options.page_size > 4096) {
    return Error{ErrorCode::kUsage, "/page_size", "expected 1..4096"};
  }
  std::unique_ptr<BatchModel> b(new BatchModel(model, options));
  if (model.limits.HasSlidingWindow()) {
    if (options.max_batch_size != 1 && !options.or_one_at_a_time) {
      return Error{ErrorCode::kUnsupported, "/sliding_window_size",
                   "batching over a sliding-window KV cache is not supported (one sequence at a time)"};
    }
    return b;  // one cache per sequence
  }
  int64_t positions = options.kv_positions;
  if (positions <= 0) {
    positions = std::min<int64_t>(model.limits.context_window_size * options.max_batch_size,
                                  int64_t{1} << 20);
  }
  b->options_.kv_positions = positions;
  auto kv = b->runner_->CreateKvCache(KvCacheShape{options.max_batch_size, positions,
                                                   model.limits.prefill_chunk_size,
                                                   options.page_size, false});
  MLC_RETURN_IF_ERROR(kv);
  auto* paged = dynamic_cast<PagedKvState*>(kv->get());
  if (!paged) {
    if (options.max_batch_size == 1 || options.or_one_at_a_time) return b;  // one cache per sequence
    return Error{ErrorCode::kUnsupported, "",
                 model.bound.contract.create_kv_cache_function + ": returned " + (*kv)->TypeName() +
                     ", expected a KV cache that holds several sequences"};
  }
  b->kv_ref_ = std::move(*kv);
  b->kv_ = paged;
  return b;
}

Result<ObjectRef> BatchModel::NewSequenceCache() {
  const PlanLimits& limits = runner_->limits();
  return runner_->CreateKvCache(KvCacheShape{
      1, limits.HasSlidingWindow() ? limits.sliding_window_size : limits.context_window_size,
      limits.prefill_chunk_size, 16, limits.HasSlidingWindow()});
}

const PhaseTimings& BatchModel::timings() const { return runner_->timings(); }

Result<SequenceLogits> BatchModel::PrefillOwn(ObjectRef* own, const SequenceChunk& chunk) {
  return runner_->Prefill({own, false}, std::span<const SequenceChunk>(&chunk, 1));
}

Result<SequenceLogits> BatchModel::DecodeOwn(ObjectRef* own, int32_t token) {
  const int64_t seq = 0;
  return runner_->Decode({own, false}, std::span<const int64_t>(&seq, 1), std::span<const int32_t>(&token, 1));
}

Result<PreparedPrompt> BatchModel::Prepare(const TurnInput& input, int64_t kv_length) {
  return runner_->Prepare(input.pieces, input.media, kv_length);
}

Result<NDArray> BatchModel::ChunkEmbeddings(const PrefillChunk& chunk,
                                            const PreparedPrompt& prompt) {
  return runner_->ChunkEmbeddings(chunk, prompt);
}

Result<SequenceLogits> BatchModel::Prefill(std::span<const SequenceChunk> chunks) {
  return runner_->Prefill({&kv_ref_, true}, chunks);
}

bool BatchModel::embeddings() const { return runner_->model().hidden_states != nullptr; }

Result<NDArray> BatchModel::PrefillHidden(std::span<const SequenceChunk> chunks) {
  return runner_->PrefillHidden({&kv_ref_, true}, chunks);
}

Result<NDArray> BatchModel::PrefillHiddenOwn(ObjectRef* own, const SequenceChunk& chunk) {
  return runner_->PrefillHidden({own, false}, std::span<const SequenceChunk>(&chunk, 1));
}

Result<SequenceLogits> BatchModel::Decode(std::span<const int64_t> seq_ids,
                                                           std::span<const int32_t> tokens) {
  return runner_->Decode({&kv_ref_, true}, seq_ids, tokens);
}

}  // namespace mlc
