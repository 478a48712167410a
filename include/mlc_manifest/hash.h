// Digests used across the project (OpenSSL EVP): lowercase hex of MD5 and SHA-256.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mlc {

// Lowercase hex of bytes.
std::string HexLower(const unsigned char* bytes, size_t n);
// Lowercase hex MD5 of bytes (tensor-cache md5sum).
std::string Md5Hex(std::string_view bytes);
// Lowercase hex SHA-256 of bytes.
std::string Sha256Hex(std::string_view bytes);

}  // namespace mlc
