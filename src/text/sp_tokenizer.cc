// A SentencePiece tokenizer.model as web-tokenizers runs it: SentencePieceProcessor's Encode
// and Decode on ids, errors ignored (an id out of range decodes the whole list to ""). The
// processor lives in the SentencePiece module (text/sp_backend.h), loaded with the first model.
#include <memory>

#include "text/sp_backend.h"
#include "text/tokenizers_internal.h"
#include "text/unicode.h"

namespace mlc {

namespace text {
namespace {

// The module's sinks: copy what a call produced into the caller's container.
void TakeIds(void* context, const int32_t* ids, size_t count) {
  static_cast<std::vector<int32_t>*>(context)->assign(ids, ids + count);
}
void TakeText(void* context, const char* text, size_t size) {
  static_cast<std::string*>(context)->assign(text, size);
}

class SpTokenizer : public Tokenizer {
 public:
  explicit SpTokenizer(const MlcSpBackend* backend)
      : backend_(backend), sp_(nullptr, backend->destroy) {}

  Status Load(std::string_view bytes) {
    MlcSpError error{};
    sp_.reset(backend_->load(bytes.data(), bytes.size(), &error));
    if (!sp_) return Invalid("", std::string("expected a SentencePiece model: ") + error.message);
    pieces_ = backend_->piece_count(sp_.get());
    if (pieces_ <= 0) return Invalid("", "expected a SentencePiece model with pieces");
    return Status::Ok();
  }

  std::vector<int32_t> Encode(std::string_view text) const override {
    const std::string valid = Utf8Lossy(text);
    std::vector<int32_t> ids;
    MlcSpError error{};
    if (!backend_->encode(sp_.get(), valid.data(), valid.size(), TakeIds, &ids, &error)) return {};
    return ids;
  }

  std::string Decode(std::span<const int32_t> ids) const override {
    for (int32_t id : ids) {
      if (id < 0 || id >= pieces_) return "";
    }
    std::string text;
    MlcSpError error{};
    if (!backend_->decode(sp_.get(), ids.data(), ids.size(), TakeText, &text, &error)) return "";
    return text;
  }

  std::optional<int32_t> TokenToId(std::string_view token) const override {
    const int32_t id = backend_->piece_to_id(sp_.get(), token.data(), token.size());
    if (id < 0 || id >= pieces_ || IdToToken(id) != token) return std::nullopt;
    return id;
  }

  std::string IdToToken(int32_t id) const override {
    std::string piece;
    if (!backend_->id_to_piece(sp_.get(), id, TakeText, &piece)) return "";
    return piece;
  }

  size_t VocabSize() const override { return static_cast<size_t>(pieces_); }
  std::string_view Kind() const override { return "sentencepiece"; }

 private:
  const MlcSpBackend* backend_;
  std::unique_ptr<MlcSpProcessor, void (*)(MlcSpProcessor*)> sp_;
  int32_t pieces_ = 0;
};

}  // namespace

Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(std::string_view model_bytes) {
  auto backend = LoadModule<MlcSpBackend>();
  MLC_RETURN_IF_ERROR(backend);
  auto tok = std::make_unique<SpTokenizer>(*backend);
  Status s = tok->Load(model_bytes);
  if (!s.ok()) return s.errors();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

}  // namespace text
}  // namespace mlc
