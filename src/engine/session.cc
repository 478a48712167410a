// A Session: one conversation over an Engine of its own (started by the first turn; room for an
// embedding beside it).
// Each turn is a request that continues the conversation's sequence; the caller's thread waits
// for its last event. Prefill is a turn with no tokens to generate.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "mlc_manifest/engine.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/runtime.h"

namespace mlc {

namespace {

// Waits for a request's last event, collecting its tokens, text and log-probabilities.
struct Waiter {
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;
  StreamEvent last;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::string text;
  std::function<void(const std::string&)> on_text;

  void On(const StreamEvent& e) {
    if (on_text && !e.text.empty()) on_text(e.text);
    std::lock_guard<std::mutex> lock(mu);
    tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
    logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
    text += e.text;
    if (e.done) {
      last = e;
      done = true;
      done_cv.notify_all();
    }
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    done_cv.wait(lock, [&] { return done; });
  }
};

}  // namespace

struct Session::State {
  LoadedModel model;  // what the engine is started from (the library is borrowed)
  SessionOptions options;
  std::unique_ptr<Engine> engine;
  uint64_t conversation = 0;
  PhaseTimings timings;
  int64_t kv_length = 0;

  // The engine and its conversation, started on first use.
  Status Start() {
    if (engine) return Status::Ok();
    EngineOptions eo;
    // Room for an embedding's sequence beside the conversation's, in the same positions (a
    // cache of one sequence runs them one at a time, each in a cache of its own).
    eo.batch.max_batch_size = 2;
    eo.batch.or_one_at_a_time = true;
    if (!model.limits.HasSlidingWindow()) {
      eo.batch.kv_positions = std::min<int64_t>(model.limits.context_window_size, int64_t{1} << 20);
    }
    eo.max_queue = 1;
    eo.prefix_cache = options.prefix_cache;
    auto started = Engine::Start(model, options.tokenizer, eo);
    MLC_RETURN_IF_ERROR(started);
    engine = std::move(*started);
    conversation = engine->OpenConversation();
    return Status::Ok();
  }

  // Runs a request to its end, its timings added to the session's; an error or a cancel is the
  // result's errors.
  Status Run(GenerationRequest r, const std::shared_ptr<Waiter>& waiter) {
    auto id = engine->Submit(std::move(r), [waiter](const StreamEvent& e) { waiter->On(e); });
    MLC_RETURN_IF_ERROR(id);
    waiter->Wait();
    const StreamEvent& e = waiter->last;
    timings = timings + e.timings;
    if (e.stop_reason != StopReason::kError && e.stop_reason != StopReason::kCancelled) return Status::Ok();
    if (!e.errors.empty()) return e.errors;
    return Error{ErrorCode::kUsage, "", "the request was cancelled"};
  }
};

Session::Session(const LoadedModel& model, SessionOptions options) : state_(std::make_unique<State>()) {
  state_->model = model;
  state_->options = options;
}
Session::Session(Session&&) noexcept = default;
Session& Session::operator=(Session&&) noexcept = default;
Session::~Session() {
  if (state_ && state_->engine) state_->engine->Shutdown(false);
}

const PhaseTimings& Session::timings() const { return state_->timings; }
int64_t Session::adapter_calls() const {
  return state_->engine ? state_->engine->stats().adapter_runs : 0;
}
int64_t Session::KvLength() const { return state_->kv_length; }


Result<TurnResult> Session::Generate(const TurnInput& input, const GenerationOptions& options) {
  return Turn(input, options, true);
}

Result<TurnResult> Session::GenerateApart(const TurnInput& input, const GenerationOptions& options) {
  return Turn(input, options, false);
}

Result<TurnResult> Session::Turn(const TurnInput& input, const GenerationOptions& options, bool in_conversation) {
  MLC_RETURN_IF_ERROR(CheckSamplerConfig(options.sampler));
  State& st = *state_;
  MLC_RETURN_IF_ERROR(st.Start());
  GenerationRequest r;
  r.input = input;
  r.max_tokens = options.max_tokens;
  r.sampler = options.sampler;
  r.stop_token_ids = options.stop_token_ids;
  r.stop_strings = options.stop_strings;
  if (options.json) r.json = *options.json;
  r.top_logprobs = options.top_logprobs;
  if (in_conversation) r.conversation = st.conversation;
  r.cache = in_conversation;  // a turn apart leaves nothing in the caches
  r.return_logits = true;
  r.on_token = options.on_token;
  auto waiter = std::make_shared<Waiter>();
  waiter->on_text = options.on_text;
  Status ran = st.Run(std::move(r), waiter);
  if (!ran) {
    st.kv_length = st.engine->ConversationLength(st.conversation);
    return ran.errors();
  }
  StreamEvent& e = waiter->last;
  if (in_conversation) st.kv_length = e.kv_length;
  TurnResult result;
  result.plan = std::move(e.plan);
  result.tokens = std::move(waiter->tokens);
  result.reason = e.stop_reason;
  result.stop_reason = StopReasonName(e.stop_reason);
  result.text = std::move(waiter->text);
  result.logprobs = std::move(waiter->logprobs);
  result.cached_tokens = e.cached_tokens;
  result.last_logits = std::move(e.logits);
  result.timings = e.timings;
  return result;
}

Result<EmbeddingResult> Session::Embed(const TurnInput& input, EmbeddingPooling pooling) {
  State& st = *state_;
  MLC_RETURN_IF_ERROR(st.Start());
  GenerationRequest r;
  r.input = input;
  r.embedding = pooling;
  auto waiter = std::make_shared<Waiter>();
  MLC_RETURN_IF_ERROR(st.Run(std::move(r), waiter));
  EmbeddingResult result;
  result.embedding = std::move(waiter->last.embedding);
  result.prompt_tokens = waiter->last.prompt_tokens;
  result.timings = waiter->last.timings;
  return result;
}

Result<PrefillResult> Session::Prefill(const TurnInput& input) {
  GenerationOptions options;
  options.max_tokens = 0;
  auto turn = Generate(input, options);
  MLC_RETURN_IF_ERROR(turn);
  PrefillResult result;
  result.plan = std::move(turn->plan);
  result.logits = std::move(turn->last_logits);
  return result;
}

}  // namespace mlc
