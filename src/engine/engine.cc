// The continuous-batching scheduler: a preparation worker runs each queued request's adapters
// (through the adapter cache, by media digest) and plans it (one at a time, in order, over its own
// ModelRunner), and the engine thread, which owns the KV cache, admits prepared requests. On
// admission a new sequence takes the longest prefix the prefix cache holds for its prompt (whole
// pages; a request whose prompt a running one is still prefilling waits for those pages), or a
// conversation's request continues its kept sequence. Each step runs one decode call for every
// request that is generating and one prefill call that packs the next chunk of each prefilling
// request under prefill_chunk_size, evicting unused cached pages when the step needs room;
// samples (grammar, penalties, log-probabilities), streams text through each request's
// ReplyStream, puts full pages into the prefix cache and retires finished or cancelled requests
// between steps. Events go to each request's sink outside the lock.
#include <algorithm>
#include <cmath>
#include <deque>
#include <list>
#include <unordered_map>

#include "base/hash.h"
#include "base/interrupt.h"
#include "engine/prefix_cache.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/engine.h"
#include "runtime/cpu/phase_clock.h"
#include "runtime/model_runner.h"

namespace mlc {

// A sequence in the KV cache and what it knows of its positions.
struct Engine::Sequence {
  int64_t id = -1;     // in the paged cache; -1 until added
  ObjectRef own;       // not paged: its own cache
  int64_t length = 0;  // positions held
  // What filled each position: the held ones, then (while a request runs) its prompt's rest.
  std::vector<PositionKey> keys;
  std::vector<PrefixCache::Node*> path;  // pinned: its first path.size() pages are cached
  int64_t pages = 0;                     // reserved: pages of its own (not cached) it may hold
  std::optional<int32_t> pending;        // a sampled token not fed yet (conversations)
  bool cacheable = true;                 // its pages may go into the prefix cache
};

struct Engine::Conversation {
  Sequence seq;
  bool busy = false;
  bool closed = false;
};

struct Engine::Active {
  uint64_t id = 0;
  GenerationRequest request;
  StreamSink sink;
  std::optional<PreparedPrompt> prompt;  // once its adapters ran
  Errors prepare_errors;                 // or why they could not
  std::vector<std::string> digests;      // per prompt piece: the media's SHA-256 (hex), or ""
  PhaseTimings prepare_time;             // the preparation worker's calls for it
  Conversation* conversation = nullptr;
  bool holds_seq = false;  // a conversation's sequence is here until the request ends
  Sequence seq;
  size_t next_chunk = 0;
  bool admitted = false;
  bool decoding = false;  // prefill done; `pending` is the token to feed
  bool finished = false;
  int32_t pending = 0;
  int64_t generated = 0;
  int64_t limit = 0;   // max_tokens capped by the context window
  int64_t cached = 0;  // prompt positions taken from the prefix cache
  PhaseTimings start;  // the batch's timings at admission
  std::optional<Sampler> sampler;
  std::optional<ReplyStream> reply;
  std::optional<GrammarMatcher> grammar;  // structured output
  std::deque<TokenLogprobs> held_logprobs;  // of kept tokens whose text is not shown yet
  std::vector<double> pooled;               // an embedding request's sum (mean) or last row
  size_t logprobs_sent = 0;

  // Log-probabilities go out with their token's text: those of tokens still held back wait, and
  // once a stop string ends the reply those of the tokens it cut are dropped (all: every one).
  void ReleaseLogprobs(std::vector<TokenLogprobs>& out, bool all) {
    const size_t shown = all || !reply ? logprobs_sent + held_logprobs.size() : reply->TokensShown();
    while (logprobs_sent < shown && !held_logprobs.empty()) {
      out.push_back(std::move(held_logprobs.front()));
      held_logprobs.pop_front();
      ++logprobs_sent;
    }
  }
};

// The adapter cache: outputs by "adapter:digest", least recently used out first, bounded in
// entries and bytes. The preparation worker uses it; stats() reads its counters.
class Engine::Memo : public AdapterMemo {
 public:
  Memo(size_t entries, uint64_t bytes) : max_entries_(entries), max_bytes_(bytes) {}
  NDArray Find(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return NDArray();
    order_.splice(order_.begin(), order_, it->second);
    ++hits_;
    return it->second->second;
  }
  void Keep(const std::string& key, const NDArray& rows) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++runs_;
    if (rows.Bytes() > max_bytes_ || max_entries_ == 0 || index_.count(key)) return;
    order_.emplace_front(key, rows);
    index_[key] = order_.begin();
    bytes_ += rows.Bytes();
    while (order_.size() > max_entries_ || bytes_ > max_bytes_) {
      bytes_ -= order_.back().second.Bytes();
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }
  // Adapter runs whose rows were not offered to the cache.
  void Ran(int64_t runs) {
    std::lock_guard<std::mutex> lock(mu_);
    runs_ += runs;
  }
  void Count(Stats& s) const {
    std::lock_guard<std::mutex> lock(mu_);
    s.adapter_hits = hits_;
    s.adapter_runs = runs_;
    s.adapter_cache_entries = static_cast<int64_t>(order_.size());
  }

 private:
  mutable std::mutex mu_;
  size_t max_entries_;
  uint64_t max_bytes_;
  uint64_t bytes_ = 0;
  int64_t hits_ = 0, runs_ = 0;
  std::list<std::pair<std::string, NDArray>> order_;
  std::unordered_map<std::string, std::list<std::pair<std::string, NDArray>>::iterator> index_;
};

namespace {

int64_t PagesFor(int64_t positions, int64_t page_size) {
  return (positions + page_size - 1) / page_size;
}

// The SHA-256 (hex) of a media tensor's dtype, shape and bytes; "" when it cannot be taken.
std::string MediaDigest(const NDArray& media) {
  std::string bytes = media.Describe();
  bytes.push_back('\0');
  bytes.append(static_cast<const char*>(media.dl().data), media.Bytes());
  auto hex = Sha256Hex(bytes);
  return hex ? *hex : std::string();
}

PositionKey MediaKey(const std::string& hex_digest, int64_t row) {
  if (hex_digest.size() < 32) return UniqueKey();
  std::string raw(16, '\0');
  for (size_t i = 0; i < 16; ++i) {
    raw[i] = static_cast<char>(std::stoi(hex_digest.substr(2 * i, 2), nullptr, 16));
  }
  return MediaRowKey(raw, row);
}

// What fills each position of a plan, in order.
std::vector<PositionKey> PlanKeys(const PrefillPlan& plan, const std::vector<std::string>& digests) {
  std::vector<PositionKey> keys;
  keys.reserve(static_cast<size_t>(plan.prompt_length));
  for (const PrefillChunk& c : plan.chunks) {
    for (int64_t i = 0; i < c.size(); ++i) {
      if (c.rows) {
        const std::string& d = c.rows->piece < digests.size() ? digests[c.rows->piece] : std::string();
        keys.push_back(MediaKey(d, c.rows->start + i));
      } else {
        keys.push_back(TokenKey(c.token_ids[static_cast<size_t>(i)]));
      }
    }
  }
  return keys;
}

// Drops a plan's first n positions (they are in the cache already).
void DropPrefix(PrefillPlan& plan, int64_t n) {
  auto& chunks = plan.chunks;
  size_t drop = 0;
  while (n > 0 && drop < chunks.size()) {
    PrefillChunk& c = chunks[drop];
    if (c.size() <= n) {
      n -= c.size();
      ++drop;
      continue;
    }
    c.token_ids.erase(c.token_ids.begin(), c.token_ids.begin() + n);
    c.modality_ids.erase(c.modality_ids.begin(), c.modality_ids.begin() + n);
    if (c.rows) {
      c.rows->start += n;
      c.rows->count -= n;
    }
    n = 0;
  }
  chunks.erase(chunks.begin(), chunks.begin() + static_cast<std::ptrdiff_t>(drop));
}

size_t CommonPrefix(const std::vector<PositionKey>& a, const std::vector<PositionKey>& b) {
  size_t n = std::min(a.size(), b.size()), i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace

const char* PoolingName(EmbeddingPooling pooling) {
  return pooling == EmbeddingPooling::kLast ? "last" : "mean";
}

Result<EmbeddingPooling> ParsePooling(const std::string& name) {
  if (name == "mean") return EmbeddingPooling::kMean;
  if (name == "last") return EmbeddingPooling::kLast;
  return Error{ErrorCode::kUsage, "", "unknown pooling \"" + name + "\"; expected mean or last"};
}

Engine::Engine(std::unique_ptr<BatchModel> batch, const Tokenizer* tokenizer, EngineOptions options)
    : batch_(std::move(batch)),
      prepare_runner_(batch_->ForkRunner()),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      memo_(std::make_unique<Memo>(options_.adapter_cache_entries, options_.adapter_cache_bytes)) {
  if (options_.prefill_chunk_size <= 0) options_.prefill_chunk_size = batch_->limits().prefill_chunk_size;
  if (batch_->paged()) {
    stats_.total_pages = batch_->kv().TotalPages();
    stats_.free_pages = batch_->kv().FreePages();
    stats_.page_size = batch_->kv().PageSize();
    if (options_.prefix_cache && batch_->kv().SharesPages()) {
      prefix_ = std::make_unique<PrefixCache>(batch_->kv().PageSize());
    }
  }
  stats_.prefix_cache = prefix_ != nullptr;
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
  if (request.embedding) {
    if (!batch_->embeddings()) {
      return Error{ErrorCode::kUnsupported, "/input",
                   std::string("this model's library has no ") + kHiddenStatesFunction + ": no embeddings"};
    }
    if (request.conversation) {
      return Error{ErrorCode::kUsage, "/conversation", "an embedding request runs in a sequence of its own"};
    }
    request.max_tokens = 0;
  }
  if (!request.cache && request.conversation) {
    return Error{ErrorCode::kUsage, "/cache", "a conversation's request is always cached"};
  }
  auto a = std::make_unique<Active>();
  a->request = std::move(request);
  a->seq.cacheable = a->request.cache;
  a->sink = std::move(sink);
  std::lock_guard<std::mutex> lock(mu_);
  if (!accepting_) return Error{ErrorCode::kUsage, "", "the engine is shutting down"};
  if (WaitingLocked() >= options_.max_queue) {
    return Error{ErrorCode::kLimit, "",
                 "the queue holds " + std::to_string(WaitingLocked()) + " waiting requests, its limit"};
  }
  if (uint64_t c = a->request.conversation) {
    auto it = conversations_.find(c);
    if (it == conversations_.end() || it->second->closed) {
      return Error{ErrorCode::kUsage, "/conversation", "no open conversation " + std::to_string(c)};
    }
    if (it->second->busy) {
      return Error{ErrorCode::kUsage, "/conversation", "the conversation's previous request has not ended"};
    }
    it->second->busy = true;
    a->conversation = it->second.get();
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
  if (preparing_ && preparing_->id == id) CancelPreparingLocked();
  if (!step_ids_.empty() &&
      std::all_of(step_ids_.begin(), step_ids_.end(), [&](uint64_t s) { return cancelled_.count(s) > 0; })) {
    step_interrupt_ = true;
  }
  wake_.notify_all();
}

void Engine::CancelPreparingLocked() {
  preparing_cancelled_ = true;
  prepare_interrupt_ = true;
}

uint64_t Engine::OpenConversation() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_id_++;
  conversations_[id] = std::make_unique<Conversation>();
  return id;
}

void Engine::CloseConversation(uint64_t conversation) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conversations_.find(conversation);
  if (it == conversations_.end()) return;
  it->second->closed = true;
  if (!it->second->busy) closed_.insert(conversation);
  wake_.notify_all();
}

int64_t Engine::ConversationLength(uint64_t conversation) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = conversations_.find(conversation);
  return it == conversations_.end() ? 0 : it->second->seq.length;
}

void Engine::Shutdown(bool drain) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    draining_ = drain;
    stop_ = true;
    // A request being prepared is cancelled: its adapter call is interrupted.
    if (!drain && preparing_) CancelPreparingLocked();
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
  memo_->Count(s);
  return s;
}

// The preparation worker: takes the queue's head, runs its adapters (or takes their rows from
// the adapter cache) and plans it without the lock, and hands it to the engine thread (prepared,
// failed, or cancelled meanwhile). A conversation's request is planned after the positions its
// sequence holds, its pending token first.
void Engine::PrepareLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    prepare_wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (stop_ && (!draining_ || queue_.empty())) return;  // the engine thread cancels the rest
    preparing_ = std::move(queue_.front());
    queue_.pop_front();
    prepare_interrupt_ = false;
    Active& a = *preparing_;
    int64_t kv_length = 0;
    if (a.conversation) {
      // The conversation is busy with this request: its sequence changes no more until it ends.
      const Sequence& s = a.conversation->seq;
      kv_length = s.length;
      if (s.pending) {
        auto& in = a.request.input;
        in.pieces.insert(in.pieces.begin(), PromptPiece{TextPiece{{*s.pending}}, ""});
        in.media.insert(in.media.begin(), NDArray());
      }
    }
    lock.unlock();
    const TurnInput& in = a.request.input;
    std::vector<std::string> keys(in.pieces.size());
    a.digests.assign(in.pieces.size(), "");
    for (size_t i = 0; i < in.pieces.size() && i < in.media.size(); ++i) {
      if (!in.media[i].defined()) continue;
      a.digests[i] = MediaDigest(in.media[i]);
      if (auto* m = std::get_if<MediaPiece>(&in.pieces[i].value); m && !a.digests[i].empty()) {
        keys[i] = m->adapter + ":" + a.digests[i];
      }
    }
    const PhaseTimings before = prepare_runner_->timings();
    const int64_t calls_before = prepare_runner_->adapter_calls();
    Result<PreparedPrompt> prompt = Errors{};
    {
      const InterruptScope scope(&prepare_interrupt_);
      // A request that leaves nothing behind neither finds nor keeps adapter rows.
      prompt = prepare_runner_->Prepare(in.pieces, in.media, kv_length, a.request.cache ? memo_.get() : nullptr, &keys);
    }
    if (!a.request.cache) memo_->Ran(prepare_runner_->adapter_calls() - calls_before);
    a.prepare_time = prepare_runner_->timings() - before;
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

void Engine::Finish(Active& a, StopReason reason, Errors errors, Outbox& out, std::span<const float> logits) {
  if (a.finished) return;
  a.finished = true;
  StreamEvent e;
  if (a.reply && reason != StopReason::kError && reason != StopReason::kCancelled) {
    e.text = a.reply->Finish();
  }
  a.ReleaseLogprobs(e.logprobs, !(a.reply && a.reply->stopped()));
  a.held_logprobs.clear();
  e.done = true;
  e.stop_reason = reason;
  e.finish_reason = FinishReasonName(reason);
  e.errors = std::move(errors);
  e.prompt_tokens = a.prompt ? a.prompt->plan.prompt_length : 0;
  e.cached_tokens = a.cached;
  e.completion_tokens = a.generated;
  e.timings = a.prepare_time;
  if (a.admitted) e.timings = (batch_->timings() - a.start) + a.prepare_time;
  if (a.prompt) e.plan = a.prompt->plan;
  if (a.request.return_logits) e.logits.assign(logits.begin(), logits.end());
  if (a.request.embedding && reason == StopReason::kLength) e.embedding.assign(a.pooled.begin(), a.pooled.end());
  // A token sampled but not fed (cut by a limit or a stop string) starts a conversation's next
  // request; a stop token is never fed.
  if (a.admitted && (reason == StopReason::kLength || reason == StopReason::kStopString) && a.generated > 0) {
    a.seq.pending = a.pending;
  }
  e.kv_length = a.seq.length;
  out.emplace_back(a.sink, std::move(e));
}

// A token among those the request's grammar allows, sampled in this sequence's own step (the
// mask is this sequence's work only); -1 when the request ended instead.
int32_t Engine::SampleConstrained(Active& a, std::span<const float> logits, int top_n, TokenLogprobs* logprobs,
                                  Outbox& out) {
  std::vector<float> masked(logits.begin(), logits.end());
  const auto& stops = a.request.stop_token_ids;
  auto is_stop = [&](int32_t t) { return std::find(stops.begin(), stops.end(), t) != stops.end(); };
  // Free text (before a tool call opens) is not masked; a token that opens a call and goes on in
  // a way the call's grammar refuses is sampled again under the full mask.
  const bool free_text = a.grammar->InFreeText();
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) masked.assign(logits.begin(), logits.end());
    if (a.grammar->Constrain(masked, stops, /*full=*/pass == 1) == 0) {
      if (a.grammar->Accepting()) {
        Finish(a, StopReason::kStopToken, {}, out, logits);
      } else {
        Finish(a, StopReason::kError,
               {Error{ErrorCode::kUnsupported, "/response_format",
                      "no token of the vocabulary continues the JSON reply"}},
               out, logits);
      }
      return -1;
    }
    const int32_t token = a.sampler->Sample(masked, top_n, logprobs);
    if (is_stop(token) || a.grammar->Advance(token)) return token;
    if (!free_text) break;
  }
  Finish(a, StopReason::kError,
         {Error{ErrorCode::kInvalid, "/response_format", "the sampler chose a token the grammar refuses"}},
         out, logits);
  return -1;
}

// A sampled token: a stop id ends the reply; otherwise it is kept, its text streamed, and fed
// back unless the reply is complete. A request with no tokens to generate ends at its prompt.
void Engine::Accept(Active& a, std::span<const float> logits, Outbox& out) {
  if (a.limit == 0) {
    Finish(a, StopReason::kLength, {}, out, logits);
    return;
  }
  const bool logprobs = a.request.top_logprobs >= 0;
  TokenLogprobs lp;
  TokenLogprobs* lp_out = logprobs ? &lp : nullptr;
  const int top_n = logprobs ? a.request.top_logprobs : 0;
  int32_t token;
  {
    cpu::PhaseScope clock(cpu::StepKind::kDecode, cpu::Phase::kSampling);
    token = a.grammar ? SampleConstrained(a, logits, top_n, lp_out, out) : a.sampler->Sample(logits, top_n, lp_out);
  }
  if (a.finished) return;
  const auto& stops = a.request.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    Finish(a, StopReason::kStopToken, {}, out, logits);
    return;
  }
  ++a.generated;
  a.pending = token;
  StreamEvent e;
  e.tokens = {token};
  if (logprobs) a.held_logprobs.push_back(std::move(lp));
  if (a.reply) e.text = a.reply->Push(token);
  a.ReleaseLogprobs(e.logprobs, false);
  e.prompt_tokens = a.prompt->plan.prompt_length;
  e.cached_tokens = a.cached;
  e.completion_tokens = a.generated;
  out.emplace_back(a.sink, std::move(e));
  const bool go_on = !a.request.on_token || a.request.on_token(token);
  if (!go_on || (a.reply && a.reply->stopped())) {
    Finish(a, StopReason::kStopString, {}, out, logits);
  } else if (a.generated >= a.limit) {
    Finish(a, StopReason::kLength, {}, out, logits);
  } else {
    a.decoding = true;
  }
}

bool Engine::MatchPrefix(Active& a) {
  const int64_t page = prefix_->page_size();
  const int64_t prompt = a.prompt->plan.prompt_length;
  const int64_t most = (prompt - 1) / page;  // at least one position is prefilled
  auto path = prefix_->Match(a.seq.keys, most);
  // A running request still prefilling the same prompt start: wait for its pages.
  for (const auto& r : running_) {
    if (r->finished || r->decoding || !r->seq.cacheable) continue;
    const int64_t common = std::min<int64_t>(static_cast<int64_t>(CommonPrefix(r->seq.keys, a.seq.keys)) / page, most);
    if (common > static_cast<int64_t>(path.size())) return false;
  }
  for (PrefixCache::Node* n : path) prefix_->Pin(n);
  a.seq.path = std::move(path);
  return true;
}

bool Engine::MakeRoom(int64_t pages) {
  PagedKvState& kv = batch_->kv();
  while (kv.FreePages() < pages) {
    if (!prefix_) return false;
    const int32_t page = prefix_->EvictOne();
    if (page < 0) return false;
    kv.ReleasePage(page);
    ++stats_.evictions;
  }
  return true;
}

void Engine::CachePages(Sequence& s) {
  if (!prefix_ || !s.cacheable) return;
  const int64_t page = prefix_->page_size();
  PagedKvState& kv = batch_->kv();
  std::span<const PositionKey> keys(s.keys);
  while (true) {
    const int64_t index = static_cast<int64_t>(s.path.size());
    if ((index + 1) * page > s.length || (index + 1) * page > static_cast<int64_t>(keys.size())) return;
    auto held = kv.RetainPage(s.id, index);
    if (!held) {
      s.cacheable = false;
      return;
    }
    bool created = false;
    PrefixCache::Node* node =
        prefix_->Insert(s.path.empty() ? nullptr : s.path.back(), keys.subspan(index * page, page), *held, &created);
    if (!created) {
      // Another sequence cached the same content first: this one's pages stay its own.
      kv.ReleasePage(*held);
      s.cacheable = false;
      return;
    }
    prefix_->Pin(node);
    s.path.push_back(node);
    --s.pages;
    --reserved_pages_;
  }
}

void Engine::ReleaseSequence(Sequence& s) {
  if (prefix_) {
    for (PrefixCache::Node* n : s.path) prefix_->Unpin(n);
  }
  s.path.clear();
  if (batch_->paged() && s.id >= 0) (void)batch_->kv().RemoveSequence(s.id);
  s.own.reset();
  reserved_pages_ -= s.pages;
  s.pages = 0;
  s.id = -1;
}

void Engine::AdmitWaiting(Outbox& out) {
  const bool paged = batch_->paged();
  const int64_t limit_running = paged ? batch_->max_batch_size() : 1;
  const int64_t page = paged ? batch_->kv().PageSize() : 1;
  while (static_cast<int64_t>(running_.size()) < limit_running) {
    std::unique_ptr<Active> next;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (prepared_.empty()) return;
      next = std::move(prepared_.front());
      prepared_.pop_front();
      if (next->conversation) {
        next->seq = std::move(next->conversation->seq);
        next->conversation->seq = Sequence{};
        next->holds_seq = true;
      }
    }
    Active& a = *next;
    // Puts it back at the head (it waits for room), its conversation's sequence too.
    auto wait = [&] {
      std::lock_guard<std::mutex> lock(mu_);
      if (a.conversation) {
        a.seq.keys.resize(static_cast<size_t>(a.seq.length));
        a.conversation->seq = std::move(a.seq);
        a.seq = Sequence{};
        a.holds_seq = false;
      }
      prepared_.push_front(std::move(next));
    };
    if (!a.prepare_errors.empty()) {
      Errors errors = std::move(a.prepare_errors);
      Finish(a, StopReason::kError, std::move(errors), out);
      running_.push_back(std::move(next));  // retired by DropFinished (a conversation's sequence returns)
      continue;
    }
    const int64_t before = a.seq.length;
    const int64_t prompt_len = a.prompt->plan.prompt_length;
    const PlanLimits& limits = batch_->limits();
    // The last sampled token needs no position: a reply may take the window's last position + 1.
    int64_t cap = a.request.max_tokens;
    if (!limits.HasSlidingWindow()) {
      cap = std::min<int64_t>(cap, std::max<int64_t>(limits.context_window_size - before - prompt_len + 1, 0));
    }
    a.limit = cap;
    const int64_t positions = before + prompt_len + std::max<int64_t>(a.limit - 1, 0);
    std::vector<PositionKey> prompt_keys = PlanKeys(a.prompt->plan, a.digests);
    if (paged) {
      PagedKvState& kv = batch_->kv();
      const int64_t need = PagesFor(positions, page);
      if (need > kv.TotalPages()) {
        Finish(a,
               StopReason::kError,
               {Error{ErrorCode::kLimit, "",
                      "the request needs " + std::to_string(positions) + " KV positions; the cache holds " +
                          std::to_string(kv.TotalPages() * page)}},
               out);
        running_.push_back(std::move(next));
        continue;
      }
      const size_t held_keys = static_cast<size_t>(a.seq.length);
      a.seq.keys.resize(held_keys);
      a.seq.keys.insert(a.seq.keys.end(), prompt_keys.begin(), prompt_keys.end());
      const bool fresh = a.seq.id < 0;
      // A mean over the prompt needs every position's hidden state: nothing cached is reused.
      const bool reuse = a.request.embedding != EmbeddingPooling::kMean;
      if (fresh && prefix_ && reuse && !MatchPrefix(a)) {
        a.seq.keys.clear();
        wait();
        return;
      }
      const int64_t own = need - static_cast<int64_t>(a.seq.path.size());
      const int64_t old = a.seq.pages;  // a conversation's reservation while it was idle
      if (reserved_pages_ - old + own + (prefix_ ? prefix_->pinned_pages() : 0) > kv.TotalPages()) {
        if (fresh && prefix_) {
          for (PrefixCache::Node* n : a.seq.path) prefix_->Unpin(n);
          a.seq.path.clear();
        }
        if (running_.empty()) {
          Finish(a, StopReason::kError,
                 {Error{ErrorCode::kLimit, "",
                        "the request needs " + std::to_string(own) +
                            " KV pages that kept conversations hold"}},
                 out);
          running_.push_back(std::move(next));
          continue;
        }
        if (fresh) a.seq.keys.clear();
        wait();
        return;  // waits for running requests to end
      }
      reserved_pages_ += own - old;
      a.seq.pages = own;
      if (fresh) {
        a.seq.id = static_cast<int64_t>(a.id);
        std::vector<int32_t> pages;
        for (PrefixCache::Node* n : a.seq.path) pages.push_back(n->page);
        Status s = pages.empty() ? kv.AddSequence(a.seq.id) : kv.AddSequenceWithPages(a.seq.id, pages);
        if (!s) {
          Finish(a, StopReason::kError, s.errors(), out);
          running_.push_back(std::move(next));
          continue;
        }
        a.seq.length = static_cast<int64_t>(pages.size()) * page;
        a.cached = a.seq.length;
        ++stats_.prefix_queries;
        if (a.cached > 0) ++stats_.prefix_hits;
        stats_.cached_tokens += a.cached;
        DropPrefix(a.prompt->plan, a.cached);
      }
    } else {
      a.seq.keys.clear();
      if (!a.seq.own) {
        auto own = batch_->NewSequenceCache();
        if (!own) {
          Finish(a, StopReason::kError, own.take_errors(), out);
          running_.push_back(std::move(next));
          continue;
        }
        a.seq.own = std::move(*own);
      }
    }
    stats_.prompt_tokens += prompt_len;
    a.seq.pending.reset();
    a.admitted = true;
    a.start = batch_->timings();
    a.sampler.emplace(a.request.sampler);
    if (a.request.json) a.grammar.emplace(*a.request.json);
    // A structured reply is the JSON value alone: stop strings never cut it.
    if (tokenizer_) a.reply.emplace(*tokenizer_, a.request.json ? std::vector<std::string>{} : a.request.stop_strings);
    running_.push_back(std::move(next));
  }
}

int64_t Engine::StepPages(const std::vector<Active*>& batch, bool decode) const {
  const int64_t page = batch_->kv().PageSize();
  int64_t pages = 0;
  for (const Active* a : batch) {
    const int64_t n = decode ? 1 : a->prompt->plan.chunks[a->next_chunk].size();
    pages += PagesFor(a->seq.length + n, page) - PagesFor(a->seq.length, page);
  }
  return pages;
}

void Engine::RunDecode(Outbox& out) {
  std::vector<Active*> batch;
  std::vector<int64_t> ids;
  std::vector<int32_t> tokens;
  for (auto& a : running_) {
    if (a->finished || !a->decoding) continue;
    batch.push_back(a.get());
    ids.push_back(a->seq.id);
    tokens.push_back(a->pending);
  }
  if (batch.empty()) return;
  if (!batch_->paged()) {
    Active& a = *batch.front();
    auto logits = batch_->DecodeOwn(&a.seq.own, a.pending);
    if (!logits) {
      Finish(a, StopReason::kError, logits.errors(), out);
      return;
    }
    ++a.seq.length;
    Accept(a, (*logits)[0], out);
    return;
  }
  (void)MakeRoom(StepPages(batch, true));
  auto logits = batch_->Decode(ids, tokens);
  for (size_t i = 0; i < batch.size(); ++i) {
    Active& a = *batch[i];
    if (!logits) {
      Finish(a, StopReason::kError, logits.errors(), out);
      continue;
    }
    ++a.seq.length;
    a.seq.keys.push_back(TokenKey(a.pending));
    CachePages(a.seq);
    Accept(a, (*logits)[i], out);
  }
}

void Engine::RunPrefill(Outbox& out) {
  // The next chunks under the step's budget: the embedding requests' go through the hidden-states
  // function, the others' through prefill, one call each.
  std::vector<Active*> batch[2];
  std::vector<SequenceChunk> chunks[2];
  int64_t budget = options_.prefill_chunk_size;
  bool any = false;
  for (auto& a : running_) {
    if (a->finished || a->decoding) continue;
    const PrefillChunk& chunk = a->prompt->plan.chunks[a->next_chunk];
    if (any && chunk.size() > budget) break;  // the next step takes it
    auto embeds = batch_->ChunkEmbeddings(chunk, *a->prompt);
    if (!embeds) {
      Finish(*a, StopReason::kError, embeds.take_errors(), out);
      continue;
    }
    const int kind = a->request.embedding ? 1 : 0;
    batch[kind].push_back(a.get());
    chunks[kind].push_back(SequenceChunk{a->seq.id, &chunk, *embeds});
    any = true;
    budget -= chunk.size();
    if (budget <= 0 || !batch_->paged()) break;
  }
  for (int kind : {0, 1}) {
    if (!chunks[kind].empty()) RunPrefillCall(batch[kind], chunks[kind], kind == 1, out);
  }
}

void Engine::RunPrefillCall(const std::vector<Active*>& batch, const std::vector<SequenceChunk>& chunks,
                            bool hidden, Outbox& out) {
  Result<SequenceLogits> logits = SequenceLogits();
  Result<NDArray> states = NDArray();
  const bool paged = batch_->paged();
  if (paged) (void)MakeRoom(StepPages(batch, false));
  BeginInterruptibleStep(batch);
  {
    const InterruptScope scope(&step_interrupt_);
    ObjectRef* own = &batch.front()->seq.own;
    if (hidden) {
      states = paged ? batch_->PrefillHidden(chunks) : batch_->PrefillHiddenOwn(own, chunks.front());
    } else {
      logits = paged ? batch_->Prefill(chunks) : batch_->PrefillOwn(own, chunks.front());
    }
  }
  const bool interrupted = EndInterruptibleStep();
  const bool ok = hidden ? states.ok() : logits.ok();
  int64_t row = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    Active& a = *batch[i];
    if (!ok) {
      // Interrupted: every request of the call was cancelled, and the cache committed nothing.
      Finish(a, interrupted ? StopReason::kCancelled : StopReason::kError,
             interrupted ? Errors{} : (hidden ? states.errors() : logits.errors()), out);
      continue;
    }
    const int64_t n = chunks[i].chunk->size();
    a.seq.length += n;
    if (paged) CachePages(a.seq);
    const bool last = ++a.next_chunk == a.prompt->plan.chunks.size();
    if (hidden) {
      const int64_t width = states->shape()[1];
      Pool(a, states->data<float>() + row * width, n, width);
      row += n;
      if (last) FinishEmbedding(a, out);
    } else if (last) {
      Accept(a, (*logits)[i], out);
    }
  }
}

void Engine::Pool(Active& a, const float* rows, int64_t n, int64_t width) {
  a.pooled.resize(static_cast<size_t>(width), 0.0);
  if (*a.request.embedding == EmbeddingPooling::kLast) {
    std::copy_n(rows + (n - 1) * width, width, a.pooled.begin());
    return;
  }
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < width; ++j) a.pooled[static_cast<size_t>(j)] += rows[t * width + j];
  }
}

void Engine::FinishEmbedding(Active& a, Outbox& out) {
  // The mean's 1/n cancels in the normalisation; a zero vector stays zero.
  double norm = 0;
  for (double v : a.pooled) norm += v * v;
  norm = std::sqrt(norm);
  if (norm > 0) {
    for (double& v : a.pooled) v /= norm;
  }
  Finish(a, StopReason::kLength, {}, out);
}

// A prefill call that may be interrupted once all of its requests are cancelled: not when one
// continues a conversation (its sequence outlives the request).
void Engine::BeginInterruptibleStep(std::span<Active* const> batch) {
  std::lock_guard<std::mutex> lock(mu_);
  step_interrupt_ = false;
  step_ids_.clear();
  if (std::any_of(batch.begin(), batch.end(), [](const Active* a) { return a->conversation != nullptr; })) return;
  for (const Active* a : batch) step_ids_.push_back(a->id);
}

bool Engine::EndInterruptibleStep() {
  std::lock_guard<std::mutex> lock(mu_);
  step_ids_.clear();
  return step_interrupt_.exchange(false);
}

void Engine::DropFinished() {
  for (auto& a : running_) {
    if (!a->finished) continue;
    Sequence& s = a->seq;
    s.keys.resize(std::min(s.keys.size(), static_cast<size_t>(std::max<int64_t>(s.length, 0))));
    if (a->conversation) {
      std::lock_guard<std::mutex> lock(mu_);
      Conversation& c = *a->conversation;
      c.busy = false;
      if (c.closed) closed_.insert(a->request.conversation);
      if (!a->holds_seq) continue;
      // Kept: its reservation becomes the pages it holds of its own.
      if (batch_->paged() && s.id >= 0) {
        const int64_t held = PagesFor(s.length, batch_->kv().PageSize()) - static_cast<int64_t>(s.path.size());
        reserved_pages_ += held - s.pages;
        s.pages = held;
      }
      c.seq = std::move(s);
    } else {
      ReleaseSequence(s);
    }
  }
  std::erase_if(running_, [](const std::unique_ptr<Active>& a) { return a->finished; });
}

void Engine::Loop() {
  for (;;) {
    Outbox out;
    std::vector<std::unique_ptr<Active>> cancelled_queued;
    std::vector<std::unique_ptr<Conversation>> closing;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        // Stopping, it waits for a request being prepared to come back before it ends.
        bool ending = stop_ && !preparing_ && (queue_.empty() || !draining_);
        return ending || !cancelled_.empty() || !running_.empty() || !prepared_.empty() || !closed_.empty();
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
      if (preparing_ && cancelled_.count(preparing_->id)) CancelPreparingLocked();
      for (auto& a : running_) {
        if (cancelled_.count(a->id)) Finish(*a, StopReason::kCancelled, {}, out);
      }
      cancelled_.clear();
      for (uint64_t c : closed_) {
        auto it = conversations_.find(c);
        if (it == conversations_.end() || it->second->busy) continue;
        closing.push_back(std::move(it->second));
        conversations_.erase(it);
      }
      closed_.clear();
      if (stop_ && queue_.empty() && !preparing_ && prepared_.empty() && running_.empty() &&
          cancelled_queued.empty() && closing.empty()) {
        break;
      }
    }
    for (auto& c : closing) ReleaseSequence(c->seq);
    for (auto& a : cancelled_queued) {
      Finish(*a, StopReason::kCancelled, {}, out);
      running_.push_back(std::move(a));  // its conversation gets its sequence back
    }
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
      if (batch_->paged()) stats_.free_pages = batch_->kv().FreePages();
      stats_.cached_pages = prefix_ ? prefix_->pages() : 0;
    }
    for (auto& [sink, event] : out) {
      if (sink) sink(event);
    }
  }
}

}  // namespace mlc
