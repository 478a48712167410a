// TokenPieces (token_pieces.h): a token decoded after a fixed context, a piece of a character
// read back from its token string.
#include "text/token_pieces.h"

#include <string_view>

#include "base/ascii.h"
#include "text/hf_components.h"
#include "text/unicode.h"

namespace mlc::text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// A token's raw bytes from its token string when decoding alone cannot give them (a piece of a
// UTF-8 character): "<0xNN>" (byte fallback) or ByteLevel's visible characters.
std::optional<std::string> RawBytes(const std::string& token) {
  if (token.size() == 6 && token.starts_with("<0x") && token[5] == '>') {
    unsigned value = 0;
    for (char c : token.substr(3, 2)) {
      int d = HexDigitValue(c);
      if (d < 0) return std::nullopt;
      value = value * 16 + static_cast<unsigned>(d);
    }
    return std::string(1, static_cast<char>(value));
  }
  std::string out;
  for (size_t i = 0, len = 0; i < token.size(); i += len) {
    int b = CharToByte(DecodeUtf8(token, i, &len));
    if (b < 0 || len == 0) return std::nullopt;
    out.push_back(static_cast<char>(b));
  }
  return out;
}

}  // namespace

TokenPieces::TokenPieces(const Tokenizer& tokenizer)
    : tokenizer_(tokenizer), context_(tokenizer.Encode("a")), base_(tokenizer.Decode(context_)) {}

std::optional<std::string> TokenPieces::Bytes(int32_t id) const {
  std::vector<int32_t> ids = context_;
  ids.push_back(id);
  std::string text = tokenizer_.Decode(ids);
  text = text.starts_with(base_) ? text.substr(base_.size()) : tokenizer_.Decode({&id, 1});
  if (text.find(kReplacement) != std::string::npos) {
    const std::string name = tokenizer_.IdToToken(id);
    if (name.find(kReplacement) == std::string::npos) return RawBytes(name);
  }
  return text;
}

}  // namespace mlc::text
