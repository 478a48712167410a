// The HTTP server lives in a module of its own (libmlc_manifest_http.so, src/modules/http/: our
// event loop and framing limits in front of cpp-httplib's routing and responses): cpp-httplib
// brings OpenSSL, brotli and zlib, whose loading and start-up cost every command about half of
// its start-up time while only `serve` needs them. This is the table the module
// exports -- plain C: opaque handles, the routes' handler and streamed bodies as callbacks with a
// context, error text in caller-provided buffers -- and the loader the server uses to reach it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/module_loader.h"

extern "C" {

// Bumped whenever the table or a struct it passes changes.
enum { MLC_HTTP_BACKEND_ABI = 4 };

typedef struct MlcHttpError {
  char message[512];
} MlcHttpError;

typedef struct MlcHttpServer MlcHttpServer;
typedef struct MlcHttpResponse MlcHttpResponse;
typedef struct MlcHttpSink MlcHttpSink;
typedef struct MlcHttpConnection MlcHttpConnection;

// One route: a method ("GET", "POST") and an exact path.
typedef struct MlcHttpRoute {
  const char* method;
  const char* path;
} MlcHttpRoute;

// A request as the handler sees it (valid during the call).
typedef struct MlcHttpRequest {
  int route;  // index into the routes given to create
  const char* body;
  size_t body_size;
  MlcHttpConnection* connection;  // valid during the call (and a stream's provide calls)
  const char* content_type;       // the request's Content-Type ("" when absent)
} MlcHttpRequest;

// What the server calls, from its worker threads, all at once. handle answers a routed
// request; error_body fills the body of an answer the server gives itself (status: 404 no route,
// 4xx for a request refused before it was read whole (401: no API key or a wrong one), with a
// message saying why, else NULL;
// internal: 1 when a handler failed, with status 500).
typedef struct MlcHttpHandler {
  void* context;
  void (*handle)(void* context, const MlcHttpRequest* request, MlcHttpResponse* response);
  void (*error_body)(void* context, int status, int internal, const char* message, MlcHttpResponse* response);
} MlcHttpHandler;

// A streamed (chunked) body: provide is called until it returns 0 (stop: the client went away or
// the stream failed) or calls sink_done; release is called once at the end (success: 1 when the
// stream was written to its end).
typedef struct MlcHttpStream {
  void* context;
  int (*provide)(void* context, MlcHttpSink* sink);
  void (*release)(void* context, int success);
} MlcHttpStream;

typedef struct MlcHttpOptions {
  size_t max_body_bytes;       // on the wire (chunked: sizes included); 413 beyond
  int threads;                 // worker threads (requests answered at once)
  int idle_timeout_s;          // silence between requests; write timeout
  int request_read_timeout_s;  // a request's line, headers and body must arrive within this
  size_t max_request_line;     // 414 beyond
  size_t max_header_bytes;     // 431 beyond
  size_t max_headers;          // 431 beyond
  size_t max_connections;      // open connections; more are answered 503 and closed
  const char* const* allowed_hosts;  // Host / Origin names ("*": any); 403 for others
  size_t allowed_host_count;
  size_t max_buffered_bytes;   // request bodies held at once, all connections together; 503 beyond
  // With any key, a request for a path not in open_paths needs "Authorization: Bearer KEY"
  // (401 otherwise, refused from its head).
  const char* const* api_keys;
  size_t api_key_count;
  const char* const* open_paths;  // exact paths, without a query
  size_t open_path_count;
} MlcHttpOptions;

typedef struct MlcHttpBackend {
  int abi;
  // The routes and the handler must outlive the server.
  MlcHttpServer* (*create)(const MlcHttpOptions* options, const MlcHttpRoute* routes,
                           size_t route_count, const MlcHttpHandler* handler, MlcHttpError* error);
  // port 0: any free port. The bound port in *bound; 1, or 0 when it cannot bind.
  int (*bind)(MlcHttpServer* server, const char* host, int port, int* bound, MlcHttpError* error);
  void (*run)(MlcHttpServer* server);   // serves until stop
  void (*stop)(MlcHttpServer* server);  // from any thread
  void (*destroy)(MlcHttpServer* server);
  // The response of a handler call (or of error_body).
  int (*response_status)(const MlcHttpResponse* response);
  int (*response_has_body)(const MlcHttpResponse* response);
  void (*set_status)(MlcHttpResponse* response, int status);
  void (*set_header)(MlcHttpResponse* response, const char* name, const char* value);
  void (*set_content)(MlcHttpResponse* response, const char* body, size_t size,
                      const char* content_type);
  void (*set_stream)(MlcHttpResponse* response, const char* content_type, MlcHttpStream stream);
  // A stream's sink, during provide: 1 when written / still writable.
  int (*sink_write)(MlcHttpSink* sink, const char* data, size_t size);
  int (*sink_writable)(MlcHttpSink* sink);
  void (*sink_done)(MlcHttpSink* sink);
  // 1 once the client of a request being answered has closed or reset its connection.
  int (*connection_closed)(MlcHttpConnection* connection);
} MlcHttpBackend;

}  // extern "C"

// libmlc_manifest_http.so, $MLC_MANIFEST_HTTP_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcHttpBackend, "http", "the HTTP server module (cpp-httplib)", MLC_HTTP_BACKEND_ABI);
