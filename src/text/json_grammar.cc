// The JSON automaton of structured output: a stack of frames, one per open value, each a grammar
// node and a phase inside it; bytes are fed one at a time. Strings are checked as UTF-8 (and
// \u escapes outside the surrogates), so the text a token sequence decodes to is the text the
// automaton saw. A string with a pattern or format walks its ByteDfa over the decoded characters;
// a bounded non-integer number walks its range's. Composed grammars (tool calls) add sequences,
// switches on a leading literal, repetitions and free text up to a trigger. The schema compiler is
// json_schema.cc.
#include "mlc_manifest/json_grammar.h"

#include <algorithm>
#include <cstdint>

#include "text/byte_dfa.h"

namespace mlc {

enum class JsonGrammar::Outcome : uint8_t { kTaken, kRefused, kAgain };

using Outcome = JsonGrammar::Outcome;
using Kind = JsonGrammar::Kind;

namespace {

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }
bool IsHex(uint8_t c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// Number phases (the JSON number grammar); the complete ones may end before any other byte.
enum NumberPhase : uint8_t {
  kNumStart, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac, kNumExp, kNumExpSign, kNumExpDigits
};
bool NumberComplete(uint8_t phase) {
  return phase == kNumZero || phase == kNumInt || phase == kNumFrac || phase == kNumExpDigits;
}

// A bounded integer's digits so far: its sign (flag 1: negative), whether a digit has come and
// its magnitude (mask). The value an integer text ends with, and whether some way of going on
// can still end within [low, high]: more digits make the magnitude v into v * 10^j + [0, 10^j).
__extension__ typedef __int128 Wide;  // room for magnitude * 10 past 2^64
constexpr Wide kMagnitudeCap = Wide{1} << 64;  // past every int64 bound

bool InRange(const JsonGrammar::Node& n, Wide value) {
  return value >= n.low && value <= n.high && (n.multiple == 0 || value % n.multiple == 0);
}

// Whether [lo, hi] holds a value within the node's bounds (and a multiple of its multipleOf).
bool Hits(const JsonGrammar::Node& n, Wide lo, Wide hi) {
  lo = std::max<Wide>(lo, n.low);
  hi = std::min<Wide>(hi, n.high);
  if (lo > hi) return false;
  if (n.multiple == 0) return true;
  Wide q = lo / n.multiple;
  if (q * n.multiple < lo) ++q;
  return q * n.multiple <= hi;
}

bool IntegerReachable(const JsonGrammar::Node& n, bool negative, bool digits, uint64_t magnitude) {
  if (!digits) {  // "-": -0 or any negative integer
    return InRange(n, 0) || Hits(n, n.low, -1);
  }
  for (Wide scale = 1, v = magnitude; v < kMagnitudeCap; scale *= 10, v *= 10) {
    const Wide lo = negative ? -(v + scale - 1) : v, hi = negative ? -v : v + scale - 1;
    if (Hits(n, lo, hi)) return true;
    if (magnitude == 0) break;  // "0" or "-0" takes no more digits
  }
  return false;
}

Wide IntegerValue(const JsonGrammar::Frame& f) {
  return f.flag ? -Wide(f.mask) : Wide(f.mask);
}

// A UTF-8 lead byte past ASCII: how many continuation bytes follow and the range of the first
// (lo | hi << 8: no overlong forms, surrogates or code points past U+10FFFF); false for a byte no
// character starts with.
bool Utf8Lead(uint8_t c, uint16_t& more, uint32_t& range) {
  uint32_t lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    more = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    more = 2;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;  // no surrogates
  } else if (c >= 0xf0 && c <= 0xf4) {
    more = 3;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return false;
  }
  range = lo | (hi << 8);
  return true;
}

// String phases.
enum StringPhase : uint8_t { kStrOpen, kStrBody, kStrEscape, kStrHex };

// Object phases (kObject and kAnyObject).
enum ObjectPhase : uint8_t { kObjOpen, kObjFirst, kObjKey, kObjColon, kObjValue, kObjAfter, kObjNext };

// Array phases.
enum ArrayPhase : uint8_t { kArrOpen, kArrFirst, kArrAfter, kArrNext };

// The properties that may come next from index i, `written` having been: up to and including
// the first required one, each leaving room for minProperties after it and maxProperties for
// the required ones after it.
uint64_t Candidates(const JsonGrammar::Node& n, uint32_t i, int64_t written) {
  uint64_t mask = 0;
  const int64_t count = static_cast<int64_t>(n.properties.size());
  for (int64_t j = i; j < count; ++j) {
    int64_t required_after = 0;
    for (int64_t k = j + 1; k < count; ++k) required_after += n.properties[static_cast<size_t>(k)].required;
    const bool room_min = written + 1 + (count - j - 1) >= n.min;
    const bool room_max = n.max < 0 || written + 1 + required_after <= n.max;
    if (room_min && room_max) mask |= uint64_t{1} << j;
    if (n.properties[static_cast<size_t>(j)].required) break;
  }
  return mask;
}

bool RequiredLeft(const JsonGrammar::Node& n, uint32_t i) {
  for (size_t j = i; j < n.properties.size(); ++j) {
    if (n.properties[j].required) return true;
  }
  return false;
}

// The alive literals that are complete at position pos.
bool LiteralComplete(const JsonGrammar::Node& n, const JsonGrammar::Frame& f) {
  for (size_t k = 0; k < n.literals.size(); ++k) {
    if ((f.mask >> k & 1) && n.literals[k].size() == f.x) return true;
  }
  return false;
}

}  // namespace

JsonGrammar::State JsonGrammar::Start() const {
  State s;
  Push(s, root_);
  return s;
}

bool JsonGrammar::Push(State& state, uint32_t node) const {
  if (static_cast<int64_t>(state.size()) > options_.max_depth) return false;
  Frame f;
  f.node = node;
  if (nodes_[node].kind == Kind::kNumber && nodes_[node].dfa >= 0) f.mask = static_cast<uint64_t>(dfas_[nodes_[node].dfa]->start);
  if (nodes_[node].kind == Kind::kLiterals) {
    f.mask = nodes_[node].literals.size() >= 64 ? ~uint64_t{0}
                                                : (uint64_t{1} << nodes_[node].literals.size()) - 1;
  }
  state.push_back(f);
  return true;
}

// A string whose characters walk a pattern's automaton (the frame's mask is its state): raw
// characters feed their bytes; the short escapes feed the character they stand for; \u escapes
// are refused (a partial one could lead nowhere). A character is taken only when the pattern can
// still end within maxLength.
Outcome JsonGrammar::StepPatternString(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  const ByteDfa& d = *dfas_[n.dfa];
  // Feeds one byte of the decoded text; chars: the characters it would make the string.
  auto feed = [&](uint8_t b, int64_t chars) {
    const int32_t t = d.Next(f.mask, b);
    if (t < 0) return false;
    if (n.max >= 0 && chars + d.min_chars[static_cast<size_t>(t)] > n.max) return false;
    f.mask = static_cast<uint64_t>(t);
    return true;
  };
  static constexpr uint8_t kEscapes[][2] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', '\b'},
                                            {'f', '\f'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};
  switch (f.phase) {
    case kStrOpen:
      if (c != '"') return Outcome::kRefused;
      f.phase = kStrBody;
      f.mask = static_cast<uint64_t>(d.start);
      return Outcome::kTaken;
    case kStrBody:
      if (f.extra > 0) {
        if (c < (f.y & 0xff) || c > (f.y >> 8) || !feed(c, f.x)) return Outcome::kRefused;
        --f.extra;
        f.y = 0x80 | (0xbf << 8);
        return Outcome::kTaken;
      }
      if (c == '"') {
        if (f.x < n.min || !d.accepting[f.mask]) return Outcome::kRefused;
        s.pop_back();
        return Outcome::kTaken;
      }
      if (c == '\\') {  // some short escape must be able to follow
        const uint64_t here = f.mask;
        for (const auto& e : kEscapes) {
          if (feed(e[1], f.x + 1)) {
            f.mask = here;
            f.phase = kStrEscape;
            return Outcome::kTaken;
          }
        }
        return Outcome::kRefused;
      }
      if (c < 0x20 || (c >= 0x80 && c < 0xc2) || c > 0xf4) return Outcome::kRefused;
      if (!feed(c, f.x + 1)) return Outcome::kRefused;
      ++f.x;
      if (c >= 0x80) {
        f.extra = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : 1;
        const uint32_t lo = c == 0xe0 ? 0xa0 : c == 0xf0 ? 0x90 : 0x80;
        const uint32_t hi = c == 0xed ? 0x9f : c == 0xf4 ? 0x8f : 0xbf;
        f.y = lo | (hi << 8);
      }
      return Outcome::kTaken;
    case kStrEscape:
      for (const auto& e : kEscapes) {
        if (c == e[0]) {
          if (!feed(e[1], f.x + 1)) return Outcome::kRefused;
          ++f.x;
          f.phase = kStrBody;
          return Outcome::kTaken;
        }
      }
      return Outcome::kRefused;
    default:
      return Outcome::kRefused;
  }
}

bool JsonGrammar::IsBareKeyByte(uint8_t c) {
  if (c <= 0x20 || c >= 0x7f) return false;
  for (char x : std::string_view(":{}[],<\"'\\")) {
    if (c == static_cast<uint8_t>(x)) return false;
  }
  return true;
}

// A key of the Gemma dialect's free-form objects: bare, letters and the like, ended by the ':'
// its object takes.
Outcome JsonGrammar::StepBareKey(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if (c == ':') {
    if (f.x < std::max<int64_t>(1, n.min)) return Outcome::kRefused;
    s.pop_back();
    return Outcome::kAgain;
  }
  if (!IsBareKeyByte(c) || (n.max >= 0 && f.x >= n.max)) return Outcome::kRefused;
  ++f.x;
  return Outcome::kTaken;
}

// A string of the Gemma dialect: <|"|>, raw text (whole UTF-8 characters, nothing escaped), <|"|>.
// flag counts the bytes of a mark matched so far (the opening one in kStrOpen; in the body, a
// '<' that may begin the closing one: when the mark breaks off, those bytes were text). A pattern
// or format walks its automaton over the text (mask), else x counts characters.
Outcome JsonGrammar::StepGemmaString(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  const ByteDfa* d = n.dfa >= 0 ? dfas_[n.dfa].get() : nullptr;
  const auto quote = static_cast<uint8_t>(kGemmaQuote.size());
  // One byte of text; a lead byte (or ASCII) is one more character.
  auto text = [&](uint8_t b, bool lead) {
    const int64_t chars = f.x + (lead ? 1 : 0);
    if (d) {
      const int32_t t = d->Next(f.mask, b);
      if (t < 0 || (n.max >= 0 && chars + d->min_chars[static_cast<size_t>(t)] > n.max)) return false;
      f.mask = static_cast<uint64_t>(t);
    } else if (n.max >= 0 && chars > n.max) {
      return false;
    }
    f.x = static_cast<uint32_t>(chars);
    return true;
  };
  auto may_close = [&] { return f.x >= n.min && (!d || d->accepting[f.mask]); };
  if (f.phase == kStrOpen) {
    if (c != static_cast<uint8_t>(kGemmaQuote[f.flag])) return Outcome::kRefused;
    if (++f.flag == quote) {
      f.phase = kStrBody;
      f.flag = 0;
      if (d) f.mask = static_cast<uint64_t>(d->start);
    }
    return Outcome::kTaken;
  }
  if (f.extra > 0) {  // a UTF-8 continuation byte within [y & 0xff, y >> 8]
    if (c < (f.y & 0xff) || c > (f.y >> 8) || !text(c, false)) return Outcome::kRefused;
    --f.extra;
    f.y = 0x80 | (0xbf << 8);
    return Outcome::kTaken;
  }
  if (f.flag > 0) {
    if (c == static_cast<uint8_t>(kGemmaQuote[f.flag])) {
      if (++f.flag < quote) return Outcome::kTaken;
      if (!may_close()) return Outcome::kRefused;
      s.pop_back();
      return Outcome::kTaken;
    }
    for (uint8_t i = 0; i < f.flag; ++i) {  // the mark broke off: its bytes were text
      if (!text(static_cast<uint8_t>(kGemmaQuote[i]), true)) return Outcome::kRefused;
    }
    f.flag = 0;
  }
  if (c == '<') {  // the closing mark, or text
    const Frame before = f;
    const bool as_text = text(c, true);
    f = before;
    if (!may_close() && !as_text) return Outcome::kRefused;
    f.flag = 1;
    return Outcome::kTaken;
  }
  if (c < 0x80) return text(c, true) ? Outcome::kTaken : Outcome::kRefused;
  uint16_t more = 0;
  uint32_t range = 0;
  if (!Utf8Lead(c, more, range) || !text(c, true)) return Outcome::kRefused;
  f.extra = more;
  f.y = range;
  return Outcome::kTaken;
}

Outcome JsonGrammar::StepString(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if (n.bare) return StepBareKey(s, c);
  if (options_.dialect == JsonDialect::kGemma) return StepGemmaString(s, c);
  if (n.dfa >= 0) return StepPatternString(s, c);
  auto count = [&] {  // one more character
    if (n.max >= 0 && f.x >= n.max) return false;
    ++f.x;
    return true;
  };
  switch (f.phase) {
    case kStrOpen:
      if (c != '"') return Outcome::kRefused;
      f.phase = kStrBody;
      return Outcome::kTaken;
    case kStrBody:
      if (f.extra > 0) {  // a UTF-8 continuation byte within [y & 0xff, y >> 8]
        if (c < (f.y & 0xff) || c > (f.y >> 8)) return Outcome::kRefused;
        --f.extra;
        f.y = 0x80 | (0xbf << 8);
        return Outcome::kTaken;
      }
      if (c == '"') {
        if (f.x < n.min) return Outcome::kRefused;
        s.pop_back();
        return Outcome::kTaken;
      }
      if (c == '\\') {
        if (!count()) return Outcome::kRefused;
        f.phase = kStrEscape;
        return Outcome::kTaken;
      }
      if (c < 0x20) return Outcome::kRefused;
      if (c < 0x80) return count() ? Outcome::kTaken : Outcome::kRefused;
      {
        uint16_t more = 0;
        uint32_t range = 0;
        if (!Utf8Lead(c, more, range) || !count()) return Outcome::kRefused;
        f.extra = more;
        f.y = range;
        return Outcome::kTaken;
      }
    case kStrEscape:
      if (c == 'u') {
        f.phase = kStrHex;
        f.y = 0;
        f.flag = 0;
        return Outcome::kTaken;
      }
      if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' ||
          c == 't') {
        f.phase = kStrBody;
        return Outcome::kTaken;
      }
      return Outcome::kRefused;
    case kStrHex:
      if (!IsHex(c)) return Outcome::kRefused;
      if (f.y == 0 && (c == 'd' || c == 'D')) f.flag = 1;
      if (f.y == 1 && f.flag && !(c >= '0' && c <= '7')) return Outcome::kRefused;  // a surrogate
      if (++f.y == 4) f.phase = kStrBody;
      f.y = f.phase == kStrBody ? 0 : f.y;
      return Outcome::kTaken;
    default:
      return Outcome::kRefused;
  }
}

Outcome JsonGrammar::StepNumber(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if (n.dfa >= 0) {  // a bounded non-integer: its range's automaton (mask is its state)
    const ByteDfa& d = *dfas_[n.dfa];
    const int32_t t = d.Next(f.mask, c);
    if (t >= 0) {
      f.mask = static_cast<uint64_t>(t);
      return Outcome::kTaken;
    }
    if (!d.accepting[f.mask]) return Outcome::kRefused;
    s.pop_back();
    return Outcome::kAgain;
  }
  const bool integer = n.integer;
  auto to = [&](uint8_t phase) {
    f.phase = phase;
    return Outcome::kTaken;
  };
  // A bounded integer takes a sign or digit only when the value can still end within its bounds.
  auto digit = [&](uint8_t phase) {
    if (!n.bounded) return to(phase);
    const uint64_t d = c - '0';
    if (f.mask > (UINT64_MAX - d) / 10) return Outcome::kRefused;
    const uint64_t v = f.mask * 10 + d;
    if (!IntegerReachable(n, f.flag != 0, true, v)) return Outcome::kRefused;
    f.mask = v;
    return to(phase);
  };
  switch (f.phase) {
    case kNumStart:
      if (c == '-') {
        if (n.bounded && !IntegerReachable(n, true, false, 0)) return Outcome::kRefused;
        f.flag = 1;
        return to(kNumMinus);
      }
      [[fallthrough]];
    case kNumMinus:
      if (c == '0') return digit(kNumZero);
      if (IsDigit(c)) return digit(kNumInt);
      return Outcome::kRefused;
    case kNumZero:
    case kNumInt:
      if (f.phase == kNumInt && IsDigit(c)) return digit(kNumInt);
      if (!integer && c == '.') return to(kNumDot);
      if (!integer && (c == 'e' || c == 'E')) return to(kNumExp);
      break;
    case kNumDot:
      return IsDigit(c) ? to(kNumFrac) : Outcome::kRefused;
    case kNumFrac:
      if (IsDigit(c)) return Outcome::kTaken;
      if (c == 'e' || c == 'E') return to(kNumExp);
      break;
    case kNumExp:
      if (c == '+' || c == '-') return to(kNumExpSign);
      [[fallthrough]];
    case kNumExpSign:
      return IsDigit(c) ? to(kNumExpDigits) : Outcome::kRefused;
    case kNumExpDigits:
      if (IsDigit(c)) return Outcome::kTaken;
      break;
    default:
      return Outcome::kRefused;
  }
  // A complete number ends here (a bounded integer only within its bounds); the byte is its parent's.
  if (n.bounded && !InRange(n, IntegerValue(f))) return Outcome::kRefused;
  s.pop_back();
  return Outcome::kAgain;
}

Outcome JsonGrammar::StepLiterals(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  uint64_t next = 0;
  bool longer = false;
  for (size_t k = 0; k < n.literals.size(); ++k) {
    const std::string& lit = n.literals[k];
    if ((f.mask >> k & 1) && lit.size() > f.x && static_cast<uint8_t>(lit[f.x]) == c) {
      next |= uint64_t{1} << k;
      longer = longer || lit.size() > f.x + 1;
    }
  }
  if (next == 0) {
    if (!LiteralComplete(n, f)) return Outcome::kRefused;
    return EndLiteral(s, Outcome::kAgain);  // a complete literal (a number) ends before its parent's byte
  }
  f.mask = next;
  ++f.x;
  return longer ? Outcome::kTaken : EndLiteral(s, Outcome::kTaken);
}

// A literal is complete: its frame gives way to the part that follows it (a switch's case), if any.
Outcome JsonGrammar::EndLiteral(State& s, Outcome outcome) const {
  const Frame f = s.back();
  const Node& n = nodes_[f.node];
  s.pop_back();
  if (n.children.empty()) return outcome;
  for (size_t k = 0; k < n.literals.size(); ++k) {
    if ((f.mask >> k & 1) && n.literals[k].size() == f.x) {
      if (!Push(s, n.children[k])) return Outcome::kRefused;
      return outcome;
    }
  }
  return Outcome::kRefused;
}

// The parts in order: each byte goes to the part on top; once the last has ended, the byte is
// the parent's.
Outcome JsonGrammar::StepSequence(State& s, uint8_t) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if (f.x >= n.children.size()) {
    s.pop_back();
    return Outcome::kAgain;
  }
  const uint32_t child = n.children[f.x++];
  if (f.x == n.children.size()) s.pop_back();  // the last part in its place: chains stay shallow
  return Push(s, child) ? Outcome::kAgain : Outcome::kRefused;
}

// Another item when its first byte comes and room is left; else the repetition ends (the byte is
// the parent's) once it has its minimum.
Outcome JsonGrammar::StepRepeat(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if ((n.max < 0 || f.x < n.max) && first_[n.children[0]].test(c)) {
    ++f.x;
    return Push(s, n.children[0]) ? Outcome::kAgain : Outcome::kRefused;
  }
  if (f.x < n.min) return Outcome::kRefused;
  s.pop_back();
  return Outcome::kAgain;
}

// Free text: any byte; f.x counts how much of the trigger the text ends with (the longest
// suffix that is a prefix of it). The whole trigger hands over to the part that follows.
Outcome JsonGrammar::StepText(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  const std::string& trigger = n.literals[0];
  std::string tail = trigger.substr(0, f.x);
  tail.push_back(static_cast<char>(c));
  size_t keep = std::min(tail.size(), trigger.size());
  while (keep > 0 && tail.compare(tail.size() - keep, keep, trigger, 0, keep) != 0) --keep;
  if (keep == trigger.size()) {
    const uint32_t then = n.children[0];
    s.pop_back();
    return Push(s, then) ? Outcome::kTaken : Outcome::kRefused;
  }
  f.x = static_cast<uint32_t>(keep);
  return Outcome::kTaken;
}

// Both object kinds: kObject with its properties in order, kAnyObject with any keys (a key string
// node) and values.
Outcome JsonGrammar::StepObject(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  const bool any = n.kind == Kind::kAnyObject;  // children: [value, key string]
  const bool bare = options_.dialect == JsonDialect::kGemma;  // keys unquoted, ':' part of a property's
  // extra: the properties written so far (minProperties/maxProperties).
  const bool may_close = (any || !RequiredLeft(n, f.x)) && f.extra >= n.min;
  auto start_key = [&] {
    if (n.max >= 0 && f.extra >= n.max) return Outcome::kRefused;
    if (f.extra < UINT16_MAX) ++f.extra;
    if (any) {
      f.phase = kObjColon;
      return Push(s, n.children[1]) ? Outcome::kAgain : Outcome::kRefused;
    }
    uint64_t mask = Candidates(n, f.x, f.extra - 1);
    if (mask == 0) return Outcome::kRefused;
    f.mask = mask;
    f.phase = kObjKey;
    if (bare) {
      f.y = 0;
      return Outcome::kAgain;  // the byte is the key's first
    }
    f.y = 1;  // the key's opening quote
    return Outcome::kTaken;
  };
  auto close = [&] {
    s.pop_back();
    return Outcome::kTaken;
  };
  auto space_once = [&] {
    f.flag = 1;
    return Outcome::kTaken;
  };
  switch (f.phase) {
    case kObjOpen:
      if (c != '{') return Outcome::kRefused;
      f.phase = kObjFirst;
      return Outcome::kTaken;
    case kObjFirst:
      if (c == '}' && may_close) return close();
      return c == '"' || (bare && c != '}') ? start_key() : Outcome::kRefused;
    case kObjKey: {
      uint64_t next = 0;
      for (size_t k = 0; k < n.properties.size(); ++k) {
        const std::string& key = n.properties[k].key;
        if ((f.mask >> k & 1) && key.size() > f.y && static_cast<uint8_t>(key[f.y]) == c) {
          next |= uint64_t{1} << k;
        }
      }
      if (next == 0) return Outcome::kRefused;
      f.mask = next;
      ++f.y;
      for (size_t k = 0; k < n.properties.size(); ++k) {
        if ((next >> k & 1) && n.properties[k].key.size() == f.y) {  // the closing quote (bare: the ':')
          f.phase = bare ? kObjValue : kObjColon;
          f.flag = 0;
          f.y = static_cast<uint32_t>(k);
          f.x = static_cast<uint32_t>(k + 1);
          break;
        }
      }
      return Outcome::kTaken;
    }
    case kObjColon:
      if (c != ':') return Outcome::kRefused;
      f.phase = kObjValue;
      f.flag = 0;
      return Outcome::kTaken;
    case kObjValue:
      if (c == ' ' && !f.flag) return space_once();
      f.phase = kObjAfter;
      return Push(s, any ? n.children[0] : n.properties[f.y].value) ? Outcome::kAgain
                                                                     : Outcome::kRefused;
    case kObjAfter:
      if (c == ',' && (n.max < 0 || f.extra < n.max) && (any || Candidates(n, f.x, f.extra) != 0)) {
        f.phase = kObjNext;
        f.flag = 0;
        return Outcome::kTaken;
      }
      if (c == '}' && may_close) return close();
      return Outcome::kRefused;
    case kObjNext:
      if (c == ' ' && !f.flag) return space_once();
      return c == '"' || (bare && c != '}') ? start_key() : Outcome::kRefused;
    default:
      return Outcome::kRefused;
  }
}

Outcome JsonGrammar::StepArray(State& s, uint8_t c) const {
  Frame& f = s.back();
  const Node& n = nodes_[f.node];
  auto item = [&] {
    if (n.max >= 0 && f.x >= n.max) return Outcome::kRefused;
    const size_t child = std::min<size_t>(f.x, n.prefix_items);
    if (child >= n.children.size()) return Outcome::kRefused;  // no items past the prefix
    ++f.x;
    f.phase = kArrAfter;
    return Push(s, n.children[child]) ? Outcome::kAgain : Outcome::kRefused;
  };
  switch (f.phase) {
    case kArrOpen:
      if (c != '[') return Outcome::kRefused;
      f.phase = kArrFirst;
      return Outcome::kTaken;
    case kArrFirst:
      if (c == ']') {
        if (n.min > 0) return Outcome::kRefused;
        s.pop_back();
        return Outcome::kTaken;
      }
      return item();
    case kArrAfter:
      if (c == ',' && (n.max < 0 || f.x < n.max) && std::min<size_t>(f.x, n.prefix_items) < n.children.size()) {
        f.phase = kArrNext;
        f.flag = 0;
        return Outcome::kTaken;
      }
      if (c == ']' && f.x >= n.min) {
        s.pop_back();
        return Outcome::kTaken;
      }
      return Outcome::kRefused;
    case kArrNext:
      if (c == ' ' && !f.flag) {
        f.flag = 1;
        return Outcome::kTaken;
      }
      return item();
    default:
      return Outcome::kRefused;
  }
}

bool JsonGrammar::Step(State& s, uint8_t c) const {
  for (;;) {
    if (s.empty()) return false;
    Outcome o = Outcome::kRefused;
    const Node& n = nodes_[s.back().node];
    switch (n.kind) {
      case Kind::kChoice: {
        // Alternatives start with different bytes: the first byte picks one.
        o = Outcome::kRefused;
        for (uint32_t alt : n.children) {
          if (first_[alt].test(c)) {
            s.pop_back();
            o = Push(s, alt) ? Outcome::kAgain : Outcome::kRefused;
            break;
          }
        }
        break;
      }
      case Kind::kObject:
      case Kind::kAnyObject: o = StepObject(s, c); break;
      case Kind::kArray: o = StepArray(s, c); break;
      case Kind::kString: o = StepString(s, c); break;
      case Kind::kNumber: o = StepNumber(s, c); break;
      case Kind::kLiterals: o = StepLiterals(s, c); break;
      case Kind::kSequence: o = StepSequence(s, c); break;
      case Kind::kRepeat: o = StepRepeat(s, c); break;
      case Kind::kText: o = StepText(s, c); break;
    }
    if (o != Outcome::kAgain) return o == Outcome::kTaken;
  }
}

// Complete when every open frame may end here: a number or literal on top that is whole (a
// switch's literal still has its case to come), sequences past their last part, repetitions at
// their minimum, free text.
bool JsonGrammar::Accepting(const State& s) const {
  for (size_t i = s.size(); i-- > 0;) {
    const Frame& f = s[i];
    const Node& n = nodes_[f.node];
    const bool top = i + 1 == s.size();
    bool ends = false;
    switch (n.kind) {
      case Kind::kNumber:
        ends = top && (n.dfa >= 0 ? dfas_[n.dfa]->accepting[f.mask] != 0
                                  : NumberComplete(f.phase) && (!n.bounded || InRange(n, IntegerValue(f))));
        break;
      case Kind::kLiterals: ends = top && n.children.empty() && f.x > 0 && LiteralComplete(n, f); break;
      case Kind::kSequence: ends = Empties(n, f.x); break;
      case Kind::kRepeat: ends = f.x >= n.min; break;
      case Kind::kText: ends = true; break;
      default: break;
    }
    if (!ends) return false;
  }
  return true;
}

// Whether a node's text may be empty: a repetition that needs no item, free text, a sequence of
// such parts.
bool JsonGrammar::MayBeEmpty(uint32_t node) const {
  const Node& n = nodes_[node];
  if (n.kind == Kind::kRepeat) return n.min == 0;
  if (n.kind == Kind::kText) return true;
  return n.kind == Kind::kSequence && Empties(n, 0);
}

// Whether a sequence's parts from `from` on may all be empty.
bool JsonGrammar::Empties(const Node& n, size_t from) const {
  for (size_t i = from; i < n.children.size(); ++i) {
    if (!MayBeEmpty(n.children[i])) return false;
  }
  return true;
}

bool JsonGrammar::InFreeText(const State& s) const {
  return !s.empty() && nodes_[s.back().node].kind == Kind::kText;
}

int64_t JsonGrammar::StringRoom(const State& s) const {
  if (s.empty()) return -1;
  const Frame& f = s.back();
  const Node& n = nodes_[f.node];
  if (n.kind != Kind::kString || n.dfa >= 0 || n.bare || f.phase != kStrBody || f.extra != 0) return -1;
  if (options_.dialect == JsonDialect::kGemma && f.flag != 0) return -1;  // within a '<'...
  return n.max < 0 ? INT64_MAX : n.max - static_cast<int64_t>(f.x);
}

bool JsonGrammar::Feed(State& state, std::string_view bytes) const {
  for (char c : bytes) {
    if (!Step(state, static_cast<uint8_t>(c))) return false;
  }
  return true;
}

namespace {

// Keys in the order Jinja's dictsort gives them (ignoring ASCII case; equal ones as they came).
std::vector<std::string> DictsortKeys(const OrderedJson& object) {
  std::vector<std::string> keys;
  for (auto it = object.begin(); it != object.end(); ++it) keys.push_back(it.key());
  auto lower = [](std::string k) {
    for (char& c : k) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    return k;
  };
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) { return lower(a) < lower(b); });
  return keys;
}

void AppendDialect(std::string& out, const OrderedJson& v) {
  if (v.is_string()) {
    out.append(kGemmaQuote).append(v.get<std::string>()).append(kGemmaQuote);
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const std::string& k : DictsortKeys(v)) {
      if (!first) out += ',';
      first = false;
      out += k + ":";
      AppendDialect(out, v[k]);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      AppendDialect(out, v[i]);
    }
    out += ']';
  } else {
    out += v.dump();
  }
}

}  // namespace

std::vector<std::string> DialectKeyOrder(const OrderedJson& object) { return DictsortKeys(object); }

std::string DialectText(const OrderedJson& value, JsonDialect dialect) {
  if (dialect == JsonDialect::kJson) return value.dump();
  std::string out;
  AppendDialect(out, value);
  return out;
}

bool JsonGrammar::Matches(std::string_view text) const {
  State s = Start();
  return Feed(s, text) && Accepting(s);
}

}  // namespace mlc
