// HTTP/1.1 request framing read incrementally within explicit limits: the request line (414),
// the header block (431 for its bytes or its count), and a Content-Length or chunked body counted
// on the wire as it arrives (413; an over-limit Content-Length is refused as soon as the headers
// end). Framing that could be read two ways is refused (400: duplicate or conflicting
// Content-Length, Content-Length with Transfer-Encoding, duplicate Host), as is a compressed body
// (415: nothing is ever inflated) and a transfer coding other than chunked (501). A pure parser --
// bytes in, no I/O, errors as values naming the header and the byte offset -- used by the HTTP
// module's event loop (src/modules/http/) and the fuzzer; standard library only, so the module
// carries its own copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mlc::serve {

struct HttpLimits {
  size_t max_request_line = 8 << 10;   // bytes of the request line (414 beyond)
  size_t max_header_bytes = 64 << 10;  // bytes of the header block, line ends included (431)
  size_t max_headers = 100;            // header fields (431)
  size_t max_body_bytes = 32 << 20;    // a body's bytes on the wire (413); chunked: sizes included
};

struct HttpHeader {
  std::string name;
  std::string value;  // without surrounding spaces
};

// A request's line and headers, with its framing decided.
struct HttpRequestHead {
  std::string method;
  std::string target;  // origin-form: starts with '/'
  int minor_version = 1;  // HTTP/1.<minor>
  std::vector<HttpHeader> headers;
  bool chunked = false;
  uint64_t content_length = 0;  // when not chunked
  bool keep_alive = true;       // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive
  bool expect_continue = false;

  // The first header of this name (ASCII case-insensitive); nullptr when absent.
  const std::string* Find(std::string_view name) const;
  size_t Count(std::string_view name) const;
};

struct HttpFramingError {
  int status = 0;        // 400, 413, 414, 415, 417, 431, 501, 505
  uint64_t offset = 0;   // bytes of this request read before the fault
  std::string message;   // names the header or the part at fault
};

class HttpRequestParser {
 public:
  enum class Status {
    kMore,     // every byte taken; more are needed
    kHead,     // the line and headers are complete (reported once, before any body byte)
    kMessage,  // the request is complete; the bytes after it were not taken
    kError,    // see error(); nothing more is taken
  };
  struct Step {
    Status status;
    size_t taken;  // bytes of the input consumed
  };

  explicit HttpRequestParser(const HttpLimits& limits) : limits_(limits) {}

  // Takes bytes of the connection. Call again with the bytes not taken after kHead (the body
  // follows) and after kMessage only once Reset has started the next request.
  Step Feed(std::string_view bytes);
  // Ready for the next request on the connection.
  void Reset();

  const HttpRequestHead& head() const { return head_; }
  std::string& body() { return body_; }
  const HttpFramingError& error() const { return error_; }
  // Bytes of this request taken so far.
  uint64_t offset() const { return offset_; }
  // True once a byte of the current request has been taken.
  bool started() const { return offset_ > 0; }

 private:
  enum class Phase { kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailers, kDone, kError };

  // Appends to the current line; true when it is complete (without its CR LF in line_).
  bool TakeLineByte(char c);
  Status Fail(int status, std::string message, uint64_t offset);
  Status Fail(int status, std::string message) { return Fail(status, std::move(message), offset_); }
  Status EndRequestLine();
  Status EndHeaderLine();
  Status EndHead();
  Status EndChunkSize();
  Status EndTrailerLine();
  // Counts a body byte on the wire against the limit.
  bool CountWire(uint64_t n);

  HttpLimits limits_;
  Phase phase_ = Phase::kRequestLine;
  HttpRequestHead head_;
  std::string body_;
  HttpFramingError error_;
  std::string line_;
  bool line_cr_ = false;      // the line's last byte was CR
  uint64_t line_start_ = 0;   // offset of the current line
  uint64_t offset_ = 0;
  uint64_t header_bytes_ = 0;
  uint64_t wire_body_ = 0;    // body bytes on the wire
  uint64_t left_ = 0;         // body or chunk bytes still to come
};

// ASCII case-insensitive equality (header names, tokens).
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// The reason phrase of a status this server answers ("Payload Too Large"); "Error" otherwise.
const char* HttpReason(int status);

}  // namespace mlc::serve
