// The epoll connection loop and its worker threads (event_loop.h).
#include "modules/http/event_loop.h"

#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mlc::serve {
namespace {

constexpr int kSweepMs = 250;
constexpr auto kLinger = std::chrono::seconds(2);  // reading (and dropping) after a refusal
constexpr uint64_t kLingerBytes = 16u << 20;
constexpr size_t kReadBytes = 64 << 10;

// A 401 names the scheme the server wants (RFC 6750).
std::string RefusalText(int status, const std::string& body) {
  return "HTTP/1.1 " + std::to_string(status) + " " + HttpReason(status) +
         (status == 401 ? "\r\nWWW-Authenticate: Bearer" : "") +
         "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// A small write that fits the socket's buffer; what does not fit is dropped.
void SendSmall(int fd, const std::string& text) {
  ssize_t n;
  do {
    n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
}

}  // namespace

bool WorkerConnection::ClientGone() const {
  pollfd p{fd, POLLRDHUP, 0};
  int r;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  return r > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

struct EventLoop::Connection {
  enum class State { kReading, kBusy, kLingering };
  Connection(int f, const HttpLimits& limits) : fd(f), parser(limits) {}
  int fd;
  HttpRequestParser parser;
  std::string pending;  // read, not yet taken by the parser (a pipelined request)
  State state = State::kReading;
  bool in_request = false;  // a byte of the next request has arrived
  Clock::time_point deadline;
  uint64_t dropped = 0;  // bytes read and dropped while lingering
  uint64_t reserved = 0;  // body bytes held against the server's budget (declared or arrived)
};

EventLoop::EventLoop(LoopOptions options, ServeRequest serve, RefusalBody refusal)
    : options_(std::move(options)),
      serve_(std::move(serve)),
      refusal_(std::move(refusal)),
      hosts_(options_.allowed_hosts),
      keys_(options_.api_keys, options_.open_paths) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
}

EventLoop::~EventLoop() {
  for (auto& [fd, c] : connections_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

bool EventLoop::Listen(const std::string& host, int port, int* bound, std::string* error) {
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    *error = std::string("cannot create the event loop: ") + std::strerror(errno);
    return false;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    *error = "cannot resolve " + host + ": " + ::gai_strerror(rc);
    return false;
  }
  *error = "cannot bind (address in use or not available)";
  for (addrinfo* a = found; a && listen_fd_ < 0; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      listen_fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  *bound = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(addr).sin6_port)
                                      : ntohs(reinterpret_cast<sockaddr_in&>(addr).sin_port);
  return true;
}

void EventLoop::Watch(int fd, bool watch) {
  epoll_event e{};
  e.events = EPOLLIN | EPOLLRDHUP;
  e.data.fd = fd;
  ::epoll_ctl(epoll_fd_, watch ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &e);
}

void EventLoop::Close(int fd) {
  if (auto it = connections_.find(fd); it != connections_.end()) Release(*it->second);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  connections_.erase(fd);
}

void EventLoop::Run() {
  if (listen_fd_ < 0) return;
  Watch(listen_fd_, true);
  Watch(wake_fd_, true);
  for (int i = 0; i < std::max(options_.workers, 1); ++i) workers_.emplace_back([this] { WorkerLoop(); });
  std::vector<epoll_event> events(256);
  auto next_sweep = Clock::now();
  while (!stopping_) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepMs);
    for (int i = 0; i < n && !stopping_; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listen_fd_) {
        Accept();
      } else if (fd == wake_fd_) {
        uint64_t count;
        while (::read(wake_fd_, &count, sizeof(count)) > 0) {
        }
        TakeBack();
      } else if (auto it = connections_.find(fd); it != connections_.end()) {
        OnReadable(*it->second);
      }
    }
    if (Clock::now() >= next_sweep) {
      Sweep();
      next_sweep = Clock::now() + std::chrono::milliseconds(kSweepMs);
    }
  }
  ::close(listen_fd_);
  listen_fd_ = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    workers_stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  std::vector<int> open;
  for (auto& [fd, c] : connections_) open.push_back(fd);
  for (int fd : open) Close(fd);
}

void EventLoop::Stop() {
  stopping_ = true;
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!::write(wake_fd_, &one, sizeof(one));
}

void EventLoop::Accept() {
  for (;;) {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        Watch(listen_fd_, false);  // the backlog waits until descriptors are free
        accept_paused_ = true;
      }
      return;
    }
    if (connections_.size() >= options_.max_connections) {
      SendSmall(fd, RefusalText(503, refusal_(503, "this server has " + std::to_string(options_.max_connections) +
                                                        " connections open (serve --max-connections)")));
      ::close(fd);
      continue;
    }
    auto c = std::make_unique<Connection>(fd, options_.limits);
    c->deadline = Clock::now() + std::chrono::seconds(options_.idle_timeout_s);
    Watch(fd, true);
    connections_[fd] = std::move(c);
  }
}

void EventLoop::OnReadable(Connection& c) {
  char buf[kReadBytes];
  ssize_t n;
  do {
    n = ::recv(c.fd, buf, sizeof(buf), 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
  if (n <= 0) {  // the client closed or reset: a partial request has no one to answer
    Close(c.fd);
    return;
  }
  if (c.state == Connection::State::kLingering) {
    c.dropped += static_cast<uint64_t>(n);
    if (c.dropped > kLingerBytes) Close(c.fd);
    return;
  }
  if (!c.in_request) {
    c.in_request = true;
    c.deadline = Clock::now() + std::chrono::seconds(options_.request_read_timeout_s);
  }
  c.pending.append(buf, static_cast<size_t>(n));
  Parse(c);
}

void EventLoop::Parse(Connection& c) {
  for (;;) {
    const HttpRequestParser::Step step = c.parser.Feed(c.pending);
    c.pending.erase(0, step.taken);
    switch (step.status) {
      case HttpRequestParser::Status::kMore:
        // A chunked body is held as it arrives.
        if (c.parser.body().size() > c.reserved) (void)Reserve(c, c.parser.body().size() - c.reserved);
        return;
      case HttpRequestParser::Status::kError: {
        const HttpFramingError& e = c.parser.error();
        Refuse(c, e.status, e.message + " (byte " + std::to_string(e.offset) + " of the request)");
        return;
      }
      case HttpRequestParser::Status::kHead: {
        const HttpRequestHead& head = c.parser.head();
        if (auto refusal = Admit(head, hosts_, keys_)) {
          Refuse(c, refusal->status, refusal->message);
          return;
        }
        if (!head.chunked && head.content_length > 0 && !Reserve(c, head.content_length)) return;
        if (head.expect_continue && (head.chunked || head.content_length > 0)) {
          SendSmall(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
        }
        break;
      }
      case HttpRequestParser::Status::kMessage:
        if (c.parser.body().size() > c.reserved && !Reserve(c, c.parser.body().size() - c.reserved)) return;
        Dispatch(c);
        return;
    }
  }
}

bool EventLoop::Reserve(Connection& c, uint64_t n) {
  if (buffered_ + n > options_.max_buffered_bytes) {
    Refuse(c, 503, "this server holds " + std::to_string(buffered_) + " bytes of request bodies and " +
                       std::to_string(n) + " more would pass its limit of " +
                       std::to_string(options_.max_buffered_bytes) + " (serve --max-buffered-bytes); try again");
    return false;
  }
  buffered_ += n;
  c.reserved += n;
  return true;
}

void EventLoop::Release(Connection& c) {
  buffered_ -= std::min(buffered_, c.reserved);
  c.reserved = 0;
}

void EventLoop::Refuse(Connection& c, int status, const std::string& message) {
  Release(c);
  SendSmall(c.fd, RefusalText(status, refusal_(status, message)));
  ::shutdown(c.fd, SHUT_WR);
  c.state = Connection::State::kLingering;
  c.pending.clear();
  c.parser.Reset();
  c.deadline = Clock::now() + kLinger;
}

void EventLoop::Dispatch(Connection& c) {
  c.state = Connection::State::kBusy;
  Watch(c.fd, false);
  Job job{&c, c.parser.head(), std::move(c.parser.body())};
  c.parser.Reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  work_cv_.notify_one();
}

void EventLoop::TakeBack() {
  std::vector<std::pair<Connection*, bool>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(returned_);
  }
  for (auto [c, keep] : back) {
    Release(*c);  // the worker is done with its body
    if (!keep || stopping_) {
      Close(c->fd);
      continue;
    }
    c->state = Connection::State::kReading;
    c->in_request = !c->pending.empty();
    c->deadline = Clock::now() + std::chrono::seconds(c->in_request ? options_.request_read_timeout_s
                                                                    : options_.idle_timeout_s);
    Watch(c->fd, true);
    if (c->in_request) Parse(*c);
  }
}

void EventLoop::Sweep() {
  if (accept_paused_) {
    accept_paused_ = false;
    Watch(listen_fd_, true);
  }
  const auto now = Clock::now();
  std::vector<int> expired;
  for (auto& [fd, c] : connections_) {
    if (c->state != Connection::State::kBusy && now >= c->deadline) expired.push_back(fd);
  }
  for (int fd : expired) Close(fd);  // idle, too slow to send its request, or done lingering
}

void EventLoop::WorkerLoop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return workers_stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    WorkerConnection wc{job.connection->fd};
    bool keep = false;
    try {
      keep = serve_(wc, job.head, job.body) && job.head.keep_alive;
    } catch (...) {
      keep = false;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      returned_.emplace_back(job.connection, keep);
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof(one));
  }
}

}  // namespace mlc::serve
