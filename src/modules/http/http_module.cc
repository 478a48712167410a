// The HTTP module (libmlc_manifest_http.so): our event loop with its framing limits
// (event_loop.h) in front of cpp-httplib's routing and responses (http_server.h), behind the
// plain C table of serve/http_backend.h. The server of the library (src/serve/server.cc) opens
// it when it starts, so no other command loads cpp-httplib, OpenSSL, brotli or zlib.
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "modules/http/http_server.h"
#include "serve/http_backend.h"

struct MlcHttpServer {
  std::unique_ptr<mlc::serve::HttpServer> http;
  std::unique_ptr<mlc::serve::EventLoop> loop;
};

namespace {

void SetText(MlcHttpError* error, const std::string& text) {
  std::snprintf(error->message, sizeof error->message, "%s", text.c_str());
}

httplib::Response& Of(MlcHttpResponse* r) { return *reinterpret_cast<httplib::Response*>(r); }
const httplib::Response& Of(const MlcHttpResponse* r) {
  return *reinterpret_cast<const httplib::Response*>(r);
}
MlcHttpResponse* C(httplib::Response& r) { return reinterpret_cast<MlcHttpResponse*>(&r); }
httplib::DataSink& Of(MlcHttpSink* s) { return *reinterpret_cast<httplib::DataSink*>(s); }

// cpp-httplib takes a route's path as a regular expression: an exact path (a model's name in
// /v1/models/NAME may hold '.', '+' or '(') has its special characters escaped.
std::string ExactPattern(const char* path) {
  std::string out;
  for (const char* c = path; *c; ++c) {
    if (std::string_view("\\^$.|?*+()[]{}").find(*c) != std::string_view::npos) out += '\\';
    out += *c;
  }
  return out;
}

void Route(mlc::serve::HttpServer& http, const MlcHttpRoute& route, int index,
           const MlcHttpHandler* handler) {
  auto call = [index, handler](const httplib::Request& req, httplib::Response& res) {
    auto* connection = reinterpret_cast<MlcHttpConnection*>(mlc::serve::CurrentConnection());
    const std::string content_type = req.get_header_value(mlc::serve::kContentTypeHeader);
    const MlcHttpRequest request{index, req.body.data(), req.body.size(), connection, content_type.c_str()};
    handler->handle(handler->context, &request, C(res));
  };
  const std::string method = route.method;
  if (method == "GET") {
    http.Get(ExactPattern(route.path), call);
  } else if (method == "POST") {
    http.Post(ExactPattern(route.path), call);
  }
}

mlc::serve::LoopOptions LoopOptionsOf(const MlcHttpOptions& o) {
  mlc::serve::LoopOptions l;
  l.limits.max_body_bytes = o.max_body_bytes;
  if (o.max_request_line) l.limits.max_request_line = o.max_request_line;
  if (o.max_header_bytes) l.limits.max_header_bytes = o.max_header_bytes;
  if (o.max_headers) l.limits.max_headers = o.max_headers;
  if (o.max_connections) l.max_connections = o.max_connections;
  if (o.max_buffered_bytes) l.max_buffered_bytes = o.max_buffered_bytes;
  l.idle_timeout_s = o.idle_timeout_s;
  l.request_read_timeout_s = o.request_read_timeout_s;
  l.write_timeout_s = o.idle_timeout_s;
  l.workers = o.threads > 0 ? o.threads : 1;
  for (size_t i = 0; i < o.allowed_host_count; ++i) l.allowed_hosts.emplace_back(o.allowed_hosts[i]);
  for (size_t i = 0; i < o.api_key_count; ++i) l.api_keys.emplace_back(o.api_keys[i]);
  for (size_t i = 0; i < o.open_path_count; ++i) l.open_paths.emplace_back(o.open_paths[i]);
  return l;
}

MlcHttpServer* Create(const MlcHttpOptions* o, const MlcHttpRoute* routes, size_t route_count,
                      const MlcHttpHandler* handler, MlcHttpError* error) {
  try {
    auto server = std::make_unique<MlcHttpServer>();
    server->http = std::make_unique<mlc::serve::HttpServer>(o->idle_timeout_s);
    mlc::serve::HttpServer& http = *server->http;
    http.set_payload_max_length(o->max_body_bytes);
    http.set_error_handler([handler](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) handler->error_body(handler->context, res.status, 0, nullptr, C(res));
    });
    http.set_exception_handler([handler](const httplib::Request&, httplib::Response& res,
                                         std::exception_ptr) {
      res.status = 500;
      handler->error_body(handler->context, 500, 1, nullptr, C(res));
    });
    for (size_t i = 0; i < route_count; ++i) Route(http, routes[i], static_cast<int>(i), handler);
    auto answer = [&http](mlc::serve::WorkerConnection& c, const mlc::serve::HttpRequestHead& head,
                          std::string& body) { return http.Answer(c, head, body); };
    auto refusal = [handler](int status, const std::string& message) {
      httplib::Response res;
      res.status = status;
      handler->error_body(handler->context, status, 0, message.c_str(), C(res));
      return res.body;
    };
    server->loop = std::make_unique<mlc::serve::EventLoop>(LoopOptionsOf(*o), answer, refusal);
    return server.release();
  } catch (const std::exception& e) {
    SetText(error, std::string("cannot create the HTTP server: ") + e.what());
    return nullptr;
  }
}

int Bind(MlcHttpServer* s, const char* host, int port, int* bound, MlcHttpError* error) {
  std::string why;
  if (s->loop->Listen(host, port, bound, &why)) return 1;
  SetText(error, why);
  return 0;
}

void Run(MlcHttpServer* s) { s->loop->Run(); }
void Stop(MlcHttpServer* s) {
  s->http->Stopping();
  s->loop->Stop();
}
void Destroy(MlcHttpServer* s) { delete s; }

int Status(const MlcHttpResponse* r) { return Of(r).status; }
int HasBody(const MlcHttpResponse* r) { return Of(r).body.empty() ? 0 : 1; }
void SetStatus(MlcHttpResponse* r, int status) { Of(r).status = status; }
void SetHeader(MlcHttpResponse* r, const char* name, const char* value) {
  Of(r).set_header(name, value);
}
void SetContent(MlcHttpResponse* r, const char* body, size_t size, const char* content_type) {
  Of(r).set_content(body, size, content_type);
}

void SetStream(MlcHttpResponse* r, const char* content_type, MlcHttpStream stream) {
  Of(r).set_chunked_content_provider(
      content_type,
      [stream](size_t, httplib::DataSink& sink) {
        return stream.provide(stream.context, reinterpret_cast<MlcHttpSink*>(&sink)) != 0;
      },
      [stream](bool success) { stream.release(stream.context, success ? 1 : 0); });
}

int SinkWrite(MlcHttpSink* s, const char* data, size_t size) { return Of(s).write(data, size) ? 1 : 0; }
int SinkWritable(MlcHttpSink* s) { return Of(s).is_writable() ? 1 : 0; }
void SinkDone(MlcHttpSink* s) { Of(s).done(); }
int ConnectionClosed(MlcHttpConnection* c) {
  return c && reinterpret_cast<mlc::serve::WorkerConnection*>(c)->ClientGone() ? 1 : 0;
}

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(http, MlcHttpBackend) {
  static const MlcHttpBackend backend{MLC_HTTP_BACKEND_ABI, &Create, &Bind, &Run, &Stop, &Destroy,
                                      &Status, &HasBody, &SetStatus, &SetHeader, &SetContent,
                                      &SetStream, &SinkWrite, &SinkWritable, &SinkDone,
                                      &ConnectionClosed};
  return &backend;
}
