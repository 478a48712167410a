// The decoders of a Hugging Face tokenizer.json (ByteLevel, ByteFallback, Fuse, Strip, Replace,
// Metaspace, Sequence), parsed and applied as Hugging Face tokenizers applies them.
#include <optional>

#include "text/hf_internal.h"
#include "base/ascii.h"
#include "text/unicode.h"

namespace mlc::text {

using namespace hf;  // the shared readers (hf_internal.h)

namespace {

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
  auto hex = HexDigitValue;
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

}  // namespace

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

}  // namespace mlc::text
