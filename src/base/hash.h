// Digests used across the project: lowercase hex of MD5 and SHA-256. They go through the crypto
// module (libcrypto, opened on first use): an I/O error when it cannot be loaded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc {

// Lowercase hex of bytes.
std::string HexLower(const unsigned char* bytes, size_t n);
// Lowercase hex MD5 of bytes (tensor-cache md5sum).
Result<std::string> Md5Hex(std::string_view bytes);
// Lowercase hex SHA-256 of bytes.
Result<std::string> Sha256Hex(std::string_view bytes);

}  // namespace mlc
