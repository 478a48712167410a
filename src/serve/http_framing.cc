// The request framing parser (http_framing.h): a byte-at-a-time state machine over lines and
// body bytes, each limit checked as the bytes arrive so that nothing over a limit is buffered.
#include "serve/http_framing.h"

#include "base/ascii.h"

#include <algorithm>

namespace mlc::serve {
namespace {

constexpr size_t kMaxChunkLine = 1024;  // a chunk's size line with its extensions


// RFC 9110 tchar: the characters of methods, header names and transfer codings.
bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value lists this token.
bool ListHas(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (EqualsIgnoreCase(Trim(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

// Shown in messages: printable ASCII, at most 64 bytes.
std::string Shown(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 64)) out += c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?';
  if (s.size() > 64) out += "...";
  return out;
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return AsciiLower(x) == AsciiLower(y); });
}

const char* HttpReason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

const std::string* HttpRequestHead::Find(std::string_view name) const {
  for (const HttpHeader& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return &h.value;
  }
  return nullptr;
}

size_t HttpRequestHead::Count(std::string_view name) const {
  return static_cast<size_t>(std::count_if(headers.begin(), headers.end(),
                                           [&](const HttpHeader& h) { return EqualsIgnoreCase(h.name, name); }));
}

void HttpRequestParser::Reset() {
  phase_ = Phase::kRequestLine;
  head_ = HttpRequestHead();
  body_.clear();
  error_ = HttpFramingError();
  line_.clear();
  line_cr_ = false;
  line_start_ = offset_ = header_bytes_ = wire_body_ = left_ = 0;
}

HttpRequestParser::Status HttpRequestParser::Fail(int status, std::string message, uint64_t offset) {
  phase_ = Phase::kError;
  error_ = HttpFramingError{status, offset, std::move(message)};
  line_.clear();
  return Status::kError;
}

bool HttpRequestParser::CountWire(uint64_t n) {
  wire_body_ += n;
  return wire_body_ <= limits_.max_body_bytes;
}

HttpRequestParser::Step HttpRequestParser::Feed(std::string_view in) {
  size_t i = 0;
  auto step = [&](Status s) { return Step{s, i}; };
  while (true) {
    if (phase_ == Phase::kError) return step(Status::kError);
    if (phase_ == Phase::kDone) return step(Status::kMessage);
    if (phase_ == Phase::kBody && left_ == 0) {
      phase_ = Phase::kDone;
      continue;
    }
    if (i == in.size()) return step(Status::kMore);
    if (phase_ == Phase::kBody || phase_ == Phase::kChunkData) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left_, in.size() - i));
      body_.append(in.data() + i, n);
      i += n;
      offset_ += n;
      left_ -= n;
      if (phase_ == Phase::kChunkData && left_ == 0) phase_ = Phase::kChunkEnd;
      continue;
    }
    const char c = in[i++];
    ++offset_;
    // Line limits, checked before the byte is kept.
    switch (phase_) {
      case Phase::kRequestLine:
        if (offset_ > limits_.max_request_line + 2) {
          return step(Fail(414, "the request line is longer than " + std::to_string(limits_.max_request_line) +
                                    " bytes", line_start_));
        }
        break;
      case Phase::kHeaders:
        if (++header_bytes_ > limits_.max_header_bytes) {
          return step(Fail(431, "the header block is larger than " + std::to_string(limits_.max_header_bytes) +
                                    " bytes"));
        }
        break;
      case Phase::kChunkSize:
      case Phase::kChunkEnd:
      case Phase::kTrailers:
        if (!CountWire(1)) {
          return step(Fail(413, "the chunked body is larger than " + std::to_string(limits_.max_body_bytes) +
                                    " bytes on the wire"));
        }
        if (phase_ == Phase::kChunkSize && line_.size() >= kMaxChunkLine) {
          return step(Fail(400, "a chunk size line is longer than " + std::to_string(kMaxChunkLine) + " bytes",
                           line_start_));
        }
        break;
      default:
        break;
    }
    if (phase_ == Phase::kChunkEnd) {  // CR LF (or LF) after a chunk's data
      if (c == '\r' && !line_cr_) {
        line_cr_ = true;
        continue;
      }
      if (c != '\n') return step(Fail(400, "expected CR LF after a chunk's data", offset_ - 1));
      line_cr_ = false;
      line_start_ = offset_;
      phase_ = Phase::kChunkSize;
      continue;
    }
    if (!TakeLineByte(c)) {
      if (phase_ == Phase::kError) return step(Status::kError);
      continue;
    }
    Status s = Status::kMore;
    switch (phase_) {
      case Phase::kRequestLine: s = EndRequestLine(); break;
      case Phase::kHeaders: s = EndHeaderLine(); break;
      case Phase::kChunkSize: s = EndChunkSize(); break;
      case Phase::kTrailers: s = EndTrailerLine(); break;
      default: break;
    }
    line_.clear();
    line_start_ = offset_;
    if (s == Status::kError) return step(s);
    if (s == Status::kHead) return step(s);
  }
}

bool HttpRequestParser::TakeLineByte(char c) {
  if (c == '\n') {
    line_cr_ = false;
    return true;
  }
  if (line_cr_) {  // a CR not followed by LF
    Fail(400, "a bare CR inside a line", offset_ - 2);
    return false;
  }
  if (c == '\r') {
    line_cr_ = true;
    return false;
  }
  line_ += c;
  return false;
}

HttpRequestParser::Status HttpRequestParser::EndRequestLine() {
  if (line_.empty()) return Status::kMore;  // empty lines before a request are ignored
  std::string_view line = line_;
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Fail(400, "expected a request line METHOD SP TARGET SP HTTP-VERSION, got \"" + Shown(line) + "\"",
                line_start_);
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "the method is not a token", line_start_);
  if (target.empty() || target.front() != '/') {
    return Fail(400, "expected a request target starting with '/'", line_start_ + sp1 + 1);
  }
  for (unsigned char c : target) {
    if (c <= 0x20 || c == 0x7f) return Fail(400, "a control character in the request target", line_start_ + sp1 + 1);
  }
  if (version == "HTTP/1.1" || version == "HTTP/1.0") {
    head_.minor_version = version.back() - '0';
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[6] == '.') {
    return Fail(505, "HTTP version " + Shown(version.substr(5)) + " is not supported (1.0 and 1.1 are)",
                line_start_ + sp2 + 1);
  } else {
    return Fail(400, "expected HTTP/1.1 or HTTP/1.0 at the end of the request line", line_start_ + sp2 + 1);
  }
  head_.method = std::string(method);
  head_.target = std::string(target);
  phase_ = Phase::kHeaders;
  return Status::kMore;
}

HttpRequestParser::Status HttpRequestParser::EndHeaderLine() {
  if (line_.empty()) return EndHead();
  if (line_.front() == ' ' || line_.front() == '\t') {
    return Fail(400, "obsolete header line folding", line_start_);
  }
  const size_t colon = line_.find(':');
  std::string_view name = std::string_view(line_).substr(0, colon == std::string::npos ? line_.size() : colon);
  if (colon == std::string::npos || !IsToken(name)) {
    return Fail(400, "expected a header NAME: value, got \"" + Shown(line_) + "\"", line_start_);
  }
  std::string_view value = Trim(std::string_view(line_).substr(colon + 1));
  for (unsigned char c : value) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return Fail(400, "a control character in header " + std::string(name), line_start_);
    }
  }
  if (head_.headers.size() == limits_.max_headers) {
    return Fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields", line_start_);
  }
  head_.headers.push_back(HttpHeader{std::string(name), std::string(value)});
  return Status::kMore;
}

HttpRequestParser::Status HttpRequestParser::EndHead() {
  HttpRequestHead& h = head_;
  const size_t lengths = h.Count("Content-Length");
  const size_t codings = h.Count("Transfer-Encoding");
  if (lengths > 1) {
    bool same = true;
    for (const HttpHeader& x : h.headers) {
      if (EqualsIgnoreCase(x.name, "Content-Length")) same = same && x.value == *h.Find("Content-Length");
    }
    return Fail(400, same ? "duplicate Content-Length headers" : "conflicting Content-Length headers");
  }
  if (codings > 1) return Fail(400, "duplicate Transfer-Encoding headers");
  if (lengths && codings) return Fail(400, "both Content-Length and Transfer-Encoding");
  if (h.Count("Host") > 1) return Fail(400, "duplicate Host headers");
  if (h.minor_version == 1 && !h.Find("Host")) return Fail(400, "no Host header (HTTP/1.1 requires one)");
  for (const HttpHeader& x : h.headers) {
    if (EqualsIgnoreCase(x.name, "Content-Encoding") && !EqualsIgnoreCase(x.value, "identity")) {
      return Fail(415, "Content-Encoding " + Shown(x.value) + " is refused: send the body uncompressed");
    }
  }
  if (const std::string* te = h.Find("Transfer-Encoding")) {
    if (!EqualsIgnoreCase(*te, "chunked")) {
      return Fail(501, "Transfer-Encoding " + Shown(*te) + " is not supported (only chunked)");
    }
    if (h.minor_version == 0) return Fail(400, "Transfer-Encoding in an HTTP/1.0 request");
    h.chunked = true;
  }
  if (const std::string* cl = h.Find("Content-Length")) {
    if (cl->empty() || cl->find_first_not_of("0123456789") != std::string::npos) {
      return Fail(400, "Content-Length \"" + Shown(*cl) + "\" is not a number of bytes");
    }
    uint64_t n = 0;
    for (char c : *cl) {
      const uint64_t d = static_cast<uint64_t>(c - '0');
      if (d > limits_.max_body_bytes || n > (limits_.max_body_bytes - d) / 10) {
        return Fail(413, "Content-Length " + Shown(*cl) + " is over the limit of " +
                             std::to_string(limits_.max_body_bytes) + " bytes");
      }
      n = n * 10 + d;
    }
    h.content_length = n;
  }
  if (const std::string* expect = h.Find("Expect")) {
    if (!EqualsIgnoreCase(*expect, "100-continue")) return Fail(417, "Expect " + Shown(*expect) + " is not supported");
    h.expect_continue = true;
  }
  const std::string* connection = h.Find("Connection");
  h.keep_alive = h.minor_version == 1 ? !(connection && ListHas(*connection, "close"))
                                      : connection && ListHas(*connection, "keep-alive");
  left_ = h.content_length;
  phase_ = h.chunked ? Phase::kChunkSize : Phase::kBody;
  return Status::kHead;
}

HttpRequestParser::Status HttpRequestParser::EndChunkSize() {
  std::string_view line = line_;
  std::string_view digits = Trim(line.substr(0, line.find(';')));
  if (digits.empty() || digits.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) {
    return Fail(400, "expected a chunk size in hexadecimal, got \"" + Shown(line) + "\"", line_start_);
  }
  uint64_t size = 0;
  for (char c : digits) {
    const uint64_t d = static_cast<uint64_t>(HexDigitValue(c));
    if (size > (limits_.max_body_bytes >> 4)) {
      return Fail(413, "a chunk is larger than the limit of " + std::to_string(limits_.max_body_bytes) + " bytes",
                  line_start_);
    }
    size = size * 16 + d;
  }
  if (size == 0) {
    phase_ = Phase::kTrailers;
    return Status::kMore;
  }
  // The chunk's data and its CR LF must fit: refused before any of it arrives.
  if (wire_body_ + size + 2 > limits_.max_body_bytes) {
    return Fail(413, "the chunked body is larger than " + std::to_string(limits_.max_body_bytes) +
                         " bytes on the wire", line_start_);
  }
  wire_body_ += size;
  left_ = size;
  phase_ = Phase::kChunkData;
  return Status::kMore;
}

HttpRequestParser::Status HttpRequestParser::EndTrailerLine() {
  if (line_.empty()) {
    phase_ = Phase::kDone;
    return Status::kMore;
  }
  const size_t colon = line_.find(':');
  if (colon == std::string::npos || !IsToken(std::string_view(line_).substr(0, colon))) {
    return Fail(400, "expected a trailer NAME: value, got \"" + Shown(line_) + "\"", line_start_);
  }
  return Status::kMore;  // trailers are read and dropped
}

}  // namespace mlc::serve
