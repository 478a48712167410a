// The normalizers of a Hugging Face tokenizer.json (NFC, NFKC, Lowercase, Prepend, Replace,
// Sequence), parsed and applied as Hugging Face tokenizers applies them.
#include <optional>

#include "text/hf_internal.h"
#include "text/unicode.h"

namespace mlc::text {

using namespace hf;  // the shared readers (hf_internal.h)

namespace {

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

}  // namespace mlc::text
