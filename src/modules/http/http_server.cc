// HttpServer::Answer (http_server.h): the request re-framed in memory for httplib, and a stream
// whose writes go to the socket within the write timeout and stop once the client has gone.
#include "modules/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

namespace mlc::serve {
namespace {

thread_local WorkerConnection* current_connection = nullptr;

void Address(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof(text));
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof(text));
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

// The request as httplib reads it: its line, its headers but the framing ones (the body is whole
// now and never encoded), a Content-Length, the body. Content-Type goes under kContentTypeHeader:
// httplib would read a form body into its own structures, and the routes parse their bodies
// themselves (serve/multipart.cc, bounded and fuzzed).
std::string Reframed(const HttpRequestHead& head, const std::string& body) {
  std::string out = head.method + " " + head.target + " HTTP/1." + std::to_string(head.minor_version) + "\r\n";
  for (const HttpHeader& h : head.headers) {
    if (EqualsIgnoreCase(h.name, "Content-Length") || EqualsIgnoreCase(h.name, "Transfer-Encoding") ||
        EqualsIgnoreCase(h.name, "Content-Encoding") || EqualsIgnoreCase(h.name, "Expect") ||
        EqualsIgnoreCase(h.name, kContentTypeHeader)) {
      continue;
    }
    if (EqualsIgnoreCase(h.name, "Content-Type")) {
      out += std::string(kContentTypeHeader) + ": " + h.value + "\r\n";
      continue;
    }
    out += h.name + ": " + h.value + "\r\n";
  }
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  out += body;
  return out;
}

// Reads the re-framed request; writes to the socket (non-blocking: each write waits for room up
// to the write timeout) while the client is there.
class RequestStream : public httplib::Stream {
 public:
  RequestStream(const WorkerConnection& c, std::string request, int write_timeout_s)
      : c_(c), request_(std::move(request)), write_ms_(write_timeout_s * 1000) {}

  bool is_readable() const override { return read_ < request_.size(); }
  bool is_writable() const override { return !c_.ClientGone() && WaitWritable(); }

  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, request_.size() - read_);
    std::copy_n(request_.data() + read_, n, ptr);
    read_ += n;
    return static_cast<ssize_t>(n);
  }

  ssize_t write(const char* ptr, size_t size) override {
    for (;;) {
      ssize_t n = ::send(c_.fd, ptr, size, MSG_NOSIGNAL);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if ((errno != EAGAIN && errno != EWOULDBLOCK) || !WaitWritable()) return -1;
    }
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) Address(addr, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(c_.fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) Address(addr, ip, port);
  }
  socket_t socket() const override { return c_.fd; }

 private:
  bool WaitWritable() const {
    pollfd p{c_.fd, POLLOUT, 0};
    int r;
    do {
      r = ::poll(&p, 1, write_ms_);
    } while (r < 0 && errno == EINTR);
    return r > 0 && (p.revents & POLLOUT) != 0;
  }

  const WorkerConnection& c_;
  std::string request_;
  size_t read_ = 0;
  int write_ms_;
};

}  // namespace

WorkerConnection* CurrentConnection() { return current_connection; }

bool HttpServer::Answer(WorkerConnection& c, const HttpRequestHead& head, std::string& body) {
  RequestStream stream(c, Reframed(head, body), write_timeout_s_);
  body.clear();
  body.shrink_to_fit();
  current_connection = &c;
  bool closed = false;
  const bool ok = process_request(stream, !head.keep_alive, closed, nullptr);
  current_connection = nullptr;
  return ok && !closed;
}

}  // namespace mlc::serve
