// One-shot digests through the streaming Digester (base/digest.h).
#include "base/hash.h"

#include "base/digest.h"

namespace mlc {
namespace {

Result<std::string> DigestHex(DigestKind kind, std::string_view bytes) {
  auto digester = Digester::Start(kind);
  MLC_RETURN_IF_ERROR(digester);
  digester->Update(bytes);
  return digester->FinishHex();
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

Result<std::string> Md5Hex(std::string_view bytes) { return DigestHex(DigestKind::kMd5, bytes); }

Result<std::string> Sha256Hex(std::string_view bytes) { return DigestHex(DigestKind::kSha256, bytes); }

}  // namespace mlc
