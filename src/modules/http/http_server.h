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

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(int write_timeout_s) : write_timeout_s_(write_timeout_s) {}

  // Answers one request on c; false when the connection must close afterwards.
  bool Answer(WorkerConnection& c, const HttpRequestHead& head, std::string& body);

 private:
  int write_timeout_s_;
};

// The connection whose request this thread is answering (nullptr outside Answer).
WorkerConnection* CurrentConnection();

}  // namespace mlc::serve
