// Byte-level deterministic automata for structured output: a string's "pattern" or "format"
// (an ECMA-262 regular-expression subset over the string's UTF-8 bytes) and a bounded
// non-integer number's text. Built by schema_pattern.cc and number_range.cc, walked by
// json_grammar.cc. Every state it keeps can still reach an accepting one (dead ends are trimmed),
// so a sampler following it never gets stuck.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc {

struct ByteDfa {
  std::array<uint16_t, 256> byte_class{};  // byte -> column of `next`
  uint16_t classes = 1;
  std::vector<int32_t> next;       // state * classes + class -> state, -1: refused
  std::vector<uint8_t> accepting;  // per state
  // Per state: the fewest characters (UTF-8 lead or ASCII bytes) that reach an accepting state.
  std::vector<int32_t> min_chars;
  int32_t start = 0;

  int32_t Next(uint64_t state, uint8_t byte) const {
    return next[static_cast<size_t>(state) * classes + byte_class[byte]];
  }
  size_t states() const { return accepting.size(); }
};

// A nondeterministic automaton over byte ranges (Thompson's construction), made deterministic.
class ByteNfa {
 public:
  int NewState();
  void Epsilon(int from, int to);
  void Range(int from, int to, uint8_t lo, uint8_t hi);
  size_t size() const { return states_.size(); }
  // The subset construction from start to accept, trimmed; kLimit (at `at`) past max_states.
  Result<ByteDfa> Determinize(int start, int accept, size_t max_states, const std::string& at) const;

 private:
  struct Edge {
    uint8_t lo, hi;
    int to;
  };
  struct State {
    std::vector<Edge> edges;
    std::vector<int> epsilon;
  };
  std::vector<State> states_;
};

// Removes states that cannot reach an accepting one, numbers the rest from start, and fills
// min_chars. False when the start state itself is dead (the language is empty).
bool TrimDfa(ByteDfa& dfa);

// The strings both automata take (a pattern beside a format, as zod writes for its string formats);
// kLimit at `at` past max_states, Invalid when none is.
Result<std::shared_ptr<const ByteDfa>> IntersectDfa(const ByteDfa& a, const ByteDfa& b, size_t max_states,
                                                    const std::string& at);

// A number's bound as a plain decimal: magnitude digits without leading zeros ("0" for none)
// and fraction digits without trailing zeros.
struct DecimalBound {
  bool negative = false;
  std::string whole = "0", fraction;
  bool exclusive = false;
};

// The JSON number texts without an exponent whose exact decimal value lies within the bounds
// (either may be absent). Invalid at `at` when none does.
Result<std::shared_ptr<const ByteDfa>> NumberRangeDfa(const DecimalBound* low, const DecimalBound* high,
                                                      const std::string& at);

}  // namespace mlc
