// The continuous-batching scheduler: a preparation worker runs each queued request's adapters and
// plans it (one at a time, in order, over its own ModelRunner), and the engine thread, which owns
// the KV cache, only admits prepared requests. Each step it admits prepared
// requests while the batch and the KV page budget allow (a request that can never fit fails,
// one that fits later waits), runs one decode call for every request that is generating and one
// prefill call that packs the next chunk of each prefilling request under prefill_chunk_size,
// samples, streams text through each request's ReplyStream and retires finished or cancelled
// requests between steps. Events go to each request's sink outside the lock.
#include <algorithm>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/engine.h"
#include "runtime/model_runner.h"

namespace mlc {

using Outbox = std::vector<std::pair<StreamSink, StreamEvent>>;

struct Engine::Active {
  uint64_t id = 0;
  GenerationRequest request;
  StreamSink sink;
  std::optional<PreparedPrompt> prompt;  // once its adapters ran
  Errors prepare_errors;                 // or why they could not
  size_t next_chunk = 0;
  bool decoding = false;   // prefill done; `pending` is the token to feed
  bool finished = false;
  int32_t pending = 0;
  int64_t generated = 0;
  int64_t limit = 0;       // max_tokens capped by the context window
  int64_t pages = 0;       // reserved
  std::optional<Sampler> sampler;
  std::optional<ReplyStream> reply;
  std::optional<GrammarMatcher> grammar;  // structured output
};

namespace {

int64_t PagesFor(int64_t positions, int64_t page_size) {
  return (positions + page_size - 1) / page_size;
}

}  // namespace

Engine::Engine(std::unique_ptr<BatchModel> batch, const Tokenizer* tokenizer, EngineOptions options)
    : batch_(std::move(batch)),
      prepare_runner_(batch_->ForkRunner()),
      tokenizer_(tokenizer),
      options_(std::move(options)) {
  if (options_.prefill_chunk_size <= 0) options_.prefill_chunk_size = batch_->limits().prefill_chunk_size;
  stats_.total_pages = batch_->kv().TotalPages();
  stats_.free_pages = batch_->kv().FreePages();
  stats_.page_size = batch_->kv().PageSize();
  thread_ = std::thread([this] { Loop(); });
  prepare_thread_ = std::thread([this] { PrepareLoop(); });
}

size_t Engine::WaitingLocked() const {
  return queue_.size() + prepared_.size() + (preparing_ ? 1 : 0);
}

Result<std::unique_ptr<Engine>> Engine::Start(const LoadedModel& model, const Tokenizer* tokenizer,
                                              const EngineOptions& options) {
  if (options.max_queue < 1) return Error{ErrorCode::kUsage, "/max_queue", "expected >= 1"};
  auto batch = BatchModel::Create(model, options.batch);
  MLC_RETURN_IF_ERROR(batch);
  return std::unique_ptr<Engine>(new Engine(std::move(*batch), tokenizer, options));
}

Engine::~Engine() { Shutdown(false); }

Result<uint64_t> Engine::Submit(GenerationRequest request, StreamSink sink) {
  MLC_RETURN_IF_ERROR(CheckSamplerConfig(request.sampler));
  if (request.max_tokens < 0) return Invalid("/max_tokens", "expected >= 0");
  if (request.json && (!request.json->grammar || !request.json->vocabulary)) {
    return Error{ErrorCode::kUsage, "/response_format", "a JSON constraint needs a grammar and a vocabulary"};
  }
  if (request.top_logprobs < -1 || request.top_logprobs > 20) {
    return Invalid("/top_logprobs", "expected an integer in [0, 20]");
  }
  if (!request.stop_strings.empty() && !tokenizer_) {
    return Error{ErrorCode::kUsage, "/stop", "stop strings need the package's tokenizer"};
  }
  auto a = std::make_unique<Active>();
  a->request = std::move(request);
  a->sink = std::move(sink);
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return Error{ErrorCode::kUsage, "", "the engine is shutting down"};
  if (WaitingLocked() >= options_.max_queue) {
    return Error{ErrorCode::kLimit, "",
                 "the queue holds " + std::to_string(WaitingLocked()) + " waiting requests, its limit"};
  }
  a->id = next_id_++;
  uint64_t id = a->id;
  queue_.push_back(std::move(a));
  prepare_wake_.notify_all();
  return id;
}

void Engine::Cancel(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.insert(id);
  wake_.notify_all();
}

void Engine::Shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    draining_ = drain;
    stop_ = true;
    // A request being prepared is cancelled once its adapters return.
    if (!drain && preparing_) preparing_cancelled_ = true;
    wake_.notify_all();
    prepare_wake_.notify_all();
  }
  if (prepare_thread_.joinable()) prepare_thread_.join();
  if (thread_.joinable()) thread_.join();
}

Engine::Stats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s = stats_;
  s.queued = WaitingLocked();
  return s;
}

// The preparation worker: takes the queue's head, runs its adapters and plans it without the
// lock, and hands it to the engine thread (prepared, failed, or cancelled meanwhile).
void Engine::PrepareLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    prepare_wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_ && (!draining_ || queue_.empty())) return;  // the engine thread cancels the rest
    preparing_ = std::move(queue_.front());
    queue_.pop_front();
    Active& a = *preparing_;
    lock.unlock();
    auto prompt = prepare_runner_->Prepare(a.request.input.pieces, a.request.input.media, 0);
    if (prompt) {
      a.prompt = std::move(*prompt);
    } else {
      a.prepare_errors = prompt.take_errors();
    }
    lock.lock();
    if (preparing_cancelled_) cancelled_.insert(a.id);
    preparing_cancelled_ = false;
    prepared_.push_back(std::move(preparing_));
    wake_.notify_all();
  }
}

void Engine::Finish(Active& a, StopReason reason, Errors errors, Outbox& out) {
  if (a.finished) return;
  a.finished = true;
  StreamEvent e;
  if (a.reply && reason != StopReason::kError && reason != StopReason::kCancelled) {
    e.text = a.reply->Finish();
  }
  e.done = true;
  e.finish_reason = FinishReasonName(reason);
  e.errors = std::move(errors);
  e.prompt_tokens = a.prompt ? a.prompt->plan.prompt_length : 0;
  e.completion_tokens = a.generated;
  out.emplace_back(a.sink, std::move(e));
}

// A token among those the request's grammar allows, sampled in this sequence's own step (the
// mask is this sequence's work only); -1 when the request ended instead.
int32_t Engine::SampleConstrained(Active& a, std::span<const float> logits, int top_n, TokenLogprobs* logprobs,
                                  Outbox& out) {
  std::vector<float> masked(logits.begin(), logits.end());
  if (a.grammar->Constrain(masked, a.request.stop_token_ids) == 0) {
    if (a.grammar->Accepting()) {
      Finish(a, StopReason::kStopToken, {}, out);
    } else {
      Finish(a, StopReason::kError,
             {Error{ErrorCode::kUnsupported, "/response_format",
                    "no token of the vocabulary continues the JSON reply"}},
             out);
    }
    return -1;
  }
  int32_t token = a.sampler->Sample(masked, top_n, logprobs);
  const auto& stops = a.request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) == stops.end() && !a.grammar->Advance(token)) {
    Finish(a, StopReason::kError,
           {Error{ErrorCode::kInvalid, "/response_format", "the sampler chose a token the grammar refuses"}},
           out);
    return -1;
  }
  return token;
}

// A sampled token: a stop id ends the reply; otherwise it is kept, its text streamed, and fed
// back unless the reply is complete.
void Engine::Accept(Active& a, std::span<const float> logits, Outbox& out) {
  const bool logprobs = a.request.top_logprobs >= 0;
  TokenLogprobs lp;
  TokenLogprobs* lp_out = logprobs ? &lp : nullptr;
  const int top_n = logprobs ? a.request.top_logprobs : 0;
  int32_t token = a.grammar ? SampleConstrained(a, logits, top_n, lp_out, out) : a.sampler->Sample(logits, top_n, lp_out);
  if (a.finished) return;
  const auto& stops = a.request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    Finish(a, StopReason::kStopToken, {}, out);
    return;
  }
  ++a.generated;
  StreamEvent e;
  e.tokens = {token};
  if (logprobs) e.logprobs.push_back(std::move(lp));
  if (a.reply) e.text = a.reply->Push(token);
  e.prompt_tokens = a.prompt->plan.prompt_length;
  e.completion_tokens = a.generated;
  out.emplace_back(a.sink, std::move(e));
  if (a.reply && a.reply->stopped()) {
    Finish(a, StopReason::kStopString, {}, out);
  } else if (a.generated >= a.limit) {
    Finish(a, StopReason::kLength, {}, out);
  } else {
    a.decoding = true;
    a.pending = token;
  }
}

void Engine::AdmitWaiting(Outbox& out) {
  PagedKvState& kv = batch_->kv();
  const int64_t page = kv.PageSize();
  while (static_cast<int64_t>(running_.size()) < batch_->max_batch_size()) {
    std::unique_ptr<Active> next;
    int64_t need = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (prepared_.empty()) return;
      Active& head = *prepared_.front();
      if (head.prepare_errors.empty()) {
        const int64_t prompt_len = head.prompt->plan.prompt_length;
        const int64_t window = batch_->limits().context_window_size;
        head.limit =
            std::min<int64_t>(head.request.max_tokens, std::max<int64_t>(window - prompt_len, 0));
        need = PagesFor(prompt_len + head.limit, page);
        if (need > kv.TotalPages()) {
          head.prepare_errors.push_back(
              Error{ErrorCode::kLimit, "",
                    "the request needs " + std::to_string(prompt_len + head.limit) +
                        " KV positions; the cache holds " + std::to_string(kv.TotalPages() * page)});
        } else if (need > kv.TotalPages() - reserved_pages_) {
          return;  // waits for running requests to end
        }
      }
      next = std::move(prepared_.front());
      prepared_.pop_front();
    }
    if (!next->prepare_errors.empty()) {
      Errors errors = std::move(next->prepare_errors);
      Finish(*next, StopReason::kError, std::move(errors), out);
      continue;
    }
    next->pages = need;
    reserved_pages_ += need;
    next->sampler.emplace(next->request.sampler);
    if (next->request.json) next->grammar.emplace(*next->request.json);
    if (tokenizer_) next->reply.emplace(*tokenizer_, next->request.stop_strings);
    if (Status s = kv.AddSequence(static_cast<int64_t>(next->id)); !s) {
      reserved_pages_ -= need;
      Finish(*next, StopReason::kError, s.errors(), out);
      continue;
    }
    if (next->limit == 0) {
      Finish(*next, StopReason::kLength, {}, out);
    }
    running_.push_back(std::move(next));
  }
}

void Engine::RunDecode(Outbox& out) {
  std::vector<Active*> batch;
  std::vector<int64_t> ids;
  std::vector<int32_t> tokens;
  for (auto& a : running_) {
    if (a->finished || !a->decoding) continue;
    batch.push_back(a.get());
    ids.push_back(static_cast<int64_t>(a->id));
    tokens.push_back(a->pending);
  }
  if (batch.empty()) return;
  auto logits = batch_->Decode(ids, tokens);
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!logits) {
      Finish(*batch[i], StopReason::kError, logits.errors(), out);
    } else {
      Accept(*batch[i], (*logits)[i], out);
    }
  }
}

void Engine::RunPrefill(Outbox& out) {
  std::vector<Active*> batch;
  std::vector<SequenceChunk> chunks;
  int64_t budget = options_.prefill_chunk_size;
  for (auto& a : running_) {
    if (a->finished || a->decoding) continue;
    const PrefillChunk& chunk = a->prompt->plan.chunks[a->next_chunk];
    if (!chunks.empty() && chunk.size() > budget) break;  // the next step takes it
    auto embeds = batch_->ChunkEmbeddings(chunk, *a->prompt);
    if (!embeds) {
      Finish(*a, StopReason::kError, embeds.take_errors(), out);
      continue;
    }
    batch.push_back(a.get());
    chunks.push_back(SequenceChunk{static_cast<int64_t>(a->id), &chunk, *embeds});
    budget -= chunk.size();
    if (budget <= 0) break;
  }
  if (chunks.empty()) return;
  auto logits = batch_->Prefill(chunks);
  for (size_t i = 0; i < batch.size(); ++i) {
    Active& a = *batch[i];
    if (!logits) {
      Finish(a, StopReason::kError, logits.errors(), out);
      continue;
    }
    if (++a.next_chunk == a.prompt->plan.chunks.size()) Accept(a, (*logits)[i], out);
  }
}

void Engine::DropFinished() {
  for (auto& a : running_) {
    if (!a->finished) continue;
    (void)batch_->kv().RemoveSequence(static_cast<int64_t>(a->id));
    reserved_pages_ -= a->pages;
  }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->finished; });
}

void Engine::Loop() {
  for (;;) {
    Outbox out;
    std::vector<std::unique_ptr<Active>> cancelled_queued;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        // Stopping, it waits for a request being prepared to come back before it ends.
        bool ending = stop_ && !preparing_ && (queue_.empty() || !draining_);
        return ending || !cancelled_.empty() || !running_.empty() || !prepared_.empty();
      });
      if (stop_ && !draining_) {
        for (auto& a : queue_) cancelled_.insert(a->id);
        for (auto& a : prepared_) cancelled_.insert(a->id);
        for (auto& a : running_) cancelled_.insert(a->id);
      }
      for (auto* waiting : {&queue_, &prepared_}) {
        for (auto it = waiting->begin(); it != waiting->end();) {
          if (cancelled_.count((*it)->id)) {
            cancelled_queued.push_back(std::move(*it));
            it = waiting->erase(it);
          } else {
            ++it;
          }
        }
      }
      if (preparing_ && cancelled_.count(preparing_->id)) preparing_cancelled_ = true;
      for (auto& a : running_) {
        if (cancelled_.count(a->id)) Finish(*a, StopReason::kCancelled, {}, out);
      }
      cancelled_.clear();
      if (stop_ && queue_.empty() && !preparing_ && prepared_.empty() && running_.empty() &&
          cancelled_queued.empty()) {
        break;
      }
    }
    for (auto& a : cancelled_queued) Finish(*a, StopReason::kCancelled, {}, out);
    DropFinished();
    AdmitWaiting(out);
    bool worked = std::any_of(running_.begin(), running_.end(),
                              [](const auto& a) { return !a->finished; });
    RunDecode(out);
    RunPrefill(out);
    DropFinished();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (worked) ++stats_.steps;
      stats_.running = running_.size();
      stats_.max_running = std::max<int64_t>(stats_.max_running, static_cast<int64_t>(running_.size()));
      stats_.free_pages = batch_->kv().FreePages();
    }
    for (auto& [sink, event] : out) {
      if (sink) sink(event);
    }
  }
}

}  // namespace mlc
