// The bytes one token adds to a decoded text, as llama.cpp's token-to-piece gives them: the token
// decoded after a fixed context (so that a SentencePiece or Metaspace token keeps its leading
// space), and a token that holds part of a UTF-8 character as its raw bytes, read from its token
// string ("<0xNN>" byte fallback, ByteLevel's visible characters). Used by the structured-output
// vocabulary and the server's /tokenize pieces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/tokenizer.h"

namespace mlc::text {

class TokenPieces {
 public:
  explicit TokenPieces(const Tokenizer& tokenizer);

  // The token's bytes; nullopt for a piece of a character whose token string does not give its
  // bytes. Special tokens give their text. Safe from several threads at once.
  std::optional<std::string> Bytes(int32_t id) const;

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> context_;
  std::string base_;  // context_ decoded
};

}  // namespace mlc::text
