// The digests live in a module of their own (libmlc_manifest_crypto.so, src/modules/crypto/):
// libcrypto costs every process about 3 ms and 120 page faults of start-up, while only the
// commands that hash (ids of tasks and parameter lists, shard md5sums) need it. This is the table
// the module exports -- plain C: opaque streaming contexts, digests written to the caller's
// buffer, error text in caller-provided buffers -- and the loader base/digest.cc uses to reach it.
#pragma once

#include <stddef.h>

#include "base/module_loader.h"

extern "C" {

// Bumped whenever the table or a struct it passes changes.
enum { MLC_CRYPTO_BACKEND_ABI = 1 };

// The digests the table computes.
enum { MLC_DIGEST_MD5 = 1, MLC_DIGEST_SHA256 = 2 };
// Room enough for any of them (SHA-256: 32 bytes).
enum { MLC_DIGEST_MAX_BYTES = 64 };

// What went wrong, NUL-terminated and cut to fit.
typedef struct MlcCryptoError {
  char message[256];
} MlcCryptoError;

typedef struct MlcDigest MlcDigest;

typedef struct MlcCryptoBackend {
  int abi;
  // A streaming context for one MLC_DIGEST_* kind; NULL (error set) for an unknown kind or when
  // the library cannot make one.
  MlcDigest* (*digest_new)(int kind, MlcCryptoError* error);
  // Adds n bytes: 1, or 0 on failure.
  int (*digest_update)(MlcDigest* digest, const void* data, size_t n, MlcCryptoError* error);
  // Writes the digest to out (room bytes, at least MLC_DIGEST_MAX_BYTES) and returns its length
  // in bytes, or 0 on failure. The context takes no more bytes afterwards.
  size_t (*digest_final)(MlcDigest* digest, unsigned char* out, size_t room, MlcCryptoError* error);
  void (*digest_free)(MlcDigest* digest);
} MlcCryptoBackend;

}  // extern "C"

// libmlc_manifest_crypto.so, $MLC_MANIFEST_CRYPTO_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcCryptoBackend, "crypto", "the crypto module (libcrypto)", MLC_CRYPTO_BACKEND_ABI);
