// cpp-httplib's server with a deadline on reading each request. httplib's read timeout bounds
// each wait for bytes, so a client sending one byte a second keeps a connection (and a worker
// thread) forever; here the connection loop is our own and every request's line, headers and
// body must arrive within request_read_timeout_s of its first byte, else the connection is
// closed. Keep-alive, idle and write timeouts are httplib's settings.
#pragma once

#include <httplib.h>

namespace mlc::serve {

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(int request_read_timeout_s) : read_limit_s_(request_read_timeout_s) {}

 private:
  // Called by httplib on a pool thread for each accepted connection.
  bool process_and_close_socket(socket_t sock) override;

  int read_limit_s_;
};

}  // namespace mlc::serve
