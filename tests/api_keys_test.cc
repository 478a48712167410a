// The server's API keys on their own (serve/api_keys.h, serve/http_admission.h, serve.h): the
// constant-time comparison, which paths stay open, the Authorization header's forms (scheme in
// any case, one header only, a key's prefix or extension refused, every key tried), the 401's
// place among the head's checks, and key files (comments, blank lines, CRLF, a file without a
// key, a line that cannot be a key, a file that cannot be read).
#include <gtest/gtest.h>

#include <string>

#include "mlc_manifest/serve.h"
#include "serve/api_keys.h"
#include "serve/http_admission.h"
#include "serve/http_framing.h"
#include "support/test_util.h"

namespace mlc::serve {
namespace {

HttpRequestHead Head(const std::string& text) {
  HttpRequestParser p{HttpLimits()};
  std::string pending = text;
  for (;;) {
    const HttpRequestParser::Step step = p.Feed(pending);
    pending.erase(0, step.taken);
    if (step.status == HttpRequestParser::Status::kHead || step.status == HttpRequestParser::Status::kMessage) {
      return p.head();
    }
    EXPECT_EQ(step.status, HttpRequestParser::Status::kMore) << text << ": " << p.error().message;
    if (step.status != HttpRequestParser::Status::kMore || step.taken == 0) return p.head();
  }
}

TEST(ApiKeys, ConstantTimeEqualsComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("sk-abc", "sk-abc"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-abd"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "xk-abc"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-ab"));     // a prefix
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-abcd"));   // an extension
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-abcsk-abc"));  // the key twice
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals("a", ""));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

TEST(ApiKeys, KeyText) {
  EXPECT_TRUE(IsApiKeyText("sk-ABC_123.~+/="));
  EXPECT_TRUE(IsApiKeyText("!#$%&'*"));
  EXPECT_FALSE(IsApiKeyText(""));
  EXPECT_FALSE(IsApiKeyText("two words"));
  EXPECT_FALSE(IsApiKeyText("tab\there"));
  EXPECT_FALSE(IsApiKeyText("caf\xc3\xa9"));  // not ASCII
  EXPECT_FALSE(IsApiKeyText(std::string("nul\0x", 5)));
  EXPECT_TRUE(mlc::IsApiKey("k1"));
  EXPECT_FALSE(mlc::IsApiKey("k 1"));
}

TEST(ApiKeys, OpenPathsAndTheAuthorizationHeader) {
  ApiKeyPolicy none;
  EXPECT_FALSE(none.enabled());
  EXPECT_FALSE(none.Needs("/v1/models"));

  ApiKeyPolicy keys({"first-key", "second-key"}, {"/health", "/"});
  EXPECT_TRUE(keys.enabled());
  EXPECT_FALSE(keys.Needs("/health"));
  EXPECT_FALSE(keys.Needs("/health?verbose=1"));
  EXPECT_FALSE(keys.Needs("/"));
  EXPECT_TRUE(keys.Needs("/metrics"));
  EXPECT_TRUE(keys.Needs("/v1/models"));
  EXPECT_TRUE(keys.Needs("/tokenize"));
  EXPECT_TRUE(keys.Needs("/health/"));   // only the exact path is open
  EXPECT_TRUE(keys.Needs("/%68ealth"));  // an encoded spelling is not
  EXPECT_TRUE(keys.Needs("//"));
  EXPECT_TRUE(keys.Needs("/nothing"));   // unknown routes too: 401 before 404

  EXPECT_TRUE(keys.Accepts("Bearer first-key"));
  EXPECT_TRUE(keys.Accepts("Bearer second-key"));  // any of the keys
  EXPECT_TRUE(keys.Accepts("bearer first-key"));
  EXPECT_TRUE(keys.Accepts("BEARER   first-key  "));
  EXPECT_FALSE(keys.Accepts("Bearer first-ke"));
  EXPECT_FALSE(keys.Accepts("Bearer first-keyy"));
  EXPECT_FALSE(keys.Accepts("Bearer third-key"));
  EXPECT_FALSE(keys.Accepts("Bearer "));
  EXPECT_FALSE(keys.Accepts("Bearerfirst-key"));
  EXPECT_FALSE(keys.Accepts("Basic first-key"));
  EXPECT_FALSE(keys.Accepts("first-key"));
  EXPECT_FALSE(keys.Accepts("Bearer first-key second-key"));
  EXPECT_FALSE(keys.Accepts(""));
}

TEST(ApiKeys, AdmissionAnswers401AfterTheHostChecks) {
  HostPolicy loopback(HostPolicy::DefaultNames("127.0.0.1", {}));
  ApiKeyPolicy keys({"sk-test"}, {"/health", "/"});
  auto admit = [&](const std::string& line, const std::string& headers) {
    auto refusal = Admit(Head(line + " HTTP/1.1\r\nHost: localhost\r\n" + headers + "\r\n"), loopback, keys);
    return refusal ? refusal->status : 0;
  };
  const std::string json = "Content-Type: application/json\r\nContent-Length: 2\r\n";
  EXPECT_EQ(admit("GET /health", ""), 0);
  EXPECT_EQ(admit("GET /", ""), 0);
  EXPECT_EQ(admit("GET /v1/models", ""), 401);
  EXPECT_EQ(admit("GET /metrics", ""), 401);
  EXPECT_EQ(admit("GET /v1/models", "Authorization: Bearer sk-test\r\n"), 0);
  EXPECT_EQ(admit("GET /v1/models", "Authorization: Bearer sk-tesT\r\n"), 401);
  // Two headers are never read as either.
  EXPECT_EQ(admit("GET /v1/models", "Authorization: Bearer sk-test\r\nAuthorization: Bearer x\r\n"), 401);
  EXPECT_EQ(admit("POST /tokenize", json), 401);
  EXPECT_EQ(admit("POST /tokenize", json + "Authorization: Bearer sk-test\r\n"), 0);
  // The key is checked before the body's type, after the Host.
  EXPECT_EQ(admit("POST /tokenize", "Content-Type: text/plain\r\nContent-Length: 2\r\n"), 401);
  EXPECT_EQ(admit("POST /tokenize", "Content-Type: text/plain\r\nContent-Length: 2\r\nAuthorization: Bearer sk-test\r\n"),
            415);
  auto refusal = Admit(Head("GET /v1/models HTTP/1.1\r\nHost: evil.example\r\n\r\n"), loopback, keys);
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->status, 403);
  refusal = Admit(Head("GET /v1/models HTTP/1.1\r\nHost: localhost\r\n\r\n"), loopback, keys);
  ASSERT_TRUE(refusal);
  EXPECT_NE(refusal->message.find("Authorization: Bearer"), std::string::npos);
  // Without keys the header is not looked at.
  EXPECT_FALSE(Admit(Head("GET /v1/models HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic x\r\n\r\n"), loopback));
}

TEST(ApiKeys, KeyFiles) {
  auto keys = ParseApiKeys("# keys for the team\n\nsk-one\n  sk-two  \r\n\t# indented comment\nsk-three", "keys.txt");
  ASSERT_TRUE(keys.ok()) << FormatErrors(keys.errors());
  EXPECT_EQ(*keys, (std::vector<std::string>{"sk-one", "sk-two", "sk-three"}));

  auto empty = ParseApiKeys("# nothing here\n\n   \n", "keys.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().document, "keys.txt");
  EXPECT_NE(empty.error().message.find("no API key"), std::string::npos);
  EXPECT_FALSE(ParseApiKeys("", "keys.txt").ok());

  auto spaced = ParseApiKeys("sk-one\nsk two\nsk-three\n\x01\n", "keys.txt");
  ASSERT_FALSE(spaced.ok());
  ASSERT_EQ(spaced.errors().size(), 2u);
  EXPECT_EQ(spaced.errors()[0].path, "line 2");
  EXPECT_EQ(spaced.errors()[1].path, "line 4");
  EXPECT_EQ(spaced.errors()[0].document, "keys.txt");

  test::TempDir dir;
  const std::string file = dir.Write("keys", "sk-file\n# old: sk-gone\n");
  auto read = ReadApiKeyFile(file);
  ASSERT_TRUE(read.ok()) << FormatErrors(read.errors());
  EXPECT_EQ(*read, std::vector<std::string>{"sk-file"});
  auto missing = ReadApiKeyFile(dir.File("absent"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
  auto blank = ReadApiKeyFile(dir.Write("blank", "\n# none\n"));
  ASSERT_FALSE(blank.ok());
  EXPECT_EQ(blank.error().code, ErrorCode::kInvalid);
}

}  // namespace
}  // namespace mlc::serve
