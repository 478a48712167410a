// The connection loop of HttpServer (see http_server.h): a socket stream with a read buffer whose
// reads fail once the request being read passes its deadline, and the keep-alive loop that hands
// each request to httplib's process_request.
#include "modules/http/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace mlc::serve {
namespace {

using Clock = std::chrono::steady_clock;

int64_t MillisUntil(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
}

// poll() for one event, retried on EINTR; > 0 when ready.
int PollFor(int fd, short events, int64_t timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int r = ::poll(&p, 1, static_cast<int>(std::clamp<int64_t>(timeout_ms, 0, 1 << 30)));
    if (r >= 0 || errno != EINTR) return r;
  }
}

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

// One connection's socket as an httplib stream. Reads wait at most the idle timeout for bytes
// and fail past the request's deadline; writes wait at most the write timeout.
class DeadlineStream : public httplib::Stream {
 public:
  DeadlineStream(int sock, int64_t idle_ms, int64_t write_ms)
      : sock_(sock), idle_ms_(idle_ms), write_ms_(write_ms) {}

  void StartRequest(std::chrono::seconds limit) { deadline_ = Clock::now() + limit; }
  // Bytes wait (buffered or on the socket) within timeout_ms, whatever the deadline.
  bool WaitReadable(int64_t timeout_ms) const {
    return begin_ < end_ || PollFor(sock_, POLLIN, timeout_ms) > 0;
  }

  bool is_readable() const override {
    if (begin_ < end_) return true;
    int64_t wait = std::min(idle_ms_, MillisUntil(deadline_));
    return wait > 0 && PollFor(sock_, POLLIN, wait) > 0 && Clock::now() < deadline_;
  }
  bool is_writable() const override { return PollFor(sock_, POLLOUT, write_ms_) > 0; }

  ssize_t read(char* ptr, size_t size) override {
    if (begin_ == end_) {
      if (!is_readable()) return -1;
      if (size >= sizeof(buffer_)) return Receive(ptr, size);  // large reads skip the buffer
      ssize_t n = Receive(buffer_, sizeof(buffer_));
      if (n <= 0) return n;
      begin_ = 0;
      end_ = static_cast<size_t>(n);
    }
    size_t take = std::min(size, end_ - begin_);
    std::copy(buffer_ + begin_, buffer_ + begin_ + take, ptr);
    begin_ += take;
    return static_cast<ssize_t>(take);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (!is_writable()) return -1;
    ssize_t n;
    do {
      n = ::send(sock_, ptr, size, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getpeername(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) Address(addr, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(sock_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) Address(addr, ip, port);
  }
  socket_t socket() const override { return sock_; }

 private:
  ssize_t Receive(char* ptr, size_t size) {
    ssize_t n;
    do {
      n = ::recv(sock_, ptr, size, 0);
    } while (n < 0 && errno == EINTR);
    return n;
  }

  int sock_;
  int64_t idle_ms_;
  int64_t write_ms_;
  Clock::time_point deadline_ = Clock::now();
  char buffer_[4096];
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace

bool HttpServer::process_and_close_socket(socket_t sock) {
  const int64_t idle_ms = read_timeout_sec_ * 1000 + read_timeout_usec_ / 1000;
  const int64_t write_ms = write_timeout_sec_ * 1000 + write_timeout_usec_ / 1000;
  DeadlineStream stream(sock, idle_ms, write_ms);
  bool ok = false;
  for (size_t left = keep_alive_max_count_; left > 0; --left) {
    // Waits for the next request's first byte (the keep-alive timeout), in slices so that a
    // stopping server is noticed.
    const auto idle_end = Clock::now() + std::chrono::seconds(keep_alive_timeout_sec_);
    bool ready = false;
    while (!ready && svr_sock_ != INVALID_SOCKET && MillisUntil(idle_end) > 0) {
      ready = stream.WaitReadable(100);
    }
    if (!ready) break;
    stream.StartRequest(std::chrono::seconds(read_limit_s_));
    bool closed = false;
    ok = process_request(stream, left == 1, closed, nullptr);
    if (!ok || closed) break;
  }
  ::shutdown(sock, SHUT_RDWR);
  ::close(sock);
  return ok;
}

}  // namespace mlc::serve
