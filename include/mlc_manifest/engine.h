// The one generation loop: every face (`run`, the C API, Python's Session, `serve`) generates
// through an Engine. BatchModel runs several sequences over one paged KV cache (prefill chunks of
// several sequences laid end to end in one call, one decode call for a whole batch), or, for a
// library whose cache holds one sequence (a caller's runtime, a sliding-window cache), one
// sequence at a time in a cache of its own. The continuous-batching Engine on top: requests join
// and leave between decode steps, prefill chunks interleave with decode under
// prefill_chunk_size, a bounded queue, per-request limits, stop ids and strings, sampling,
// structured output, log-probabilities, cancellation, the KV page budget, conversations (a
// sequence kept between requests, each continuing it), the prefix cache (finished and running
// sequences leave their full pages in a tree keyed by what filled them; a new request reuses the
// longest cached prefix) and the adapter cache (a media input's adapter rows kept by its digest).
// A request's adapters run on a preparation worker before it joins the batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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

class PrefixCache;
class ModelRunner;

struct BatchOptions {
  int64_t max_batch_size = 8;  // sequences at once
  int64_t kv_positions = 0;    // KV capacity over all sequences; 0: context window x batch size
  int64_t page_size = 16;
  // A cache that holds one sequence (a caller's runtime, a sliding window): sequences one at a
  // time, each in a cache of its own, rather than an error when max_batch_size > 1.
  bool or_one_at_a_time = false;
};

class AdapterMemo;

class BatchModel {
 public:
  // Creates the KV cache with create_kv_cache(max_batch_size, kv_positions, prefill_chunk_size,
  // page_size, 0) when the library's cache holds several sequences (PagedKvState). Otherwise
  // (and for a sliding-window model) max_batch_size must be 1: each sequence then gets a cache of
  // its own (NewSequenceCache) and the calls run it alone.
  static Result<std::unique_ptr<BatchModel>> Create(const LoadedModel& model,
                                                    const BatchOptions& options);

  ~BatchModel();
  bool paged() const { return kv_ != nullptr; }
  PagedKvState& kv() { return *kv_; }  // paged() only
  // A one-sequence cache as `run` always made: (1, the context window or the sliding window,
  // prefill_chunk_size, 16, sliding flag).
  Result<ObjectRef> NewSequenceCache();
  const PhaseTimings& timings() const;
  const PlanLimits& limits() const;
  int64_t max_batch_size() const { return options_.max_batch_size; }
  // A runner for another thread over the same model (the engine's preparation worker): its
  // adapter calls take only the parameters, so they may run while this one prefills or decodes.
  std::unique_ptr<ModelRunner> ForkRunner() const;

  // Runs the adapters of a prompt and plans it for a sequence holding kv_length positions (the
  // context check runs before an image adapter and again once audio rows are known).
  Result<PreparedPrompt> Prepare(const TurnInput& input, int64_t kv_length);
  // Not paged: one sequence's chunk or step in its own cache (*own).
  Result<SequenceLogits> PrefillOwn(ObjectRef* own, const SequenceChunk& chunk);
  Result<SequenceLogits> DecodeOwn(ObjectRef* own, int32_t token);
  // The embeddings of a planned chunk: embed_tokens for text, the adapter rows otherwise.
  Result<NDArray> ChunkEmbeddings(const PrefillChunk& chunk, const PreparedPrompt& prompt);
  // One prefill call over several sequences (each at most once), their positions laid end to
  // end; returns each sequence's last-position logits, in order.
  Result<SequenceLogits> Prefill(std::span<const SequenceChunk> chunks);
  // The same calls through the library's kHiddenStatesFunction: every position's final-normed
  // hidden state [positions, hidden], the sequences' rows end to end.
  bool embeddings() const;  // the library has that function
  Result<NDArray> PrefillHidden(std::span<const SequenceChunk> chunks);
  Result<NDArray> PrefillHiddenOwn(ObjectRef* own, const SequenceChunk& chunk);
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
  // Reuse cached KV pages of earlier prompts (needs a cache that shares pages; else off).
  bool prefix_cache = true;
  // Adapter outputs kept by media digest: at most this many, and this many bytes (0: none).
  size_t adapter_cache_entries = 16;
  uint64_t adapter_cache_bytes = uint64_t{256} << 20;
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
  // 0: a sequence of its own, gone when the request ends. Else a conversation (OpenConversation):
  // the request continues its sequence, which stays for the next one.
  uint64_t conversation = 0;
  bool return_logits = false;  // the last step's logits in the last event
  // false: nothing of the request stays for later ones (in a sequence of its own): its KV pages
  // do not enter the prefix cache and its adapter rows are neither looked up nor kept (a
  // transcript's window, whose audio never recurs, leaves the caches to requests that repeat).
  bool cache = true;
  // Set: an embedding request. Its prompt is prefilled through the library's hidden-states
  // function (batched with the other prefills), nothing is generated, and the last event carries
  // the pooled, L2-normalised vector. A mean pools every position: no cached prefix is reused.
  std::optional<EmbeddingPooling> embedding;
  // Called on the engine's thread with each kept token; false ends the reply there ("stop_str").
  std::function<bool(int32_t token)> on_token;
};

// What the engine reports about a request, in order; the last one has done set.
struct StreamEvent {
  std::string text;             // new text, safe to show (stop strings are cut)
  std::vector<int32_t> tokens;  // tokens kept since the previous event
  // Per token, when the request asked for them, sent with the token's text: a token whose text
  // is held back (an unfinished character, a possible stop string) has its entry in a later
  // event, and the tokens a stop string cut have none (the list ends where the text does).
  std::vector<TokenLogprobs> logprobs;
  bool done = false;
  std::string finish_reason;  // when done, FinishReasonName: "stop", "length", "cancelled", "error"
  Errors errors;              // finish_reason "error"
  StopReason stop_reason = StopReason::kLength;  // when done
  int64_t prompt_tokens = 0;  // when done (and on the first event): the prompt's positions
  int64_t cached_tokens = 0;  // of those, taken from the prefix cache
  int64_t completion_tokens = 0;
  // When done: the model calls' times while the request ran (a batch's calls count whole), its
  // plan (chunks after the cached prefix), the last step's logits when asked for, and a
  // conversation's length after it.
  PhaseTimings timings;
  PrefillPlan plan;
  std::vector<float> logits;
  int64_t kv_length = 0;
  std::vector<float> embedding;  // when done, for an embedding request: [hidden], unit length
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
  // A conversation: a sequence kept between its requests (one at a time). Closing it lets its
  // pages go (to the prefix cache, where they may be reused).
  uint64_t OpenConversation();
  void CloseConversation(uint64_t conversation);
  // Positions its sequence holds (its next request continues from there).
  int64_t ConversationLength(uint64_t conversation) const;
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
    bool prefix_cache = false;  // on
    int64_t prefix_queries = 0;   // requests that looked a prefix up
    int64_t prefix_hits = 0;      // ... and reused at least one page
    int64_t cached_tokens = 0;    // prompt positions reused
    int64_t prompt_tokens = 0;    // prompt positions admitted (reused or prefilled)
    int64_t cached_pages = 0;     // pages in the prefix cache
    int64_t evictions = 0;        // pages evicted from it
    int64_t adapter_hits = 0;     // media inputs whose adapter rows were cached
    int64_t adapter_runs = 0;     // adapter calls
    int64_t adapter_cache_entries = 0;
  };
  Stats stats() const;

 private:
  struct Active;
  struct Sequence;
  struct Conversation;
  class Memo;
  using Outbox = std::vector<std::pair<StreamSink, StreamEvent>>;
  Engine(std::unique_ptr<BatchModel> batch, const Tokenizer* tokenizer, EngineOptions options);
  void Loop();
  void PrepareLoop();
  void AdmitWaiting(Outbox& out);
  // Reuses the longest cached prefix of a new sequence's prompt (whole pages, at least one
  // position left to prefill); false when it should wait for a running request to cache more.
  bool MatchPrefix(Active& a);
  // Puts the sequence's full pages that are not cached yet into the prefix cache.
  void CachePages(Sequence& s);
  void ReleaseSequence(Sequence& s);
  // Evicts cached pages until `pages` are free; false when it cannot.
  bool MakeRoom(int64_t pages);
  int64_t StepPages(const std::vector<Active*>& batch, bool decode) const;
  void RunPrefill(Outbox& out);
  // One prefill call over these requests' next chunks: through the hidden-states function for
  // embedding requests (pooled as they go), else for logits.
  void RunPrefillCall(const std::vector<Active*>& batch, const std::vector<SequenceChunk>& chunks, bool hidden,
                      Outbox& out);
  // Adds a chunk's hidden rows [n, width] to the request's pooled vector.
  static void Pool(Active& a, const float* rows, int64_t n, int64_t width);
  // An embedding request whose last chunk ran: its vector normalised and sent.
  void FinishEmbedding(Active& a, Outbox& out);
  void RunDecode(Outbox& out);
  // Logprobs (top_n alternatives into *logprobs when given) are of the masked distribution.
  int32_t SampleConstrained(Active& a, std::span<const float> logits, int top_n, TokenLogprobs* logprobs,
                            Outbox& out);
  void Accept(Active& a, std::span<const float> logits, Outbox& out);
  void Finish(Active& a, StopReason reason, Errors errors, Outbox& out,
              std::span<const float> logits = {});
  void DropFinished();
  void CancelPreparingLocked();
  void BeginInterruptibleStep(std::span<Active* const> batch);
  bool EndInterruptibleStep();  // whether the call was interrupted
  size_t WaitingLocked() const;

  std::unique_ptr<BatchModel> batch_;
  // The preparation worker's own runner: adapters and planning, off the engine thread.
  std::unique_ptr<ModelRunner> prepare_runner_;
  const Tokenizer* tokenizer_;
  EngineOptions options_;
  std::unique_ptr<Memo> memo_;          // the adapter cache (the preparation worker's)
  std::unique_ptr<PrefixCache> prefix_;  // engine thread; null when off
  int64_t reserved_pages_ = 0;  // engine thread only: private pages sequences may still hold

  mutable std::mutex mu_;
  std::condition_variable wake_;          // the engine thread
  std::condition_variable prepare_wake_;  // the preparation worker
  // A request waits in queue_, is prepared by the worker (preparing_), then waits in prepared_
  // (adapter outputs and plan ready, or its errors) until the engine admits it.
  std::deque<std::unique_ptr<Active>> queue_;     // guarded by mu_
  std::unique_ptr<Active> preparing_;             // guarded by mu_ (its fields: the worker's)
  bool preparing_cancelled_ = false;              // guarded by mu_
  // Set with preparing_cancelled_: interrupts the adapter call itself (base/interrupt.h).
  std::atomic<bool> prepare_interrupt_{false};
  // The requests of the prefill call in progress (none when one continues a conversation), and
  // the flag that interrupts the call once every one of them is cancelled.
  std::vector<uint64_t> step_ids_;                // guarded by mu_
  std::atomic<bool> step_interrupt_{false};
  std::deque<std::unique_ptr<Active>> prepared_;  // guarded by mu_
  std::vector<std::unique_ptr<Active>> running_;  // engine thread; sizes mirrored into stats
  std::map<uint64_t, std::unique_ptr<Conversation>> conversations_;  // guarded by mu_
  std::set<uint64_t> closed_;                     // guarded by mu_: conversations to let go
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
