// The server's parts shared by its files (src/serve/): the state of a running server
// (Server::Impl), the channel that carries a request's events from the engine to the HTTP thread,
// the OpenAI wire helpers, and how a request's answer is shaped (ReplyFormat, Job).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/chat.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/serve.h"
#include "mlc_manifest/transcript.h"
#include "serve/http_backend.h"
#include "serve/metrics.h"
#include "serve/served_model.h"

namespace mlc {

namespace serve {  // the server files' own parts

using Clock = std::chrono::steady_clock;

// Events of one request, from the engine's thread to the HTTP thread answering it. The engine
// may still send events after the client went away and the HTTP side let go of the channel
// (a cancel takes effect between steps), so the sink holds its own reference. The timer sees each
// event as it is made (the metrics' token timings).
struct Channel : std::enable_shared_from_this<Channel> {
  explicit Channel(RequestTimer t) : timer(t) {}
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;
  RequestTimer timer;

  StreamSink Sink() {
    return [self = shared_from_this()](const StreamEvent& e) {
      self->timer.OnEvent(e);
      std::lock_guard<std::mutex> lock(self->mu);
      self->events.push_back(e);
      self->cv.notify_all();
    };
  }
  // Waits up to `wait` for events and takes them.
  std::vector<StreamEvent> Take(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, wait, [&] { return !events.empty(); });
    std::vector<StreamEvent> out(std::make_move_iterator(events.begin()),
                                 std::make_move_iterator(events.end()));
    events.clear();
    return out;
  }
};

// Model text may hold bytes that are not UTF-8 (a random model's tokens): they become U+FFFD.
std::string Dump(const OrderedJson& j);

// The response of one request, written through the module's table, and its connection.
struct Reply {
  const MlcHttpBackend* http;
  MlcHttpResponse* res;
  MlcHttpConnection* connection = nullptr;
  // The client closed or reset its connection: no one waits for the answer.
  bool ClientGone() const { return connection && http->connection_closed(connection) != 0; }
};

void SendJson(const Reply& res, int status, const OrderedJson& body);
void SendError(const Reply& res, int status, const OrderedJson& error);
// 400 for what the client sent, 413/429 for limits it hit, 500 for our own faults.
int StatusFor(const Errors& errors);
// The OpenAI finish_reason of the engine's: "length", else "stop".
std::string FinishReason(const std::string& engine_reason);
OrderedJson Usage(const StreamEvent& last);
// The package's sampling defaults for requests that leave them out (OpenAI's temperature 1 where
// it sets none); a value the sampler would refuse is left out.
SamplerConfig SamplingDefaults(const ChatConfig::Sampling& package);

// The server's routes, in the order of Route's values; GET /v1/models/NAME of the model i is
// route kModel + i.
enum class Route {
  kHealth, kModels, kChatCompletions, kCompletions, kMetrics, kChatPage, kTokenize, kDetokenize, kEmbeddings,
  kTranscriptions, kTranslations, kModel
};

// The chat page (share/chat/index.html, embedded at build time).
extern const unsigned char kChatPage[];
extern const size_t kChatPageSize;

// Which OpenAI objects answer a request.
enum class Wire { kChat, kCompletion };

// How one request's answer is written: chat.completion / text_completion objects and their
// streamed chunks, with logprobs in the shape of each.
struct ReplyFormat {
  Wire wire = Wire::kChat;
  std::string id;
  int64_t created = 0;
  std::string model;
  int top_logprobs = -1;  // -1: no logprobs
  const Tokenizer* tokenizer = nullptr;
  int64_t text_offset = 0;  // completions' logprobs: bytes of token text written so far
  // Chat with a model that has a thinking mode: its thought goes to reasoning_content.
  std::optional<ReasoningSplitter> reasoning;
  // Chat with tools: the reply's calls go to tool_calls.
  std::optional<ToolCallStream> tools;

  // The whole answer.
  OrderedJson Whole(const std::string& text, const std::vector<TokenLogprobs>& logprobs,
                    const StreamEvent& last);
  // A streamed chunk: new text and its tokens' logprobs, or the end (finish set); null when
  // there is nothing to send yet (text held back while it may open a tool call).
  OrderedJson Chunk(const std::string& text, const std::vector<TokenLogprobs>& logprobs,
                    OrderedJson finish);
  // The text the reasoning splitter still holds, as a chunk before the last; null when none.
  OrderedJson Rest();
  // Chat's first chunk (the assistant role); null for completions.
  OrderedJson Opening() const;
  OrderedJson UsageChunk(const StreamEvent& last) const;
  // OpenAI's finish reason, "tool_calls" for a reply that stopped after its calls.
  OrderedJson Finish(const std::string& engine_reason) const;

 private:
  OrderedJson Logprobs(const std::vector<TokenLogprobs>& logprobs);
  // A chat delta or message body of text split into its thought and answer.
  static OrderedJson Delta(const ReasoningSplitter::Parts& parts, bool whole);
  OrderedJson Envelope(bool chunk, OrderedJson choices) const;
};

// A request made ready by its route: the engine's request and how to answer it.
struct Job {
  ServedModel* model = nullptr;  // whose engine runs it
  GenerationRequest gen;
  bool stream = false;
  bool include_usage = false;
  ReplyFormat format;
};

// Counts a request in flight until its answer is written (or, disarmed, until whoever took it
// over lets go).
struct InFlight {
  explicit InFlight(std::atomic<int>& count) : n(count) { ++n; }
  ~InFlight() {
    if (armed) --n;
  }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;
  std::atomic<int>& n;
  bool armed = true;
};

// How waiting for a request's last event ended: it came (the client still there, or gone: the
// request was cancelled), or the deadline passed first (the request cancelled).
enum class Waited { kDone, kGone, kTimedOut };

// Closes the module's server.
struct HttpServerCloser {
  const MlcHttpBackend* http = nullptr;
  void operator()(MlcHttpServer* s) const {
    if (s) http->destroy(s);
  }
};

}  // namespace serve

struct Server::Impl {
  ServeOptions options;
  serve::Metrics metrics;  // before the HTTP server, whose threads record into it
  std::vector<std::unique_ptr<serve::ServedModel>> models;  // each with its engine
  std::vector<std::string> model_ids;
  std::vector<std::string> model_paths;  // /v1/models/NAME, the routes after kModel
  std::vector<MlcHttpRoute> routes;
  const MlcHttpBackend* http_backend = nullptr;
  MlcHttpHandler handler{};
  std::unique_ptr<MlcHttpServer, serve::HttpServerCloser> http;
  std::vector<std::string> allowed_hosts;  // Host / Origin names given to the module
  std::atomic<int> in_flight{0};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{1};
  int port = 0;

  // Opens a package and starts its engine.
  Status AddModel(const std::string& name, const std::string& dir);
  // Every engine shut down at once (with drain: their requests finish first).
  void ShutdownEngines(bool drain);

  // Creates the module's server with the routes and their handler.
  Status StartHttp();
  void Handle(serve::Route route, std::string_view body, std::string_view content_type, const serve::Reply& res);
  // POST /tokenize and /detokenize (serve/tokenize.cc).
  // A request body as JSON within the server's limits (--max-body-bytes, the JSON value count).
  Result<Json> ParseBody(std::string_view body) const;
  // The body (ParseBody) and the model it names (Pick, not counted in the metrics), or nullptr
  // with the error already sent.
  serve::ServedModel* BodyAndModel(std::string_view body, const serve::Reply& res, Json& doc);
  void Tokenize(std::string_view body, const serve::Reply& res);
  void Detokenize(std::string_view body, const serve::Reply& res);
  // A request let in (not draining, under --max-concurrent), counted in flight while `slot`
  // lives, its body parsed and its model picked; or nothing, its refusal answered and counted.
  struct Admitted {
    std::unique_ptr<serve::InFlight> slot;
    Json doc;
    serve::ServedModel* model = nullptr;
  };
  std::optional<Admitted> Admit(std::string_view body, const serve::Reply& res);
  // A request let in (not draining, under --max-concurrent), counted in flight while the slot
  // lives; or nullptr, its refusal answered and counted.
  std::unique_ptr<serve::InFlight> Slot(const serve::Reply& res);
  // The generation routes: the request admitted, parsed by its route, queued and answered.
  void Generate(serve::Wire wire, std::string_view body, const serve::Reply& res);
  // POST /v1/embeddings (serve/embeddings.cc).
  void Embeddings(std::string_view body, const serve::Reply& res);
  // POST /v1/audio/transcriptions and /v1/audio/translations (serve/transcriptions.cc).
  void Transcribe(TranscriptionTask task, std::string_view content_type, std::string_view body, const serve::Reply& res);
  struct TranscriptState;
  // An engine's refusal to queue: 429 when full, 400 for what the model cannot do, else 503.
  void RefuseSubmit(const serve::Reply& res, const Error& e);
  // The end of an awaited request counted, and a failure answered: the timeout (504), a client
  // gone (nothing to answer), an error (its status). False: the caller answers.
  bool EndFailed(serve::Waited waited, const StreamEvent& last, const serve::Reply& res);
  // A reply not done by the request timeout: 504, counted.
  void RefuseTimeout(const serve::Reply& res);
  // Hands a request's events to `on` until its last one, cancelling the request when the client
  // goes away or the deadline passes.
  serve::Waited Await(serve::ServedModel& model, uint64_t id, serve::Channel& channel, const serve::Reply& res,
                      serve::Clock::time_point deadline, const std::function<void(StreamEvent&)>& on);
  Result<serve::Job> ChatJob(serve::ServedModel& model, std::string_view body, const Json& doc);
  Result<serve::Job> CompletionJob(serve::ServedModel& model, std::string_view body, const Json& doc);
  // The request's response_format into grammar (the body read again in key order).
  // The structured-output options of this server (--json-max-string-length).
  JsonGrammarOptions GrammarOptions() const;
  // The body's tools (key order kept), when it has any tool field.
  Status ReadTools(std::string_view body, const Json& doc, ToolSet& tools);
  Status ReadResponseFormat(std::string_view body, const Json& doc,
                            std::shared_ptr<const JsonGrammar>& grammar);
  // g samples under grammar (when set) over the package's vocabulary, built on first use (with
  // tools, the one that gives the format's special marks their text).
  static Status Constrain(serve::ServedModel& model, GenerationRequest& g,
                          std::shared_ptr<const JsonGrammar> grammar, const ToolFormat* tools = nullptr);
  // Messages -> the engine's request (media decoded); errors are the client's.
  Result<GenerationRequest> BuildRequest(serve::ServedModel& model, const ChatCompletionRequest& r);
  // A request's limits, sampling, stop ids and strings (the package's and its own), logprobs.
  template <typename Request>
  static void SetOptions(const OpenedPackage& package, GenerationRequest& g, const Request& r) {
    g.max_tokens = r.max_tokens;
    g.sampler = r.sampler;
    g.stop_token_ids = package.stop_ids;
    g.stop_strings = package.stop_strings;
    g.stop_strings.insert(g.stop_strings.end(), r.stop.begin(), r.stop.end());
    g.top_logprobs = r.top_logprobs;
  }
  // The model a request's body picks, or its error answered (and counted): nullptr then.
  serve::ServedModel* Pick(const Json& doc, const serve::Reply& res, bool count);
  // An error answer, counted in the metrics by its status.
  void Refuse(const serve::Reply& res, int status, const OrderedJson& error);
  // The outcome of a request whose last event is `last`.
  void CountEnd(const StreamEvent& last);
  void Answer(uint64_t id, serve::Job& job, std::shared_ptr<serve::Channel> channel,
              const serve::Reply& res);
  void Stream(uint64_t id, serve::Job job, std::shared_ptr<serve::Channel> channel,
              const serve::Reply& res);
  struct StreamState;
  // Answers with server-sent events that state makes (its Provide(backend, sink), false to stop)
  // as the module asks for them, until the stream ends (its Release, once).
  template <typename State>
  static void SendEvents(const serve::Reply& res, std::unique_ptr<State> state) {
    res.http->set_header(res.res, "Cache-Control", "no-cache");
    MlcHttpStream stream{};
    stream.context = state.release();
    stream.provide = [](void* context, MlcHttpSink* sink) {
      auto* s = static_cast<State*>(context);
      try {
        return s->Provide(*s->server->http_backend, sink) ? 1 : 0;
      } catch (...) {  // no exception crosses the module's table
        return 0;
      }
    };
    stream.release = [](void* context, int) { std::unique_ptr<State>(static_cast<State*>(context))->Release(); };
    res.http->set_stream(res.res, "text/event-stream", stream);
  }
};

}  // namespace mlc
