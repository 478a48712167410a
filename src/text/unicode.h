// UTF-8 and Unicode helpers for the tokenizers: lossy UTF-8 repair, code point iteration,
// NFC/NFKC (utf8proc), lowercase and character classes as Rust's `char` defines them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mlc::text {

// Replaces each maximal invalid UTF-8 subsequence by U+FFFD, as Rust's from_utf8_lossy does.
std::string Utf8Lossy(std::string_view bytes);
bool IsValidUtf8(std::string_view bytes);

// Decodes the code point starting at s[i] (s is valid UTF-8); sets *len to its byte length.
char32_t DecodeUtf8(std::string_view s, size_t i, size_t* len);
void AppendUtf8(char32_t cp, std::string* out);
// Byte length of the UTF-8 sequence led by byte b (1 for stray bytes).
inline size_t Utf8Length(unsigned char b) {
  return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}
size_t CountCodePoints(std::string_view s);

std::string Nfc(std::string_view s);
std::string Nfkc(std::string_view s);
// Rust's char::to_lowercase applied to each code point.
std::string Lowercase(std::string_view s);

// Rust's char::is_whitespace (White_Space) and char::is_numeric (Nd, Nl, No).
bool IsWhitespace(char32_t cp);
bool IsNumeric(char32_t cp);
// Rust regex's \w: alphabetic, marks, decimal digits, connector punctuation, join controls.
bool IsWordChar(char32_t cp);

}  // namespace mlc::text
