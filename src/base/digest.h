// Streaming digests (MD5, SHA-256) through the crypto module (base/crypto_backend.h): one RAII
// context that one-shot hashes (base/hash.h) and the shard check's file hashing share.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "base/crypto_backend.h"
#include "mlc_manifest/error.h"

namespace mlc {

enum class DigestKind { kMd5, kSha256 };

class Digester {
 public:
  // A fresh context; an I/O error naming every place tried when the crypto module is missing.
  static Result<Digester> Start(DigestKind kind);

  Digester(Digester&& other) noexcept;
  Digester& operator=(Digester&& other) noexcept;
  Digester(const Digester&) = delete;
  Digester& operator=(const Digester&) = delete;
  ~Digester();

  // Adds bytes (no copy). A failure is kept and returned by FinishHex.
  void Update(const void* data, size_t n);
  void Update(std::string_view bytes) { Update(bytes.data(), bytes.size()); }
  // Lowercase hex of the digest of everything added; once.
  Result<std::string> FinishHex();

 private:
  Digester(const MlcCryptoBackend* backend, MlcDigest* digest) : backend_(backend), digest_(digest) {}
  const MlcCryptoBackend* backend_ = nullptr;
  MlcDigest* digest_ = nullptr;
  std::string failure_;  // the first update's failure, if any
};

}  // namespace mlc
