// cpp-httplib's server, used for what comes after framing: the event loop (event_loop.h) reads
// and checks a request, and a worker hands the complete request to Answer, which gives httplib a
// stream that reads the request from memory (re-framed: the body whole, with its Content-Length)
// and writes to the connection's socket. httplib routes it, calls the handler and writes the
// response (chunked streams included). While a handler runs, CurrentConnection() names its
// connection, so the handler can see a client that went away.
#pragma once

#include <httplib.h>

#include <string>

#include "modules/http/event_loop.h"

namespace mlc::serve {

// Where the request's Content-Type reaches the routes (httplib never sees a Content-Type).
inline constexpr const char* kContentTypeHeader = "X-Mlc-Content-Type";

class HttpServer : public httplib::Server {
 public:
  // httplib never binds here: its listening socket only tells its streams whether the server is
  // stopping (INVALID_SOCKET: stop), so it holds a placeholder until Stopping.
  explicit HttpServer(int write_timeout_s) : write_timeout_s_(write_timeout_s) { svr_sock_ = 0; }

  // Streams still being written end at their next chunk.
  void Stopping() { svr_sock_ = INVALID_SOCKET; }

  // Answers one request on c; false when the connection must close afterwards.
  bool Answer(WorkerConnection& c, const HttpRequestHead& head, std::string& body);

 private:
  int write_timeout_s_;
};

// The connection whose request this thread is answering (nullptr outside Answer).
WorkerConnection* CurrentConnection();

}  // namespace mlc::serve
