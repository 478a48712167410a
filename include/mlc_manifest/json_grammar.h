// Structured output: a JSON Schema subset (or "any JSON object") compiled into a pushdown
// automaton over bytes, a tokenizer's vocabulary as byte strings in a trie, and the matcher that
// turns the automaton's state into a mask over the vocabulary for constrained sampling.
#pragma once

#include <bitset>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc {

struct ByteDfa;  // a string's pattern or a number's range (src/text/byte_dfa.h)

// How values are written. kJson: JSON. kGemma: Gemma 4's tool-call arguments (its published chat
// template's syntax): strings between <|"|> marks with nothing escaped (their text cannot hold
// the mark), object keys bare and followed by ':' (an object's properties in the template's key
// order: sorted, ignoring case), no spaces; numbers, true, false and null as in JSON.
enum class JsonDialect : uint8_t { kJson, kGemma };
constexpr std::string_view kGemmaQuote = "<|\"|>";

// A JSON value written in the dialect (object keys in the dialect's order).
std::string DialectText(const OrderedJson& value, JsonDialect dialect);
// An object's keys in the Gemma dialect's order (Jinja's dictsort: ignoring ASCII case, stable).
std::vector<std::string> DialectKeyOrder(const OrderedJson& object);

struct JsonGrammarOptions {
  JsonDialect dialect = JsonDialect::kJson;
  // Longest string (in characters) where the schema gives no maxLength; 0: unbounded. A pattern or
  // format that needs more raises it for its string.
  int64_t max_string_length = 0;
  int64_t max_depth = 32;  // nesting of objects and arrays (the automaton's stack)
  // A schema over either is kLimit naming the limit (the compile's memory and time are bounded
  // by them): the JSON values of the schema document, and the grammar nodes compiled (each
  // schema the compiler visits counted as one too; every spelling of one $ref target is one).
  int64_t max_schema_values = 65536;
  int64_t max_grammar_nodes = 65536;
  // States of one "pattern"'s automaton (kLimit at the pattern's pointer past it).
  int64_t max_pattern_states = 4096;
};

// The compiled grammar. Whitespace rule: none, except at most one space after ':' and ','.
// Object properties come in the schema's order; required ones always, optional ones may be
// left out, others never.
class JsonGrammar {
 public:
  // One level of the automaton's stack: a grammar node and where inside it the text is.
  struct Frame {
    uint32_t node = 0;
    uint8_t phase = 0;
    uint8_t flag = 0;
    uint16_t extra = 0;
    uint32_t x = 0;
    uint32_t y = 0;
    uint64_t mask = 0;
  };
  // The automaton's state; empty once the whole value is complete.
  using State = std::vector<Frame>;

  // Any JSON object (response_format json_object).
  static std::shared_ptr<const JsonGrammar> AnyObject(const JsonGrammarOptions& options = {});
  // A schema of the supported subset; anything else is kUnsupported at the keyword's JSON
  // Pointer inside the schema.
  static Result<std::shared_ptr<const JsonGrammar>> FromSchema(const OrderedJson& schema,
                                                               const JsonGrammarOptions& options = {});

  State Start() const;
  // Feeds one byte; false (state unspecified) when the text cannot continue with it.
  bool Step(State& state, uint8_t byte) const;
  // Whether the text so far is a complete value (or free text waiting for its trigger).
  bool Accepting(const State& state) const;
  // Whether the text is free (a kText frame waiting for its trigger): any byte is taken.
  bool InFreeText(const State& state) const;
  // Inside a string, between characters: how many more characters it may take (INT64_MAX when
  // unbounded); otherwise -1. Plain text (no quote, backslash, control character or "<", whole UTF-8
  // characters) of at most that many characters is then accepted and leaves the same phase.
  int64_t StringRoom(const State& state) const;
  // Feeds bytes; false when one is refused.
  bool Feed(State& state, std::string_view bytes) const;
  // Feed from Start and Accepting at the end.
  bool Matches(std::string_view text) const;
  // Bytes a bare key (kGemma) may hold: printable ASCII but for what ends or opens a value.
  static bool IsBareKeyByte(uint8_t c);
  // The compiled nodes (what max_grammar_nodes bounds).
  size_t node_count() const { return nodes_.size(); }

  enum class Outcome : uint8_t;  // of one byte in one frame (json_grammar.cc)
  // kSequence: children in order; kRepeat: children[0] from min to max times (-1: unbounded);
  // kText: free text until literals[0] is written, then children[0] (tool calls in a reply).
  enum class Kind : uint8_t {
    kChoice, kObject, kAnyObject, kArray, kString, kNumber, kLiterals, kSequence, kRepeat, kText
  };
  struct Property {
    std::string key;  // as JSON text, quotes included (kGemma: bare, ':' included)
    uint32_t value = 0;
    bool required = false;
  };
  struct Node {
    Kind kind = Kind::kLiterals;
    bool integer = false;                // kNumber
    bool bounded = false;                // kNumber, integer: the value lies within [low, high]
    int64_t low = 0, high = 0;
    int64_t multiple = 0;                // kNumber, integer and bounded: a multiple of it (0: any)
    int32_t dfa = -1;                    // kString: pattern/format; kNumber: range (into dfas_)
    uint32_t prefix_items = 0;           // kArray: children[i] for item i < prefix_items
    std::vector<uint32_t> children;      // kChoice: alternatives; kArray: prefix items, then the
                                         // rest's (absent: no more); kAnyObject: value, key
    std::vector<Property> properties;    // kObject
    // kLiterals: JSON texts (or raw bytes); with children, children[k] follows literals[k] (none of
    // them a prefix of another). kText: its trigger.
    std::vector<std::string> literals;
    int64_t min = 0, max = -1;           // kArray, kRepeat items, kString characters, kObject and
                                         // kAnyObject properties; -1: unbounded
    bool bare = false;                   // kString: a key written bare (kGemma), ended by ':'
  };

 private:
  friend class JsonSchemaCompiler;
  friend class GrammarComposer;
  bool Push(State& state, uint32_t node) const;
  Outcome StepString(State& state, uint8_t c) const;
  Outcome StepNumber(State& state, uint8_t c) const;
  Outcome StepLiterals(State& state, uint8_t c) const;
  Outcome StepObject(State& state, uint8_t c) const;
  Outcome StepArray(State& state, uint8_t c) const;
  Outcome StepSequence(State& state, uint8_t c) const;
  Outcome StepRepeat(State& state, uint8_t c) const;
  Outcome StepText(State& state, uint8_t c) const;
  Outcome EndLiteral(State& state, Outcome outcome) const;
  bool MayBeEmpty(uint32_t node) const;
  bool Empties(const Node& n, size_t from) const;
  std::vector<Node> nodes_;
  Outcome StepPatternString(State& state, uint8_t c) const;
  Outcome StepGemmaString(State& state, uint8_t c) const;
  Outcome StepBareKey(State& state, uint8_t c) const;
  std::vector<std::bitset<256>> first_;  // bytes each node's text can start with
  std::vector<std::shared_ptr<const ByteDfa>> dfas_;
  uint32_t root_ = 0;
  JsonGrammarOptions options_;
};

// Builds a grammar from parts (tool calls in a reply): JSON Schemas, exact text, sequences, a
// choice by leading literal, repetition, and free text up to a trigger. Node ids are the parts.
class GrammarComposer {
 public:
  explicit GrammarComposer(const JsonGrammarOptions& options = {});
  // A JSON value of the schema (its own $ref root); errors at pointers inside the schema.
  Result<uint32_t> Schema(const OrderedJson& schema);
  uint32_t Text(std::string bytes);  // exactly these bytes (not empty)
  uint32_t Sequence(std::vector<uint32_t> parts);
  // One of the literals, then its part; no literal may be a prefix of another.
  uint32_t Switch(std::vector<std::pair<std::string, uint32_t>> cases);
  uint32_t Repeat(uint32_t item, int64_t min, int64_t max);
  // Any text until `trigger` is written (which ends the free text), then `then`.
  uint32_t FreeTextThen(std::string trigger, uint32_t then);
  // The grammar rooted at `root`; the composer is spent.
  Result<std::shared_ptr<const JsonGrammar>> Finish(uint32_t root);

 private:
  uint32_t Add(JsonGrammar::Node node);
  std::shared_ptr<JsonGrammar> g_;
};

// Each token's bytes (what it adds to decoded text) and a trie over them, built once per
// tokenizer. Tokens without bytes are never allowed by a grammar.
class TokenVocabulary {
 public:
  // Special tokens have no bytes, but those whose text is one of `markers` (a tool format's
  // marks, which the model writes as single special tokens) have it.
  static std::shared_ptr<const TokenVocabulary> FromTokenizer(const Tokenizer& tokenizer,
                                                              std::span<const std::string> markers = {});
  static std::shared_ptr<const TokenVocabulary> FromBytes(std::vector<std::string> bytes);
  size_t size() const { return bytes_.size(); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  // allowed[id] = 1 for each token whose bytes the grammar accepts from state (others 0).
  void Allowed(const JsonGrammar& grammar, const JsonGrammar::State& state,
               std::vector<uint8_t>& allowed) const;

 private:
  struct TrieNode {
    uint32_t first_child = 0;  // 0: none (the root is node 0)
    uint32_t next_sibling = 0;
    uint32_t tokens_begin = 0, tokens_end = 0;  // into trie_tokens_
    uint8_t byte = 0;
  };
  void BuildTrie();
  void FindPlainText();
  std::vector<std::string> bytes_;
  // Characters of each token that is plain string text (see JsonGrammar::StringRoom), else -1;
  // and the tokens with bytes that are not.
  std::vector<int32_t> plain_chars_;
  std::vector<int32_t> not_plain_;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
};

// A reply's constraint: the grammar and the vocabulary it is sampled over.
struct JsonConstraint {
  std::shared_ptr<const JsonGrammar> grammar;
  std::shared_ptr<const TokenVocabulary> vocabulary;
};

// Follows one reply token by token.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(JsonConstraint constraint);
  // Sets the logits of tokens the grammar refuses to -infinity; the stop ids stay only when the
  // text is complete. Returns how many tokens remain. In free text (InFreeText) nothing is
  // masked unless `full`: a token that ends the free text is checked by Advance, and only when
  // it is refused does the caller mask fully and sample again (free text costs no mask).
  size_t Constrain(std::span<float> logits, std::span<const int32_t> stop_ids, bool full = false);
  bool InFreeText() const { return constraint_.grammar->InFreeText(state_); }
  // Advances over a sampled token (not a stop id); false when the grammar refuses it. In free
  // text a token without bytes (a special token) is taken and changes nothing.
  bool Advance(int32_t token);
  bool Accepting() const { return constraint_.grammar->Accepting(state_); }

 private:
  JsonConstraint constraint_;
  JsonGrammar::State state_;
  std::vector<uint8_t> allowed_;
};

}  // namespace mlc
