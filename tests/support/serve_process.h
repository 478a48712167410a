// `mlc-manifest serve` as a child process for the tests (serve_test, serve_hostile_test): started
// on a free loopback port, its memory read from /proc, stopped with SIGTERM (or killed); and the
// raw-socket client the tests talk to it with (requests written by hand, so that framing can be
// malformed on purpose), with GET /metrics read by the Prometheus client's parser.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/json.h"
#include "support/test_util.h"

namespace mlc::test {

// A server process on a free loopback port (the port it prints on stderr).
class ServerProcess {
 public:
  explicit ServerProcess(const std::string& dir, std::vector<std::string> extra = {});
  // Several package folders side by side (serve DIR DIR ...).
  ServerProcess(const std::vector<std::string>& dirs, std::vector<std::string> extra);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return ReadText(log_); }
  // SIGTERM, then the exit status.
  int Stop();
  // Resident memory now (VmRSS) and at its peak (VmHWM), in KiB; -1 when unknown.
  int64_t RssKb() const { return StatusKb("VmRSS:"); }
  int64_t PeakRssKb() const { return StatusKb("VmHWM:"); }

 private:
  int64_t StatusKb(const std::string& field) const;

  TempDir log_dir_;
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool stopped_ = false;
};

// A connected loopback socket (receives time out after recv_timeout_s), or -1.
int Connect(int port, int recv_timeout_s = 60);
bool SendAll(int fd, std::string_view data);
// Reads until the peer closes, an error or the receive timeout.
std::string ReadAll(int fd);

struct HttpReply {
  int status = 0;
  std::string head;  // the status line and header lines, each ending in CRLF
  std::string body;  // raw (chunked transfer left as sent)
};
// The status and body of a raw response ("HTTP/1.1 NNN ..."); status 0 when there is none.
HttpReply ParseReply(const std::string& raw);
// One request on its own connection (Host 127.0.0.1, Connection: close; a POST's body as JSON
// unless `headers` gives a Content-Type; `headers`: more header lines, each ending in CRLF).
HttpReply Http(int port, const std::string& method, const std::string& path, const std::string& body = "",
               const std::string& headers = "");
Json BodyJson(const HttpReply& r);
// The error object's message, "" when the body is not one.
std::string ErrorMessage(const HttpReply& r);

// GET /metrics parsed by the official Prometheus client's parser (Debian's python3-prometheus-client
// under /usr/bin/python3): {family: {"type", "samples": [{"name", "labels", "value"}]}}; null when
// the parser refuses the text.
Json ScrapeMetrics(int port);
// The value of one sample of a family (labels: one name and value, or none); NaN when absent.
double Sample(const Json& families, const std::string& family, const std::string& name,
              const std::string& label = "", const std::string& value = "");

}  // namespace mlc::test
