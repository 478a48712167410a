// The strict JSON reader (duplicates, depth, size, numbers, UTF-8, pointers) and the writers
// (canonical for ids, Python-indent for files).
#include <gtest/gtest.h>

#include "mlc_manifest/json.h"

namespace mlc {
namespace {

Error ParseError(std::string_view text, JsonLimits limits = {}) {
  auto r = ParseJson(text, limits);
  EXPECT_FALSE(r.ok()) << "accepted: " << text.substr(0, 80);
  return r.ok() ? Error{} : r.error();
}

TEST(JsonReader, ParsesValidDocument) {
  auto r = ParseJson(R"({"a": [1, 2.5, "x"], "b": {"c": null}})");
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ((*r)["a"][0], 1);
}

// A UTF-8 byte order mark is refused, as Python's json.load refuses it (RFC 8259 section 8.1).
TEST(JsonReader, RejectsAByteOrderMark) {
  auto bom = ParseJson("\xEF\xBB\xBF{}");
  ASSERT_FALSE(bom.ok());
  EXPECT_NE(bom.error().message.find("byte order mark"), std::string::npos);
  EXPECT_TRUE(ParseJson("{}").ok());
}

TEST(JsonReader, RejectsDuplicateKeysWithTheirPointer) {
  Error e = ParseError(R"({"tasks": {"chat": {"executor": "a", "executor": "b"}}})");
  EXPECT_EQ(e.path, "/tasks/chat/executor");
  EXPECT_NE(e.message.find("duplicate key \"executor\""), std::string::npos) << e.message;
  // The same key in different objects is fine.
  EXPECT_TRUE(ParseJson(R"({"a": {"x": 1}, "b": {"x": 2}})").ok());
}

TEST(JsonReader, PointerEscapesAndArrayIndices) {
  Error e = ParseError(R"({"a/b": [0, {"m~n": 1, "m~n": 2}]})");
  EXPECT_EQ(e.path, "/a~1b/1/m~0n");
}

TEST(JsonReader, DepthLimit) {
  std::string deep(65, '[');
  deep += std::string(65, ']');
  Error e = ParseError(deep);
  EXPECT_NE(e.message.find("nesting deeper than the limit of 64"), std::string::npos);
  std::string ok(64, '[');
  ok += std::string(64, ']');
  EXPECT_TRUE(ParseJson(ok).ok());
  JsonLimits tight;
  tight.max_depth = 2;
  EXPECT_FALSE(ParseJson("[[[]]]", tight).ok());
  // 100k-deep nesting is rejected without recursion.
  std::string huge(100000, '[');
  EXPECT_FALSE(ParseJson(huge).ok());
  std::string huge_obj;
  for (int i = 0; i < 100000; ++i) huge_obj += "{\"a\":";
  EXPECT_FALSE(ParseJson(huge_obj).ok());
}

TEST(JsonReader, ValueLimitCountsEveryValue) {
  JsonLimits four;
  four.max_values = 4;
  // {"a": [1, 2]} is four values: the object, the array and two numbers.
  EXPECT_TRUE(ParseJson(R"({"a": [1, 2]})", four).ok());
  Error e = ParseError(R"({"a": [1, 2, 3]})", four);
  EXPECT_NE(e.message.find("more values than the limit of 4"), std::string::npos) << e.message;
  EXPECT_EQ(e.path, "/a/2");
  EXPECT_FALSE(ParseJson(R"([[], [], [], []])", four).ok());  // empty containers count too
  EXPECT_TRUE(ParseJson(R"([[], [], [], [], []])").ok());       // 0: no limit
}

TEST(JsonReader, SizeLimit) {
  JsonLimits small;
  small.max_bytes = 10;
  Error e = ParseError(R"({"a": "0123456789"})", small);
  EXPECT_EQ(e.code, ErrorCode::kLimit);
  // A 10 MB string is fine under the default limit.
  std::string big = "\"" + std::string(10 << 20, 'x') + "\"";
  EXPECT_TRUE(ParseJson(big).ok());
}

TEST(JsonReader, MalformedTextNamesTheByte) {
  Error e = ParseError(R"({"a": [1, 2,)");
  EXPECT_NE(e.message.find("malformed JSON at line 1, column 13 (byte 12, the end of input): "
                           "syntax error"),
            std::string::npos) << e.message;
  EXPECT_EQ(e.path, "/a/2");
  EXPECT_FALSE(ParseJson("").ok());
  EXPECT_FALSE(ParseJson("{} trailing").ok());
  EXPECT_FALSE(ParseJson("{\"a\": 1} // comment").ok());
  EXPECT_FALSE(ParseJson(std::string("\x00\x01\xff\xfe", 4)).ok());
  EXPECT_FALSE(ParseJson("[1e400]").ok());  // overflows a double
  EXPECT_FALSE(ParseJson("NaN").ok());
}

// Issue 11.9: a cut document names where it ends (line, column, byte) and the member left
// unfinished, not an empty key "/".
TEST(JsonReader, TruncatedTextNamesTheEndAndTheUnfinishedMember) {
  Error e = ParseError("{");
  EXPECT_EQ(e.path, "");
  EXPECT_NE(e.message.find("line 1, column 2 (byte 1, the end of input)"), std::string::npos)
      << e.message;
  e = ParseError(R"({"audio": {)");
  EXPECT_EQ(e.path, "/audio");
  EXPECT_NE(e.message.find("(byte 11, the end of input)"), std::string::npos) << e.message;
  e = ParseError("{\n  \"a\": {\"b\": [1,\n");
  EXPECT_EQ(e.path, "/a/b/1");
  EXPECT_NE(e.message.find("line 3, column 1 (byte 19, the end of input)"), std::string::npos)
      << e.message;
  e = ParseError(R"({"a": 1)");
  EXPECT_EQ(e.path, "");
  e = ParseError(R"({"a": {"b": 1}, "c")");
  EXPECT_EQ(e.path, "/c");
  e = ParseError(R"({"a": "unterminated)");
  EXPECT_EQ(e.path, "/a");
  EXPECT_NE(e.message.find("the end of input"), std::string::npos) << e.message;
  // A bad byte inside the text is not the end of input.
  e = ParseError("{\"a\": x}");
  EXPECT_EQ(e.path, "/a");
  EXPECT_NE(e.message.find("line 1, column 7 (byte 6)"), std::string::npos) << e.message;
  e = ParseError("");
  EXPECT_NE(e.message.find("the end of input"), std::string::npos) << e.message;
}

TEST(JsonReader, RejectsInvalidUtf8) {
  EXPECT_FALSE(ParseJson("\"\xC3\x28\"").ok());          // bad continuation
  EXPECT_FALSE(ParseJson("\"\xED\xA0\x80\"").ok());      // encoded surrogate
  EXPECT_FALSE(ParseJson("\"\xF8\x88\x80\x80\x80\"").ok());
  EXPECT_FALSE(ParseJson("\"\\ud800\"").ok());           // lone surrogate escape
  EXPECT_TRUE(ParseJson("\"\\ud83d\\ude00 \xE2\x82\xAC\"").ok());
}

TEST(SafeIntegers, FollowSpec13) {
  auto num = [](const char* text) { return SafeInteger(*ParseJson(text)); };
  EXPECT_EQ(num("16000"), 16000);
  EXPECT_EQ(num("16000.0"), 16000);
  EXPECT_EQ(num("1.6e4"), 16000);
  EXPECT_EQ(num("-0"), 0);
  EXPECT_EQ(num("9007199254740991"), kMaxSafeInteger);
  EXPECT_EQ(num("-9007199254740991"), -kMaxSafeInteger);
  EXPECT_EQ(num("0.5"), std::nullopt);
  EXPECT_EQ(num("9007199254740992"), std::nullopt);   // 2^53
  EXPECT_EQ(num("-9007199254740992"), std::nullopt);
  EXPECT_EQ(num("18446744073709551616"), std::nullopt);
  EXPECT_EQ(num("1e300"), std::nullopt);
  EXPECT_EQ(num("\"5\""), std::nullopt);
  EXPECT_EQ(num("true"), std::nullopt);
}

TEST(Canonical, SortsByUtf16AndEscapesLikeJsonStringify) {
  // U+FF5E sorts after U+1F600 in UTF-16 (0xD83D < 0xFF5E), before it in UTF-8 bytes.
  auto doc = ParseJson("{\"\xEF\xBD\x9E\": 1, \"\xF0\x9F\x98\x80\": 2, \"b\": 3, \"B\": 4, \"a\": [true, null, 1.0]}");
  ASSERT_TRUE(doc.ok());
  EXPECT_EQ(CanonicalJson(*doc),
            "{\"B\":4,\"a\":[true,null,1],\"b\":3,\"\xF0\x9F\x98\x80\":2,\"\xEF\xBD\x9E\":1}");
  auto esc = ParseJson(R"(["q\"b\\s\/ \b\f\n\r\t \u0001 \u001f \u007f é"])");
  ASSERT_TRUE(esc.ok());
  EXPECT_EQ(CanonicalJson(*esc), "[\"q\\\"b\\\\s/ \\b\\f\\n\\r\\t \\u0001 \\u001f \x7f \xC3\xA9\"]");
}

TEST(PythonIndent, MatchesJsonDumpIndent2) {
  OrderedJson doc;
  doc["z"] = 1;
  doc["a"] = OrderedJson::array();
  doc["o"] = OrderedJson::object();
  doc["l"] = {1, "x\x7f\xC3\xA9"};
  doc["n"] = {{"k", nullptr}, {"t", true}};
  EXPECT_EQ(PythonIndentJson(doc),
            "{\n  \"z\": 1,\n  \"a\": [],\n  \"o\": {},\n  \"l\": [\n    1,\n    \"x\\u007f\\u00e9\"\n  ],\n"
            "  \"n\": {\n    \"k\": null,\n    \"t\": true\n  }\n}\n");
}

TEST(FieldChecker, MessagesSayWhatWasExpected) {
  Errors errors;
  FieldChecker c(&errors);
  Json v = Json::parse(R"({"s": "", "i": 1.5, "h": "sha256:ABC"})");
  EXPECT_FALSE(c.String(v["s"], "/s"));
  EXPECT_FALSE(c.Integer(v["i"], "/i", 0));
  EXPECT_FALSE(c.Sha256(v["h"], "/h"));
  EXPECT_FALSE(c.Keys(v, "", {"s", "i"}, {"s", "x"}));
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_EQ(errors[0].ToString(), "/s: expected a non-empty string, got an empty string");
  EXPECT_EQ(errors[1].ToString(),
            "/i: expected an integer >= 0 (and at most 2^53 - 1), got the number 1.5");
  EXPECT_EQ(errors[3].path, "/h");
  EXPECT_EQ(errors[4].ToString(), "/x: missing required field");
}

TEST(Sha256, KnownVector) {
  EXPECT_EQ(*Sha256Id("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_TRUE(IsSha256Id(*Sha256Id("")));
  EXPECT_FALSE(IsSha256Id("sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"));
}

}  // namespace
}  // namespace mlc
