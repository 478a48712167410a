// The regular-expression subset of structured output's "pattern" and the built-in "format"
// patterns, parsed into a small syntax tree over Unicode code points, then compiled to a
// Thompson NFA over UTF-8 bytes (each code-point range split into byte-range sequences) and a DFA.
// The subset (ECMA-262 syntax): literal characters, escapes (\t \n \r \v \f \0 \xHH \uHHHH
// \u{H..}, and any escaped punctuation), ".", classes [..] and [^..] with ranges, \d \w \s and
// \D \W \S (ASCII digits and word characters; ECMA-262's white space), groups ( ), (?: ) and
// (?<name> ), alternation |, quantifiers * + ? {n} {n,} {n,m} (lazy forms too: the language is
// the same), ^ at the start and $ at the end of the pattern or of a top-level alternative.
// Refused (kUnsupported): backreferences, lookarounds, \b \B, \p{..}, \c, anchors elsewhere.
#include "text/schema_pattern.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

namespace mlc {
namespace {

constexpr size_t kMaxNfaStates = 200000;
constexpr uint32_t kMaxCodePoint = 0x10FFFF;
constexpr int kMaxRepeat = 1000;

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges Normalized(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.push_back({lo, hi});
    }
  }
  return out;
}

Ranges Complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : Normalized(r)) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.push_back({next, kMaxCodePoint});
  return out;
}

Ranges Digits() { return {{'0', '9'}}; }
Ranges Word() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges Space() {  // ECMA-262 WhiteSpace and LineTerminator
  return {{'\t', '\r'}, {' ', ' '}, {0xa0, 0xa0}, {0x1680, 0x1680}, {0x2000, 0x200a},
          {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
}
Ranges Dot() { return Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}); }
Ranges AnyChar() { return {{0, kMaxCodePoint}}; }

// The syntax tree.
struct Re {
  enum Kind { kSet, kConcat, kAlt, kRepeat, kBegin, kEnd } kind = kConcat;
  Ranges set;
  std::vector<Re> kids;
  int min = 0, max = -1;
};

Re SetOf(Ranges r) {
  Re re;
  re.kind = Re::kSet;
  re.set = Normalized(std::move(r));
  return re;
}

std::optional<std::vector<uint32_t>> DecodeUtf8(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    if (n < 0 || i + static_cast<size_t>(n) >= s.size()) return std::nullopt;
    uint32_t cp = n == 0 ? c : c & (0x3f >> n);
    for (int k = 1; k <= n; ++k) {
      const uint8_t d = static_cast<uint8_t>(s[i + static_cast<size_t>(k)]);
      if ((d & 0xc0) != 0x80) return std::nullopt;
      cp = cp << 6 | (d & 0x3f);
    }
    out.push_back(cp);
    i += static_cast<size_t>(n) + 1;
  }
  return out;
}

// Recursive-descent parser over the pattern's code points.
class Parser {
 public:
  Parser(std::vector<uint32_t> text, std::string at) : p_(std::move(text)), at_(std::move(at)) {}

  std::optional<Re> Parse() {
    Re re = Alternation();
    if (error) return std::nullopt;
    if (pos_ < p_.size()) {
      Fail(ErrorCode::kInvalid, "an unmatched \")\"");
      return std::nullopt;
    }
    return re;
  }
  std::optional<Error> error;

 private:
  void Fail(ErrorCode code, const std::string& what) {
    if (!error) {
      error = Error{code, at_,
                    code == ErrorCode::kUnsupported
                        ? "the pattern uses " + what + ", which structured output does not support"
                        : "the pattern is malformed: " + what};
    }
  }
  bool More() const { return pos_ < p_.size() && !error; }
  uint32_t Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }

  Re Alternation() {
    Re alt;
    alt.kind = Re::kAlt;
    alt.kids.push_back(Sequence());
    while (More() && Peek() == '|') {
      ++pos_;
      alt.kids.push_back(Sequence());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Re Sequence() {
    Re seq;
    seq.kind = Re::kConcat;
    while (More() && Peek() != '|' && Peek() != ')') {
      Re atom = Atom();
      if (error) break;
      Quantify(atom);
      seq.kids.push_back(std::move(atom));
    }
    return seq;
  }

  // {n}, {n,} or {n,m} at pos_ (not consumed unless well-formed); false when it is a literal "{".
  bool Braces(int& min, int& max) {
    size_t i = pos_ + 1;
    auto number = [&](int& out) {
      size_t start = i;
      long v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') {
        v = std::min<long>(v * 10 + (p_[i] - '0'), 1L << 30);
        ++i;
      }
      out = static_cast<int>(v);
      return i > start;
    };
    if (!number(min)) return false;
    max = min;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      max = -1;
      if (i < p_.size() && p_[i] != '}' && !number(max)) return false;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    pos_ = i + 1;
    return true;
  }

  void Quantify(Re& atom) {
    int min = 0, max = -1;
    bool quantified = false;
    if (More()) {
      const uint32_t c = Peek();
      if (c == '*' || c == '+' || c == '?') {
        ++pos_;
        min = c == '+' ? 1 : 0;
        max = c == '?' ? 1 : -1;
        quantified = true;
      } else if (c == '{') {
        quantified = Braces(min, max);
      }
    }
    if (!quantified) return;
    if (More() && Peek() == '?') ++pos_;  // lazy: the same language
    if (max >= 0 && min > max) return Fail(ErrorCode::kInvalid, "a quantifier {n,m} with n above m");
    if (min > kMaxRepeat || max > kMaxRepeat) {
      return Fail(ErrorCode::kUnsupported, "a quantifier above " + std::to_string(kMaxRepeat));
    }
    if (atom.kind == Re::kBegin || atom.kind == Re::kEnd) return Fail(ErrorCode::kInvalid, "a quantified anchor");
    if (More() && (Peek() == '*' || Peek() == '+' || Peek() == '?')) {
      return Fail(ErrorCode::kInvalid, "a quantifier after a quantifier");
    }
    Re rep;
    rep.kind = Re::kRepeat;
    rep.min = min;
    rep.max = max;
    rep.kids.push_back(std::move(atom));
    atom = std::move(rep);
  }

  Re Atom() {
    const uint32_t c = p_[pos_++];
    switch (c) {
      case '(': return Group();
      case '[': return Class();
      case '.': return SetOf(Dot());
      case '^': return Re{Re::kBegin, {}, {}, 0, -1};
      case '$': return Re{Re::kEnd, {}, {}, 0, -1};
      case '*':
      case '+':
      case '?':
        Fail(ErrorCode::kInvalid, "a quantifier with nothing to repeat");
        return {};
      case '{': {
        int a = 0, b = 0;
        --pos_;
        if (Braces(a, b)) {
          Fail(ErrorCode::kInvalid, "a quantifier with nothing to repeat");
          return {};
        }
        ++pos_;
        return SetOf({{c, c}});
      }
      case '\\': {
        Ranges r;
        if (Escape(false, r)) return SetOf(std::move(r));
        return {};
      }
      default: return SetOf({{c, c}});
    }
  }

  Re Group() {
    if (Peek() == '?') {
      if (Peek(1) == ':') {
        pos_ += 2;
      } else if (Peek(1) == '<' && Peek(2) != '=' && Peek(2) != '!') {
        pos_ += 2;  // a named group: the name is skipped
        while (More() && Peek() != '>') ++pos_;
        if (!More()) {
          Fail(ErrorCode::kInvalid, "an unterminated group name");
          return {};
        }
        ++pos_;
      } else {
        Fail(ErrorCode::kUnsupported, "a lookaround or group modifier \"(?\"");
        return {};
      }
    }
    Re inner = Alternation();
    if (error) return {};
    if (!More() || Peek() != ')') {
      Fail(ErrorCode::kInvalid, "an unterminated group");
      return {};
    }
    ++pos_;
    return inner;
  }

  uint32_t Hex(size_t digits) {
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const uint32_t d = Peek();
      int x = d >= '0' && d <= '9' ? static_cast<int>(d - '0')
              : d >= 'a' && d <= 'f' ? static_cast<int>(d - 'a' + 10)
              : d >= 'A' && d <= 'F' ? static_cast<int>(d - 'A' + 10) : -1;
      if (x < 0 || pos_ >= p_.size()) {
        Fail(ErrorCode::kInvalid, "a malformed hexadecimal escape");
        return 0;
      }
      v = v * 16 + static_cast<uint32_t>(x);
      ++pos_;
    }
    return v;
  }

  // After a backslash: the characters the escape stands for. in_class: \b is a backspace there.
  bool Escape(bool in_class, Ranges& out) {
    if (pos_ >= p_.size()) {
      Fail(ErrorCode::kInvalid, "a trailing backslash");
      return false;
    }
    const uint32_t c = p_[pos_++];
    auto one = [&](uint32_t cp) {
      out.push_back({cp, cp});
      return true;
    };
    auto add = [&](const Ranges& r) {
      out.insert(out.end(), r.begin(), r.end());
      return true;
    };
    switch (c) {
      case 'd': return add(Digits());
      case 'D': return add(Complement(Digits()));
      case 'w': return add(Word());
      case 'W': return add(Complement(Word()));
      case 's': return add(Space());
      case 'S': return add(Complement(Space()));
      case 't': return one('\t');
      case 'n': return one('\n');
      case 'r': return one('\r');
      case 'v': return one('\v');
      case 'f': return one('\f');
      case '0':
        if (Peek() >= '0' && Peek() <= '9') break;
        return one(0);
      case 'x': return one(Hex(2)) && !error;
      case 'u': {
        uint32_t cp = 0;
        if (Peek() == '{') {
          ++pos_;
          while (More() && Peek() != '}' && cp <= kMaxCodePoint) cp = cp * 16 + Hex(1);
          if (!More() || Peek() != '}' || cp > kMaxCodePoint) {
            Fail(ErrorCode::kInvalid, "a malformed \\u{..} escape");
            return false;
          }
          ++pos_;
        } else {
          cp = Hex(4);
        }
        if (error) return false;
        if (cp >= 0xd800 && cp <= 0xdfff) {
          Fail(ErrorCode::kUnsupported, "a surrogate escape (write the character itself)");
          return false;
        }
        return one(cp);
      }
      case 'b':
        if (in_class) return one('\b');
        Fail(ErrorCode::kUnsupported, "the word boundary \\b");
        return false;
      default: break;
    }
    if (c >= '1' && c <= '9') {
      Fail(ErrorCode::kUnsupported, "a backreference");
      return false;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      Fail(ErrorCode::kUnsupported, std::string("the escape \\") + static_cast<char>(c));
      return false;
    }
    return one(c);  // escaped punctuation (or any other character) stands for itself
  }

  Re Class() {
    bool negated = false;
    if (Peek() == '^') {
      negated = true;
      ++pos_;
    }
    Ranges r;
    while (More() && Peek() != ']') {
      Ranges lo_set;
      if (!ClassAtom(lo_set)) return {};
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        Ranges hi_set;
        if (!ClassAtom(hi_set)) return {};
        if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
            hi_set[0].first != hi_set[0].second) {
          Fail(ErrorCode::kInvalid, "a class range with a class escape at an end");
          return {};
        }
        if (lo_set[0].first > hi_set[0].first) {
          Fail(ErrorCode::kInvalid, "a class range out of order");
          return {};
        }
        r.push_back({lo_set[0].first, hi_set[0].first});
      } else {
        r.insert(r.end(), lo_set.begin(), lo_set.end());
      }
    }
    if (!More()) {
      Fail(ErrorCode::kInvalid, "an unterminated class");
      return {};
    }
    ++pos_;  // ]
    return SetOf(negated ? Complement(r) : r);
  }

  bool ClassAtom(Ranges& out) {
    const uint32_t c = p_[pos_++];
    if (c == '\\') return Escape(true, out);
    out.push_back({c, c});
    return true;
  }

  std::vector<uint32_t> p_;
  size_t pos_ = 0;
  std::string at_;
};

// Code points [lo, hi] as UTF-8 byte-range sequences (surrogates left out).
void Utf8Sequences(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  if (lo <= 0xdfff && hi >= 0xd800) {
    if (lo < 0xd800) Utf8Sequences(lo, 0xd7ff, out);
    if (hi > 0xdfff) Utf8Sequences(0xe000, hi, out);
    return;
  }
  static const uint32_t kLast[] = {0x7f, 0x7ff, 0xffff};
  for (uint32_t last : kLast) {
    if (lo <= last && hi > last) {
      Utf8Sequences(lo, last, out);
      Utf8Sequences(last + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7f) {
    out.push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  const int n = hi <= 0x7ff ? 2 : hi <= 0xffff ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        Utf8Sequences(lo, lo | m, out);
        Utf8Sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        Utf8Sequences(lo, (hi & ~m) - 1, out);
        Utf8Sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  auto encode = [n](uint32_t cp, uint8_t* b) {
    static const uint8_t kLead[] = {0, 0, 0xc0, 0xe0, 0xf0};
    for (int k = n - 1; k > 0; --k) {
      b[k] = static_cast<uint8_t>(0x80 | (cp & 0x3f));
      cp >>= 6;
    }
    b[0] = static_cast<uint8_t>(kLead[n] | cp);
  };
  uint8_t a[4], z[4];
  encode(lo, a);
  encode(hi, z);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int k = 0; k < n; ++k) seq.push_back({a[k], z[k]});
  out.push_back(std::move(seq));
}

// Emits the tree between two NFA states (Thompson's construction).
class Builder {
 public:
  explicit Builder(ByteNfa& nfa) : nfa_(nfa) {}
  bool over = false;  // past kMaxNfaStates

  int State() {
    if (nfa_.size() >= kMaxNfaStates) over = true;
    return over ? 0 : nfa_.NewState();
  }

  void Emit(const Re& re, int in, int out) {
    if (over) return;
    switch (re.kind) {
      case Re::kSet: {
        std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
        for (auto [lo, hi] : re.set) Utf8Sequences(lo, hi, seqs);
        for (const auto& seq : seqs) {
          int from = in;
          for (size_t k = 0; k < seq.size(); ++k) {
            const int to = k + 1 == seq.size() ? out : State();
            if (over) return;
            nfa_.Range(from, to, seq[k].first, seq[k].second);
            from = to;
          }
        }
        return;
      }
      case Re::kConcat: {
        int from = in;
        for (size_t k = 0; k < re.kids.size(); ++k) {
          const int to = k + 1 == re.kids.size() ? out : State();
          if (over) return;
          Emit(re.kids[k], from, to);
          from = to;
        }
        if (re.kids.empty()) nfa_.Epsilon(in, out);
        return;
      }
      case Re::kAlt:
        for (const Re& kid : re.kids) {
          const int a = State(), b = State();
          if (over) return;
          nfa_.Epsilon(in, a);
          Emit(kid, a, b);
          nfa_.Epsilon(b, out);
        }
        return;
      case Re::kRepeat: {
        int from = in;
        for (int k = 0; k < re.min && !over; ++k) {
          const int to = State();
          Emit(re.kids[0], from, to);
          from = to;
        }
        if (over) return;
        if (re.max < 0) {
          const int loop = State(), back = State();
          if (over) return;
          nfa_.Epsilon(from, loop);
          Emit(re.kids[0], loop, back);
          nfa_.Epsilon(back, loop);
          nfa_.Epsilon(loop, out);
          return;
        }
        for (int k = re.min; k < re.max && !over; ++k) {
          nfa_.Epsilon(from, out);
          const int to = State();
          Emit(re.kids[0], from, to);
          from = to;
        }
        if (!over) nfa_.Epsilon(from, out);
        return;
      }
      case Re::kBegin:
      case Re::kEnd: nfa_.Epsilon(in, out); return;  // only where the caller stripped them
    }
  }

 private:
  ByteNfa& nfa_;
};

bool HasAnchor(const Re& re) {
  if (re.kind == Re::kBegin || re.kind == Re::kEnd) return true;
  return std::any_of(re.kids.begin(), re.kids.end(), HasAnchor);
}

Result<std::shared_ptr<const ByteDfa>> Compile(const std::string& pattern, const std::string& at,
                                               size_t max_states, bool search) {
  auto text = DecodeUtf8(pattern);
  if (!text) return Invalid(at, "the pattern is not UTF-8");
  Parser parser(std::move(*text), at);
  std::optional<Re> re = parser.Parse();
  if (!re) return *parser.error;
  std::vector<Re> alternatives;
  if (re->kind == Re::kAlt) {
    alternatives = std::move(re->kids);
  } else {
    alternatives.push_back(std::move(*re));
  }
  ByteNfa nfa;
  Builder b(nfa);
  const int start = b.State(), accept = b.State();
  const Re any_star{Re::kRepeat, {}, {SetOf(AnyChar())}, 0, -1};
  for (Re& alt : alternatives) {
    if (alt.kind != Re::kConcat) {
      Re seq;
      seq.kids.push_back(std::move(alt));
      alt = std::move(seq);
    }
    std::vector<Re>& kids = alt.kids;
    const bool begin = !kids.empty() && kids.front().kind == Re::kBegin;
    if (begin) kids.erase(kids.begin());
    const bool end = !kids.empty() && kids.back().kind == Re::kEnd;
    if (end) kids.pop_back();
    if (HasAnchor(alt)) {
      return Error{ErrorCode::kUnsupported, at,
                   "the pattern uses ^ or $ away from its ends (or a top-level alternative's), which "
                   "structured output does not support"};
    }
    if (search && !begin) kids.insert(kids.begin(), any_star);
    if (search && !end) kids.push_back(any_star);
    b.Emit(alt, start, accept);
  }
  if (b.over) {
    return Error{ErrorCode::kLimit, at,
                 "the pattern compiles to more than " + std::to_string(kMaxNfaStates) + " automaton states"};
  }
  auto dfa = nfa.Determinize(start, accept, max_states, at);
  if (!dfa) return dfa.errors();
  if (!TrimDfa(*dfa)) return Invalid(at, "no string matches the pattern");
  return std::make_shared<const ByteDfa>(std::move(*dfa));
}

// The built-in formats (anchored; documented subsets for email, uri and ipv6).
const std::map<std::string, std::string>& Formats() {
  static const std::map<std::string, std::string> k = [] {
    const std::string day31 = "(0[1-9]|[12][0-9]|3[01])", day30 = "(0[1-9]|[12][0-9]|30)";
    // Month and day with each month's length; 02-29 only in leap years.
    const std::string date = "([0-9]{4}-((0[13578]|1[02])-" + day31 + "|(0[469]|11)-" + day30 +
                             "|02-(0[1-9]|1[0-9]|2[0-8]))|([0-9]{2}(0[48]|[2468][048]|[13579][26])|"
                             "([02468][048]|[13579][26])00)-02-29)";
    const std::string time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
    const std::string h = "[0-9a-fA-F]{1,4}";
    const std::string ipv6 =
        "((" + h + ":){7}" + h + "|(" + h + ":){1,7}:|(" + h + ":){1,6}:" + h + "|(" + h + ":){1,5}(:" + h +
        "){1,2}|(" + h + ":){1,4}(:" + h + "){1,3}|(" + h + ":){1,3}(:" + h + "){1,4}|(" + h + ":){1,2}(:" + h +
        "){1,5}|" + h + ":(:" + h + "){1,6}|:((:" + h + "){1,7}|:))";
    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    const std::string dur_time = "T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S)";
    const std::string dur_date = "([0-9]+D|[0-9]+M([0-9]+D)?|[0-9]+Y([0-9]+M([0-9]+D)?)?)";
    const std::string atom = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+";
    const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
    return std::map<std::string, std::string>{
        {"date", date},
        {"time", time},
        {"date-time", date + "T" + time},
        {"duration", "P(" + dur_date + "(" + dur_time + ")?|" + dur_time + "|[0-9]+W)"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"email", atom + "(\\." + atom + ")*@" + label + "(\\." + label + ")+"},
        {"ipv4", octet + "(\\." + octet + "){3}"},
        {"ipv6", ipv6},
        {"uri", "[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*"
                "(#([A-Za-z0-9._~!$&'()*+,;=:@/?-]|%[0-9A-Fa-f]{2})*)?"},
    };
  }();
  return k;
}

}  // namespace

Result<std::shared_ptr<const ByteDfa>> CompileSchemaPattern(const std::string& pattern, const std::string& at,
                                                            size_t max_states) {
  return Compile(pattern, at, max_states, true);
}

Result<std::shared_ptr<const ByteDfa>> CompileSchemaFormat(const std::string& format, const std::string& at,
                                                           size_t max_states) {
  auto it = Formats().find(format);
  if (it == Formats().end()) {
    std::string known;
    for (const auto& [name, _] : Formats()) known += (known.empty() ? "" : ", ") + name;
    return Error{ErrorCode::kUnsupported, at,
                 "the format \"" + format + "\" is not enforced by structured output (known: " + known + ")"};
  }
  // Cached: each format compiles once per process.
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const ByteDfa>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto hit = cache.find(format); hit != cache.end()) return hit->second;
  auto dfa = Compile(it->second, at, std::max<size_t>(max_states, 1 << 16), false);
  if (!dfa) return dfa.errors();
  cache[format] = *dfa;
  return *dfa;
}

}  // namespace mlc
