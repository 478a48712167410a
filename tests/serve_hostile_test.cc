// Issue 45's reproductions against a real `serve` process on loopback, each ending in a fast,
// bounded refusal while the server keeps serving: a gzip bomb and a brotli body (415, never
// inflated), a chunked body far over --max-body-bytes (413, peak RSS under 300 MB), 60 MB of
// headers (431, RSS bounded), a declared over-limit Content-Length (413 before any body byte is
// sent), conflicting Content-Length headers (400), a foreign Host or Origin (403), a text/plain
// POST (415), the request line and header count limits, 1,000 idle connections while /health
// answers, the connection limit (503), and a client that leaves during a long prefill (its request
// cancelled, counted `cancelled` in /metrics), and the bodies held across connections
// (--max-buffered-bytes) and a body's JSON values bounded. Timeouts here only bound the test; nothing asserts
// on time.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"
#include "support/sanitizer.h"
#include "support/serve_process.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Connect;
using test::ServerProcess;

constexpr int64_t kRssBoundKb = 300 << 10;

// The reference package, a small one unless `slow` (wide enough that a long prompt takes many
// seconds to prefill).
struct Package {
  test::TempDir dir;
  explicit Package(bool slow = false) {
    ReferenceModelOptions o;
    o.seed = 5;
    if (slow) {
      o.hidden_size = 256;
      o.intermediate_size = 1024;
      o.num_layers = 8;
      o.context_window_size = 16384;
      o.prefill_chunk_size = 64;
    }
    auto w = WriteReferenceModel(dir.path(), o);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  }
};

std::string ChatBody(const std::string& text, int max_tokens) {
  OrderedJson j = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", text}}})},
                   {"max_tokens", max_tokens},
                   {"temperature", 0}};
  return j.dump();
}

// The response to bytes written on a fresh connection (read until the server closes or the bound).
test::HttpReply Exchange(int port, const std::string& bytes, int bound_s = 30) {
  int fd = Connect(port, bound_s);
  if (fd < 0) return {};
  test::SendAll(fd, bytes);
  test::HttpReply r = test::ParseReply(test::ReadAll(fd));
  close(fd);
  return r;
}

// Writes `head` and then `piece` again and again (at most `total` bytes) on one connection from
// another thread, while this one waits for the response: the server must answer before the
// sender is done, and the sender stops once the server has answered or closed.
test::HttpReply FloodAndAnswer(int port, const std::string& head, const std::string& piece, size_t total) {
  int fd = Connect(port, 60);
  if (fd < 0) return {};
  std::atomic<bool> answered{false};
  std::thread sender([&] {
    if (!test::SendAll(fd, head)) return;
    for (size_t sent = 0; sent < total && !answered; sent += piece.size()) {
      if (!test::SendAll(fd, piece)) return;  // closed by the server
    }
  });
  std::string raw;
  char buf[4096];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    raw.append(buf, static_cast<size_t>(n));
    if (raw.find("\r\n\r\n") != std::string::npos) break;
  }
  answered = true;
  shutdown(fd, SHUT_RDWR);
  sender.join();
  close(fd);
  return test::ParseReply(raw);
}

void ExpectStillServing(const ServerProcess& server) {
  test::HttpReply health = test::Http(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200) << health.body;
}

const std::string kPost =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";

TEST(ServeHostile, CompressedBodiesAre415AndNeverInflated) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  // 256 MB of zeros gzipped (about 250 KB): inflating it would cost the server 256 MB or more.
  auto bomb = test::RunProgram({"sh", "-c", "head -c 268435456 /dev/zero | gzip -9"});
  ASSERT_EQ(bomb.exit_code, 0) << bomb.err;
  ASSERT_LT(bomb.out.size(), 1u << 20);
  for (int i = 0; i < 3; ++i) {
    test::HttpReply r = Exchange(server.port(), kPost + "Content-Encoding: gzip\r\nContent-Length: " +
                                                    std::to_string(bomb.out.size()) + "\r\n\r\n" + bomb.out);
    EXPECT_EQ(r.status, 415) << r.body;
    EXPECT_NE(test::ErrorMessage(r).find("Content-Encoding gzip"), std::string::npos) << r.body;
  }
  test::HttpReply br = Exchange(server.port(), kPost + "Content-Encoding: br\r\nContent-Length: 4\r\n\r\n\x1b\xff\xff\x0f");
  EXPECT_EQ(br.status, 415) << br.body;
  EXPECT_LT(server.PeakRssKb(), kRssBoundKb);
  ExpectStillServing(server);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, ChunkedBodyOverTheLimitIs413AsItArrives) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-body-bytes", "1MiB"});
  ASSERT_GT(server.port(), 0) << server.log();
  // 600 MB offered in 1 MiB chunks under a 1 MiB limit.
  const std::string chunk = "100000\r\n" + std::string(1 << 20, '{') + "\r\n";
  test::HttpReply r = FloodAndAnswer(server.port(), kPost + "Transfer-Encoding: chunked\r\n\r\n", chunk, 600u << 20);
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_NE(test::ErrorMessage(r).find("chunked body"), std::string::npos) << r.body;
  EXPECT_LT(server.PeakRssKb(), kRssBoundKb);
  ExpectStillServing(server);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, SixtyMegabytesOfHeadersAre431) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string header = "X-Pad: " + std::string(1000, 'p') + "\r\n";
  test::HttpReply r =
      FloodAndAnswer(server.port(), "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n", header, 60u << 20);
  EXPECT_EQ(r.status, 431) << r.body;
  EXPECT_LT(server.PeakRssKb(), kRssBoundKb);
  // The header count has its own limit.
  std::string many = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (int i = 0; i < 20; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  ServerProcess strict(p.dir.path(), {"--max-headers", "10", "--max-request-line", "100"});
  ASSERT_GT(strict.port(), 0) << strict.log();
  EXPECT_EQ(Exchange(strict.port(), many + "\r\n").status, 431);
  EXPECT_EQ(Exchange(strict.port(), "GET /" + std::string(200, 'a') + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status,
            414);
  ExpectStillServing(server);
  ExpectStillServing(strict);
  EXPECT_EQ(strict.Stop(), 0);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, DeclaredOverLimitContentLengthIs413BeforeTheBody) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-body-bytes", "1MiB"});
  ASSERT_GT(server.port(), 0) << server.log();
  // Only the head is sent: the answer must come without the body (the read bounds the wait).
  for (const std::string extra : {"", "Expect: 100-continue\r\n"}) {
    int fd = Connect(server.port(), 30);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(test::SendAll(fd, kPost + extra + "Content-Length: 1073741824\r\n\r\n"));
    test::HttpReply r = test::ParseReply(test::ReadAll(fd));
    close(fd);
    EXPECT_EQ(r.status, 413) << extra << r.body;
    EXPECT_NE(test::ErrorMessage(r).find("Content-Length 1073741824"), std::string::npos) << r.body;
  }
  ExpectStillServing(server);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, AmbiguousFramingIs400) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string body = ChatBody("hi", 2);
  test::HttpReply conflicting = Exchange(server.port(), kPost + "Content-Length: " + std::to_string(body.size()) +
                                                            "\r\nContent-Length: 2\r\n\r\n" + body);
  EXPECT_EQ(conflicting.status, 400);
  EXPECT_NE(test::ErrorMessage(conflicting).find("conflicting Content-Length"), std::string::npos)
      << conflicting.body;
  test::HttpReply both = Exchange(server.port(), kPost + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}");
  EXPECT_EQ(both.status, 400);
  EXPECT_EQ(Exchange(server.port(), kPost + "Transfer-Encoding: gzip\r\n\r\n").status, 501);
  // A well-framed chunked request is served.
  std::string hex = "0123456789abcdef";
  std::string size_hex;
  for (size_t n = body.size(); n > 0; n /= 16) size_hex.insert(size_hex.begin(), hex[n % 16]);
  test::HttpReply whole = Exchange(server.port(), kPost + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" +
                                                      size_hex + "\r\n" + body + "\r\n0\r\n\r\n");
  EXPECT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, ForeignHostOrOriginIs403AndNonJsonPostsAre415) {
  Package p;
  ServerProcess server(p.dir.path(), {"--allowed-host", "model.example"});
  ASSERT_GT(server.port(), 0) << server.log();
  auto get = [&](const std::string& headers) {
    return Exchange(server.port(), "GET /v1/models HTTP/1.1\r\n" + headers + "Connection: close\r\n\r\n");
  };
  EXPECT_EQ(get("Host: localhost:8000\r\n").status, 200);
  EXPECT_EQ(get("Host: model.example\r\n").status, 200);
  test::HttpReply rebound = get("Host: attacker.example:8000\r\n");
  EXPECT_EQ(rebound.status, 403);
  EXPECT_NE(test::ErrorMessage(rebound).find("--allowed-host"), std::string::npos) << rebound.body;
  EXPECT_EQ(get("Host: 127.0.0.1\r\nOrigin: http://attacker.example\r\n").status, 403);
  EXPECT_EQ(get("Host: 127.0.0.1\r\nOrigin: http://model.example:3000\r\n").status, 200);

  const std::string body = ChatBody("hi", 2);
  auto post = [&](const std::string& type) {
    return Exchange(server.port(), "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + type +
                                       "Content-Length: " + std::to_string(body.size()) +
                                       "\r\nConnection: close\r\n\r\n" + body);
  };
  test::HttpReply plain = post("Content-Type: text/plain\r\n");
  EXPECT_EQ(plain.status, 415);
  EXPECT_NE(test::ErrorMessage(plain).find("application/json"), std::string::npos) << plain.body;
  EXPECT_EQ(post("Content-Type: application/x-www-form-urlencoded\r\n").status, 415);
  EXPECT_EQ(post("").status, 415);
  EXPECT_EQ(post("Content-Type: application/json; charset=utf-8\r\n").status, 200);
  EXPECT_EQ(server.Stop(), 0);
}

// Bodies held at once are bounded server-wide: a declared body that would pass
// --max-buffered-bytes beside one still arriving is answered 503 at its head, and accepted once the
// first has gone; a body of a million small values is refused before it is parsed whole.
TEST(ServeHostile, BufferedBodiesAreBoundedAcrossConnections) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-buffered-bytes", "1MiB"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string head = kPost + "Content-Length: 700000\r\n\r\n";
  int first = Connect(server.port(), 30);
  ASSERT_GE(first, 0);
  ASSERT_TRUE(test::SendAll(first, head + std::string(1000, ' ')));
  // The first head is taken before the second arrives: /health answered on its own connection
  // after the first was sent is served by the same loop.
  ExpectStillServing(server);
  test::HttpReply second = Exchange(server.port(), head);
  EXPECT_EQ(second.status, 503) << second.body;
  EXPECT_NE(test::ErrorMessage(second).find("--max-buffered-bytes"), std::string::npos) << second.body;
  close(first);
  const std::string body = ChatBody("hi", 2);
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    status = Exchange(server.port(), kPost + "Connection: close\r\nContent-Length: " +
                                         std::to_string(body.size()) + "\r\n\r\n" + body)
                 .status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(server.Stop(), 0);

  ServerProcess values(p.dir.path());
  ASSERT_GT(values.port(), 0) << values.log();
  std::string many = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"stop\": [";
  for (int i = 0; i < (1 << 20) + 10; ++i) many += i ? ",0" : "0";
  many += "]}";
  test::HttpReply refused = test::Http(values.port(), "POST", "/v1/chat/completions", many);
  EXPECT_EQ(refused.status, 400) << refused.body.substr(0, 300);
  EXPECT_NE(test::ErrorMessage(refused).find("more values than the limit"), std::string::npos)
      << refused.body.substr(0, 300);
  EXPECT_LT(values.PeakRssKb(), kRssBoundKb);
  EXPECT_EQ(values.Stop(), 0);
}

// The test process needs a descriptor per connection too.
void RaiseOwnDescriptorLimit() {
  rlimit r{};
  getrlimit(RLIMIT_NOFILE, &r);
  r.rlim_cur = r.rlim_max;
  setrlimit(RLIMIT_NOFILE, &r);
}

TEST(ServeHostile, ThousandIdleConnectionsDoNotStallHealth) {
  RaiseOwnDescriptorLimit();
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  std::vector<int> idle;
  for (int i = 0; i < 1000; ++i) {
    int fd = Connect(server.port(), 20);
    ASSERT_GE(fd, 0) << "connection " << i;
    // Half say nothing; the others start a request and stop.
    if (i % 2) test::SendAll(fd, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    idle.push_back(fd);
  }
  for (int i = 0; i < 5; ++i) {
    test::HttpReply health = test::Http(server.port(), "GET", "/health");
    EXPECT_EQ(health.status, 200) << health.body;
  }
  test::HttpReply chat = test::Http(server.port(), "POST", "/v1/chat/completions", ChatBody("still here", 3));
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_LT(server.PeakRssKb(), kRssBoundKb);
  for (int fd : idle) close(fd);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeHostile, ConnectionsOverTheLimitAre503) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-connections", "20"});
  ASSERT_GT(server.port(), 0) << server.log();
  std::vector<int> held;
  for (int i = 0; i < 20; ++i) held.push_back(Connect(server.port(), 20));
  test::HttpReply over = test::Http(server.port(), "GET", "/health");
  EXPECT_EQ(over.status, 503) << over.body;
  EXPECT_NE(test::ErrorMessage(over).find("--max-connections"), std::string::npos) << over.body;
  close(held.back());
  held.pop_back();
  // Once the server has seen a connection close, a new one is served.
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    status = test::Http(server.port(), "GET", "/health").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(status, 200);
  for (int fd : held) close(fd);
  EXPECT_EQ(server.Stop(), 0);
}

double Outcome(const Json& metrics, const std::string& outcome) {
  const double v = test::Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", outcome);
  return std::isnan(v) ? 0 : v;
}

// A client that closes its connection while its request is prefilling cancels it, whether it
// was streamed (the response's head already written) or not (nothing written until the end): the
// engine stops between prefill chunks, the request is counted `cancelled`, never `completed`, and
// the server takes the next one.
TEST(ServeHostile, ClientLeavingDuringPrefillIsCancelled) {
  if (test::kSanitized) GTEST_SKIP() << "the long prefill runs in the release build only";
  Package p(true);
  ServerProcess server(p.dir.path(), {"--max-batch-size", "1", "--no-prefix-cache"});
  ASSERT_GT(server.port(), 0) << server.log();
  std::string prompt;  // about 14,000 positions: tens of seconds of prefill on this package
  for (int i = 0; prompt.size() < 20000; ++i) prompt += "word" + std::to_string(i % 97) + " ";
  for (bool stream : {false, true}) {
    OrderedJson request = OrderedJson::parse(ChatBody(prompt, 1));
    request["stream"] = stream;
    const std::string body = request.dump();
    int fd = Connect(server.port(), 30);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(test::SendAll(fd, kPost + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    // Running means admitted: its prefill has started.
    int running = 0;
    for (int i = 0; i < 600 && running == 0; ++i) {
      running = test::BodyJson(test::Http(server.port(), "GET", "/health"))["running"].get<int>();
      if (running == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (running != 1) {
      shutdown(fd, SHUT_WR);
      FAIL() << "never admitted; the answer: " << test::ReadAll(fd) << server.log();
    }
    close(fd);
    const double expected = stream ? 2 : 1;
    double cancelled = 0;
    for (int i = 0; i < 600 && cancelled < expected; ++i) {
      cancelled = Outcome(test::ScrapeMetrics(server.port()), "cancelled");
      if (cancelled < expected) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const Json metrics = test::ScrapeMetrics(server.port());
    EXPECT_EQ(Outcome(metrics, "cancelled"), expected) << "stream " << stream;
    EXPECT_EQ(Outcome(metrics, "completed"), 0) << "stream " << stream;
  }
  test::HttpReply next = test::Http(server.port(), "POST", "/v1/chat/completions", ChatBody("next", 2));
  EXPECT_EQ(next.status, 200) << next.body;
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace mlc
