// The HTTP module's connection handling: one epoll thread owns the listening socket and every
// connection that is between requests or sending one, reads what arrives without blocking and
// feeds it to the framing parser (serve/http_framing.h), so an idle or trickling connection costs
// a file descriptor and a few hundred bytes, never a thread. Limits act as the bytes arrive: the
// request line, the header block, the body on the wire, the head's admission (Host, Origin, the
// API key, Content-Type: serve/http_admission.h), the request read deadline, the idle timeout and the
// connection count; a refusal is written by the loop itself. Only a complete, in-limit request
// goes to a worker thread, which answers it (cpp-httplib's routing and response writing:
// http_server.h) and gives the connection back for its next request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "serve/http_admission.h"
#include "serve/http_framing.h"

namespace mlc::serve {

struct LoopOptions {
  HttpLimits limits;
  size_t max_connections = 1024;
  size_t max_buffered_bytes = 256u << 20;  // request bodies held at once, all connections together
  int idle_timeout_s = 30;          // silence between requests
  int request_read_timeout_s = 30;  // a request's line, headers and body, from its first byte
  int write_timeout_s = 30;
  int workers = 8;
  std::vector<std::string> allowed_hosts;
  std::vector<std::string> api_keys;    // none: no key needed
  std::vector<std::string> open_paths;  // paths that need no key
};

// A connection handed to a worker: its socket, and whether its client has gone away (closed or
// reset; checked without reading, so a request's own bytes are never taken).
struct WorkerConnection {
  int fd = -1;
  bool ClientGone() const;
};

// Answers one complete request on a worker thread: writes the response to c.fd; false when the
// connection must close afterwards.
using ServeRequest = std::function<bool(WorkerConnection& c, const HttpRequestHead& head, std::string& body)>;
// The JSON body of a refusal the loop writes itself (status, message).
using RefusalBody = std::function<std::string(int status, const std::string& message)>;

class EventLoop {
 public:
  EventLoop(LoopOptions options, ServeRequest serve, RefusalBody refusal);
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Binds host:port (0: any free port) with a SOMAXCONN backlog; the port in *bound.
  bool Listen(const std::string& host, int port, int* bound, std::string* error);
  // Serves until Stop; returns once the workers have finished their requests.
  void Run();
  void Stop();  // from any thread

 private:
  struct Connection;
  using Clock = std::chrono::steady_clock;

  void Accept();
  void OnReadable(Connection& c);
  // Feeds c.pending to the parser: a refusal, a request for a worker, or more to wait for.
  void Parse(Connection& c);
  void Refuse(Connection& c, int status, const std::string& message);
  // Holds n more body bytes for c within max_buffered_bytes; false (c refused with 503) when they
  // would pass it.
  bool Reserve(Connection& c, uint64_t n);
  void Release(Connection& c);
  void Dispatch(Connection& c);
  void TakeBack();  // connections the workers are done with
  void Sweep();     // deadlines
  void Close(int fd);
  void Watch(int fd, bool watch);
  void WorkerLoop();

  LoopOptions options_;
  ServeRequest serve_;
  RefusalBody refusal_;
  HostPolicy hosts_;
  ApiKeyPolicy keys_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: workers giving connections back, Stop
  std::atomic<bool> stopping_{false};
  uint64_t buffered_ = 0;  // body bytes reserved by connections (the loop thread's)
  bool accept_paused_ = false;  // out of file descriptors: accept again at the next sweep
  std::unordered_map<int, std::unique_ptr<Connection>> connections_;  // the loop thread's

  struct Job {
    Connection* connection = nullptr;
    HttpRequestHead head;
    std::string body;
  };
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Job> jobs_;                                // guarded by mu_
  std::vector<std::pair<Connection*, bool>> returned_;  // guarded by mu_: (connection, keep open)
  bool workers_stop_ = false;                           // guarded by mu_
  std::vector<std::thread> workers_;
};

}  // namespace mlc::serve
