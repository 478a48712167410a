// The server's request framing parser and admission checks (serve/http_framing.h,
// serve/http_admission.h) on bytes alone: each limit refused as its bytes arrive (request line
// 414, header block and count 431, body on the wire 413 for Content-Length and chunked), framing
// that could be read two ways refused (duplicate or conflicting Content-Length, Content-Length
// with Transfer-Encoding, duplicate Host), compressed bodies refused with 415, chunked bodies with
// extensions and trailers, pipelined requests, bytes fed one at a time, and the Host allow-list,
// Origin and Content-Type checks.
#include <gtest/gtest.h>

#include <string>

#include "serve/http_admission.h"
#include "serve/http_framing.h"

namespace mlc::serve {
namespace {

using Status = HttpRequestParser::Status;

struct Parsed {
  Status status = Status::kMore;
  HttpFramingError error;
  HttpRequestHead head;
  std::string body;
  std::string rest;  // bytes after the request, not taken
  bool saw_head = false;
};

// Feeds the bytes (in pieces of `piece` bytes; 0: at once) until the request is complete, fails
// or the bytes run out.
Parsed Parse(const std::string& bytes, const HttpLimits& limits = HttpLimits(), size_t piece = 0) {
  HttpRequestParser p(limits);
  Parsed out;
  std::string pending;
  size_t next = 0;
  for (;;) {
    const HttpRequestParser::Step step = p.Feed(pending);
    pending.erase(0, step.taken);
    out.status = step.status;
    if (step.status == Status::kHead) {
      EXPECT_FALSE(out.saw_head) << "the head is reported once";
      out.saw_head = true;
      out.head = p.head();
      continue;
    }
    if (step.status != Status::kMore || next == bytes.size()) break;
    const size_t n = piece == 0 ? bytes.size() - next : std::min(piece, bytes.size() - next);
    pending += bytes.substr(next, n);
    next += n;
  }
  out.error = p.error();
  out.body = p.body();
  out.rest = pending + bytes.substr(next);
  return out;
}

std::string Post(const std::string& headers, const std::string& body) {
  return "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n" + headers + "\r\n" + body;
}

TEST(HttpFraming, ReadsAGetAndLeavesThePipelinedNextRequest) {
  Parsed r = Parse("GET /health HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nX-A:  spaced value \t\r\n\r\nGET /next");
  ASSERT_EQ(r.status, Status::kMessage) << r.error.message;
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.target, "/health");
  EXPECT_EQ(r.head.minor_version, 1);
  ASSERT_NE(r.head.Find("x-a"), nullptr);
  EXPECT_EQ(*r.head.Find("X-A"), "spaced value");
  EXPECT_TRUE(r.head.keep_alive);
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(r.rest, "GET /next");
}

TEST(HttpFraming, ContentLengthBodyAlikeAtOnceAndByteByByte) {
  const std::string req = Post("Content-Length: 11\r\nContent-Type: application/json\r\n", "{\"a\": true}") + "XYZ";
  for (size_t piece : {size_t{0}, size_t{1}, size_t{7}}) {
    Parsed r = Parse(req, HttpLimits(), piece);
    ASSERT_EQ(r.status, Status::kMessage) << piece << ": " << r.error.message;
    EXPECT_TRUE(r.saw_head);
    EXPECT_EQ(r.head.content_length, 11u);
    EXPECT_EQ(r.body, "{\"a\": true}") << piece;
    EXPECT_EQ(r.rest, "XYZ") << piece;
  }
}

TEST(HttpFraming, RequestLineOverTheLimitIs414BeforeItEnds) {
  HttpLimits limits;
  limits.max_request_line = 64;
  Parsed r = Parse("GET /" + std::string(200, 'a'), limits);  // no line end ever arrives
  ASSERT_EQ(r.status, Status::kError);
  EXPECT_EQ(r.error.status, 414);
  EXPECT_NE(r.error.message.find("64 bytes"), std::string::npos) << r.error.message;
  Parsed fits = Parse("GET /" + std::string(50, 'a') + " HTTP/1.1\r\nHost: localhost\r\n\r\n", limits);
  EXPECT_EQ(fits.status, Status::kMessage) << fits.error.message;
}

TEST(HttpFraming, HeaderBlockOverItsBytesOrCountIs431WhileArriving) {
  HttpLimits limits;
  limits.max_header_bytes = 1000;
  limits.max_headers = 5;
  // One endless header line: refused after 1000 bytes, without a line end.
  Parsed big = Parse("GET / HTTP/1.1\r\nX-Big: " + std::string(5000, 'x'), limits);
  ASSERT_EQ(big.status, Status::kError);
  EXPECT_EQ(big.error.status, 431);
  EXPECT_LE(big.error.offset, 1000u + 20u);
  std::string many = "GET / HTTP/1.1\r\nHost: localhost\r\n";
  for (int i = 0; i < 5; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  Parsed count = Parse(many + "\r\n", limits);
  ASSERT_EQ(count.status, Status::kError);
  EXPECT_EQ(count.error.status, 431);
  EXPECT_NE(count.error.message.find("5 header fields"), std::string::npos) << count.error.message;
}

TEST(HttpFraming, DeclaredContentLengthOverTheLimitIs413AtTheHead) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  for (const char* length : {"1001", "99999999999999999999999999"}) {
    Parsed r = Parse(Post(std::string("Content-Length: ") + length + "\r\n", ""), limits);
    ASSERT_EQ(r.status, Status::kError) << length;
    EXPECT_EQ(r.error.status, 413) << length;
    EXPECT_FALSE(r.saw_head);
    EXPECT_NE(r.error.message.find("1000 bytes"), std::string::npos) << r.error.message;
  }
  Parsed at = Parse(Post("Content-Length: 1000\r\n", std::string(1000, 'x')), limits);
  EXPECT_EQ(at.status, Status::kMessage) << at.error.message;
}

TEST(HttpFraming, AmbiguousFramingIs400) {
  struct Case {
    std::string headers;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"Content-Length: 5\r\nContent-Length: 5\r\n", "duplicate Content-Length"},
           {"Content-Length: 5\r\nContent-Length: 6\r\n", "conflicting Content-Length"},
           {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "both Content-Length and Transfer-Encoding"},
           {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "duplicate Transfer-Encoding"},
           {"Host: other\r\n", "duplicate Host"},
           {"Content-Length: +5\r\n", "not a number"},
           {"Content-Length: 5, 5\r\n", "not a number"},
           {"Content-Length : 5\r\n", "expected a header NAME: value"},
           {"X-Folded: a\r\n  b\r\n", "obsolete header line folding"},
           {"X-Cr: a\rb\r\n", "bare CR"},
           {"X-Nul: a\x01 b\r\n", "control character in header X-Nul"},
       }) {
    Parsed r = Parse(Post(c.headers, "hello"));
    ASSERT_EQ(r.status, Status::kError) << c.headers;
    EXPECT_EQ(r.error.status, 400) << c.headers;
    EXPECT_NE(r.error.message.find(c.says), std::string::npos) << c.headers << " -> " << r.error.message;
  }
  Parsed no_host = Parse("GET / HTTP/1.1\r\n\r\n");
  EXPECT_EQ(no_host.error.status, 400);
  EXPECT_EQ(Parse("GET / HTTP/1.0\r\n\r\n").status, Status::kMessage);
  EXPECT_EQ(Parse("GET / HTTP/2.0\r\nHost: localhost\r\n\r\n").error.status, 505);
  EXPECT_EQ(Parse("GET http://x/ HTTP/1.1\r\nHost: localhost\r\n\r\n").error.status, 400);
  EXPECT_EQ(Parse("GET  / HTTP/1.1\r\nHost: localhost\r\n\r\n").error.status, 400);
}

TEST(HttpFraming, CompressedBodiesAre415AndOtherCodings501) {
  for (const char* coding : {"gzip", "br", "deflate", "identity, gzip"}) {
    Parsed r = Parse(Post(std::string("Content-Encoding: ") + coding + "\r\nContent-Length: 3\r\n", "abc"));
    ASSERT_EQ(r.status, Status::kError) << coding;
    EXPECT_EQ(r.error.status, 415) << coding;
    EXPECT_FALSE(r.saw_head) << "refused before the body";
  }
  Parsed identity = Parse(Post("Content-Encoding: identity\r\nContent-Length: 3\r\n", "abc"));
  EXPECT_EQ(identity.status, Status::kMessage) << identity.error.message;
  Parsed gzip_te = Parse(Post("Transfer-Encoding: gzip, chunked\r\n", "3\r\nabc\r\n0\r\n\r\n"));
  EXPECT_EQ(gzip_te.error.status, 501);
}

TEST(HttpFraming, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string req =
      Post("Transfer-Encoding: Chunked\r\n", "4;name=value\r\nWiki\r\n5\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nX-Trailer: t\r\n\r\n") +
      "GET";
  for (size_t piece : {size_t{0}, size_t{1}, size_t{3}}) {
    Parsed r = Parse(req, HttpLimits(), piece);
    ASSERT_EQ(r.status, Status::kMessage) << piece << ": " << r.error.message;
    EXPECT_TRUE(r.head.chunked);
    EXPECT_EQ(r.body, "Wikipedia in\r\n\r\nchunks.") << piece;
    EXPECT_EQ(r.rest, "GET") << piece;
  }
}

TEST(HttpFraming, ChunkedBodyCountedOnTheWireAsItArrives) {
  HttpLimits limits;
  limits.max_body_bytes = 1000;
  // A chunk declared over the limit: refused at its size line, before its data.
  Parsed declared = Parse(Post("Transfer-Encoding: chunked\r\n", "fffffffffffffffffffffff\r\n"), limits);
  EXPECT_EQ(declared.error.status, 413);
  Parsed one = Parse(Post("Transfer-Encoding: chunked\r\n", "3e9\r\n"), limits);  // 1001
  EXPECT_EQ(one.error.status, 413);
  // Many small chunks: refused once their bytes on the wire pass the limit; never more kept.
  std::string chunks;
  for (int i = 0; i < 400; ++i) chunks += "10\r\n" + std::string(16, 'x') + "\r\n";
  Parsed many = Parse(Post("Transfer-Encoding: chunked\r\n", chunks), limits, 100);
  ASSERT_EQ(many.status, Status::kError);
  EXPECT_EQ(many.error.status, 413);
  EXPECT_LE(many.body.size(), 1000u);
  // The size lines count: one-byte chunks with long extensions pass it too.
  std::string padded;
  for (int i = 0; i < 100; ++i) padded += "1;" + std::string(40, 'e') + "\r\nx\r\n";
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", padded), limits).error.status, 413);
  // An endless size line is refused too.
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", "1;" + std::string(5000, 'e')), HttpLimits()).error.status,
            400);
}

TEST(HttpFraming, MalformedChunksAre400) {
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", "3\r\nabcX\r\n0\r\n\r\n")).error.status, 400);
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", "zz\r\nabc\r\n")).error.status, 400);
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", "\r\n")).error.status, 400);
  EXPECT_EQ(Parse(Post("Transfer-Encoding: chunked\r\n", "0\r\nno colon\r\n\r\n")).error.status, 400);
  EXPECT_EQ(Parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n").error.status, 400);
}

TEST(HttpFraming, ConnectionExpectAndReset) {
  EXPECT_FALSE(Parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n").head.keep_alive);
  EXPECT_FALSE(Parse("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
  EXPECT_TRUE(Parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").head.keep_alive);
  Parsed expect = Parse(Post("Expect: 100-continue\r\nContent-Length: 2\r\n", "{}"));
  EXPECT_TRUE(expect.head.expect_continue);
  EXPECT_EQ(Parse(Post("Expect: something\r\n", "")).error.status, 417);

  HttpRequestParser p{HttpLimits()};
  const std::string two = "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
  auto step = p.Feed(two);
  ASSERT_EQ(step.status, Status::kHead);
  std::string_view rest = std::string_view(two).substr(step.taken);
  step = p.Feed(rest);
  ASSERT_EQ(step.status, Status::kMessage);
  EXPECT_EQ(p.head().target, "/a");
  p.Reset();
  EXPECT_FALSE(p.started());
  step = p.Feed(rest);
  ASSERT_EQ(step.status, Status::kHead);
  EXPECT_EQ(p.head().target, "/b");
  EXPECT_EQ(p.Feed(rest.substr(step.taken)).status, Status::kMessage);
}

HttpRequestHead Head(const std::string& text) {
  Parsed r = Parse(text);
  EXPECT_TRUE(r.saw_head) << text << ": " << r.error.message;
  return r.head;
}

TEST(HttpAdmission, HostAllowListOriginAndContentType) {
  HostPolicy loopback(HostPolicy::DefaultNames("127.0.0.1", {}));
  auto admit = [&](const std::string& headers, const std::string& method = "GET") {
    auto refusal = Admit(Head(method + " / HTTP/1.1\r\n" + headers + "\r\n"), loopback);
    return refusal ? refusal->status : 0;
  };
  EXPECT_EQ(admit("Host: localhost:8000\r\n"), 0);
  EXPECT_EQ(admit("Host: LOCALHOST\r\n"), 0);
  EXPECT_EQ(admit("Host: 127.0.0.1:1\r\n"), 0);
  EXPECT_EQ(admit("Host: [::1]:8000\r\n"), 0);
  EXPECT_EQ(admit("Host: attacker.example:8000\r\n"), 403);  // a DNS-rebound name
  EXPECT_EQ(admit("Host: 127.0.0.1.nip.io\r\n"), 403);
  EXPECT_EQ(admit("Host: localhost\r\nOrigin: http://localhost:3000\r\n"), 0);
  EXPECT_EQ(admit("Host: localhost\r\nOrigin: https://evil.example\r\n"), 403);
  EXPECT_EQ(admit("Host: localhost\r\nOrigin: null\r\n"), 403);
  EXPECT_EQ(admit("Host: localhost\r\nContent-Type: application/json\r\nContent-Length: 0\r\n", "POST"), 0);
  EXPECT_EQ(admit("Host: localhost\r\nContent-Type: Application/JSON ; charset=utf-8\r\nContent-Length: 0\r\n",
                  "POST"),
            0);
  EXPECT_EQ(admit("Host: localhost\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n", "POST"), 415);
  EXPECT_EQ(admit("Host: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\n",
                  "POST"),
            415);
  EXPECT_EQ(admit("Host: localhost\r\nContent-Length: 0\r\n", "POST"), 415);
  // The audio routes take OpenAI's form, and only that.
  auto admit_at = [&](const std::string& target, const std::string& type) {
    auto refusal = Admit(Head("POST " + target + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: " + type +
                              "\r\nContent-Length: 0\r\n\r\n"),
                         loopback);
    return refusal ? refusal->status : 0;
  };
  EXPECT_EQ(admit_at("/v1/audio/transcriptions", "multipart/form-data; boundary=x"), 0);
  EXPECT_EQ(admit_at("/v1/audio/translations?x=1", "Multipart/Form-Data; boundary=x"), 0);
  EXPECT_EQ(admit_at("/v1/audio/transcriptions", "application/json"), 415);
  EXPECT_EQ(admit_at("/v1/chat/completions", "multipart/form-data; boundary=x"), 415);

  HostPolicy extra(HostPolicy::DefaultNames("0.0.0.0", {"Model.Example", "::2"}));
  EXPECT_FALSE(Admit(Head("GET / HTTP/1.1\r\nHost: model.example:80\r\n\r\n"), extra));
  EXPECT_FALSE(Admit(Head("GET / HTTP/1.1\r\nHost: [::2]\r\n\r\n"), extra));
  EXPECT_FALSE(Admit(Head("GET / HTTP/1.1\r\nHost: 0.0.0.0\r\n\r\n"), extra));
  EXPECT_TRUE(Admit(Head("GET / HTTP/1.1\r\nHost: other.example\r\n\r\n"), extra));
  HostPolicy any(HostPolicy::DefaultNames("127.0.0.1", {"*"}));
  EXPECT_FALSE(Admit(Head("GET / HTTP/1.1\r\nHost: other.example\r\nOrigin: http://x.example\r\n\r\n"), any));
  EXPECT_EQ(HostOf("[::1]:80"), "[::1]");
  EXPECT_EQ(HostOf("Example.COM:8000"), "example.com");
}

}  // namespace
}  // namespace mlc::serve
