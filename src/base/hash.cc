// One-shot digests through OpenSSL's EVP interface.
#include "mlc_manifest/hash.h"

#include <openssl/evp.h>

namespace mlc {
namespace {

std::string Digest(std::string_view bytes, const EVP_MD* md) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, md, nullptr);
  return HexLower(digest, len);
}

}  // namespace

std::string HexLower(const unsigned char* bytes, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

std::string Md5Hex(std::string_view bytes) { return Digest(bytes, EVP_md5()); }

std::string Sha256Hex(std::string_view bytes) { return Digest(bytes, EVP_sha256()); }

}  // namespace mlc
