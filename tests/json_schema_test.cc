// Structured output: the JSON automaton accepts and refuses strings for each supported keyword,
// unsupported keywords are named with their pointer, a vocabulary's trie mask equals the flat
// per-token walk, and the per-step mask time at a 32k and a 150k vocabulary (printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <unordered_set>

#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/tokenizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

std::shared_ptr<const JsonGrammar> Schema(const char* text, JsonGrammarOptions o = {}) {
  auto g = JsonGrammar::FromSchema(OrderedJson::parse(text), o);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : FormatErrors(g.errors()));
  return g.ok() ? *g : JsonGrammar::AnyObject();
}

void ExpectAccepts(const JsonGrammar& g, std::initializer_list<const char*> texts) {
  for (const char* t : texts) EXPECT_TRUE(g.Matches(t)) << t;
}
void ExpectRefuses(const JsonGrammar& g, std::initializer_list<const char*> texts) {
  for (const char* t : texts) EXPECT_FALSE(g.Matches(t)) << t;
}

TEST(JsonGrammar, AnyObjectAndWhitespaceRule) {
  auto g = JsonGrammar::AnyObject();
  ExpectAccepts(*g, {"{}", R"({"a":1})", R"({"a": 1, "b": [true, null, "x"]})",
                     R"({"k":{"n":[1,2.5,-3e+2,0.0]}})", R"({"s":"\u00e9\n\"q\""})",
                     "{\"\xC3\xA9\":\"\xE2\x82\xAC\xF0\x9F\x98\x80\"}"});
  ExpectRefuses(*g, {"", "[]", "1", R"("a")", "{ }", R"({"a" :1})", R"({"a":  1})", R"({"a":1 })",
                     R"({"a":01})", R"({"a":1.})", R"({"a":-})", R"({"a":tru})", R"({"a":1,})",
                     "{\"a\":\"\x01\"}", R"({"a":"\x"})", R"({"a":"\ud800"})", "{\"a\":\"\xC3\"}",
                     "{\"a\":\"\xED\xA0\x80\"}", "{\"a\":\"\xC0\xAF\"}", R"({"a":1}{)", "{\"a\":1}\n"});
  // Prefixes are live states, not accepting ones.
  JsonGrammar::State s = g->Start();
  EXPECT_TRUE(g->Feed(s, R"({"a":[1,)"));
  EXPECT_FALSE(g->Accepting(s));
}

TEST(JsonGrammar, PropertiesRequiredAndOrder) {
  auto g = Schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                      "nick":{"type":"string"}},"required":["name","age"],"additionalProperties":false})");
  ExpectAccepts(*g, {R"({"name":"x","age":3})", R"({"name": "x", "age": -3, "nick": ""})"});
  ExpectRefuses(*g, {R"({"age":3,"name":"x"})", R"({"name":"x"})", R"({"name":"x","age":3.5})",
                     R"({"name":1,"age":3})", R"({"name":"x","age":3,"other":1})", "{}",
                     R"({"name":"x","nick":"y","age":3})"});
  // Optional properties may be left out anywhere.
  auto opt = Schema(R"({"properties":{"a":{"type":"integer"},"ab":{"type":"integer"},"b":{"type":"null"}}})");
  ExpectAccepts(*opt, {"{}", R"({"ab":1})", R"({"a":1,"b":null})", R"({"b":null})"});
  ExpectRefuses(*opt, {R"({"b":null,"a":1})", R"({"a":1,"a":1})"});
}

TEST(JsonGrammar, EnumConstTypesAndLengths) {
  auto e = Schema(R"({"enum":["red","green",1,12,null,{"x":[1]}]})");
  ExpectAccepts(*e, {R"("red")", R"("green")", "1", "12", "null", R"({"x":[1]})"});
  ExpectRefuses(*e, {R"("blue")", "2", "123", R"({"x":[1] })", R"("re")"});
  auto c = Schema(R"({"properties":{"v":{"const":"only"}},"required":["v"]})");
  ExpectAccepts(*c, {R"({"v":"only"})"});
  ExpectRefuses(*c, {R"({"v":"other"})"});
  auto types = Schema(R"({"type":["string","null","boolean","number"]})");
  ExpectAccepts(*types, {R"("s")", "null", "true", "false", "1.5e3", "-0"});
  ExpectRefuses(*types, {"[]", "{}", "nul"});
  auto len = Schema(R"({"type":"string","minLength":2,"maxLength":3})");
  ExpectAccepts(*len, {R"("ab")", R"("abc")", "\"\xC3\xA9\xC3\xA9\"", R"("\n\t")"});
  ExpectRefuses(*len, {R"("a")", R"("abcd")", "\"\xC3\xA9\""});
  // The server's cap applies where the schema gives no maxLength.
  JsonGrammarOptions capped;
  capped.max_string_length = 2;
  auto cap = Schema(R"({"type":"string"})", capped);
  ExpectAccepts(*cap, {R"("ab")"});
  ExpectRefuses(*cap, {R"("abc")"});
}

TEST(JsonGrammar, ArraysNestingRefsAndAnyOf) {
  auto a = Schema(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  ExpectAccepts(*a, {"[1]", "[1, 2,3]"});
  ExpectRefuses(*a, {"[]", "[1,2,3,4]", R"(["a"])", "[1 ]", "[ 1]"});
  auto nested = Schema(R"({"type":"object","properties":{"items":{"type":"array","items":{
      "type":"object","properties":{"id":{"type":"integer"},"tags":{"type":"array","items":{"enum":["a","b"]}}},
      "required":["id","tags"]}}},"required":["items"]})");
  ExpectAccepts(*nested, {R"({"items":[]})", R"({"items":[{"id":1,"tags":["a","b"]},{"id":2,"tags":[]}]})"});
  ExpectRefuses(*nested, {R"({"items":[{"id":1}]})", R"({"items":[{"id":1,"tags":["c"]}]})"});
  auto ref = Schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},
      "$ref":"#/$defs/node"})");
  ExpectAccepts(*ref, {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":null}})"});
  ExpectRefuses(*ref, {R"({"v":1,"next":{"v":2}})", R"({"v":1,"next":1})"});
  // The automaton's stack is bounded.
  JsonGrammarOptions shallow;
  shallow.max_depth = 3;
  auto deep = JsonGrammar::AnyObject(shallow);
  EXPECT_TRUE(deep->Matches(R"({"a":{"b":1}})"));
  EXPECT_FALSE(deep->Matches(R"({"a":{"b":{"c":{"d":1}}}})"));
}

TEST(JsonGrammar, UnsupportedKeywordsAreNamedWithTheirPointer) {
  struct Case {
    const char* schema;
    const char* path;
    const char* word;
  };
  for (const Case& c : {Case{R"({"type":"object","properties":{"age":{"type":"number","multipleOf":0.5}}})",
                             "/properties/age/multipleOf", "integer divisors"},
                        Case{R"({"type":"integer","minimum":5,"maximum":4})", "", "no integer"},
                        Case{R"({"type":"integer","exclusiveMinimum":4,"exclusiveMaximum":5})", "", "no integer"},
                        Case{R"({"type":"string","minimum":1})", "/minimum", "number values"},
                        Case{R"J({"type":"string","pattern":"(?=a)"})J", "/pattern", "lookaround"},
                        Case{R"({"not":{}})", "/not", "not"},
                        Case{R"({"type":"object","properties":{"a":{}},"additionalProperties":{"type":"string"}})",
                             "/additionalProperties", "additionalProperties"},
                        Case{R"({"anyOf":[{"type":"string"},{"type":"string","maxLength":2}]})", "/anyOf",
                             "same character"},
                        Case{R"({"$ref":"http://example.com/x"})", "/$ref", "$ref"},
                        Case{R"({"type":"object","properties":{"a":{}},"required":["b"]})", "/required/0",
                             "required"}}) {
    auto g = JsonGrammar::FromSchema(OrderedJson::parse(c.schema));
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.errors().front().path, c.path) << c.schema;
    EXPECT_NE(g.errors().front().message.find(c.word), std::string::npos) << g.errors().front().message;
  }
  auto g = JsonGrammar::FromSchema(OrderedJson::parse(R"({"format":"password"})"));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.errors().front().code, ErrorCode::kUnsupported);
  EXPECT_EQ(g.errors().front().path, "/format");
  EXPECT_NE(g.errors().front().message.find("\"password\""), std::string::npos);
}

// An integer's range is enforced byte by byte: a text is taken exactly when some integer within
// the bounds starts with it, and complete exactly when it is one (checked against every integer
// text of up to five characters); zod's safe-integer range bounds the digits.
TEST(JsonGrammar, IntegerRangesAreEnforcedWhileSampling) {
  struct Range {
    const char* schema;
    int64_t low, high;
  };
  for (const Range& r : {Range{R"({"type":"integer","minimum":0,"maximum":120})", 0, 120},
                         Range{R"({"type":"integer","minimum":-15,"maximum":-3})", -15, -3},
                         Range{R"({"type":"integer","exclusiveMinimum":-1.5,"exclusiveMaximum":42})", -1, 41},
                         Range{R"({"type":"integer","minimum":7.2})", 8, INT64_MAX},
                         Range{R"({"type":"integer","maximum":-100})", INT64_MIN, -100},
                         Range{R"({"minimum":-5,"maximum":5,"type":["integer","null"]})", -5, 5}}) {
    auto g = JsonGrammar::FromSchema(OrderedJson::parse(r.schema));
    ASSERT_TRUE(g.ok()) << r.schema << ": " << FormatErrors(g.errors());
    // The prefixes of the integers within the bounds, by brute force over a window wider than
    // every prefix tried needs (an open bound reaches any longer text past the window).
    std::unordered_set<std::string> prefixes;
    for (int64_t v = std::max<int64_t>(r.low, -200000); v <= std::min<int64_t>(r.high, 200000); ++v) {
      const std::string t = std::to_string(v);
      for (size_t n = 1; n <= t.size(); ++n) prefixes.insert(t.substr(0, n));
    }
    if (r.low <= 0 && r.high >= 0) prefixes.insert({"-", "-0"});  // -0 is 0
    auto reachable = [&](const std::string& prefix) { return prefixes.count(prefix) > 0; };
    std::vector<std::string> texts = {"-", "-0", "0"};
    for (int64_t v = -9999; v <= 99999; ++v) texts.push_back(std::to_string(v));
    for (const std::string& t : texts) {
      JsonGrammar::State st = (*g)->Start();
      const bool fed = (*g)->Feed(st, t);
      EXPECT_EQ(fed, reachable(t)) << r.schema << " fed " << t;
      if (!fed) continue;
      const bool whole = t != "-" && std::stoll(t) >= r.low && std::stoll(t) <= r.high;
      EXPECT_EQ((*g)->Accepting(st), whole) << r.schema << " complete " << t;
    }
    EXPECT_FALSE((*g)->Matches("1.0")) << r.schema;
  }
  auto safe = JsonGrammar::FromSchema(OrderedJson::parse(
      R"({"type":"object","properties":{"n":{"type":"integer","minimum":-9007199254740991,"maximum":9007199254740991}},"required":["n"]})"));
  ASSERT_TRUE(safe.ok());
  EXPECT_TRUE((*safe)->Matches(R"({"n":9007199254740991})"));
  EXPECT_TRUE((*safe)->Matches(R"({"n":-9007199254740991})"));
  EXPECT_FALSE((*safe)->Matches(R"({"n":9007199254740992})"));
  EXPECT_FALSE((*safe)->Matches(R"({"n":90071992547409910})"));
  // The bound applies as the value ends, before the parent's next byte.
  auto small = JsonGrammar::FromSchema(OrderedJson::parse(R"({"type":"array","items":{"type":"integer","minimum":10}})"));
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE((*small)->Matches("[10,11]"));
  EXPECT_FALSE((*small)->Matches("[1,11]"));
  JsonGrammar::State st = (*small)->Start();
  EXPECT_TRUE((*small)->Feed(st, "[1"));
  EXPECT_FALSE((*small)->Feed(st, ","));
}

// Every spelling of one $ref target (~0 or %7E0, letters percent-encoded or not) is one
// compiled node: 4096 references to a 4k-node definition stay a grammar of a few thousand nodes
// (compiled per spelling it would be 17M nodes, far over the default max_grammar_nodes).
TEST(JsonGrammar, RefSpellingsCompileToOneTarget) {
  const std::string name = "t~a~b~c~d~e~f~g~h~i~j~k~l";  // 12 tildes
  auto spelling = [&name](size_t n) {
    std::string out = "#/$defs/";
    size_t tilde = 0;
    for (size_t i = 0; i < name.size(); ++i) {
      if (name[i] == '~') {
        out += (n >> tilde++) & 1 ? "%7E0" : "~0";
      } else {
        out += (n >> 12) & 1 ? "%" + std::string(1, "0123456789ABCDEF"[name[i] >> 4]) +
                                   std::string(1, "0123456789ABCDEF"[name[i] & 15])
                             : std::string(1, name[i]);
      }
    }
    return out;
  };
  OrderedJson target = {{"type", "object"}, {"properties", OrderedJson::object()}};
  for (int i = 0; i < 64; ++i) {
    OrderedJson inner = {{"type", "object"}, {"properties", OrderedJson::object()}};
    for (int j = 0; j < 64; ++j) inner["properties"]["f" + std::to_string(j)] = {{"type", "string"}};
    target["properties"]["g" + std::to_string(i)] = inner;
  }
  OrderedJson schema = {{"$defs", {{name, target}}}, {"type", "object"}, {"properties", OrderedJson::object()}};
  size_t n = 0;
  for (int i = 0; i < 64; ++i) {
    OrderedJson level = {{"type", "object"}, {"properties", OrderedJson::object()}};
    for (int j = 0; j < 64; ++j) level["properties"]["r" + std::to_string(j)] = {{"$ref", spelling(n++)}};
    schema["properties"]["p" + std::to_string(i)] = level;
  }
  auto g = JsonGrammar::FromSchema(schema);
  ASSERT_TRUE(g.ok()) << FormatErrors(g.errors());
  EXPECT_LT((*g)->node_count(), 10000u);
  EXPECT_TRUE((*g)->Matches(R"({"p0":{"r0":{"g1":{"f2":"x"}}}})"));
  // A '~' that is not ~0 or ~1 and a bad %XX are malformed pointers, named at the $ref.
  for (const char* bad : {R"({"$defs":{"a~b":{}},"$ref":"#/$defs/a~b"})",
                          R"({"$defs":{"a":{}},"$ref":"#/$defs/%6"})"}) {
    auto e = JsonGrammar::FromSchema(OrderedJson::parse(bad));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.errors().front().path, "/$ref") << bad;
    EXPECT_EQ(e.errors().front().code, ErrorCode::kInvalid) << bad;
  }
  // A cycle of $refs with no value between them.
  auto cycle = JsonGrammar::FromSchema(OrderedJson::parse(
      R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"));
  ASSERT_FALSE(cycle.ok());
  EXPECT_NE(cycle.errors().front().message.find("cycle"), std::string::npos);
}

TEST(JsonGrammar, SchemaAndGrammarSizeLimitsAreNamed) {
  OrderedJson wide = {{"type", "object"}, {"properties", OrderedJson::object()}};
  for (int i = 0; i < 64; ++i) {
    OrderedJson inner = {{"type", "object"}, {"properties", OrderedJson::object()}};
    for (int j = 0; j < 64; ++j) inner["properties"]["f" + std::to_string(j)] = {{"type", "integer"}};
    wide["properties"]["g" + std::to_string(i)] = inner;
  }
  EXPECT_TRUE(JsonGrammar::FromSchema(wide).ok());
  JsonGrammarOptions nodes;
  nodes.max_grammar_nodes = 1000;
  auto g = JsonGrammar::FromSchema(wide, nodes);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.errors().front().code, ErrorCode::kLimit);
  EXPECT_NE(g.errors().front().message.find("max_grammar_nodes"), std::string::npos);
  EXPECT_EQ(g.errors().front().path.rfind("/properties/g", 0), 0u) << g.errors().front().path;
  JsonGrammarOptions values;
  values.max_schema_values = 1000;
  g = JsonGrammar::FromSchema(wide, values);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.errors().front().code, ErrorCode::kLimit);
  EXPECT_EQ(g.errors().front().path, "");
  EXPECT_NE(g.errors().front().message.find("max_schema_values"), std::string::npos);
}

// Keywords the compiler would not apply are refused at their pointer, never dropped.
TEST(JsonGrammar, KeywordsThatWouldBeIgnoredAreRefused) {
  struct Case {
    const char* schema;
    const char* path;
    const char* word;
  };
  for (const Case& c : {Case{R"({"$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","type":"string"})",
                             "/type", "beside \"$ref\""},
                        Case{R"({"$ref":"#/$defs/a","$defs":{"a":{}},"properties":{"x":{}}})",
                             "/properties", "beside \"$ref\""},
                        Case{R"({"enum":["a","bb"],"maxLength":1})", "/maxLength", "beside \"enum\""},
                        Case{R"({"const":"a","enum":["a"]})", "/enum", "beside \"const\""},
                        Case{R"({"anyOf":[{"type":"string"},{"type":"null"}],"type":"object"})", "/type",
                             "beside \"anyOf\""},
                        Case{R"({"anyOf":[{"type":"string"},{"type":"null"}],"minLength":3})", "/minLength",
                             "beside \"anyOf\""},
                        Case{R"({"type":"integer","maxLength":3})", "/maxLength", "string values"},
                        Case{R"({"type":"object","items":{"type":"string"}})", "/items", "array values"},
                        Case{R"({"properties":{"a":{}},"minLength":1})", "/minLength", "string values"},
                        Case{R"({"type":"string","const":3})", "/const", "type"},
                        Case{R"({"type":"string","enum":[1,null]})", "/enum", "type"}}) {
    auto g = JsonGrammar::FromSchema(OrderedJson::parse(c.schema));
    ASSERT_FALSE(g.ok()) << c.schema;
    EXPECT_EQ(g.errors().front().path, c.path) << c.schema;
    EXPECT_NE(g.errors().front().message.find(c.word), std::string::npos) << g.errors().front().message;
  }
  // Annotations beside $ref stay allowed; "type" beside enum narrows the values.
  auto a = Schema(R"({"$defs":{"a":{"type":"integer"}},"$ref":"#/$defs/a","description":"d","title":"t"})");
  ExpectAccepts(*a, {"1"});
  auto e = Schema(R"({"type":"string","enum":["a",1,"b"]})");
  ExpectAccepts(*e, {R"("a")", R"("b")"});
  ExpectRefuses(*e, {"1"});
  auto i = Schema(R"({"type":"integer","enum":[1,2.0,2.5]})");
  ExpectAccepts(*i, {"1", "2.0"});
  ExpectRefuses(*i, {"2.5"});
}

// The trie walk gives what feeding each token's bytes to a copy of the state gives.
std::vector<uint8_t> FlatMask(const JsonGrammar& g, const JsonGrammar::State& s, const TokenVocabulary& v) {
  std::vector<uint8_t> out(v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) {
    JsonGrammar::State copy = s;
    const std::string& b = v.bytes(static_cast<int32_t>(i));
    out[i] = !b.empty() && g.Feed(copy, b);
  }
  return out;
}

// A vocabulary like a byte-level BPE one: the 256 bytes, then words with and without a leading
// space, JSON punctuation runs and pieces of UTF-8 characters.
std::vector<std::string> SyntheticVocabulary(size_t n, uint64_t seed) {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) out.emplace_back(1, static_cast<char>(b));
  std::mt19937_64 rng(seed);
  const std::string letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  const std::vector<std::string> punct = {"\"", "\":", "\": \"", "\",", "{\"", "}", "},", "\"}", "[", "],",
                                          ", \"", "\\n", "\xC3\xA9", "\xE2\x82", "\xAC", " ", "\xED\xA0\x80", "\x01", "\\u00e9"};
  while (out.size() < n) {
    std::string t = rng() % 3 == 0 ? " " : "";
    size_t len = 1 + rng() % 9;
    for (size_t k = 0; k < len; ++k) t += letters[rng() % letters.size()];
    if (rng() % 4 == 0) t = punct[rng() % punct.size()] + t;
    if (rng() % 5 == 0) t += punct[rng() % punct.size()];
    out.push_back(std::move(t));
  }
  return out;
}

TEST(TokenVocabulary, TrieMaskEqualsTheFlatWalk) {
  auto vocab = TokenVocabulary::FromBytes(SyntheticVocabulary(5000, 1));
  auto g = Schema(R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"number"},
                      "e":{"enum":["yes","no"]},"short":{"type":"string","maxLength":4}},
                      "required":["name","n","e","short"]})");
  for (const char* prefix : {"", "{", R"({"name":)", R"({"name":"ab)", "{\"name\":\"\xE2\x82",
                             R"({"name":"a\)", R"({"name":"a","n":1)", R"({"name":"a","n":1,"e":)",
                             R"({"name":"a","n":1,"e":"no","short":")", R"({"name":"a","n":1,"e":"no","short":"abc)",
                             R"({"name":"a","n":1,"e":"no","short":"abcd"})"}) {
    JsonGrammar::State s = g->Start();
    ASSERT_TRUE(g->Feed(s, prefix)) << prefix;
    std::vector<uint8_t> trie;
    vocab->Allowed(*g, s, trie);
    EXPECT_EQ(trie, FlatMask(*g, s, *vocab)) << prefix;
  }
}

TEST(TokenVocabulary, BytesOfRealTokenizers) {
  // Byte-level BPE (Qwen2): a piece of a UTF-8 character keeps its raw byte.
  auto qwen = Tokenizer::FromJsonFile(test::SharedPath("testdata/tokenizers/qwen2-readerlm/tokenizer.reconstructed.json"));
  ASSERT_TRUE(qwen.ok());
  auto v = TokenVocabulary::FromTokenizer(**qwen);
  EXPECT_EQ(v->size(), (*qwen)->VocabSize());
  for (const char* text : {"{\"name\": \"caf\xC3\xA9\"}", " hello world", "\xE2\x82\xAC 5"}) {
    std::string joined;
    for (int32_t id : (*qwen)->Encode(text)) joined += v->bytes(id);
    EXPECT_EQ(joined, text);
  }
  // SentencePiece-style (Phi-3's tokenizer.json: Metaspace + byte fallback): the leading space
  // of a word piece is kept.
  auto phi = Tokenizer::FromJsonFile(test::SharedPath("testdata/tokenizers/phi-3-mini/tokenizer.json"));
  ASSERT_TRUE(phi.ok());
  auto p = TokenVocabulary::FromTokenizer(**phi);
  for (const char* text : {"{\"a\": \"b c\"}", "x \xE2\x82\xAC\xF0\x9F\x98\x80"}) {
    std::string joined;
    for (int32_t id : (*phi)->Encode(text)) joined += p->bytes(id);
    EXPECT_NE(joined.find(std::string(text).substr(1)), std::string::npos) << joined;
  }
  // Special tokens are never allowed.
  auto special = (*phi)->TokenToId("<|endoftext|>");
  ASSERT_TRUE(special.has_value());
  EXPECT_TRUE(p->bytes(*special).empty());
}

// The matcher's mask over logits: stop ids (even past the tokenizer's vocabulary) only once the
// value is complete; an advance the grammar refuses leaves the state as it was.
TEST(GrammarMatcher, StopIdsOnlyWhenComplete) {
  auto vocab = TokenVocabulary::FromBytes({"1", "}", "{", "\"a\"", ":", "2", ""});
  GrammarMatcher m(JsonConstraint{Schema(R"({"type":"integer"})"), vocab});
  const float inf = std::numeric_limits<float>::infinity();
  const int32_t stops[] = {7};
  std::vector<float> logits(8, 0.5f);
  EXPECT_EQ(m.Constrain(logits, stops), 2u);  // "1", "2"
  EXPECT_EQ(logits, (std::vector<float>{0.5f, -inf, -inf, -inf, -inf, 0.5f, -inf, -inf}));
  EXPECT_FALSE(m.Advance(1));
  EXPECT_FALSE(m.Advance(6));  // no bytes
  EXPECT_TRUE(m.Advance(0));
  EXPECT_TRUE(m.Accepting());
  logits.assign(8, 0.5f);
  EXPECT_EQ(m.Constrain(logits, stops), 3u);  // more digits or the stop id
  EXPECT_EQ(logits, (std::vector<float>{0.5f, -inf, -inf, -inf, -inf, 0.5f, -inf, 0.5f}));
}

// The per-step mask time (figures in the README): the mean over the states met along a reply,
// for the real Phi-3 (32k) and Qwen2 (151k) vocabularies.
TEST(TokenVocabulary, MaskTimePerStep) {
  auto g = Schema(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"},
                      "tags":{"type":"array","items":{"type":"string"}}},"required":["name","age","tags"]})");
  const std::string reply = R"({"name": "Ada Lovelace", "age": 36, "tags": ["math", "engines"]})";
  for (const char* file : {"testdata/tokenizers/phi-3-mini/tokenizer.json",
                           "testdata/tokenizers/qwen2-readerlm/tokenizer.reconstructed.json"}) {
    auto tokenizer = Tokenizer::FromJsonFile(test::SharedPath(file));
    ASSERT_TRUE(tokenizer.ok()) << file;
    auto vocab = TokenVocabulary::FromTokenizer(**tokenizer);
    std::vector<uint8_t> allowed;
    JsonGrammar::State s = g->Start();
    double total = 0, worst = 0;
    for (char c : reply) {
      auto t0 = std::chrono::steady_clock::now();
      vocab->Allowed(*g, s, allowed);
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      total += ms;
      worst = std::max(worst, ms);
      ASSERT_TRUE(g->Step(s, static_cast<uint8_t>(c)));
    }
    std::printf("mask over %zu tokens: %.3f ms per step (mean of %zu states), worst %.3f ms\n",
                vocab->size(), total / static_cast<double>(reply.size()), reply.size(), worst);
    EXPECT_LT(total / static_cast<double>(reply.size()), 1000.0);
  }
  // And the synthetic vocabulary of the trie test at 150k, whose tokens hold far more JSON
  // punctuation than real ones (the string fast path feeds each of those).
  auto synthetic = TokenVocabulary::FromBytes(SyntheticVocabulary(150000, 7));
  std::vector<uint8_t> allowed;
  JsonGrammar::State s = g->Start();
  auto t0 = std::chrono::steady_clock::now();
  for (char c : reply) {
    synthetic->Allowed(*g, s, allowed);
    ASSERT_TRUE(g->Step(s, static_cast<uint8_t>(c)));
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("mask over 150000 synthetic tokens: %.3f ms per step\n", ms / static_cast<double>(reply.size()));
}

}  // namespace
}  // namespace mlc
