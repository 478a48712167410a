// The HTTP server (cpp-httplib): routes, limits and the OpenAI wire format around the engine.
// A chat completion is parsed, built into a prompt with the package's conversation template
// (media parts decoded from data: URLs, or local files when allowed), queued on the engine and
// answered as one JSON object or as server-sent events; a client that goes away cancels its
// request. Every failure is an OpenAI-style error object with a 4xx (5xx only for our own faults).
#include <httplib.h>
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
#include "serve/http_server.h"

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

void SendJson(httplib::Response& res, int status, const OrderedJson& body) {
  res.status = status;
  res.set_content(Dump(body), "application/json");
}

void SendError(httplib::Response& res, int status, const OrderedJson& error) {
  SendJson(res, status, error);
}

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
  std::unique_ptr<serve::HttpServer> http;
  std::string model_id;
  std::atomic<int> in_flight{0};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{1};
  int port = 0;

  void Routes();
  void ChatCompletions(const httplib::Request& req, httplib::Response& res);
  // Messages -> the engine's request (media decoded); errors are the client's.
  Result<GenerationRequest> BuildRequest(const ChatCompletionRequest& r);
  void Answer(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
              const std::string& completion_id, httplib::Response& res);
  void Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
              const std::string& completion_id, httplib::Response& res);
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
  impl->http = std::make_unique<serve::HttpServer>(options.request_read_timeout_s);
  impl->Routes();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

void Server::Impl::Routes() {
  const int threads = options.max_concurrent + 16;
  http->new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http->set_payload_max_length(options.max_body_bytes);
  http->set_read_timeout(options.idle_timeout_s, 0);
  http->set_write_timeout(options.idle_timeout_s, 0);
  http->set_keep_alive_timeout(options.idle_timeout_s);
  http->set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413   ? "the request body is larger than this server takes"
                          : res.status == 404 ? "no such route"
                                              : "the request could not be read";
    std::string type = "invalid_request_error";
    res.set_content(Dump(OpenAiError(message, type)), "application/json");
  });
  http->set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    SendError(res, 500, OpenAiError("internal error", "server_error"));
  });
  http->Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    auto s = engine->stats();
    SendJson(res, draining ? 503 : 200,
             {{"status", draining ? "draining" : "ok"},
              {"queued", s.queued},
              {"running", s.running},
              {"kv_free_pages", s.free_pages},
              {"kv_total_pages", s.total_pages}});
  });
  http->Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200,
             {{"object", "list"},
              {"data", OrderedJson::array({{{"id", model_id},
                                            {"object", "model"},
                                            {"created", 0},
                                            {"owned_by", "mlc-manifest"}}})}});
  });
  http->Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    ChatCompletions(req, res);
  });
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

void Server::Impl::ChatCompletions(const httplib::Request& req, httplib::Response& res) {
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
  auto doc = ParseJson(req.body, limits);
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
                          const std::string& completion_id, httplib::Response& res) {
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

void Server::Impl::Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
                          const std::string& completion_id, httplib::Response& res) {
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  auto started = std::make_shared<bool>(false);
  auto finished = std::make_shared<bool>(false);
  const auto deadline = Clock::now() + std::chrono::seconds(options.request_timeout_s);
  const bool usage = r.include_usage;
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, id, channel, completion_id, created, started, finished, deadline, usage](
          size_t, httplib::DataSink& sink) {
        auto send = [&sink](const OrderedJson& j) {
          std::string line = "data: " + Dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (!*started) {
          *started = true;
          if (!send(Chunk(completion_id, created, {{"role", "assistant"}, {"content", ""}}, nullptr))) {
            return false;
          }
        }
        if (Clock::now() > deadline) {
          engine->Cancel(id);
          send(OpenAiError("the reply took longer than the request timeout", "timeout"));
          return false;
        }
        for (StreamEvent& e : channel->Take(std::chrono::milliseconds(100))) {
          if (e.done && e.finish_reason == "error") {
            send(OpenAiError(e.errors));
            *finished = true;
            sink.done();
            return true;
          }
          if (!e.text.empty() && !send(Chunk(completion_id, created, {{"content", e.text}}, nullptr))) {
            return false;
          }
          if (e.done) {
            if (!send(Chunk(completion_id, created, OrderedJson::object(),
                            FinishReason(e.finish_reason)))) {
              return false;
            }
            if (usage) {
              OrderedJson u = {{"id", completion_id},
                               {"object", "chat.completion.chunk"},
                               {"created", created},
                               {"model", model_id},
                               {"choices", OrderedJson::array()},
                               {"usage", Usage(e)}};
              if (!send(u)) return false;
            }
            static const std::string kDone = "data: [DONE]\n\n";
            if (!sink.write(kDone.data(), kDone.size())) return false;
            *finished = true;
            sink.done();
            return true;
          }
        }
        return sink.is_writable();
      },
      [this, id, finished](bool) {
        if (!*finished) engine->Cancel(id);  // the client went away or the stream failed
        --in_flight;
      });
}

Status Server::Bind() {
  Impl& s = *impl_;
  if (s.options.port == 0) {
    s.port = s.http->bind_to_any_port(s.options.host);
    if (s.port <= 0) return IoError(s.options.host, "cannot bind to any port on this address");
  } else {
    if (!s.http->bind_to_port(s.options.host, s.options.port)) {
      return IoError(s.options.host + ":" + std::to_string(s.options.port),
                     "cannot bind (address in use or not available)");
    }
    s.port = s.options.port;
  }
  return Status::Ok();
}

void Server::Run() { impl_->http->listen_after_bind(); }

void Server::Stop(bool drain) {
  Impl& s = *impl_;
  s.draining = true;
  s.engine->Shutdown(drain);  // with drain: every queued and running request ends normally
  // Let the answers in flight be written out.
  for (int i = 0; i < 600 && s.in_flight > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  s.http->stop();
}

int Server::port() const { return impl_->port; }
const std::string& Server::model_id() const { return impl_->model_id; }

}  // namespace mlc
