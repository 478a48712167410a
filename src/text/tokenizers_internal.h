// Constructors of the two tokenizer kinds, shared between src/text files.
#pragma once

#include <memory>
#include <string_view>

#include "mlc_manifest/json.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc::text {

Result<std::unique_ptr<Tokenizer>> ParseHfTokenizer(const Json& doc);
Result<std::unique_ptr<Tokenizer>> LoadSentencePiece(std::string_view model_bytes);
// Whether id is an added token a Hugging Face tokenizer.json marks special (structured output
// never samples those); false for SentencePiece, whose control pieces decode to nothing.
bool IsSpecialToken(const Tokenizer& tokenizer, int32_t id);

}  // namespace mlc::text
