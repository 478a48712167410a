// The HTTP server (cpp-httplib, in the HTTP module: serve/http_backend.h): routes, limits and the
// OpenAI wire format around the engine.
// A chat completion is parsed, built into a prompt with the package's conversation template
// (media parts decoded from data: URLs, or local files when allowed), queued on the engine and
// answered as one JSON object or as server-sent events; a client that goes away cancels its
// request. Every failure is an OpenAI-style error object with a 4xx (5xx only for our own faults).
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>

#include "mlc_manifest/chat.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/serve.h"
#include "serve/http_backend.h"

namespace mlc {
namespace {

using Clock = std::chrono::steady_clock;

// Events of one request, from the engine's thread to the HTTP thread answering it. The engine
// may still send events after the client went away and the HTTP side let go of the channel
// (a cancel takes effect between steps), so the sink holds its own reference.
struct Channel : std::enable_shared_from_this<Channel> {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;

  StreamSink Sink() {
    return [self = shared_from_this()](const StreamEvent& e) {
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
std::string Dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

// The response of one request, written through the module's table.
struct Reply {
  const MlcHttpBackend* http;
  MlcHttpResponse* res;
};

void SendJson(const Reply& res, int status, const OrderedJson& body) {
  const std::string text = Dump(body);
  res.http->set_status(res.res, status);
  res.http->set_content(res.res, text.data(), text.size(), "application/json");
}

void SendError(const Reply& res, int status, const OrderedJson& error) {
  SendJson(res, status, error);
}

// The server's routes, in the order of Route's values.
enum class Route { kHealth, kModels, kChatCompletions };
constexpr MlcHttpRoute kRoutes[] = {
    {"GET", "/health"}, {"GET", "/v1/models"}, {"POST", "/v1/chat/completions"}};

// Closes the module's server.
struct HttpServerCloser {
  const MlcHttpBackend* http = nullptr;
  void operator()(MlcHttpServer* s) const {
    if (s) http->destroy(s);
  }
};

// 400 for what the client sent, 413/429 for limits it hit, 500 for our own faults.
int StatusFor(const Errors& errors) {
  if (errors.empty()) return 500;
  switch (errors.front().code) {
    case ErrorCode::kIo:
      return 500;
    default:
      return 400;
  }
}

std::string FinishReason(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";
}

OrderedJson Usage(const StreamEvent& last) {
  return {{"prompt_tokens", last.prompt_tokens},
          {"completion_tokens", last.completion_tokens},
          {"total_tokens", last.prompt_tokens + last.completion_tokens}};
}

// The package's sampling defaults for requests that leave them out (OpenAI's temperature 1 where
// it sets none); a value the sampler would refuse is left out.
SamplerConfig SamplingDefaults(const ChatConfig::Sampling& package) {
  SamplerConfig openai;
  openai.temperature = 1.0;
  ChatSamplingOptions options;
  options.skip_refused = true;
  return ChatSamplerConfig(openai, package, options);
}

}  // namespace

struct Server::Impl {
  ServeOptions options;
  std::string dir;
  std::unique_ptr<ModelLibrary> library;
  LoadedModel model;
  std::unique_ptr<Tokenizer> tokenizer;
  ConvTemplate tmpl;
  std::vector<int32_t> stop_ids;
  SamplerConfig defaults;
  std::unique_ptr<Engine> engine;
  const MlcHttpBackend* http_backend = nullptr;
  MlcHttpHandler handler{};
  std::unique_ptr<MlcHttpServer, HttpServerCloser> http;
  std::string model_id;
  std::atomic<int> in_flight{0};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{1};
  int port = 0;

  // Creates the module's server with the routes and their handler.
  Status StartHttp();
  void Handle(Route route, std::string_view body, const Reply& res);
  void ChatCompletions(std::string_view body, const Reply& res);
  // Messages -> the engine's request (media decoded); errors are the client's.
  Result<GenerationRequest> BuildRequest(const ChatCompletionRequest& r);
  void Answer(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
              const std::string& completion_id, const Reply& res);
  void Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
              const std::string& completion_id, const Reply& res);
  struct StreamState;
  OrderedJson Chunk(const std::string& completion_id, int64_t created, OrderedJson delta,
                    OrderedJson finish_reason) const {
    return {{"id", completion_id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model_id},
            {"choices", OrderedJson::array({{{"index", 0},
                                             {"delta", std::move(delta)},
                                             {"finish_reason", std::move(finish_reason)}}})}};
  }
};

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  if (impl_->engine) impl_->engine->Shutdown(false);
}

Result<std::unique_ptr<Server>> Server::Create(const std::string& package_dir,
                                               const ServeOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->dir = package_dir;
  auto library = OpenPackageLibrary(package_dir);
  MLC_RETURN_IF_ERROR(library);
  impl->library = std::move(*library);
  auto model = LoadModel(package_dir, *impl->library);
  MLC_RETURN_IF_ERROR(model);
  impl->model = std::move(*model);
  auto tokenizer = Tokenizer::FromDirectory(package_dir);
  MLC_RETURN_IF_ERROR(tokenizer);
  impl->tokenizer = std::move(*tokenizer);
  auto tmpl = ConvTemplateFromChatConfig(impl->model.config.raw);
  MLC_RETURN_IF_ERROR(tmpl);
  impl->tmpl = std::move(*tmpl);
  impl->stop_ids = StopTokenIds(impl->model.config);
  impl->defaults = SamplingDefaults(impl->model.config.sampling);
  impl->model_id = std::filesystem::path(package_dir).lexically_normal().filename().string();
  if (impl->model_id.empty()) impl->model_id = std::filesystem::path(package_dir).parent_path().filename().string();
  auto engine = Engine::Start(impl->model, impl->tokenizer.get(), options.engine);
  MLC_RETURN_IF_ERROR(engine);
  impl->engine = std::move(*engine);
  Status http = impl->StartHttp();
  MLC_RETURN_IF_ERROR(http);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Impl::StartHttp() {
  auto backend = LoadModule<MlcHttpBackend>();
  MLC_RETURN_IF_ERROR(backend);
  http_backend = *backend;
  handler.context = this;
  // No exception crosses the module's table: a handler that throws answers 500.
  handler.handle = [](void* context, const MlcHttpRequest* request, MlcHttpResponse* response) {
    auto* self = static_cast<Impl*>(context);
    const Reply res{self->http_backend, response};
    try {
      self->Handle(static_cast<Route>(request->route),
                   std::string_view(request->body, request->body_size), res);
    } catch (...) {
      SendError(res, 500, OpenAiError("internal error", "server_error"));
    }
  };
  handler.error_body = [](void* context, int status, int internal, MlcHttpResponse* response) {
    const Reply res{static_cast<Impl*>(context)->http_backend, response};
    std::string message = internal        ? "internal error"
                          : status == 413 ? "the request body is larger than this server takes"
                          : status == 404 ? "no such route"
                                          : "the request could not be read";
    const std::string text = Dump(OpenAiError(message, internal ? "server_error" : "invalid_request_error"));
    res.http->set_content(res.res, text.data(), text.size(), "application/json");
  };
  MlcHttpOptions o{};
  o.max_body_bytes = options.max_body_bytes;
  o.threads = options.max_concurrent + 16;
  o.idle_timeout_s = options.idle_timeout_s;
  o.request_read_timeout_s = options.request_read_timeout_s;
  MlcHttpError error{};
  MlcHttpServer* server = http_backend->create(&o, kRoutes, std::size(kRoutes), &handler, &error);
  if (!server) return IoError("", error.message);
  http = std::unique_ptr<MlcHttpServer, HttpServerCloser>(server, HttpServerCloser{http_backend});
  return Status::Ok();
}

void Server::Impl::Handle(Route route, std::string_view body, const Reply& res) {
  switch (route) {
    case Route::kHealth: {
      auto s = engine->stats();
      SendJson(res, draining ? 503 : 200,
               {{"status", draining ? "draining" : "ok"},
                {"queued", s.queued},
                {"running", s.running},
                {"kv_free_pages", s.free_pages},
                {"kv_total_pages", s.total_pages}});
      return;
    }
    case Route::kModels:
      SendJson(res, 200,
               {{"object", "list"},
                {"data", OrderedJson::array({{{"id", model_id},
                                              {"object", "model"},
                                              {"created", 0},
                                              {"owned_by", "mlc-manifest"}}})}});
      return;
    case Route::kChatCompletions:
      ChatCompletions(body, res);
      return;
  }
}

Result<GenerationRequest> Server::Impl::BuildRequest(const ChatCompletionRequest& r) {
  for (const ChatMessage& m : r.messages) {
    for (const ContentPart& p : m.parts) {
      if (p.kind == PartKind::kText) continue;
      auto inline_bytes = InlineMedia(p, "");
      MLC_RETURN_IF_ERROR(inline_bytes);
      if (!*inline_bytes && !options.allow_local_files) {
        return Invalid(p.path, "expected a data: URL (base64) or base64 audio; this server does "
                               "not read local files");
      }
    }
  }
  auto prompt = BuildChatPrompt(tmpl, r.messages);
  MLC_RETURN_IF_ERROR(prompt);
  auto turn = PromptTurn(*prompt, tmpl, *tokenizer, "");
  MLC_RETURN_IF_ERROR(turn);
  auto input = PrepareTurn(model.bound.contract, *turn);
  MLC_RETURN_IF_ERROR(input);
  GenerationRequest g;
  g.input = std::move(*input);
  g.max_tokens = r.max_tokens;
  g.sampler = r.sampler;
  g.stop_token_ids = stop_ids;
  g.stop_strings = tmpl.stop_str;
  g.stop_strings.insert(g.stop_strings.end(), r.stop.begin(), r.stop.end());
  return g;
}

void Server::Impl::ChatCompletions(std::string_view body, const Reply& res) {
  if (draining) {
    SendError(res, 503, OpenAiError("the server is shutting down", "server_error"));
    return;
  }
  struct Slot {  // counts the request in flight until its answer is written
    explicit Slot(std::atomic<int>& count) : n(count) { ++n; }
    ~Slot() {
      if (armed) --n;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    std::atomic<int>& n;
    bool armed = true;
  };
  auto slot = std::make_unique<Slot>(in_flight);
  if (in_flight > options.max_concurrent) {
    SendError(res, 429, OpenAiError("too many requests in flight; retry later", "rate_limit_error"));
    return;
  }
  JsonLimits limits;
  limits.max_bytes = options.max_body_bytes;
  auto doc = ParseJson(body, limits);
  if (!doc) {
    SendError(res, 400, OpenAiError(doc.errors()));
    return;
  }
  auto parsed = ParseChatCompletionRequest(*doc, options.request_limits, defaults);
  if (!parsed) {
    SendError(res, 400, OpenAiError(parsed.errors()));
    return;
  }
  auto gen = BuildRequest(*parsed);
  if (!gen) {
    SendError(res, StatusFor(gen.errors()), OpenAiError(gen.errors()));
    return;
  }
  auto channel = std::make_shared<Channel>();
  auto id = engine->Submit(std::move(*gen), channel->Sink());
  if (!id) {
    bool full = id.error().code == ErrorCode::kLimit;
    SendError(res, full ? 429 : 503,
              OpenAiError(id.error().message, full ? "rate_limit_error" : "server_error"));
    return;
  }
  std::string completion_id = "chatcmpl-" + std::to_string(getpid()) + "-" + std::to_string(next_id++);
  if (parsed->stream) {
    slot->armed = false;  // the stream's releaser gives the slot back
    Stream(*id, *parsed, channel, completion_id, res);
  } else {
    Answer(*id, *parsed, channel, completion_id, res);
  }
}

void Server::Impl::Answer(uint64_t id, const ChatCompletionRequest&, std::shared_ptr<Channel> channel,
                          const std::string& completion_id, const Reply& res) {
  const auto deadline = Clock::now() + std::chrono::seconds(options.request_timeout_s);
  std::string text;
  StreamEvent last;
  for (bool done = false; !done;) {
    if (Clock::now() > deadline) {
      engine->Cancel(id);
      SendError(res, 504, OpenAiError("the reply took longer than the request timeout", "timeout"));
      return;
    }
    for (StreamEvent& e : channel->Take(std::chrono::milliseconds(200))) {
      text += e.text;
      if (e.done) {
        last = std::move(e);
        done = true;
      }
    }
  }
  if (last.finish_reason == "error") {
    SendError(res, StatusFor(last.errors), OpenAiError(last.errors));
    return;
  }
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  SendJson(res, 200,
           {{"id", completion_id},
            {"object", "chat.completion"},
            {"created", created},
            {"model", model_id},
            {"choices", OrderedJson::array({{{"index", 0},
                                             {"message", {{"role", "assistant"}, {"content", text}}},
                                             {"finish_reason", FinishReason(last.finish_reason)}}})},
            {"usage", Usage(last)}});
}

// One streamed answer: the state its chunks are made from, owned by the module's stream until
// its release.
struct Server::Impl::StreamState {
  Impl* server;
  uint64_t id;
  std::shared_ptr<Channel> channel;
  std::string completion_id;
  int64_t created;
  Clock::time_point deadline;
  bool usage;
  bool started = false;
  bool finished = false;

  // The next chunks of the answer; false stops the stream (the client went away or it failed).
  bool Provide(const MlcHttpBackend& backend, MlcHttpSink* sink);
};

bool Server::Impl::StreamState::Provide(const MlcHttpBackend& backend, MlcHttpSink* sink) {
  auto write = [&](const std::string& text) {
    return backend.sink_write(sink, text.data(), text.size()) != 0;
  };
  auto send = [&](const OrderedJson& j) { return write("data: " + Dump(j) + "\n\n"); };
  if (!started) {
    started = true;
    if (!send(server->Chunk(completion_id, created, {{"role", "assistant"}, {"content", ""}}, nullptr))) {
      return false;
    }
  }
  if (Clock::now() > deadline) {
    server->engine->Cancel(id);
    send(OpenAiError("the reply took longer than the request timeout", "timeout"));
    return false;
  }
  for (StreamEvent& e : channel->Take(std::chrono::milliseconds(100))) {
    if (e.done && e.finish_reason == "error") {
      send(OpenAiError(e.errors));
      finished = true;
      backend.sink_done(sink);
      return true;
    }
    if (!e.text.empty() && !send(server->Chunk(completion_id, created, {{"content", e.text}}, nullptr))) {
      return false;
    }
    if (e.done) {
      if (!send(server->Chunk(completion_id, created, OrderedJson::object(),
                              FinishReason(e.finish_reason)))) {
        return false;
      }
      if (usage) {
        OrderedJson u = {{"id", completion_id},
                         {"object", "chat.completion.chunk"},
                         {"created", created},
                         {"model", server->model_id},
                         {"choices", OrderedJson::array()},
                         {"usage", Usage(e)}};
        if (!send(u)) return false;
      }
      if (!write("data: [DONE]\n\n")) return false;
      finished = true;
      backend.sink_done(sink);
      return true;
    }
  }
  return backend.sink_writable(sink) != 0;
}

void Server::Impl::Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
                          const std::string& completion_id, const Reply& res) {
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  auto* state = new StreamState{this, id, std::move(channel), completion_id, created,
                                Clock::now() + std::chrono::seconds(options.request_timeout_s),
                                r.include_usage};
  res.http->set_header(res.res, "Cache-Control", "no-cache");
  MlcHttpStream stream{};
  stream.context = state;
  stream.provide = [](void* context, MlcHttpSink* sink) {
    auto* s = static_cast<StreamState*>(context);
    try {
      return s->Provide(*s->server->http_backend, sink) ? 1 : 0;
    } catch (...) {  // no exception crosses the module's table
      return 0;
    }
  };
  stream.release = [](void* context, int) {
    std::unique_ptr<StreamState> s(static_cast<StreamState*>(context));
    if (!s->finished) s->server->engine->Cancel(s->id);  // the client went away or the stream failed
    --s->server->in_flight;
  };
  res.http->set_stream(res.res, "text/event-stream", stream);
}

Status Server::Bind() {
  Impl& s = *impl_;
  MlcHttpError error{};
  if (!s.http_backend->bind(s.http.get(), s.options.host.c_str(), s.options.port, &s.port, &error)) {
    return IoError(s.options.port == 0 ? s.options.host : s.options.host + ":" + std::to_string(s.options.port),
                   error.message);
  }
  return Status::Ok();
}

void Server::Run() { impl_->http_backend->run(impl_->http.get()); }

void Server::Stop(bool drain) {
  Impl& s = *impl_;
  s.draining = true;
  s.engine->Shutdown(drain);  // with drain: every queued and running request ends normally
  // Let the answers in flight be written out.
  for (int i = 0; i < 600 && s.in_flight > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  s.http_backend->stop(s.http.get());
}

int Server::port() const { return impl_->port; }
const std::string& Server::model_id() const { return impl_->model_id; }

}  // namespace mlc
