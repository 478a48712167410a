// Batching over one model: several sequences in one paged KV cache (BatchModel: prefill chunks
// of several sequences laid end to end in one call, one decode call for a whole batch), and the
// continuous-batching Engine on top (requests join and leave between decode steps, prefill chunks
// of new requests interleave with decode under prefill_chunk_size, a bounded queue, per-request
// limits, stop ids and strings, sampling, cancellation, the KV page budget); a request's adapters
// run on a preparation worker before it joins the batch, so running streams keep decoding.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc {

struct BatchOptions {
  int64_t max_batch_size = 8;  // sequences at once
  int64_t kv_positions = 0;    // KV capacity over all sequences; 0: context window x batch size
  int64_t page_size = 16;
};

class BatchModel {
 public:
  // Creates the KV cache with create_kv_cache(max_batch_size, kv_positions, prefill_chunk_size,
  // page_size, 0); the library's cache must hold several sequences (PagedKvState).
  static Result<std::unique_ptr<BatchModel>> Create(const LoadedModel& model,
                                                    const BatchOptions& options);

  ~BatchModel();
  PagedKvState& kv() { return *kv_; }
  const PlanLimits& limits() const;
  int64_t max_batch_size() const { return options_.max_batch_size; }
  // A runner for another thread over the same model (the engine's preparation worker): its
  // adapter calls take only the parameters, so they may run while this one prefills or decodes.
  std::unique_ptr<ModelRunner> ForkRunner() const;

  // Runs the adapters of a prompt and plans it for a sequence holding kv_length positions (the
  // context check runs before an image adapter and again once audio rows are known).
  Result<PreparedPrompt> Prepare(const TurnInput& input, int64_t kv_length);
  // The embeddings of a planned chunk: embed_tokens for text, the adapter rows otherwise.
  Result<NDArray> ChunkEmbeddings(const PrefillChunk& chunk, const PreparedPrompt& prompt);
  // One prefill call over several sequences (each at most once), their positions laid end to
  // end; returns each sequence's last-position logits, in order.
  Result<SequenceLogits> Prefill(std::span<const SequenceChunk> chunks);
  // One decode step for several sequences (decode_tokens [batch, 1]; for the embed pair
  // decode_embeds [1, 1, hidden] at batch 1, else prefill_embeds with one position each).
  Result<SequenceLogits> Decode(std::span<const int64_t> seq_ids, std::span<const int32_t> tokens);

 private:
  BatchModel(const LoadedModel& model, const BatchOptions& options);

  std::unique_ptr<ModelRunner> runner_;
  BatchOptions options_;
  ObjectRef kv_ref_;
  PagedKvState* kv_ = nullptr;
};

// ---- Continuous batching ----

struct EngineOptions {
  BatchOptions batch;
  size_t max_queue = 64;           // waiting requests; Submit fails beyond it
  int64_t prefill_chunk_size = 0;  // positions of prefill per step; 0: the model's
};

struct GenerationRequest {
  TurnInput input;
  int64_t max_tokens = 256;  // capped so that prompt + reply fit the context window
  SamplerConfig sampler;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop_strings;  // needs a tokenizer
  // Structured output: each token is sampled among those the grammar allows (stop ids only
  // once the value is complete); unset: free text.
  std::optional<JsonConstraint> json;
  // -1: no log-probabilities; 0..20: each kept token's, with this many most likely alternatives
  // (StreamEvent::logprobs).
  int top_logprobs = -1;
};

// What the engine reports about a request, in order; the last one has done set.
struct StreamEvent {
  std::string text;             // new text, safe to show (stop strings are cut)
  std::vector<int32_t> tokens;  // tokens kept since the previous event
  std::vector<TokenLogprobs> logprobs;  // per token, when the request asked for them
  bool done = false;
  std::string finish_reason;  // when done, FinishReasonName: "stop", "length", "cancelled", "error"
  Errors errors;              // finish_reason "error"
  int64_t prompt_tokens = 0;  // when done (and on the first event): positions prefilled
  int64_t completion_tokens = 0;
};
// Called on the engine's thread; it must not block for long.
using StreamSink = std::function<void(const StreamEvent& event)>;

class Engine {
 public:
  // The model must outlive the engine; the tokenizer (nullptr: no text, no stop strings) too.
  static Result<std::unique_ptr<Engine>> Start(const LoadedModel& model, const Tokenizer* tokenizer,
                                               const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its events go to sink. kLimit when the queue is full, kUsage after
  // Shutdown or for a request that can never run (stop strings without a tokenizer, bad sampler).
  Result<uint64_t> Submit(GenerationRequest request, StreamSink sink);
  // Ends a queued or running request (its last event says "cancelled"); unknown ids are ignored.
  void Cancel(uint64_t id);
  // Stops accepting requests; with drain, finishes the queued and running ones first, else
  // cancels them. Returns once the engine's thread has ended.
  void Shutdown(bool drain);

  struct Stats {
    size_t queued = 0;
    size_t running = 0;
    int64_t free_pages = 0;
    int64_t total_pages = 0;
    int64_t page_size = 0;      // KV positions per page
    int64_t steps = 0;          // scheduler iterations that called the model
    int64_t max_running = 0;    // most requests running at once so far
  };
  Stats stats() const;

 private:
  struct Active;
  Engine(std::unique_ptr<BatchModel> batch, const Tokenizer* tokenizer, EngineOptions options);
  void Loop();
  void PrepareLoop();
  void AdmitWaiting(std::vector<std::pair<StreamSink, StreamEvent>>& out);
  void RunPrefill(std::vector<std::pair<StreamSink, StreamEvent>>& out);
  void RunDecode(std::vector<std::pair<StreamSink, StreamEvent>>& out);
  // Logprobs (top_n alternatives into *logprobs when given) are of the masked distribution.
  int32_t SampleConstrained(Active& a, std::span<const float> logits, int top_n, TokenLogprobs* logprobs,
                            std::vector<std::pair<StreamSink, StreamEvent>>& out);
  void Accept(Active& a, std::span<const float> logits,
              std::vector<std::pair<StreamSink, StreamEvent>>& out);
  void Finish(Active& a, StopReason reason, Errors errors,
              std::vector<std::pair<StreamSink, StreamEvent>>& out);
  void DropFinished();
  size_t WaitingLocked() const;

  std::unique_ptr<BatchModel> batch_;
  // The preparation worker's own runner: adapters and planning, off the engine thread.
  std::unique_ptr<ModelRunner> prepare_runner_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  int64_t reserved_pages_ = 0;  // engine thread only

  mutable std::mutex mu_;
  std::condition_variable wake_;          // the engine thread
  std::condition_variable prepare_wake_;  // the preparation worker
  // A request waits in queue_, is prepared by the worker (preparing_), then waits in prepared_
  // (adapter outputs and plan ready, or its errors) until the engine admits it.
  std::deque<std::unique_ptr<Active>> queue_;     // guarded by mu_
  std::unique_ptr<Active> preparing_;             // guarded by mu_ (its fields: the worker's)
  bool preparing_cancelled_ = false;              // guarded by mu_
  std::deque<std::unique_ptr<Active>> prepared_;  // guarded by mu_
  std::vector<std::unique_ptr<Active>> running_;  // engine thread; sizes mirrored into stats
  std::set<uint64_t> cancelled_;                  // guarded by mu_
  uint64_t next_id_ = 1;
  bool accepting_ = true;
  bool draining_ = true;
  bool stop_ = false;
  Stats stats_;
  std::thread thread_;
  std::thread prepare_thread_;
};

}  // namespace mlc
