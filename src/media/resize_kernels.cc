// The arithmetic of the image resize (image_resize.cc) with Pillow's conventions: centre of
// output pixel i at in0 + (i + 0.5) * scale, kernel stretched by max(1, scale), weights
// normalized per output pixel in double then rounded to fixed point with 22 fractional bits; the
// horizontal and vertical passes over rows (scalar, and AVX2 where the CPU has it, with
// identical integer results).
#include "media/resize_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace mlc::resize {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // as Pillow for 8-bit images
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);

double BicubicKernel(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double BilinearKernel(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double LanczosKernel(double x) {
  return (x >= -3.0 && x < 3.0) ? Sinc(x) * Sinc(x / 3.0) : 0.0;
}

}  // namespace

Kernel KernelFor(ResizeFilter filter) {
  switch (filter) {
    case ResizeFilter::kBilinear: return {BilinearKernel, 1.0};
    case ResizeFilter::kLanczos: return {LanczosKernel, 3.0};
    case ResizeFilter::kBicubic: break;
  }
  return {BicubicKernel, 2.0};
}

AxisWeights ComputeWeights(int64_t in_size, double in0, double in1, int64_t out_size,
                           int64_t begin, int64_t n, const Kernel& kernel) {
  const double scale = (in1 - in0) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = kernel.support * filterscale;
  AxisWeights w;
  w.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  w.first.resize(n);
  w.count.resize(n);
  w.weights.assign(static_cast<size_t>(n) * w.ksize, 0);
  std::vector<double> k(w.ksize);
  const double ss = 1.0 / filterscale;
  for (int64_t j = 0; j < n; ++j) {
    const double center = in0 + (static_cast<double>(begin + j) + 0.5) * scale;
    // Pillow truncates toward zero here (a C cast), then clamps.
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    xmin = std::clamp<int64_t>(xmin, 0, in_size);
    xmax = std::clamp<int64_t>(xmax, 0, in_size);
    int64_t taps = std::clamp<int64_t>(xmax - xmin, 0, w.ksize);
    if (taps == 0) {  // cannot happen for sane boxes; keep one tap at the nearest pixel
      xmin = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in_size - 1);
      taps = 1;
    }
    double total = 0.0;
    for (int64_t x = 0; x < taps; ++x) {
      k[x] = kernel.fn((static_cast<double>(x + xmin) - center + 0.5) * ss);
      total += k[x];
    }
    int32_t* out = &w.weights[static_cast<size_t>(j) * w.ksize];
    for (int64_t x = 0; x < taps; ++x) {
      const double v = (total != 0.0 ? k[x] / total : k[x]) * (1 << kPrecisionBits);
      out[x] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
    if (total == 0.0 && taps == 1) out[0] = 1 << kPrecisionBits;
    w.first[j] = static_cast<int32_t>(xmin);
    w.count[j] = static_cast<int32_t>(taps);
  }
  return w;
}

namespace {

inline uint8_t Clip8(int32_t v) {
  if (v >= (int32_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// The horizontal pass over pixels of kBytes bytes (3: RGB, 4: RGBX; `in` is source column c0).
template <int kBytes>
void HorizontalPass(const uint8_t* in, int64_t c0, const AxisWeights& w, uint8_t* out) {
  const int64_t cols = static_cast<int64_t>(w.first.size());
  for (int64_t x = 0; x < cols; ++x) {
    const int32_t* k = &w.weights[static_cast<size_t>(x) * w.ksize];
    const uint8_t* p = in + static_cast<size_t>(w.first[x] - c0) * kBytes;
    int32_t r = kHalf, g = kHalf, b = kHalf;
    for (int32_t t = 0, n = w.count[x]; t < n; ++t) {
      r += p[kBytes * t] * k[t];
      g += p[kBytes * t + 1] * k[t];
      b += p[kBytes * t + 2] * k[t];
    }
    out[3 * x] = Clip8(r);
    out[3 * x + 1] = Clip8(g);
    out[3 * x + 2] = Clip8(b);
  }
}

}  // namespace

void HorizontalRow(const uint8_t* in, const AxisWeights& w, uint8_t* out) {
  HorizontalPass<3>(in, 0, w, out);
}

void HorizontalRowRgbxScalar(const uint8_t* in, int64_t c0, const AxisWeights& w, uint8_t* out) {
  HorizontalPass<4>(in, c0, w, out);
}

#if defined(__x86_64__) && defined(__GNUC__)
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

std::optional<MaddWeights> MakeMaddWeights(const AxisWeights& w) {
  MaddWeights m;
  m.groups = (w.ksize + 3) / 4;
  const size_t per_pixel = static_cast<size_t>(m.groups) * 32;
  m.table.assign(w.first.size() * per_pixel, 0);
  m.used.resize(w.first.size());
  for (size_t x = 0; x < w.first.size(); ++x) {
    m.used[x] = (w.count[x] + 3) / 4;
    for (int32_t t = 0; t < w.count[x]; ++t) {
      const int32_t k = w.weights[x * w.ksize + static_cast<size_t>(t)];
      const int32_t hi = k >> 11, lo = k & 2047;  // arithmetic shift: hi * 2048 + lo == k
      if (hi < INT16_MIN || hi > INT16_MAX) return std::nullopt;
      int16_t* group = &m.table[x * per_pixel + static_cast<size_t>(t / 4) * 32];
      const int half = (t % 4) / 2, odd = t % 2;  // which 128-bit half, which of the pair
      for (int c = 0; c < 4; ++c) {
        group[half * 8 + c * 2 + odd] = static_cast<int16_t>(hi);
        group[16 + half * 8 + c * 2 + odd] = static_cast<int16_t>(lo);
      }
    }
  }
  return m;
}

namespace {

// Four RGBX pixels as 16-bit R0 R1 G0 G1 B0 B1 X0 X1 | R2 R3 G2 G3 B2 B3 X2 X3 (`pairs` is the
// byte shuffle that pairs them).
__attribute__((target("avx2"), always_inline)) inline __m256i FourTaps(const uint8_t* p,
                                                                       __m128i pairs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(raw, pairs));
}

}  // namespace

__attribute__((target("avx2"))) void HorizontalRowRgbxAvx2(const uint8_t* in, int64_t c0,
                                                           int64_t c1, const AxisWeights& w,
                                                           const MaddWeights& m, uint8_t* padded,
                                                           uint8_t* out) {
  // Plain pointers: the byte stores to `out` may alias anything, so the vectors' would be reloaded.
  const int64_t cols = static_cast<int64_t>(w.first.size());
  const int32_t* firsts = w.first.data();
  const int32_t* counts = w.count.data();
  const int32_t* used = m.used.data();
  const size_t vectors_per_pixel = static_cast<size_t>(m.groups) * 2;
  const __m256i* table = reinterpret_cast<const __m256i*>(m.table.data());
  const __m128i pairs = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  const __m256i half = _mm256_set1_epi32(kHalf);
  // The sums of output pixels x - 1 and x are finished together (`pending` holds the first's).
  __m256i pending = _mm256_setzero_si256();
  for (int64_t x = 0; x < cols; ++x) {
    const __m256i* k = table + static_cast<size_t>(x) * vectors_per_pixel;
    const int32_t groups = used[x];
    const uint8_t* p = in + (firsts[x] - c0) * 4;
    if (firsts[x] + groups * 4 > c1) {
      std::memset(padded, 0, static_cast<size_t>(groups) * 16);
      std::memcpy(padded, p, static_cast<size_t>(counts[x]) * 4);
      p = padded;
    }
    __m256i hi0 = _mm256_setzero_si256(), lo0 = hi0, hi1 = hi0, lo1 = hi0;
    int32_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      const __m256i v0 = FourTaps(p + 16 * g, pairs), v1 = FourTaps(p + 16 * g + 16, pairs);
      hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g)));
      lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g + 1)));
      hi1 = _mm256_add_epi32(hi1, _mm256_madd_epi16(v1, _mm256_loadu_si256(k + 2 * g + 2)));
      lo1 = _mm256_add_epi32(lo1, _mm256_madd_epi16(v1, _mm256_loadu_si256(k + 2 * g + 3)));
    }
    if (g < groups) {
      const __m256i v0 = FourTaps(p + 16 * g, pairs);
      hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g)));
      lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g + 1)));
    }
    // R G B X sums of taps 0-1 of each group (low half) and of taps 2-3 (high half).
    const __m256i acc = _mm256_add_epi32(_mm256_slli_epi32(_mm256_add_epi32(hi0, hi1), 11),
                                         _mm256_add_epi32(lo0, lo1));
    const bool second = x % 2 == 1;
    if (!second && x + 1 < cols) {
      pending = acc;
      continue;
    }
    // Low half: the first pixel's halves added (this one's when it has no partner); high half:
    // this pixel's.
    const __m256i a = second ? pending : acc;
    __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(a, acc, 0x20),
                                   _mm256_permute2x128_si256(a, acc, 0x31));
    // (sum + half) >> 22 saturated to 0..255: Clip8's result for every int32.
    sum = _mm256_srai_epi32(_mm256_add_epi32(sum, half), kPrecisionBits);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    const __m128i bytes = _mm_packus_epi16(words, words);  // R G B X of each pixel
    if (second) {
      const int32_t before = _mm_cvtsi128_si32(bytes);
      std::memcpy(out + 3 * (x - 1), &before, 3);
    }
    const int32_t here = _mm_extract_epi32(bytes, 1);
    std::memcpy(out + 3 * x, &here, 3);
  }
}
#endif

void VerticalRowScalar(const uint8_t* const* rows, const int32_t* k, int32_t taps, int64_t x0,
                       int64_t n, uint8_t* out) {
  for (int64_t x = x0; x < n; ++x) {
    int32_t acc = kHalf;
    for (int32_t t = 0; t < taps; ++t) {
      if (rows[t]) acc += rows[t][x] * k[t];
    }
    out[x] = Clip8(acc);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* const* rows, const int32_t* k,
                                                     int32_t taps, int64_t n, uint8_t* out) {
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) {
    __m256i acc = _mm256_set1_epi32(kHalf);
    for (int32_t t = 0; t < taps; ++t) {
      if (!rows[t]) continue;
      const __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[t] + x)));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, _mm256_set1_epi32(k[t])));
    }
    // (acc >> 22) saturated to 0..255: Clip8's result for every int32.
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), _mm_packus_epi16(words, words));
  }
  VerticalRowScalar(rows, k, taps, x, n, out);
}
#endif

}  // namespace mlc::resize
