// The HTTP server (cpp-httplib, in the HTTP module: serve/http_backend.h): each package opened and
// its engine started, the module's server with the routes and their limits, the health and models
// routes, the metrics and the chat page, binding, running and stopping (draining every engine). Chat
// completions and completions: serve/chat_completions.cc, serve/completions.cc, serve/stream.cc;
// /tokenize and /detokenize: serve/tokenize.cc; /v1/embeddings: serve/embeddings.cc. Every failure is an OpenAI-style error object with
// a 4xx (5xx only for our own faults); a missing or wrong API key is refused from the request's
// head by the HTTP module (401, counted here).
#include <thread>

#include "serve/http_admission.h"
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts
namespace {

// The routes, in the order of Route's values.
constexpr MlcHttpRoute kRoutes[] = {
    {"GET", "/health"},   {"GET", "/v1/models"}, {"POST", "/v1/chat/completions"},
    {"POST", "/v1/completions"}, {"GET", "/metrics"},   {"GET", "/"},
    {"POST", "/tokenize"},       {"POST", "/detokenize"},   {"POST", "/v1/embeddings"},
    {"POST", "/v1/audio/transcriptions"}, {"POST", "/v1/audio/translations"}};

}  // namespace

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { impl_->ShutdownEngines(false); }

Result<std::unique_ptr<Server>> Server::Create(const std::string& package_dir,
                                               const ServeOptions& options) {
  return Create(std::vector<ModelSource>{{"", package_dir}}, options);
}

Result<std::unique_ptr<Server>> Server::Create(const std::vector<ModelSource>& models,
                                               const ServeOptions& options) {
  auto impl = std::make_unique<Impl>();
  for (size_t i = 0; i < options.api_keys.size(); ++i) {
    if (!IsApiKey(options.api_keys[i])) {
      return Error{ErrorCode::kUsage, "/api_keys/" + std::to_string(i),
                   "an API key is visible ASCII: no spaces or control characters, at least one byte"};
    }
  }
  auto names = ModelNames(models);
  MLC_RETURN_IF_ERROR(names);
  impl->options = options;
  for (size_t i = 0; i < models.size(); ++i) {
    Status added = impl->AddModel((*names)[i], models[i].dir);
    if (!added) {  // the engines already started stop with impl
      impl->ShutdownEngines(false);
      return added.errors();
    }
  }
  Status http = impl->StartHttp();
  if (!http) impl->ShutdownEngines(false);
  MLC_RETURN_IF_ERROR(http);
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Status Server::Impl::AddModel(const std::string& name, const std::string& dir) {
  auto m = std::make_unique<ServedModel>();
  m->name = name;
  m->dir = dir;
  OpenOptions open;
  open.chat = true;
  auto package = OpenPackage(dir, open);
  MLC_RETURN_IF_ERROR(package);
  m->package = std::move(*package);
  m->defaults = SamplingDefaults(m->package.model.config.sampling);
  auto engine = Engine::Start(m->package.model, m->package.tokenizer.get(), options.engine);
  MLC_RETURN_IF_ERROR(engine);
  m->engine = std::move(*engine);
  model_ids.push_back(name);
  models.push_back(std::move(m));
  return Status::Ok();
}

void Server::Impl::ShutdownEngines(bool drain) {
  std::vector<std::thread> stopping;
  for (auto& m : models) {
    if (m->engine) stopping.emplace_back([&m, drain] { m->engine->Shutdown(drain); });
  }
  for (std::thread& t : stopping) t.join();
}

ServedModel* Server::Impl::Pick(const Json& doc, const Reply& res, bool count) {
  auto picked = PickModel(models, doc);
  if (picked) return *picked;
  const int status = PickStatus(picked.error());
  if (count) {
    Refuse(res, status, PickError(picked.error()));
  } else {
    SendError(res, status, PickError(picked.error()));
  }
  return nullptr;
}

Status Server::Impl::StartHttp() {
  auto backend = LoadModule<MlcHttpBackend>();
  MLC_RETURN_IF_ERROR(backend);
  http_backend = *backend;
  handler.context = this;
  // No exception crosses the module's table: a handler that throws answers 500.
  handler.handle = [](void* context, const MlcHttpRequest* request, MlcHttpResponse* response) {
    auto* self = static_cast<Impl*>(context);
    const Reply res{self->http_backend, response, request->connection};
    try {
      self->Handle(static_cast<Route>(request->route), std::string_view(request->body, request->body_size),
                   request->content_type ? request->content_type : "", res);
    } catch (...) {
      SendError(res, 500, OpenAiError("internal error", "server_error"));
    }
  };
  handler.error_body = [](void* context, int status, int internal, const char* why, MlcHttpResponse* response) {
    auto* self = static_cast<Impl*>(context);
    const Reply res{self->http_backend, response};
    if (status == 401) {  // refused from its head: no API key, or not one of the keys
      self->metrics.Count(Outcome::kUnauthorized);
      const std::string text = Dump(OpenAiError(why && why[0] ? why : "a valid API key is needed",
                                                "invalid_request_error", "", "invalid_api_key"));
      res.http->set_content(res.res, text.data(), text.size(), "application/json");
      return;
    }
    std::string message = internal             ? "internal error"
                          : why && why[0]      ? why
                          : status == 413      ? "the request body is larger than this server takes"
                          : status == 404      ? "no such route"
                                               : "the request could not be read";
    const std::string text = Dump(OpenAiError(message, internal ? "server_error" : "invalid_request_error"));
    res.http->set_content(res.res, text.data(), text.size(), "application/json");
  };
  MlcHttpOptions o{};
  o.max_body_bytes = options.max_body_bytes;
  o.threads = options.max_concurrent + 16;
  o.idle_timeout_s = options.idle_timeout_s;
  o.request_read_timeout_s = options.request_read_timeout_s;
  o.max_request_line = options.max_request_line;
  o.max_header_bytes = options.max_header_bytes;
  o.max_headers = options.max_headers;
  o.max_connections = options.max_connections;
  o.max_buffered_bytes = options.max_buffered_bytes;
  allowed_hosts = HostPolicy::DefaultNames(options.host, options.allowed_hosts);
  std::vector<const char*> hosts;
  for (const std::string& h : allowed_hosts) hosts.push_back(h.c_str());
  o.allowed_hosts = hosts.data();
  o.allowed_host_count = hosts.size();
  // With keys, only the health check, the chat page (which asks for a key) and, unless they need
  // one too, the metrics stay open.
  std::vector<const char*> keys, open_paths = {"/health", "/"};
  for (const std::string& k : options.api_keys) keys.push_back(k.c_str());
  if (!options.metrics_need_key) open_paths.push_back("/metrics");
  o.api_keys = keys.data();
  o.api_key_count = keys.size();
  o.open_paths = open_paths.data();
  o.open_path_count = open_paths.size();
  // The fixed routes, then GET /v1/models/NAME for each model.
  routes.assign(std::begin(kRoutes), std::end(kRoutes));
  for (const auto& m : models) model_paths.push_back("/v1/models/" + m->name);
  for (const std::string& path : model_paths) routes.push_back({"GET", path.c_str()});
  MlcHttpError error{};
  MlcHttpServer* server = http_backend->create(&o, routes.data(), routes.size(), &handler, &error);
  if (!server) return IoError("", error.message);
  http = std::unique_ptr<MlcHttpServer, HttpServerCloser>(server, HttpServerCloser{http_backend});
  return Status::Ok();
}

void Server::Impl::Handle(Route route, std::string_view body, std::string_view content_type, const Reply& res) {
  switch (route) {
    case Route::kHealth: {  // one answer for the server: the engines summed
      Engine::Stats sum;
      for (const auto& m : models) {
        const Engine::Stats s = m->engine->stats();
        sum.queued += s.queued;
        sum.running += s.running;
        sum.free_pages += s.free_pages;
        sum.total_pages += s.total_pages;
      }
      SendJson(res, draining ? 503 : 200,
               {{"status", draining ? "draining" : "ok"},
                {"queued", sum.queued},
                {"running", sum.running},
                {"kv_free_pages", sum.free_pages},
                {"kv_total_pages", sum.total_pages}});
      return;
    }
    case Route::kModels: {
      OrderedJson data = OrderedJson::array();
      for (const auto& m : models) data.push_back(m->Describe());
      SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}});
      return;
    }
    case Route::kChatCompletions:
      Generate(Wire::kChat, body, res);
      return;
    case Route::kCompletions:
      Generate(Wire::kCompletion, body, res);
      return;
    case Route::kMetrics: {
      std::vector<ModelView> views;
      for (const auto& m : models) views.push_back({&m->name, &m->metrics, m->engine->stats()});
      const std::string text = metrics.Render(views);
      res.http->set_content(res.res, text.data(), text.size(), "text/plain; version=0.0.4; charset=utf-8");
      return;
    }
    case Route::kTokenize:
      Tokenize(body, res);
      return;
    case Route::kDetokenize:
      Detokenize(body, res);
      return;
    case Route::kEmbeddings:
      Embeddings(body, res);
      return;
    case Route::kTranscriptions:
      Transcribe(TranscriptionTask::kTranscribe, content_type, body, res);
      return;
    case Route::kTranslations:
      Transcribe(TranscriptionTask::kTranslate, content_type, body, res);
      return;
    case Route::kChatPage:
      res.http->set_content(res.res, reinterpret_cast<const char*>(kChatPage), kChatPageSize,
                            "text/html; charset=utf-8");
      return;
    case Route::kModel:
      break;
  }
  const size_t model = static_cast<size_t>(route) - static_cast<size_t>(Route::kModel);
  if (route >= Route::kModel && model < models.size()) SendJson(res, 200, models[model]->Describe());
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
  s.ShutdownEngines(drain);  // with drain: every queued and running request ends normally
  // Let the answers in flight be written out.
  for (int i = 0; i < 600 && s.in_flight > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  s.http_backend->stop(s.http.get());
}

int Server::port() const { return impl_->port; }
const std::string& Server::model_id() const { return impl_->model_ids.front(); }
const std::vector<std::string>& Server::model_ids() const { return impl_->model_ids; }

}  // namespace mlc
