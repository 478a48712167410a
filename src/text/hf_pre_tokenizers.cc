// The pre-tokenizers of a Hugging Face tokenizer.json (Split, ByteLevel, Metaspace, Digits,
// Whitespace, Sequence) and the splitting behaviours they share, as Hugging Face applies them.
#include <optional>

#include "text/hf_internal.h"
#include "text/unicode.h"

namespace mlc::text {

using namespace hf;  // the shared readers (hf_internal.h)

namespace {

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

}  // namespace

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

}  // namespace mlc::text
