// A SentencePiece tokenizer.model as web-tokenizers runs it: SentencePieceProcessor's Encode
// and Decode on ids, errors ignored (an id out of range decodes the whole list to "").
#include <sentencepiece_processor.h>

#include "text/tokenizers_internal.h"
#include "text/unicode.h"

namespace mlc::text {
namespace {

class SpTokenizer : public Tokenizer {
 public:
  Status Load(std::string_view bytes) {
    auto status = sp_.LoadFromSerializedProto(bytes);
    if (!status.ok()) {
      return Invalid("", "expected a SentencePiece model: " + std::string(status.message()));
    }
    if (sp_.GetPieceSize() <= 0) return Invalid("", "expected a SentencePiece model with pieces");
    return Status::Ok();
  }

  std::vector<int32_t> Encode(std::string_view text) const override {
    std::vector<int> ids;
    if (!sp_.Encode(Utf8Lossy(text), &ids).ok()) return {};
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string Decode(std::span<const int32_t> ids) const override {
    std::vector<int> list(ids.begin(), ids.end());
    for (int id : list) {
      if (id < 0 || id >= sp_.GetPieceSize()) return "";
    }
    std::string text;
    if (!sp_.Decode(list, &text).ok()) return "";
    return text;
  }

  std::optional<int32_t> TokenToId(std::string_view token) const override {
    int id = sp_.PieceToId(token);
    if (id < 0 || id >= sp_.GetPieceSize() || sp_.IdToPiece(id) != token) return std::nullopt;
    return id;
  }

  std::string IdToToken(int32_t id) const override {
    if (id < 0 || id >= sp_.GetPieceSize()) return "";
    return sp_.IdToPiece(id);
  }

  size_t VocabSize() const override { return static_cast<size_t>(sp_.GetPieceSize()); }
  std::string_view Kind() const override { return "sentencepiece"; }

 private:
  sentencepiece::SentencePieceProcessor sp_;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(std::string_view model_bytes) {
  auto tok = std::make_unique<SpTokenizer>();
  Status s = tok->Load(model_bytes);
  if (!s.ok()) return s.errors();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace mlc::text
