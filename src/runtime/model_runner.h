// The one caller of a bound model's functions: create_kv_cache, embed_tokens, the adapters,
// prefill and decode, each result checked before it is used. Session (one sequence, turn by turn)
// and the engine's BatchModel (several sequences in one paged cache) both drive a model through it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mlc_manifest/session.h"

namespace mlc {

// The shape create_kv_cache takes: (max_batch_size, positions, prefill_chunk_size, page_size,
// sliding window flag).
struct KvCacheShape {
  int64_t max_batch_size = 1;
  int64_t positions = 0;
  int64_t prefill_chunk_size = 0;
  int64_t page_size = 16;
  bool sliding_window = false;
};

// Adapter outputs kept by the media they came from (the engine's bounded cache): Prepare asks it
// before it runs an adapter and gives it each output it computed.
class AdapterMemo {
 public:
  virtual ~AdapterMemo() = default;
  virtual NDArray Find(const std::string& key) = 0;  // undefined when absent
  virtual void Keep(const std::string& key, const NDArray& rows) = 0;
};

// One thread at a time per runner; Fork gives another thread its own runner over the same model
// (the adapters and embed_tokens take only the parameters, no KV state, so two runners may call
// them while a third prefills or decodes).
class ModelRunner {
 public:
  ModelRunner(const BoundModel& model, std::shared_ptr<ParameterSet> params, PlanLimits limits,
              std::optional<int64_t> hidden_size = std::nullopt);

  // A runner for another thread: the same model and parameters, the hidden size learned so far
  // shared with this one, its own timings.
  ModelRunner Fork() const;

  const BoundModel& model() const { return model_; }
  const PlanLimits& limits() const { return limits_; }
  const PhaseTimings& timings() const { return timings_; }
  int64_t adapter_calls() const { return adapter_calls_; }

  // create_kv_cache; the result must be an object (a KV cache).
  Result<ObjectRef> CreateKvCache(const KvCacheShape& shape);
  // embed_tokens: [ids.size(), hidden] float32.
  Result<NDArray> Embed(std::span<const int32_t> ids);
  // The media piece's adapter over its input: [rows, hidden] float32.
  Result<NDArray> RunAdapter(const MediaPiece& media, const NDArray& input);
  // Runs the adapters of a prompt (media[i] is piece i's input) and plans it for a sequence
  // holding kv_length positions: the context is checked before an image adapter runs and again
  // once audio rows are known.
  // With memo, media piece i whose media_keys[i] is not empty takes its rows from the memo when
  // it holds them, and its computed rows are kept there.
  Result<PreparedPrompt> Prepare(std::vector<PromptPiece> pieces, const std::vector<NDArray>& media,
                                 int64_t kv_length, AdapterMemo* memo = nullptr,
                                 const std::vector<std::string>* media_keys = nullptr);
  // The embeddings of a planned chunk, [chunk size, hidden]: embed_tokens for text, the adapter
  // rows otherwise.
  Result<NDArray> ChunkEmbeddings(const PrefillChunk& chunk, const PreparedPrompt& prompt);

  // How a call reaches its KV cache. Not batched: the cache's only sequence, and a second value
  // the function returns replaces `kv` (the one-sequence contract). Batched: the sequences named
  // in the call, laid end to end between the paged cache's BeginForward and EndForward.
  struct Target {
    ObjectRef* kv = nullptr;
    bool batched = false;
  };
  // One prefill call over the chunks of several sequences (each at most once; one when not
  // batched), their positions laid end to end.
  Result<SequenceLogits> Prefill(Target target, std::span<const SequenceChunk> chunks);
  // The same call through kHiddenStatesFunction: every position's final-normed hidden state
  // [total positions, hidden], the sequences' rows end to end (kUnsupported without it).
  Result<NDArray> PrefillHidden(Target target, std::span<const SequenceChunk> chunks);
  // One decode step, one token per sequence (decode_tokens [batch, 1]; for the embed pair
  // decode_embeds [1, 1, hidden] for one sequence, else prefill_embeds with one position each).
  Result<SequenceLogits> Decode(Target target, std::span<const int64_t> seq_ids,
                                std::span<const int32_t> tokens);

 private:
  // The hidden size every embedding and adapter output must share, learned from the first one.
  struct HiddenSize {
    std::mutex mu;
    std::optional<int64_t> value;
  };
  // A context check that failed once audio rows were known, its message ending with what the
  // turn's audio takes in seconds and about how many seconds would fit.
  Errors AudioInSeconds(Errors errors, const std::vector<PromptPiece>& pieces, const std::vector<NDArray>& media,
                        int64_t kv_length) const;
  // A prefill call's inputs: the rows (and for the token pair their ids) laid end to end.
  struct PrefillArgs {
    std::vector<Value> args;
    std::vector<int64_t> ids, lengths;
    int64_t total = 0, hidden = 0;
  };
  Result<PrefillArgs> MakePrefillArgs(Target target, std::span<const SequenceChunk> chunks) const;
  // Calls fn with the KV cache and parameters after args (the paged sequences begun and ended).
  Result<std::vector<Value>> Invoke(const PackedFunction& fn, const std::string& name, std::vector<Value> args,
                                    Target target, std::span<const int64_t> seq_ids,
                                    std::span<const int64_t> lengths);
  // Not batched: a KV cache the call returned second replaces *target.kv.
  static void TakeKv(Target target, const std::vector<Value>& out);
  Result<SequenceLogits> Call(const PackedFunction& fn, const std::string& name,
                              std::vector<Value> args, Target target,
                              std::span<const int64_t> seq_ids, std::span<const int64_t> lengths);

  BoundModel model_;
  std::shared_ptr<ParameterSet> params_;
  PlanLimits limits_;
  std::shared_ptr<HiddenSize> hidden_;
  PhaseTimings timings_;
  int64_t adapter_calls_ = 0;
};

}  // namespace mlc
