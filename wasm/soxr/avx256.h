/* Included first in soxr's 64-bit SIMD sources of the WebAssembly build (the very-high-quality
   engine and its double-precision PFFFT): the 256-bit AVX intrinsics they use, which emscripten
   3.1.6's avxintrin.h lacks, over the compiler's 4-double vectors (two wasm f64x2 operations each).
   Each lane is one IEEE double operation in the order Intel defines for the instruction, so the
   results are the native AVX engine's, bit for bit. */
#ifndef MLC_SOXR_AVX256_H
#define MLC_SOXR_AVX256_H
#include <immintrin.h>

typedef double __m256d __attribute__((__vector_size__(32), __aligned__(32)));
typedef double mlc_m256d_unaligned __attribute__((__vector_size__(32), __aligned__(8)));
#define MLC_AVX256 static __inline__ __attribute__((__always_inline__))

MLC_AVX256 __m256d _mm256_setzero_pd(void) { return (__m256d){0, 0, 0, 0}; }
MLC_AVX256 __m256d _mm256_set1_pd(double a) { return (__m256d){a, a, a, a}; }
/* Arguments from the highest lane to the lowest, as Intel's set intrinsics take them. */
MLC_AVX256 __m256d _mm256_set_pd(double e3, double e2, double e1, double e0) {
  return (__m256d){e0, e1, e2, e3};
}
MLC_AVX256 __m256d _mm256_load_pd(const double *p) { return *(const __m256d *)p; }
MLC_AVX256 __m256d _mm256_loadu_pd(const double *p) { return *(const mlc_m256d_unaligned *)p; }
MLC_AVX256 __m256d _mm256_add_pd(__m256d a, __m256d b) { return a + b; }
MLC_AVX256 __m256d _mm256_sub_pd(__m256d a, __m256d b) { return a - b; }
MLC_AVX256 __m256d _mm256_mul_pd(__m256d a, __m256d b) { return a * b; }
/* Sums of adjacent pairs: a's and b's, within each 128-bit half. */
MLC_AVX256 __m256d _mm256_hadd_pd(__m256d a, __m256d b) {
  return (__m256d){a[0] + a[1], b[0] + b[1], a[2] + a[3], b[2] + b[3]};
}
MLC_AVX256 __m256d _mm256_unpacklo_pd(__m256d a, __m256d b) { return (__m256d){a[0], b[0], a[2], b[2]}; }
MLC_AVX256 __m256d _mm256_unpackhi_pd(__m256d a, __m256d b) { return (__m256d){a[1], b[1], a[3], b[3]}; }
/* Bit k of imm picks the upper element of a (even k) or b (odd k) within 128-bit half k / 2. */
MLC_AVX256 __m256d _mm256_shuffle_pd(__m256d a, __m256d b, int imm) {
  return (__m256d){a[imm & 1], b[(imm >> 1) & 1], a[2 + ((imm >> 2) & 1)], b[2 + ((imm >> 3) & 1)]};
}
/* Each 128-bit half of the result: imm's nibble selects a.lo, a.hi, b.lo or b.hi; bit 3 zeroes it. */
MLC_AVX256 void mlc_avx256_half(__m256d a, __m256d b, int select, double *out) {
  if (select & 8) {
    out[0] = out[1] = 0;
    return;
  }
  const __m256d source = (select & 2) ? b : a;
  const int at = (select & 1) * 2;
  out[0] = source[at];
  out[1] = source[at + 1];
}
MLC_AVX256 __m256d _mm256_permute2f128_pd(__m256d a, __m256d b, int imm) {
  double low[2], high[2];
  mlc_avx256_half(a, b, imm & 15, low);
  mlc_avx256_half(a, b, (imm >> 4) & 15, high);
  return (__m256d){low[0], low[1], high[0], high[1]};
}
MLC_AVX256 __m128d _mm256_castpd256_pd128(__m256d a) { return (__m128d){a[0], a[1]}; }
#endif
