// ASCII character helpers the parsers share: hex digit values and case folding that ignore the
// locale (HTTP names, units, escapes and token strings are ASCII by definition).
#pragma once

#include <string>
#include <string_view>

namespace mlc {

// 0..15 for [0-9a-fA-F], else -1.
inline int HexDigitValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

inline char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string AsciiLowerCopy(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = AsciiLower(c);
  return out;
}

}  // namespace mlc
