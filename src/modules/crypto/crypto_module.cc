// The crypto module (libmlc_manifest_crypto.so): OpenSSL's EVP digests (MD5, SHA-256) as
// streaming contexts behind the plain C table of base/crypto_backend.h. The library opens it on
// the first digest (base/digest.cc), so commands that hash nothing never load libcrypto.
#include <openssl/err.h>
#include <openssl/evp.h>

#include <cstdio>
#include <new>

#include "base/crypto_backend.h"

struct MlcDigest {
  EVP_MD_CTX* ctx = nullptr;
};

namespace {

// OpenSSL's reason for the last failure (its error queue), else `fallback`.
void SetError(MlcCryptoError* error, const char* fallback) {
  const unsigned long code = ERR_get_error();
  char reason[200] = {0};
  if (code != 0) ERR_error_string_n(code, reason, sizeof reason);
  ERR_clear_error();
  if (error) std::snprintf(error->message, sizeof error->message, "%s", code != 0 ? reason : fallback);
}

const EVP_MD* Algorithm(int kind) {
  switch (kind) {
    case MLC_DIGEST_MD5: return EVP_md5();
    case MLC_DIGEST_SHA256: return EVP_sha256();
    default: return nullptr;
  }
}

void Free(MlcDigest* digest) {
  if (!digest) return;
  EVP_MD_CTX_free(digest->ctx);
  delete digest;
}

MlcDigest* New(int kind, MlcCryptoError* error) {
  const EVP_MD* md = Algorithm(kind);
  if (!md) {
    SetError(error, "unknown digest kind");
    return nullptr;
  }
  auto* digest = new (std::nothrow) MlcDigest;
  if (!digest || !(digest->ctx = EVP_MD_CTX_new()) || EVP_DigestInit_ex(digest->ctx, md, nullptr) != 1) {
    SetError(error, "cannot start a digest");
    Free(digest);
    return nullptr;
  }
  return digest;
}

int Update(MlcDigest* digest, const void* data, size_t n, MlcCryptoError* error) {
  if (EVP_DigestUpdate(digest->ctx, data, n) == 1) return 1;
  SetError(error, "cannot add to a digest");
  return 0;
}

size_t Final(MlcDigest* digest, unsigned char* out, size_t room, MlcCryptoError* error) {
  if (room < static_cast<size_t>(EVP_MD_CTX_get_size(digest->ctx))) {
    SetError(error, "no room for the digest");
    return 0;
  }
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(digest->ctx, out, &len) != 1) {
    SetError(error, "cannot finish a digest");
    return 0;
  }
  return len;
}

constexpr MlcCryptoBackend kBackend = {MLC_CRYPTO_BACKEND_ABI, New, Update, Final, Free};

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(crypto, MlcCryptoBackend) {
  return &kBackend;
}
