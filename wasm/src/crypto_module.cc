// The crypto module of the WebAssembly build (base/crypto_backend.h's table): SHA-256 (FIPS 180-4)
// and MD5 (RFC 1321) in portable C++, since libcrypto is not part of that build. The ids of tasks
// and parameter lists and the shard md5sums come out the same as the native module's (the Node
// test compares them with the native CLI's).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>

#include "base/crypto_backend.h"

struct MlcDigest {
  int kind = 0;
  uint32_t state[8] = {};
  unsigned char block[64] = {};
  size_t filled = 0;    // bytes waiting in block
  uint64_t length = 0;  // bytes taken so far
  bool finished = false;
};

namespace {

uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }
uint32_t Rotl(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

constexpr uint32_t kSha256K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

void Sha256Block(uint32_t* h, const unsigned char* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) {
    w[i] = uint32_t{p[4 * i]} << 24 | uint32_t{p[4 * i + 1]} << 16 | uint32_t{p[4 * i + 2]} << 8 | p[4 * i + 3];
  }
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = Rotr(w[i - 15], 7) ^ Rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = Rotr(w[i - 2], 17) ^ Rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = k + (Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
    uint32_t t2 = (Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

// MD5's per-round shifts and sine-derived constants (RFC 1321, 3.4).
constexpr int kMd5Shift[64] = {7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22,
                               5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20, 5, 9,  14, 20,
                               4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23,
                               6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21};
constexpr uint32_t kMd5K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391};

void Md5Block(uint32_t* h, const unsigned char* p) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) {
    m[i] = uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 | uint32_t{p[4 * i + 3]} << 24;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
  for (int i = 0; i < 64; ++i) {
    uint32_t f;
    int g;
    if (i < 16) {
      f = (b & c) | (~b & d), g = i;
    } else if (i < 32) {
      f = (d & b) | (~d & c), g = (5 * i + 1) % 16;
    } else if (i < 48) {
      f = b ^ c ^ d, g = (3 * i + 5) % 16;
    } else {
      f = c ^ (b | ~d), g = (7 * i) % 16;
    }
    uint32_t next = b + Rotl(a + f + kMd5K[i] + m[g], kMd5Shift[i]);
    a = d, d = c, c = b, b = next;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d;
}

void Compress(MlcDigest* digest) {
  if (digest->kind == MLC_DIGEST_SHA256) {
    Sha256Block(digest->state, digest->block);
  } else {
    Md5Block(digest->state, digest->block);
  }
  digest->filled = 0;
}

void SetError(MlcCryptoError* error, const char* message) {
  if (error) std::snprintf(error->message, sizeof error->message, "%s", message);
}

MlcDigest* New(int kind, MlcCryptoError* error) {
  static constexpr uint32_t kSha256Init[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                              0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  static constexpr uint32_t kMd5Init[4] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476};
  if (kind != MLC_DIGEST_SHA256 && kind != MLC_DIGEST_MD5) {
    SetError(error, "unknown digest kind");
    return nullptr;
  }
  auto* digest = new (std::nothrow) MlcDigest;
  if (!digest) {
    SetError(error, "cannot start a digest");
    return nullptr;
  }
  digest->kind = kind;
  if (kind == MLC_DIGEST_SHA256) {
    std::memcpy(digest->state, kSha256Init, sizeof kSha256Init);
  } else {
    std::memcpy(digest->state, kMd5Init, sizeof kMd5Init);
  }
  return digest;
}

int Update(MlcDigest* digest, const void* data, size_t n, MlcCryptoError* error) {
  if (digest->finished) {
    SetError(error, "cannot add to a finished digest");
    return 0;
  }
  const auto* p = static_cast<const unsigned char*>(data);
  digest->length += n;
  while (n > 0) {
    size_t take = n < 64 - digest->filled ? n : 64 - digest->filled;
    std::memcpy(digest->block + digest->filled, p, take);
    digest->filled += take, p += take, n -= take;
    if (digest->filled == 64) Compress(digest);
  }
  return 1;
}

size_t Final(MlcDigest* digest, unsigned char* out, size_t room, MlcCryptoError* error) {
  const bool sha = digest->kind == MLC_DIGEST_SHA256;
  const size_t size = sha ? 32 : 16;
  if (room < size) {
    SetError(error, "no room for the digest");
    return 0;
  }
  if (digest->finished) {
    SetError(error, "cannot finish a digest twice");
    return 0;
  }
  digest->finished = true;
  // Padding: 0x80, zeros to 56 bytes mod 64, then the length in bits (SHA: big-endian, MD5: little).
  const uint64_t bits = digest->length * 8;
  digest->block[digest->filled++] = 0x80;
  if (digest->filled > 56) {
    std::memset(digest->block + digest->filled, 0, 64 - digest->filled);
    Compress(digest);
  }
  std::memset(digest->block + digest->filled, 0, 56 - digest->filled);
  for (int i = 0; i < 8; ++i) {
    digest->block[56 + i] = static_cast<unsigned char>(bits >> (sha ? 56 - 8 * i : 8 * i));
  }
  Compress(digest);
  for (size_t i = 0; i < size / 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      out[4 * i + j] = static_cast<unsigned char>(digest->state[i] >> (sha ? 24 - 8 * j : 8 * j));
    }
  }
  return size;
}

void Free(MlcDigest* digest) { delete digest; }

constexpr MlcCryptoBackend kBackend = {MLC_CRYPTO_BACKEND_ABI, New, Update, Final, Free};

}  // namespace

// The module's one entry (base/module_loader.h), linked into the WebAssembly build.
MLC_MODULE_ENTRY(crypto, MlcCryptoBackend) {
  return &kBackend;
}
