// Digester over the crypto module, which it loads on first use (base/module_loader.h).
#include "base/digest.h"

#include <utility>

#include "base/hash.h"

namespace mlc {
namespace {

// The module's file, the document of its errors.
std::string CryptoModuleFile() { return ModuleFile(ModuleOf<MlcCryptoBackend>::kSpec); }

Error DigestError(const std::string& what, const MlcCryptoError& e) {
  return IoError(CryptoModuleFile(), what + ": " + e.message);
}

}  // namespace

Result<Digester> Digester::Start(DigestKind kind) {
  auto backend = LoadModule<MlcCryptoBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcCryptoError error{};
  MlcDigest* digest =
      (*backend)->digest_new(kind == DigestKind::kMd5 ? MLC_DIGEST_MD5 : MLC_DIGEST_SHA256, &error);
  if (!digest) return DigestError(kind == DigestKind::kMd5 ? "md5" : "sha256", error);
  return Digester(*backend, digest);
}

Digester::Digester(Digester&& other) noexcept
    : backend_(other.backend_), digest_(std::exchange(other.digest_, nullptr)),
      failure_(std::move(other.failure_)) {}

Digester& Digester::operator=(Digester&& other) noexcept {
  if (this != &other) {
    if (digest_) backend_->digest_free(digest_);
    backend_ = other.backend_;
    digest_ = std::exchange(other.digest_, nullptr);
    failure_ = std::move(other.failure_);
  }
  return *this;
}

Digester::~Digester() {
  if (digest_) backend_->digest_free(digest_);
}

void Digester::Update(const void* data, size_t n) {
  if (!digest_ || !failure_.empty() || n == 0) return;
  MlcCryptoError error{};
  if (!backend_->digest_update(digest_, data, n, &error)) failure_ = error.message;
}

Result<std::string> Digester::FinishHex() {
  if (!digest_) return IoError(CryptoModuleFile(), "digest: already finished");
  if (!failure_.empty()) return IoError(CryptoModuleFile(), "digest: " + failure_);
  unsigned char out[MLC_DIGEST_MAX_BYTES];
  MlcCryptoError error{};
  const size_t n = backend_->digest_final(digest_, out, sizeof out, &error);
  backend_->digest_free(std::exchange(digest_, nullptr));
  if (n == 0) return DigestError("digest", error);
  return HexLower(out, n);
}

}  // namespace mlc
