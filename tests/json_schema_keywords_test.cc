// Structured output's JSON Schema keywords that zod, pydantic and the openai helpers write:
// number ranges and multipleOf, pattern, format, minProperties/maxProperties, allOf, oneOf,
// nullable anyOf, prefixItems and the annotations; each enforced byte by byte (accepted and
// refused texts, no live state without a way on). The corpus test compiles schemas pydantic
// writes (and zod-to-json-schema's shapes, written out here) and checks random walks of each
// automaton with Python's jsonschema.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "mlc_manifest/json_grammar.h"
#include "support/test_util.h"

namespace mlc {
namespace {

std::shared_ptr<const JsonGrammar> Schema(const std::string& text) {
  auto g = JsonGrammar::FromSchema(OrderedJson::parse(text));
  EXPECT_TRUE(g.ok()) << text << "\n" << (g.ok() ? "" : FormatErrors(g.errors()));
  return g.ok() ? *g : JsonGrammar::AnyObject();
}

void ExpectAccepts(const JsonGrammar& g, std::initializer_list<const char*> texts) {
  for (const char* t : texts) EXPECT_TRUE(g.Matches(t)) << t;
}
void ExpectRefuses(const JsonGrammar& g, std::initializer_list<const char*> texts) {
  for (const char* t : texts) EXPECT_FALSE(g.Matches(t)) << t;
}

// The bytes the automaton takes from a state.
std::vector<uint8_t> Allowed(const JsonGrammar& g, const JsonGrammar::State& s) {
  std::vector<uint8_t> out;
  for (int b = 0; b < 256; ++b) {
    JsonGrammar::State copy = s;
    if (g.Step(copy, static_cast<uint8_t>(b))) out.push_back(static_cast<uint8_t>(b));
  }
  return out;
}

// Every prefix of text that the automaton takes can still go on or is complete.
void ExpectNoDeadEnds(const JsonGrammar& g, const std::string& text) {
  JsonGrammar::State s = g.Start();
  for (char c : text) {
    if (!g.Step(s, static_cast<uint8_t>(c))) return;
    EXPECT_TRUE(g.Accepting(s) || !Allowed(g, s).empty()) << "dead end after a prefix of " << text;
  }
}

void ExpectError(const std::string& schema, const std::string& path, const std::string& word,
                 ErrorCode code = ErrorCode::kUnsupported) {
  auto g = JsonGrammar::FromSchema(OrderedJson::parse(schema));
  ASSERT_FALSE(g.ok()) << schema;
  EXPECT_EQ(g.errors().front().code, code) << schema << ": " << g.errors().front().message;
  EXPECT_EQ(g.errors().front().path, path) << schema;
  EXPECT_NE(g.errors().front().message.find(word), std::string::npos) << g.errors().front().message;
}

// Whether text is a JSON number without exponent, and its value.
bool PlainNumber(const std::string& t, long double& value) {
  size_t i = 0;
  if (i < t.size() && t[i] == '-') ++i;
  if (i >= t.size() || !isdigit(static_cast<unsigned char>(t[i]))) return false;
  if (t[i] == '0' && i + 1 < t.size() && isdigit(static_cast<unsigned char>(t[i + 1]))) return false;
  while (i < t.size() && isdigit(static_cast<unsigned char>(t[i]))) ++i;
  if (i < t.size()) {
    if (t[i] != '.' || i + 1 >= t.size()) return false;
    for (++i; i < t.size(); ++i) {
      if (!isdigit(static_cast<unsigned char>(t[i]))) return false;
    }
  }
  value = std::strtold(t.c_str(), nullptr);
  return true;
}

// Every text of up to five characters over the number alphabet: taken exactly when it is a
// plain number within the range, and each taken prefix can go on or is complete.
TEST(JsonSchemaKeywords, NumberRangesAreExactWithoutExponents) {
  struct Range {
    const char* schema;
    long double low, high;
    bool low_open, high_open;
  };
  const Range ranges[] = {
      {R"({"type":"number","minimum":0.5,"maximum":2.25})", 0.5L, 2.25L, false, false},
      {R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1})", 0, 1, true, true},
      {R"({"type":"number","minimum":-1.5,"exclusiveMaximum":-0.25})", -1.5L, -0.25L, false, true},
      {R"({"type":"number","minimum":-0.05})", -0.05L, INFINITY, false, false},
      {R"({"type":"number","maximum":12.5,"minimum":10})", 10, 12.5L, false, false},
      {R"({"type":"number","exclusiveMaximum":0})", -INFINITY, 0, false, true},
  };
  const std::string alphabet = "-0123456789.";
  for (const Range& r : ranges) {
    auto g = Schema(r.schema);
    std::vector<std::string> texts = {""};
    for (size_t len = 0; len < 5; ++len) {
      std::vector<std::string> longer;
      for (const std::string& t : texts) {
        if (t.size() != len) continue;
        for (char c : alphabet) longer.push_back(t + c);
      }
      texts.insert(texts.end(), longer.begin(), longer.end());
    }
    int taken = 0;
    for (const std::string& t : texts) {
      if (t.empty()) continue;
      long double v = 0;
      const bool in = PlainNumber(t, v) && (r.low_open ? v > r.low : v >= r.low) && (r.high_open ? v < r.high : v <= r.high);
      EXPECT_EQ(g->Matches(t), in) << r.schema << " " << t;
      taken += in;
      JsonGrammar::State s = g->Start();
      if (g->Feed(s, t)) {
        EXPECT_TRUE(g->Accepting(s) || !Allowed(*g, s).empty()) << r.schema << " " << t;
      }
    }
    EXPECT_GT(taken, 0) << r.schema;
  }
  auto g = Schema(R"({"type":"number","minimum":0,"maximum":1})");
  ExpectAccepts(*g, {"0", "1", "0.999999999999", "1.000000", "-0", "-0.0"});
  ExpectRefuses(*g, {"1e0", "0.5E1", "1.0000001", "-0.1", "2"});
  // Inside an object: the number ends at the parent's byte.
  auto o = Schema(R"({"type":"object","properties":{"p":{"type":"number","exclusiveMinimum":0,"maximum":1}},"required":["p"]})");
  ExpectAccepts(*o, {R"({"p":0.5})", R"({"p":1})", R"({"p": 0.0001})"});
  ExpectRefuses(*o, {R"({"p":0})", R"({"p":0.0})", R"({"p":1.5})", R"({"p":-1})"});
  ExpectError(R"({"type":"number","minimum":2,"maximum":1})", "", "no number", ErrorCode::kInvalid);
  ExpectError(R"({"type":"number","minimum":1e300})", "/minimum", "64 digits");
}

TEST(JsonSchemaKeywords, MultipleOfForIntegers) {
  auto g = Schema(R"({"type":"integer","multipleOf":5,"minimum":-12,"maximum":23})");
  ExpectAccepts(*g, {"0", "5", "-10", "20", "-0"});
  ExpectRefuses(*g, {"3", "25", "-15", "21", "1.0"});
  for (const char* t : {"2", "-1", "-"}) ExpectNoDeadEnds(*g, t);
  // "-" may go on only to -5 or -10; "2" only to 20.
  JsonGrammar::State s = g->Start();
  ASSERT_TRUE(g->Feed(s, "2"));
  EXPECT_EQ(Allowed(*g, s), std::vector<uint8_t>{'0'});
  auto unbounded = Schema(R"({"type":"integer","multipleOf":7})");
  ExpectAccepts(*unbounded, {"0", "14", "-700", "9223372036854775807"});
  ExpectRefuses(*unbounded, {"15", "9223372036854775806", "9223372036854775808"});
  auto number = Schema(R"({"type":"number","multipleOf":1})");
  ExpectAccepts(*number, {"3", "-2"});
  ExpectRefuses(*number, {"1.5"});
  ExpectError(R"({"type":"number","multipleOf":0.01})", "/multipleOf", "integer divisors");
  ExpectError(R"({"type":"integer","multipleOf":10,"minimum":1,"maximum":9})", "", "multiple of 10",
              ErrorCode::kInvalid);
}

TEST(JsonSchemaKeywords, PatternsAreWalkedInsideTheString) {
  auto zip = Schema(R"({"type":"string","pattern":"^[0-9]{5}(-[0-9]{4})?$"})");
  ExpectAccepts(*zip, {R"("12345")", R"("12345-6789")"});
  ExpectRefuses(*zip, {R"("1234")", R"("123456")", R"("12345-678")", R"("a2345")", R"("")"});
  ExpectNoDeadEnds(*zip, R"("12345-6)");
  // Unanchored: anything around it.
  auto word = Schema(R"({"type":"string","pattern":"ab+c"})");
  ExpectAccepts(*word, {R"("abc")", R"("xxabbbcyy")", "\"\xC3\xA9" "abc\""});
  ExpectRefuses(*word, {R"("ac")", R"("abx")", R"("")"});
  auto classes = Schema(R"({"type":"string","pattern":"^\\w+@[^\\s@]+\\.(com|org)$"})");
  ExpectAccepts(*classes, {R"("a_1@b-c.com")", "\"x@\xC3\xA9t\xC3\xA9.org\""});
  ExpectRefuses(*classes, {R"("a b@c.com")", R"("a@b.net")", R"("@b.com")", R"("a@b c.com")"});
  auto dot = Schema(R"({"type":"string","pattern":"^.{2,3}$"})");
  ExpectAccepts(*dot, {R"("ab")", "\"\xE2\x82\xAC\xF0\x9F\x98\x80\"", R"("a\"b")"});
  ExpectRefuses(*dot, {R"("a")", R"("abcd")", R"("a\nb")"});
  // Escapes are decoded before the pattern sees them; \u escapes are refused while it walks.
  auto esc = Schema(R"({"type":"string","pattern":"^a\\nb\\\\$"})");
  ExpectAccepts(*esc, {R"("a\nb\\")"});
  ExpectRefuses(*esc, {R"("a\u000ab\\")", R"("anb\\")"});
  auto nonascii = Schema("{\"type\":\"string\",\"pattern\":\"^[\xC3\xA0-\xC3\xBF]+x$\"}");
  ExpectAccepts(*nonascii, {"\"\xC3\xA9\xC3\xA0x\""});
  ExpectRefuses(*nonascii, {"\"ex\"", "\"\xC3\x9Fx\""});
  auto alt = Schema(R"({"type":"string","pattern":"^cat$|^dog|fish$"})");
  ExpectAccepts(*alt, {R"("cat")", R"("dogs")", R"("goldfish")"});
  ExpectRefuses(*alt, {R"("cats")", R"("hotdog")", R"("fishy")"});
  // With maxLength the pattern must still end in time.
  auto tight = Schema(R"({"type":"string","pattern":"^a+b$","maxLength":3})");
  ExpectAccepts(*tight, {R"("ab")", R"("aab")"});
  ExpectRefuses(*tight, {R"("aaab")", R"("aaa")"});
  ExpectNoDeadEnds(*tight, R"("aa)");
  // The plain-text shortcut of the token mask is off inside a pattern.
  JsonGrammar::State s = zip->Start();
  ASSERT_TRUE(zip->Feed(s, "\"1"));
  EXPECT_EQ(zip->StringRoom(s), -1);
  for (const auto& [pattern, what] : std::vector<std::pair<std::string, std::string>>{
           {"(a)\\\\1", "backreference"}, {"a(?=b)", "lookaround"}, {"(?<!a)b", "lookaround"},
           {"\\\\bword", "word boundary"}, {"\\\\p{L}", "escape \\p"}, {"a^b", "^ or $"}, {"(^a)", "^ or $"}}) {
    ExpectError(R"({"type":"object","properties":{"s":{"type":"string","pattern":")" + pattern + "\"}}}",
                "/properties/s/pattern", what);
  }
  ExpectError(R"({"type":"string","pattern":"(ab"})", "/pattern", "unterminated group", ErrorCode::kInvalid);
  ExpectError(R"({"type":"string","pattern":"[b-a]"})", "/pattern", "out of order", ErrorCode::kInvalid);
  ExpectError(R"({"type":"string","pattern":"^a{5}$","maxLength":3})", "/pattern", "maxLength", ErrorCode::kInvalid);
  JsonGrammarOptions small;
  small.max_pattern_states = 50;
  auto big = JsonGrammar::FromSchema(OrderedJson::parse(R"({"type":"string","pattern":"^[a-z]{100}$"})"), small);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.errors().front().code, ErrorCode::kLimit);
  EXPECT_EQ(big.errors().front().path, "/pattern");
}

TEST(JsonSchemaKeywords, FormatsAreBuiltInPatterns) {
  struct Case {
    const char* format;
    std::vector<const char*> good, bad;
  };
  const Case cases[] = {
      {"date", {"2024-02-29", "2023-12-31", "2000-02-29"}, {"2023-02-29", "2023-04-31", "1900-02-29", "2023-13-01", "23-01-01"}},
      {"time", {"23:59:59Z", "00:00:00.123+05:30"}, {"24:00:00Z", "12:00:00", "12:60:00Z"}},
      {"date-time", {"2024-01-15T10:20:30Z", "2024-01-15T10:20:30.5-08:00"}, {"2024-01-15 10:20:30Z", "2024-01-15T10:20Z"}},
      {"duration", {"P1D", "PT1H30M", "P1Y2M3DT4H", "P2W"}, {"P", "PT", "P1H", "1D"}},
      {"uuid", {"123e4567-e89b-12d3-a456-426614174000"}, {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}},
      {"email", {"a.b+c@example.co.uk", "x@y.io"}, {"a@b", "@b.com", "a b@c.com", "a@-b.com"}},
      {"ipv4", {"192.168.0.1", "0.0.0.0", "255.255.255.255"}, {"256.1.1.1", "01.1.1.1", "1.1.1"}},
      {"ipv6", {"::1", "::", "2001:db8::8a2e:370:7334", "fe80:0:0:0:0:0:0:1"}, {":::", "1:2:3:4:5:6:7:8:9", "12345::"}},
      {"uri", {"https://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c"}, {"example.com", "http://a b", "1http:x"}},
  };
  for (const Case& c : cases) {
    auto g = Schema(std::string(R"({"type":"string","format":")") + c.format + "\"}");
    for (const char* t : c.good) EXPECT_TRUE(g->Matches(std::string("\"") + t + "\"")) << c.format << " " << t;
    for (const char* t : c.bad) EXPECT_FALSE(g->Matches(std::string("\"") + t + "\"")) << c.format << " " << t;
    for (const char* t : c.good) ExpectNoDeadEnds(*g, std::string("\"") + t);
  }
  ExpectError(R"({"type":"object","properties":{"p":{"type":"string","format":"password"}}})",
              "/properties/p/format", "\"password\"");
  // Both a format and a pattern (zod's string formats write the two): the strings both take.
  auto both = Schema(R"({"type":"string","format":"date","pattern":"^2"})");
  EXPECT_TRUE(both->Matches("\"2024-02-29\""));
  EXPECT_FALSE(both->Matches("\"1999-01-01\""));  // a date, not the pattern's
  EXPECT_FALSE(both->Matches("\"2x\""));          // the pattern's, not a date
  ExpectNoDeadEnds(*both, "\"2024-02-2");
  ExpectError(R"({"type":"string","format":"date","pattern":"^x"})", "/format", "both", ErrorCode::kInvalid);
  ExpectError(R"({"type":"number","format":"time-delta"})", "/format", "string values");
}

TEST(JsonSchemaKeywords, PropertyCounts) {
  auto g = Schema(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},
                      "c":{"type":"integer"}},"minProperties":2,"maxProperties":2})");
  ExpectAccepts(*g, {R"({"a":1,"b":2})", R"({"a":1,"c":2})", R"({"b":1,"c":2})"});
  ExpectRefuses(*g, {"{}", R"({"a":1})", R"({"c":1})", R"({"a":1,"b":2,"c":3})"});
  // Writing "c" first would leave too few properties: refused at its key.
  for (const char* t : {R"({"c")", R"({"b":1,"c":2)", R"({"a":1,"b":2)"}) ExpectNoDeadEnds(*g, t);
  JsonGrammar::State s = g->Start();
  EXPECT_FALSE(g->Feed(s, R"({"c")"));
  auto req = Schema(R"({"type":"object","properties":{"a":{},"b":{},"c":{}},"required":["c"],"maxProperties":2})");
  ExpectAccepts(*req, {R"({"c":1})", R"({"a":1,"c":1})", R"({"b":1,"c":1})"});
  ExpectRefuses(*req, {R"({"a":1,"b":1,"c":1})"});
  auto map = Schema(R"({"type":"object","additionalProperties":{"type":"integer"},"minProperties":1,"maxProperties":2})");
  ExpectAccepts(*map, {R"({"x":1})", R"({"x":1,"y":2})"});
  ExpectRefuses(*map, {"{}", R"({"x":"s"})", R"({"x":1,"y":2,"z":3})"});
  ExpectError(R"({"type":"object","properties":{"a":{}},"minProperties":2})", "", "minProperties",
              ErrorCode::kInvalid);
  ExpectError(R"({"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}})",
              "/additionalProperties", "no properties");
}

// OpenAPI's "nullable": true beside a type or an enum (the openai SDKs' zod helper writes it):
// null is allowed too.
TEST(JsonSchemaKeywords, OpenApiNullable) {
  auto g = Schema(R"({"type":"object","properties":{"s":{"type":"string","maxLength":3,"nullable":true},
      "n":{"type":"number","nullable":true},"e":{"type":"string","enum":["a","b"],"nullable":true},
      "k":{"type":"integer","nullable":false}},"required":["s","n","e","k"],"additionalProperties":false})");
  ExpectAccepts(*g, {R"({"s":null,"n":null,"e":null,"k":1})", R"({"s":"abc","n":1.5,"e":"a","k":-2})"});
  ExpectRefuses(*g, {R"({"s":null,"n":null,"e":null,"k":null})", R"({"s":"abcd","n":1,"e":"a","k":1})",
                     R"({"s":"a","n":1,"e":"c","k":1})"});
  ExpectError(R"({"type":"string","nullable":"yes"})", "/nullable", "true or false", ErrorCode::kInvalid);
}

// The options' cap for strings without maxLength gives way to what a format needs; a schema's own
// maxLength does not.
TEST(JsonSchemaKeywords, StringCapGivesWayToAFormat) {
  JsonGrammarOptions o;
  o.max_string_length = 12;
  auto g = JsonGrammar::FromSchema(OrderedJson::parse(R"({"type":"string","format":"date-time"})"), o);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE((*g)->Matches("\"2024-01-02T03:04:05Z\""));
  EXPECT_FALSE((*g)->Matches("\"2024-01-02T03:04:05.123Z\""));  // past the minimum, the cap holds
  auto own = JsonGrammar::FromSchema(OrderedJson::parse(R"({"type":"string","format":"date-time","maxLength":12})"), o);
  EXPECT_FALSE(own.ok());
}

TEST(JsonSchemaKeywords, AllOfOneOfAndNullable) {
  // pydantic v1 wraps a described $ref in allOf; a single member is that member.
  auto single = Schema(R"({"definitions":{"P":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},
      "type":"object","properties":{"p":{"title":"P","description":"d","allOf":[{"$ref":"#/definitions/P"}]}},"required":["p"]})");
  ExpectAccepts(*single, {R"({"p":{"x":1}})"});
  ExpectRefuses(*single, {R"({"p":{}})"});
  auto merged = Schema(R"({"$defs":{"A":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}},
      "allOf":[{"$ref":"#/$defs/A"},{"type":"object","properties":{"b":{"type":"integer","minimum":0}},"required":["b"]}]})");
  ExpectAccepts(*merged, {R"({"a":"x","b":1})"});
  ExpectRefuses(*merged, {R"({"a":"x"})", R"({"b":1})", R"({"a":"x","b":-1})"});
  // A closed member forbids what it does not list.
  auto closed = Schema(R"({"allOf":[{"type":"object","properties":{"a":{},"b":{}},"additionalProperties":false},
      {"type":"object","properties":{"a":{"type":"integer"},"c":{}}}]})");
  ExpectAccepts(*closed, {R"({"a":1})", R"({"a":1,"b":"x"})"});
  ExpectRefuses(*closed, {R"({"a":"s"})", R"({"c":1})"});
  ExpectError(R"({"allOf":[{"type":"string","maxLength":2},{"type":"string","maxLength":3}]})", "/allOf/1/maxLength",
              "differently");
  ExpectError(R"({"allOf":[{"type":"string"},{"type":"integer"}]})", "/allOf/1/type", "no type", ErrorCode::kInvalid);
  // oneOf as anyOf when the alternatives say their types and start differently.
  auto one = Schema(R"({"oneOf":[{"type":"string","format":"date"},{"type":"integer"},{"type":"null"}]})");
  ExpectAccepts(*one, {R"("2024-01-01")", "3", "null"});
  ExpectRefuses(*one, {R"("x")", "1.5"});
  ExpectError(R"({"oneOf":[{"type":"integer"},{"minLength":3}]})", "/oneOf/1", "without \"type\"");
  ExpectError(R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "/oneOf", "same character");
  // zod's .nullable() and pydantic's Optional.
  auto zod = Schema(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],
      "additionalProperties":false},{"type":"null"}]})");
  ExpectAccepts(*zod, {"null", R"({"a":"x"})"});
  auto pyd = Schema(R"({"properties":{"n":{"anyOf":[{"type":"integer","maximum":3},{"type":"null"}],"default":null,
      "title":"N"}},"type":"object"})");
  ExpectAccepts(*pyd, {R"({"n":null})", R"({"n":3})", "{}"});
  ExpectRefuses(*pyd, {R"({"n":4})"});
}

TEST(JsonSchemaKeywords, TuplesAndAnnotations) {
  auto closed = Schema(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false,"minItems":1})");
  ExpectAccepts(*closed, {"[1]", R"([1,"a"])"});
  ExpectRefuses(*closed, {"[]", R"(["a"])", R"([1,"a",2])", "[1,2]"});
  auto rest = Schema(R"({"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}})");
  ExpectAccepts(*rest, {"[]", R"(["a"])", R"(["a",1,2])"});
  ExpectRefuses(*rest, {"[1]", R"(["a","b"])"});
  // draft 7's tuples (pydantic v1, zod-to-json-schema).
  auto old = Schema(R"({"type":"array","items":[{"type":"integer"},{"type":"number"}],"minItems":2,"maxItems":2})");
  ExpectAccepts(*old, {"[1,2.5]"});
  ExpectRefuses(*old, {"[1]", "[1.5,2]", "[1,2,3]"});
  auto extra = Schema(R"({"type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"boolean"}})");
  ExpectAccepts(*extra, {"[1,true,false]"});
  ExpectRefuses(*extra, {"[1,2]"});
  ExpectError(R"({"type":"array","additionalItems":false})", "/additionalItems", "ignored");
  ExpectError(R"({"type":"array","prefixItems":[{}],"items":false,"minItems":2})", "", "tuple's length",
              ErrorCode::kInvalid);
  auto notes = Schema(R"({"type":"object","title":"t","description":"d","default":{},"examples":[{}],
      "$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"s":{"type":"string","readOnly":true,
      "writeOnly":false,"deprecated":true,"contentEncoding":"base64","contentMediaType":"image/png"}}})");
  ExpectAccepts(*notes, {R"({"s":"x"})"});
}

// Random walks: bytes sampled among those the automaton takes (closing bytes favoured so texts
// end); false when a live state takes nothing or no text ends within the budget.
bool RandomWalk(const JsonGrammar& g, std::mt19937_64& rng, std::string& text) {
  JsonGrammar::State s = g.Start();
  text.clear();
  for (int step = 0; step < 4000; ++step) {
    if (g.Accepting(s) && (s.empty() || rng() % 3 == 0)) return true;
    std::vector<uint8_t> allowed = Allowed(g, s);
    if (allowed.empty()) return false;
    const bool late = text.size() > 150;
    std::vector<uint8_t> closers, calm, ascii;
    for (uint8_t b : allowed) {
      if (b == '"' || b == '}' || b == ']' || (late && b == ',')) closers.push_back(b);
      if (b != '{' && b != '[' && b != ',') calm.push_back(b);
      if (b >= 0x20 && b < 0x7f) ascii.push_back(b);
    }
    const std::vector<uint8_t>* pool = &allowed;
    if (!closers.empty() && rng() % 100 < (late ? 90u : 12u)) {
      pool = &closers;
    } else if (late && !calm.empty()) {
      pool = &calm;
    } else if (!ascii.empty() && rng() % 10 != 0) {
      pool = &ascii;
    }
    const uint8_t b = (*pool)[rng() % pool->size()];
    EXPECT_TRUE(g.Step(s, b));
    text.push_back(static_cast<char>(b));
  }
  return g.Accepting(s);
}

// pydantic (v1, Debian's python3-pydantic) models as JSON Schema, one per line.
const char* kPydanticModels = R"PY(
import datetime, enum, ipaddress, json, uuid
from typing import Dict, List, Literal, Optional, Tuple, Union
from pydantic import BaseModel, Field, conint, confloat, constr, conlist

class Color(str, enum.Enum):
    red = 'red'
    green = 'green'

class Address(BaseModel):
    street: constr(min_length=1, max_length=40)
    zip: constr(regex=r'^[0-9]{5}(-[0-9]{4})?$')
    country: Literal['US', 'CA'] = 'US'

class Person(BaseModel):
    id: uuid.UUID
    name: constr(max_length=20)
    age: conint(ge=0, le=150)
    score: confloat(gt=0, lt=1)
    height: Optional[confloat(ge=0.5, le=2.5)]
    born: datetime.date
    seen: datetime.datetime = Field(..., description='last seen')
    wake: datetime.time
    color: Color = Color.red
    address: Address = Field(..., description='home')
    tags: conlist(constr(regex=r'^[a-z]+$', max_length=8), min_items=1, max_items=3)
    point: Tuple[int, float]
    counts: Optional[Dict[str, conint(multiple_of=5)]]
    key: Union[int, str]
    ip: ipaddress.IPv4Address
    ip6: Optional[ipaddress.IPv6Address]

class Tree(BaseModel):
    value: confloat(ge=-1.5, le=1000)
    children: List['Tree'] = []
Tree.update_forward_refs()

class Invoice(BaseModel):
    number: constr(regex=r'^INV-\d{4}-(?:[A-Z]{2}|\d{3})$')
    amount: confloat(ge=0.01, le=99999.99)
    currency: Literal['EUR', 'USD']
    lines: conlist(Tuple[constr(max_length=10), conint(gt=0, lt=100)], max_items=4)
    due: Optional[datetime.date] = None
    paid: bool = False

for m in (Address, Person, Tree, Invoice):
    print(json.dumps(m.schema()))
)PY";

// zod-to-json-schema's output shapes for common zod schemas (written out: no npm package here).
const char* kZodSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","minLength":1},"email":{"type":"string","format":"email"},
       "age":{"type":"integer","exclusiveMinimum":0,"maximum":120},"ratio":{"type":"number","minimum":0,"maximum":1},
       "nick":{"type":["string","null"]},"role":{"type":"string","enum":["admin","user"]},
       "site":{"type":"string","format":"uri"},"id":{"type":"string","format":"uuid"},
       "when":{"type":"string","format":"date-time"},"code":{"type":"string","pattern":"^[A-Z]{3}-\\d+$"}},
       "required":["name","email","age","ratio","nick","role"],"additionalProperties":false,
       "$schema":"http://json-schema.org/draft-07/schema#"})",
    R"({"type":"object","properties":{"owner":{"anyOf":[{"type":"object","properties":{"login":{"type":"string"}},
       "required":["login"],"additionalProperties":false},{"type":"null"}]},"pair":{"type":"array","minItems":2,
       "maxItems":2,"items":[{"type":"string","format":"ipv4"},{"type":"number","exclusiveMaximum":0}]},
       "meta":{"type":"object","additionalProperties":{"type":"boolean"},"maxProperties":3},
       "span":{"type":"string","format":"duration"}},"required":["owner","pair"],"additionalProperties":false,
       "$schema":"http://json-schema.org/draft-07/schema#"})",
    R"({"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{
       "t":{"type":"array","prefixItems":[{"type":"integer","multipleOf":3},{"type":"string","pattern":"^(ab|cd)*$"}],
       "items":false,"minItems":2},"o":{"allOf":[{"type":"object","properties":{"a":{"type":"string","format":"date"}},
       "required":["a"]},{"type":"object","properties":{"b":{"type":"string","format":"time"}},"required":["b"]}]},
       "u":{"oneOf":[{"type":"string","format":"ipv6"},{"type":"number","minimum":-2.5,"maximum":-0.5}]}},
       "required":["t","o","u"],"minProperties":3,"additionalProperties":false})",
};

// Validates each schema's texts with Python's jsonschema (the draft its $schema names, draft 7
// by default; formats checked); returns its report.
std::string ValidateWithPython(const OrderedJson& cases) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("json_schema_keywords_" + std::to_string(::getpid()) + ".json")).string();
  std::ofstream(path) << cases.dump();
  const char* script = R"PY(
import json, sys, jsonschema
cases = json.load(open(sys.argv[1]))
bad = 0
for c in cases:
    cls = jsonschema.validators.validator_for(c['schema'], default=jsonschema.Draft7Validator)
    v = cls(c['schema'], format_checker=cls.FORMAT_CHECKER)
    for t in c['texts']:
        errors = list(v.iter_errors(json.loads(t)))
        if bool(errors) != c.get('invalid', False):
            bad += 1
            print('MISMATCH', json.dumps(c['schema'])[:200], t, [e.message for e in errors][:2])
print('checked', sum(len(c['texts']) for c in cases), 'bad', bad)
)PY";
  auto r = test::RunProgram({"/usr/bin/python3", "-c", script, path});
  std::filesystem::remove(path);
  return r.out + r.err;
}

TEST(JsonSchemaKeywords, PydanticAndZodSchemasWalkToValidTexts) {
  auto py = test::RunProgram({"/usr/bin/python3", "-c", kPydanticModels});
  ASSERT_EQ(py.exit_code, 0) << "python3-pydantic (scripts/deps) writes the schemas:\n" << py.err;
  std::vector<OrderedJson> schemas;
  std::istringstream lines(py.out);
  for (std::string line; std::getline(lines, line);) schemas.push_back(OrderedJson::parse(line));
  ASSERT_EQ(schemas.size(), 4u);
  for (const char* z : kZodSchemas) schemas.push_back(OrderedJson::parse(z));
  OrderedJson cases = OrderedJson::array();
  std::mt19937_64 rng(42);
  size_t walks = 0;
  for (const OrderedJson& schema : schemas) {
    auto g = JsonGrammar::FromSchema(schema);
    ASSERT_TRUE(g.ok()) << schema.dump() << "\n" << FormatErrors(g.errors());
    OrderedJson texts = OrderedJson::array();
    for (int i = 0; i < 40; ++i) {
      std::string text;
      ASSERT_TRUE(RandomWalk(**g, rng, text)) << schema.dump() << "\nstuck or unfinished after: " << text;
      EXPECT_TRUE((*g)->Matches(text));
      texts.push_back(text);
      ++walks;
    }
    cases.push_back({{"schema", schema}, {"texts", texts}});
  }
  // A control the validator must refuse, so a validator that checks nothing fails the test.
  cases.push_back({{"schema", schemas[0]}, {"texts", {R"({"street":"","zip":"1"})"}}, {"invalid", true}});
  const std::string report = ValidateWithPython(cases);
  EXPECT_NE(report.find("checked " + std::to_string(walks + 1) + " bad 0"), std::string::npos) << report;
}

}  // namespace
}  // namespace mlc
