// Normalizers, pre-tokenizers and decoders of Hugging Face tokenizers (see hf_components.h).
#include "text/hf_components.h"

#include <array>
#include <optional>

#include "text/regex.h"
#include "text/unicode.h"

namespace mlc::text {
namespace {

// ---------------------------------------------------------------- field helpers

Error Unsupported(const std::string& path, const std::string& message) {
  return Error{ErrorCode::kUnsupported, path, message};
}

// The component's "type" string, or an error.
Result<std::string> TypeOf(const Json& j, const std::string& path) {
  if (!j.is_object()) return Invalid(path, "expected an object with a \"type\"");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) {
    return Invalid(PointerAppend(path, "type"), "expected the component's type as a string");
  }
  return it->get<std::string>();
}

const Json* Field(const Json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

bool BoolField(const Json& j, const char* key, bool fallback, const std::string& path,
               Errors* errors) {
  const Json* v = Field(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected true or false"));
    return fallback;
  }
  return v->get<bool>();
}

std::optional<std::string> StringField(const Json& j, const char* key, const std::string& path,
                                       Errors* errors) {
  const Json* v = Field(j, key);
  if (!v || !v->is_string()) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected a string"));
    return std::nullopt;
  }
  return v->get<std::string>();
}

// A string holding exactly one character (Metaspace's replacement, Strip's content).
std::optional<std::string> CharField(const Json& j, const char* key, const std::string& path,
                                     Errors* errors) {
  std::optional<std::string> s = StringField(j, key, path, errors);
  if (s && CountCodePoints(*s) != 1) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected exactly one character"));
    return std::nullopt;
  }
  return s;
}

size_t CountField(const Json& j, const char* key, const std::string& path, Errors* errors) {
  const Json* v = Field(j, key);
  std::optional<int64_t> n = v ? SafeInteger(*v) : std::nullopt;
  if (!n || *n < 0) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected a count (integer >= 0)"));
    return 0;
  }
  return static_cast<size_t>(*n);
}

const Json* ArrayField(const Json& j, const char* key, const std::string& path, Errors* errors) {
  const Json* v = Field(j, key);
  if (!v || !v->is_array()) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected an array of components"));
    return nullptr;
  }
  return v;
}

// {"String": s} or {"Regex": r} -> a compiled regex (a string is matched literally).
Result<std::shared_ptr<const Regex>> PatternField(const Json& j, const std::string& path) {
  std::string at = PointerAppend(path, "pattern");
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object() || it->size() != 1) {
    return Invalid(at, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    return Regex::Compile(Regex::Escape(s->get<std::string>()), PointerAppend(at, "String"));
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    return Regex::Compile(r->get<std::string>(), PointerAppend(at, "Regex"));
  }
  return Invalid(at, "expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string ReplaceAll(const Regex& regex, std::string_view s, const std::string& content) {
  std::vector<std::pair<size_t, size_t>> matches = regex.FindAll(s);
  if (matches.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(s.substr(prev, b - prev));
    out += content;
    prev = e;
  }
  out.append(s.substr(prev));
  return out;
}

// ---------------------------------------------------------------- splitting

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct Range {
  size_t begin, end;
  bool match;
};

// Matches of a regex as a cover of s: (range, is_match) in order, as Hugging Face's Pattern,
// each handed to f as it is found.
template <class F>
void ForEachRegexRange(const Regex& regex, std::string_view s, bool invert, F f) {
  if (s.empty()) {
    f(Range{0, 0, invert});
    return;
  }
  size_t prev = 0;
  regex.ForEachMatch(s, [&](size_t b, size_t e) {
    if (prev != b) f(Range{prev, b, invert});
    f(Range{b, e, !invert});
    prev = e;
  });
  if (prev != s.size()) f(Range{prev, s.size(), invert});
}

std::vector<Range> RegexRanges(const Regex& regex, std::string_view s, bool invert) {
  std::vector<Range> out;
  ForEachRegexRange(regex, s, invert, [&out](const Range& r) { out.push_back(r); });
  return out;
}

// Each character for which pred holds is a match of its own.
template <class Pred>
std::vector<Range> CharRanges(std::string_view s, Pred pred) {
  std::vector<Range> out;
  size_t last = 0, i = 0;
  while (i < s.size()) {
    size_t len = 0;
    char32_t cp = DecodeUtf8(s, i, &len);
    if (pred(cp)) {
      if (last < i) out.push_back(Range{last, i, false});
      out.push_back(Range{i, i + len, true});
      last = i + len;
    }
    i += len;
  }
  if (last < s.size()) out.push_back(Range{last, s.size(), false});
  return out;
}

std::vector<Range> ApplyBehavior(std::vector<Range> ranges, Behavior behavior) {
  std::vector<Range> out;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kIsolated:
      return ranges;
    case Behavior::kRemoved:
      for (const Range& r : ranges) {
        if (!r.match) out.push_back(r);
      }
      return out;
    case Behavior::kMergedWithPrevious:
      for (const Range& r : ranges) {
        if (r.match && !previous_match && !out.empty()) {
          out.back().end = r.end;
        } else {
          out.push_back(r);
        }
        previous_match = r.match;
      }
      return out;
    case Behavior::kMergedWithNext:
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->match;
      }
      return std::vector<Range>(out.rbegin(), out.rend());
    case Behavior::kContiguous:
      for (size_t k = 0; k < ranges.size(); ++k) {
        if (k > 0 && ranges[k].match == previous_match) {
          out.back().end = ranges[k].end;
        } else {
          out.push_back(ranges[k]);
        }
        previous_match = ranges[k].match;
      }
      return out;
  }
  return ranges;
}

// Replaces `piece` by its sub-pieces (empty ones dropped), appending to out.
void EmitSplits(const Piece& piece, const std::vector<Range>& ranges, std::vector<Piece>* out) {
  for (const Range& r : ranges) {
    if (r.end <= r.begin) continue;
    out->push_back(Piece{piece.text.substr(r.begin, r.end - r.begin), piece.at_start && r.begin == 0});
  }
}

std::optional<Behavior> ParseBehavior(const std::string& s) {
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  return std::nullopt;
}

// ---------------------------------------------------------------- normalizers

class NfcNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string s) const override { return Nfc(s); }
};

class NfkcNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string s) const override { return Nfkc(s); }
};

class LowercaseNormalizer : public Normalizer {
 public:
  std::string Normalize(std::string s) const override { return Lowercase(s); }
};

class PrependNormalizer : public Normalizer {
 public:
  explicit PrependNormalizer(std::string prepend) : prepend_(std::move(prepend)) {}
  std::string Normalize(std::string s) const override {
    return s.empty() ? s : prepend_ + s;  // only onto a non-empty piece
  }

 private:
  std::string prepend_;
};

class ReplaceNormalizer : public Normalizer {
 public:
  ReplaceNormalizer(std::shared_ptr<const Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  std::string Normalize(std::string s) const override { return ReplaceAll(*regex_, s, content_); }

 private:
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class SequenceNormalizer : public Normalizer {
 public:
  explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> parts)
      : parts_(std::move(parts)) {}
  std::string Normalize(std::string s) const override {
    for (const auto& p : parts_) s = p->Normalize(std::move(s));
    return s;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> parts_;
};

// ---------------------------------------------------------------- pre-tokenizers

}  // namespace

void PreTokenizer::SplitEach(Piece piece, const std::function<void(Piece)>& emit) const {
  std::vector<Piece> one;
  one.push_back(std::move(piece));
  for (Piece& q : Split(std::move(one))) emit(std::move(q));
}

namespace {

// Split over a list, through SplitEach (for the pre-tokenizers that stream).
std::vector<Piece> SplitThroughEach(const PreTokenizer& pre, std::vector<Piece> pieces) {
  std::vector<Piece> out;
  for (Piece& p : pieces) pre.SplitEach(std::move(p), [&out](Piece q) { out.push_back(std::move(q)); });
  return out;
}

class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::shared_ptr<const Regex> regex, Behavior behavior, bool invert)
      : regex_(std::move(regex)), behavior_(behavior), invert_(invert) {}
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    return SplitThroughEach(*this, std::move(pieces));
  }
  // Isolated and Removed need no neighbour, so they stream; the merging behaviours take the list.
  void SplitEach(Piece p, const std::function<void(Piece)>& emit) const override {
    if (behavior_ != Behavior::kIsolated && behavior_ != Behavior::kRemoved) {
      std::vector<Piece> out;
      EmitSplits(p, ApplyBehavior(RegexRanges(*regex_, p.text, invert_), behavior_), &out);
      for (Piece& q : out) emit(std::move(q));
      return;
    }
    ForEachRegexRange(*regex_, p.text, invert_, [&](const Range& r) {
      if ((behavior_ == Behavior::kRemoved && r.match) || r.end <= r.begin) return;
      emit(Piece{p.text.substr(r.begin, r.end - r.begin), p.at_start && r.begin == 0});
    });
  }

 private:
  std::shared_ptr<const Regex> regex_;
  Behavior behavior_;
  bool invert_;
};

class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, std::shared_ptr<const Regex> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    return SplitThroughEach(*this, std::move(pieces));
  }
  void SplitEach(Piece p, const std::function<void(Piece)>& emit) const override {
    if (add_prefix_space_ && (p.text.empty() || p.text[0] != ' ')) p.text.insert(0, " ");
    auto mapped = [&emit](std::string_view text, bool at_start) {
      std::string m;
      m.reserve(text.size() * 2);
      for (char c : text) m += ByteToChar(static_cast<unsigned char>(c));
      emit(Piece{std::move(m), at_start});
    };
    if (!regex_) {
      mapped(p.text, p.at_start);
      return;
    }
    ForEachRegexRange(*regex_, p.text, false, [&](const Range& r) {
      if (r.end > r.begin) {
        mapped(std::string_view(p.text).substr(r.begin, r.end - r.begin), p.at_start && r.begin == 0);
      }
    });
  }

 private:
  bool add_prefix_space_;
  std::shared_ptr<const Regex> regex_;  // null when use_regex is false
};

enum class PrependScheme { kAlways, kFirst, kNever };

class MetaspacePreTokenizer : public PreTokenizer {
 public:
  MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
      : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {
    size_t len = 0;
    replacement_cp_ = DecodeUtf8(replacement_, 0, &len);
  }
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    std::vector<Piece> out;
    for (Piece& p : pieces) {
      std::string s;
      s.reserve(p.text.size() + 8);
      for (char c : p.text) {
        if (c == ' ') {
          s += replacement_;
        } else {
          s.push_back(c);
        }
      }
      bool starts = s.compare(0, replacement_.size(), replacement_) == 0;
      if (!starts && (scheme_ == PrependScheme::kAlways ||
                      (scheme_ == PrependScheme::kFirst && p.at_start))) {
        s.insert(0, replacement_);
      }
      Piece q{std::move(s), p.at_start};
      if (split_) {
        char32_t rep = replacement_cp_;
        EmitSplits(q, ApplyBehavior(CharRanges(q.text, [rep](char32_t c) { return c == rep; }),
                                    Behavior::kMergedWithNext),
                   &out);
      } else {
        out.push_back(std::move(q));
      }
    }
    return out;
  }

 private:
  std::string replacement_;
  char32_t replacement_cp_ = 0;
  PrependScheme scheme_;
  bool split_;
};

class DigitsPreTokenizer : public PreTokenizer {
 public:
  explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    std::vector<Piece> out;
    Behavior b = individual_ ? Behavior::kIsolated : Behavior::kContiguous;
    for (const Piece& p : pieces) EmitSplits(p, ApplyBehavior(CharRanges(p.text, IsNumeric), b), &out);
    return out;
  }

 private:
  bool individual_;
};

// Hugging Face's Whitespace: the runs of `\w+|[^\w\s]+` (Rust regex classes), spaces dropped.
class WhitespacePreTokenizer : public PreTokenizer {
 public:
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    std::vector<Piece> out;
    for (const Piece& p : pieces) {
      const std::string& t = p.text;
      size_t run_begin = 0;
      int run_class = 0;  // 0 whitespace, 1 word, 2 other
      auto close = [&](size_t end) {
        if (run_class != 0 && end > run_begin) {
          out.push_back(Piece{t.substr(run_begin, end - run_begin), p.at_start && run_begin == 0});
        }
      };
      for (size_t i = 0, len = 0; i < t.size(); i += len) {
        char32_t cp = DecodeUtf8(t, i, &len);
        int c = IsWhitespace(cp) ? 0 : IsWordChar(cp) ? 1 : 2;
        if (c != run_class || i == 0) {
          close(i);
          run_begin = i;
          run_class = c;
        }
      }
      close(t.size());
    }
    return out;
  }
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> parts)
      : parts_(std::move(parts)) {}
  std::vector<Piece> Split(std::vector<Piece> pieces) const override {
    for (const auto& p : parts_) pieces = p->Split(std::move(pieces));
    return pieces;
  }
  // Depth first: each piece of one stage goes through the next stages before the following one.
  void SplitEach(Piece piece, const std::function<void(Piece)>& emit) const override {
    Stage(0, std::move(piece), emit);
  }

 private:
  void Stage(size_t k, Piece piece, const std::function<void(Piece)>& emit) const {
    if (k == parts_.size()) {
      emit(std::move(piece));
      return;
    }
    parts_[k]->SplitEach(std::move(piece), [&](Piece q) { Stage(k + 1, std::move(q), emit); });
  }

  std::vector<std::unique_ptr<PreTokenizer>> parts_;
};

// ---------------------------------------------------------------- decoders

class ByteLevelDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      std::string mapped;
      bool all = true;
      size_t i = 0;
      while (i < t.size() && all) {
        size_t len = 0;
        int b = CharToByte(DecodeUtf8(t, i, &len));
        if (b < 0) all = false;
        mapped.push_back(static_cast<char>(b));
        i += len;
      }
      bytes += all ? mapped : t;
    }
    return {Utf8Lossy(bytes)};
  }
};

// "<0xXX>" -> the byte (Rust's u8::from_str_radix, which also takes a leading '+').
std::optional<unsigned char> ByteToken(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return std::nullopt;
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (t[3] == '+') {
    int d = hex(t[4]);
    return d < 0 ? std::nullopt : std::optional<unsigned char>(static_cast<unsigned char>(d));
  }
  int hi = hex(t[3]), lo = hex(t[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

class ByteFallbackDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (IsValidUtf8(pending)) {
        out.push_back(pending);
      } else {
        for (size_t k = 0; k < pending.size(); ++k) out.push_back("\xEF\xBF\xBD");
      }
      pending.clear();
    };
    for (std::string& t : tokens) {
      if (std::optional<unsigned char> b = ByteToken(t)) {
        pending.push_back(static_cast<char>(*b));
        continue;
      }
      flush();
      out.push_back(std::move(t));
    }
    flush();
    return out;
  }
};

class FuseDecoder : public Decoder {
 public:
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    std::string all;
    for (const std::string& t : tokens) all += t;
    return {all};
  }
};

class StripDecoder : public Decoder {
 public:
  StripDecoder(char32_t content, size_t start, size_t stop)
      : content_(content), start_(start), stop_(stop) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) t = Strip(t);
    return tokens;
  }

 private:
  std::string Strip(const std::string& t) const {
    std::vector<std::pair<size_t, char32_t>> chars;  // (byte offset, code point)
    for (size_t i = 0, len = 0; i < t.size(); i += len) chars.emplace_back(i, DecodeUtf8(t, i, &len));
    size_t start_cut = 0, stop_cut = 0;
    for (size_t k = 0; k < chars.size() && k < start_; ++k) {
      if (chars[k].second != content_) break;
      start_cut = k + 1;
    }
    for (size_t k = 0; k < chars.size() && k < stop_; ++k) {
      if (chars[chars.size() - 1 - k].second != content_) break;
      stop_cut = k + 1;
    }
    // As the reference: keep (byte length - cuts) characters after the start cut.
    size_t keep = t.size() >= start_cut + stop_cut ? t.size() - start_cut - stop_cut : 0;
    size_t first = start_cut, last = std::min(chars.size(), start_cut + keep);
    if (first >= last) return "";
    size_t b = chars[first].first;
    size_t e = last < chars.size() ? chars[last].first : t.size();
    return t.substr(b, e - b);
  }
  char32_t content_;
  size_t start_, stop_;
};

class ReplaceDecoder : public Decoder {
 public:
  ReplaceDecoder(std::shared_ptr<const Regex> regex, std::string content)
      : regex_(std::move(regex)), content_(std::move(content)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (std::string& t : tokens) t = ReplaceAll(*regex_, t, content_);
    return tokens;
  }

 private:
  std::shared_ptr<const Regex> regex_;
  std::string content_;
};

class MetaspaceDecoder : public Decoder {
 public:
  MetaspaceDecoder(char32_t replacement, bool prepend) : replacement_(replacement), prepend_(prepend) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (size_t k = 0; k < tokens.size(); ++k) {
      const std::string& t = tokens[k];
      std::string out;
      out.reserve(t.size());
      for (size_t i = 0, len = 0; i < t.size(); i += len) {
        char32_t cp = DecodeUtf8(t, i, &len);
        if (cp != replacement_) {
          out.append(t, i, len);
        } else if (k != 0 || !prepend_) {  // the first token loses its replacement characters
          out.push_back(' ');
        }
      }
      tokens[k] = std::move(out);
    }
    return tokens;
  }

 private:
  char32_t replacement_;
  bool prepend_;
};

class SequenceDecoder : public Decoder {
 public:
  explicit SequenceDecoder(std::vector<std::unique_ptr<Decoder>> parts) : parts_(std::move(parts)) {}
  std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const override {
    for (const auto& p : parts_) tokens = p->DecodeChain(std::move(tokens));
    return tokens;
  }

 private:
  std::vector<std::unique_ptr<Decoder>> parts_;
};

// ---------------------------------------------------------------- parsing

// Metaspace's prepend scheme: "always" / "first" / "never", or the older add_prefix_space.
std::optional<PrependScheme> ParsePrependScheme(const Json& j, const std::string& path,
                                                Errors* errors) {
  if (const Json* v = Field(j, "prepend_scheme")) {
    std::string s = v->is_string() ? v->get<std::string>() : "";
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    errors->push_back(Invalid(PointerAppend(path, "prepend_scheme"),
                              "expected \"always\", \"first\" or \"never\""));
    return std::nullopt;
  }
  return BoolField(j, "add_prefix_space", true, path, errors) ? PrependScheme::kAlways
                                                               : PrependScheme::kNever;
}

template <class T, class ParseOne>
Result<std::vector<std::unique_ptr<T>>> ParseList(const Json& j, const char* key,
                                                  const std::string& path, ParseOne parse_one) {
  Errors errors;
  const Json* list = ArrayField(j, key, path, &errors);
  if (!list) return errors;
  std::vector<std::unique_ptr<T>> parts;
  for (size_t k = 0; k < list->size(); ++k) {
    auto part = parse_one((*list)[k], PointerAppend(PointerAppend(path, key), k));
    if (!part.ok()) {
      for (const Error& e : part.errors()) AddError(errors, e);
      continue;
    }
    if (*part) parts.push_back(std::move(*part));
  }
  if (!errors.empty()) return errors;
  return parts;
}

template <class T>
Result<std::unique_ptr<T>> Done(std::unique_ptr<T> value, const Errors& errors) {
  if (!errors.empty()) return errors;
  return value;
}

}  // namespace

Result<std::unique_ptr<Normalizer>> ParseNormalizer(const Json& j, const std::string& path) {
  if (j.is_null()) return std::unique_ptr<Normalizer>();
  auto type = TypeOf(j, path);
  if (!type.ok()) return type.errors();
  Errors errors;
  if (*type == "NFC") return std::unique_ptr<Normalizer>(new NfcNormalizer());
  if (*type == "NFKC") return std::unique_ptr<Normalizer>(new NfkcNormalizer());
  if (*type == "Lowercase") return std::unique_ptr<Normalizer>(new LowercaseNormalizer());
  if (*type == "Prepend") {
    auto prepend = StringField(j, "prepend", path, &errors);
    return Done<Normalizer>(std::make_unique<PrependNormalizer>(prepend.value_or("")), errors);
  }
  if (*type == "Replace") {
    auto regex = PatternField(j, path);
    auto content = StringField(j, "content", path, &errors);
    if (!regex.ok()) return regex.errors();
    return Done<Normalizer>(std::make_unique<ReplaceNormalizer>(*regex, content.value_or("")),
                            errors);
  }
  if (*type == "Sequence") {
    auto parts = ParseList<Normalizer>(j, "normalizers", path, ParseNormalizer);
    if (!parts.ok()) return parts.errors();
    return std::unique_ptr<Normalizer>(new SequenceNormalizer(std::move(*parts)));
  }
  return Unsupported(PointerAppend(path, "type"),
                     "unsupported normalizer \"" + *type +
                         "\"; expected NFC, NFKC, Replace, Prepend, Lowercase or Sequence");
}

Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const Json& j, const std::string& path) {
  if (j.is_null()) return std::unique_ptr<PreTokenizer>();
  auto type = TypeOf(j, path);
  if (!type.ok()) return type.errors();
  Errors errors;
  if (*type == "Split") {
    auto regex = PatternField(j, path);
    auto behavior_name = StringField(j, "behavior", path, &errors);
    bool invert = BoolField(j, "invert", false, path, &errors);
    std::optional<Behavior> behavior;
    if (behavior_name) behavior = ParseBehavior(*behavior_name);
    if (behavior_name && !behavior) {
      AddError(errors, Invalid(PointerAppend(path, "behavior"),
                               "expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                               "Contiguous"));
    }
    if (!regex.ok()) return regex.errors();
    if (!errors.empty()) return errors;
    return std::unique_ptr<PreTokenizer>(new SplitPreTokenizer(*regex, *behavior, invert));
  }
  if (*type == "ByteLevel") {
    bool add_prefix_space = BoolField(j, "add_prefix_space", true, path, &errors);
    bool use_regex = BoolField(j, "use_regex", true, path, &errors);
    std::shared_ptr<const Regex> regex;
    if (use_regex) {
      auto r = Regex::Compile(
          R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", path);
      if (!r.ok()) return r.errors();
      regex = *r;
    }
    return Done<PreTokenizer>(std::make_unique<ByteLevelPreTokenizer>(add_prefix_space, regex),
                              errors);
  }
  if (*type == "Metaspace") {
    auto replacement = CharField(j, "replacement", path, &errors);
    auto scheme = ParsePrependScheme(j, path, &errors);
    bool split = BoolField(j, "split", true, path, &errors);
    if (!errors.empty()) return errors;
    return std::unique_ptr<PreTokenizer>(new MetaspacePreTokenizer(*replacement, *scheme, split));
  }
  if (*type == "Digits") {
    bool individual = BoolField(j, "individual_digits", false, path, &errors);
    return Done<PreTokenizer>(std::make_unique<DigitsPreTokenizer>(individual), errors);
  }
  if (*type == "Whitespace") {
    return std::unique_ptr<PreTokenizer>(new WhitespacePreTokenizer());
  }
  if (*type == "Sequence") {
    auto parts = ParseList<PreTokenizer>(j, "pretokenizers", path, ParsePreTokenizer);
    if (!parts.ok()) return parts.errors();
    return std::unique_ptr<PreTokenizer>(new SequencePreTokenizer(std::move(*parts)));
  }
  return Unsupported(PointerAppend(path, "type"),
                     "unsupported pre-tokenizer \"" + *type +
                         "\"; expected Split, ByteLevel, Metaspace, Digits, Whitespace or Sequence");
}

Result<std::unique_ptr<Decoder>> ParseDecoder(const Json& j, const std::string& path) {
  if (j.is_null()) return std::unique_ptr<Decoder>();
  auto type = TypeOf(j, path);
  if (!type.ok()) return type.errors();
  Errors errors;
  if (*type == "ByteLevel") return std::unique_ptr<Decoder>(new ByteLevelDecoder());
  if (*type == "ByteFallback") return std::unique_ptr<Decoder>(new ByteFallbackDecoder());
  if (*type == "Fuse") return std::unique_ptr<Decoder>(new FuseDecoder());
  if (*type == "Strip") {
    auto content = CharField(j, "content", path, &errors);
    size_t start = CountField(j, "start", path, &errors);
    size_t stop = CountField(j, "stop", path, &errors);
    if (!errors.empty()) return errors;
    size_t len = 0;
    return std::unique_ptr<Decoder>(new StripDecoder(DecodeUtf8(*content, 0, &len), start, stop));
  }
  if (*type == "Replace") {
    auto regex = PatternField(j, path);
    auto content = StringField(j, "content", path, &errors);
    if (!regex.ok()) return regex.errors();
    return Done<Decoder>(std::make_unique<ReplaceDecoder>(*regex, content.value_or("")), errors);
  }
  if (*type == "Metaspace") {
    auto replacement = CharField(j, "replacement", path, &errors);
    auto scheme = ParsePrependScheme(j, path, &errors);
    if (!errors.empty()) return errors;
    size_t len = 0;
    return std::unique_ptr<Decoder>(new MetaspaceDecoder(DecodeUtf8(*replacement, 0, &len),
                                                         *scheme != PrependScheme::kNever));
  }
  if (*type == "Sequence") {
    auto parts = ParseList<Decoder>(j, "decoders", path, ParseDecoder);
    if (!parts.ok()) return parts.errors();
    return std::unique_ptr<Decoder>(new SequenceDecoder(std::move(*parts)));
  }
  return Unsupported(PointerAppend(path, "type"),
                     "unsupported decoder \"" + *type +
                         "\"; expected ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace "
                         "or Sequence");
}

namespace {

struct ByteTables {
  std::array<std::string, 256> to_char;
  std::array<int, 324> to_byte;  // code points 0..323 cover the whole table
  ByteTables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool visible = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = visible ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      AppendUtf8(cp, &to_char[b]);
      to_byte[cp] = b;
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& ByteToChar(unsigned char b) { return Tables().to_char[b]; }

int CharToByte(char32_t cp) { return cp < 324 ? Tables().to_byte[cp] : -1; }

}  // namespace mlc::text
