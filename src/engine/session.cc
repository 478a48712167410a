// A Session: one conversation over an Engine of its own (batch 1, started by the first turn).
// Each turn is a request that continues the conversation's sequence; the caller's thread waits
// for its last event. Prefill is a turn with no tokens to generate.
#include <condition_variable>
#include <mutex>

#include "mlc_manifest/engine.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/runtime.h"

namespace mlc {

struct Session::State {
  LoadedModel model;  // what the engine is started from (the library is borrowed)
  SessionOptions options;
  std::unique_ptr<Engine> engine;
  uint64_t conversation = 0;
  PhaseTimings timings;
  int64_t kv_length = 0;
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

Result<TurnResult> Session::Generate(const TurnInput& input, const GenerationOptions& options) {
  MLC_RETURN_IF_ERROR(CheckSamplerConfig(options.sampler));
  State& st = *state_;
  if (!st.engine) {
    EngineOptions eo;
    eo.batch.max_batch_size = 1;
    eo.max_queue = 1;
    eo.prefix_cache = st.options.prefix_cache;
    auto engine = Engine::Start(st.model, st.options.tokenizer, eo);
    MLC_RETURN_IF_ERROR(engine);
    st.engine = std::move(*engine);
    st.conversation = st.engine->OpenConversation();
  }
  GenerationRequest r;
  r.input = input;
  r.max_tokens = options.max_tokens;
  r.sampler = options.sampler;
  r.stop_token_ids = options.stop_token_ids;
  r.stop_strings = options.stop_strings;
  if (options.json) r.json = *options.json;
  r.top_logprobs = options.top_logprobs;
  r.conversation = st.conversation;
  r.return_logits = true;
  r.on_token = options.on_token;
  auto waiter = std::make_shared<Waiter>();
  waiter->on_text = options.on_text;
  auto id = st.engine->Submit(std::move(r), [waiter](const StreamEvent& e) { waiter->On(e); });
  MLC_RETURN_IF_ERROR(id);
  waiter->Wait();
  StreamEvent& e = waiter->last;
  st.timings = st.timings + e.timings;
  if (e.stop_reason == StopReason::kError || e.stop_reason == StopReason::kCancelled) {
    st.kv_length = st.engine->ConversationLength(st.conversation);
    if (!e.errors.empty()) return e.errors;
    return Error{ErrorCode::kUsage, "", "the turn was cancelled"};
  }
  st.kv_length = e.kv_length;
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
