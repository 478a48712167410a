// The HTTP module (libmlc_manifest_http.so): cpp-httplib's server (with our request deadline,
// http_server.h) behind the plain C table of serve/http_backend.h. The server of the library
// (src/serve/server.cc) opens it when it starts, so no other command loads cpp-httplib, OpenSSL,
// brotli or zlib.
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "modules/http/http_server.h"
#include "serve/http_backend.h"

struct MlcHttpServer {
  std::unique_ptr<mlc::serve::HttpServer> http;
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

void Route(mlc::serve::HttpServer& http, const MlcHttpRoute& route, int index,
           const MlcHttpHandler* handler) {
  auto call = [index, handler](const httplib::Request& req, httplib::Response& res) {
    const MlcHttpRequest request{index, req.body.data(), req.body.size()};
    handler->handle(handler->context, &request, C(res));
  };
  const std::string method = route.method;
  if (method == "GET") {
    http.Get(route.path, call);
  } else if (method == "POST") {
    http.Post(route.path, call);
  }
}

MlcHttpServer* Create(const MlcHttpOptions* o, const MlcHttpRoute* routes, size_t route_count,
                      const MlcHttpHandler* handler, MlcHttpError* error) {
  try {
    auto server = std::make_unique<MlcHttpServer>();
    server->http = std::make_unique<mlc::serve::HttpServer>(o->request_read_timeout_s);
    mlc::serve::HttpServer& http = *server->http;
    const size_t threads = static_cast<size_t>(o->threads > 0 ? o->threads : 1);
    http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http.set_payload_max_length(o->max_body_bytes);
    http.set_read_timeout(o->idle_timeout_s, 0);
    http.set_write_timeout(o->idle_timeout_s, 0);
    http.set_keep_alive_timeout(o->idle_timeout_s);
    http.set_error_handler([handler](const httplib::Request&, httplib::Response& res) {
      if (res.body.empty()) handler->error_body(handler->context, res.status, 0, C(res));
    });
    http.set_exception_handler([handler](const httplib::Request&, httplib::Response& res,
                                         std::exception_ptr) {
      res.status = 500;
      handler->error_body(handler->context, 500, 1, C(res));
    });
    for (size_t i = 0; i < route_count; ++i) Route(http, routes[i], static_cast<int>(i), handler);
    return server.release();
  } catch (const std::exception& e) {
    SetText(error, std::string("cannot create the HTTP server: ") + e.what());
    return nullptr;
  }
}

int Bind(MlcHttpServer* s, const char* host, int port, int* bound, MlcHttpError* error) {
  if (port == 0) {
    *bound = s->http->bind_to_any_port(host);
    if (*bound > 0) return 1;
    SetText(error, "cannot bind to any port on this address");
    return 0;
  }
  if (s->http->bind_to_port(host, port)) {
    *bound = port;
    return 1;
  }
  SetText(error, "cannot bind (address in use or not available)");
  return 0;
}

void Run(MlcHttpServer* s) { s->http->listen_after_bind(); }
void Stop(MlcHttpServer* s) { s->http->stop(); }
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

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(http, MlcHttpBackend) {
  static const MlcHttpBackend backend{MLC_HTTP_BACKEND_ABI, &Create, &Bind, &Run, &Stop, &Destroy,
                                      &Status, &HasBody, &SetStatus, &SetHeader, &SetContent,
                                      &SetStream, &SinkWrite, &SinkWritable, &SinkDone};
  return &backend;
}
