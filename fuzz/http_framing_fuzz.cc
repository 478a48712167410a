// libFuzzer target: arbitrary bytes as what a client writes on a connection, through the server's
// framing parser (serve/http_framing.h) with small limits chosen by the first byte, request after
// request (pipelining), fed whole and again in pieces whose size the second byte chooses, and each
// head through the admission checks (serve/http_admission.h), with and without API keys. Nothing may crash; both feedings
// must read the same requests and the same refusal; no body, header list or line may pass its
// limit; a refusal has a status the server answers with and a message. The seed corpus and the
// dictionary cover compressed, chunked and duplicate-header framing.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_admission.h"
#include "serve/http_framing.h"

namespace {

using mlc::serve::HttpRequestParser;

// What one feeding read: each request's method, target and body, then the refusal's status.
struct Reading {
  std::vector<std::string> requests;
  int refusal = 0;
  bool operator==(const Reading&) const = default;
};

void CheckRefusal(const mlc::serve::HttpFramingError& e) {
  static const int kStatuses[] = {400, 413, 414, 415, 417, 431, 501, 505};
  if (std::find(std::begin(kStatuses), std::end(kStatuses), e.status) == std::end(kStatuses)) std::abort();
  if (e.message.empty()) std::abort();
}

Reading Read(std::string_view bytes, const mlc::serve::HttpLimits& limits, size_t piece,
             const mlc::serve::HostPolicy& hosts) {
  HttpRequestParser p(limits);
  Reading out;
  std::string pending;
  size_t next = 0;
  for (;;) {
    const HttpRequestParser::Step step = p.Feed(pending);
    if (step.taken > pending.size()) std::abort();
    pending.erase(0, step.taken);
    if (p.body().size() > limits.max_body_bytes) std::abort();
    switch (step.status) {
      case HttpRequestParser::Status::kHead: {
        const auto& head = p.head();
        if (head.headers.size() > limits.max_headers || head.target.empty() || head.target[0] != '/') std::abort();
        if (!head.chunked && head.content_length > limits.max_body_bytes) std::abort();
        if (auto refusal = mlc::serve::Admit(head, hosts); refusal && refusal->message.empty()) std::abort();
        static const mlc::serve::ApiKeyPolicy keys({"sk-fuzz", "k"}, {"/health", "/"});
        if (auto refusal = mlc::serve::Admit(head, hosts, keys)) {
          if (refusal->message.empty() || (refusal->status == 401 && !keys.Needs(head.target))) std::abort();
        }
        continue;
      }
      case HttpRequestParser::Status::kMessage:
        out.requests.push_back(p.head().method + " " + p.head().target + " " + p.body());
        p.Reset();
        continue;
      case HttpRequestParser::Status::kError:
        CheckRefusal(p.error());
        out.refusal = p.error().status;
        return out;
      case HttpRequestParser::Status::kMore:
        break;
    }
    if (next == bytes.size()) return out;
    const size_t n = std::min(piece, bytes.size() - next);
    pending.append(bytes.substr(next, n));
    next += n;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  mlc::serve::HttpLimits limits;
  limits.max_request_line = 16 + (data[0] & 0x3f);
  limits.max_header_bytes = 64 + 16 * (data[0] >> 6);
  limits.max_headers = 1 + (data[1] & 7);
  limits.max_body_bytes = 8u << (data[1] >> 6);
  const size_t piece = 1 + ((data[1] >> 3) & 7);
  static const mlc::serve::HostPolicy hosts(mlc::serve::HostPolicy::DefaultNames("127.0.0.1", {"a.example"}));
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (Read(bytes, limits, bytes.size() + 1, hosts) != Read(bytes, limits, piece, hosts)) std::abort();
  return 0;
}
