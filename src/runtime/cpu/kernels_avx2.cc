// The AVX2/FMA/F16C kernel path (this file alone is compiled with -mavx2 -mfma -mf16c; see
// CMakeLists.txt). Avx2Kernels() hands it out only when the CPU reports all three features.
// Activation rounding to int8 blocks; the fused 4-bit products of kernels_x86_q4.h with
// vpmaddubsw + vpmaddwd; float32 / float16 / bfloat16 weights with 8-wide FMA, one row against up
// to 4 tokens at a time.
// No standard-library template is instantiated here: a copy compiled for AVX2 could be the one the
// linker keeps for the whole program (scratch memory comes from ThreadScratch in kernels.cc).
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MLC_HAVE_AVX2_PATH 1
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#endif

namespace mlc::cpu::detail {

#ifdef MLC_HAVE_AVX2_PATH
namespace {

int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

void Quantize(const float* x, int64_t in, int64_t t_begin, int64_t t_end, int8_t* q, float* d,
              float* offset, int32_t* start) {
  const int64_t blocks = in / 32;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // packs leaves dwords in the order 0 2 4 6 1 3 5 7; this restores 0..7.
  const __m256i unpack_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  // Per 128-bit lane: even bytes, then odd ones.
  const __m256i even_odd = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + t * in + b * 32;
      __m256 v0 = _mm256_loadu_ps(xb), v1 = _mm256_loadu_ps(xb + 8);
      __m256 v2 = _mm256_loadu_ps(xb + 16), v3 = _mm256_loadu_ps(xb + 24);
      __m256 m = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1)),
                               _mm256_max_ps(_mm256_andnot_ps(sign, v2), _mm256_andnot_ps(sign, v3)));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
      const float scale = amax / 127.0f;
      const __m256 inverse = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
      __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v0, inverse));
      __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v1, inverse));
      __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v2, inverse));
      __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v3, inverse));
      const int32_t sum = HorizontalSum(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
      __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
      bytes = _mm256_permutevar8x32_epi32(bytes, unpack_order);           // x0 .. x31
      bytes = _mm256_shuffle_epi8(bytes, even_odd);                        // per lane: even, odd
      bytes = _mm256_permute4x64_epi64(bytes, 0xD8);                       // all even, all odd
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + (t * blocks + b) * 32), bytes);
      d[t * blocks + b] = scale;
      offset[t * blocks + b] = static_cast<float>(7 * sum) * scale;
      start[t * blocks + b] = -7 * sum;
    }
  }
}

#include "runtime/cpu/kernels_x86_q4.h"

// Exact int32 partial sums of one block: sum q_w * q over 8 lanes (at most 15 * 128 * 4 each).
struct MaddDot {
  static __m256i Block(__m256i w, __m256i x) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1));
  }
};

// Eight weights of a float-format row as float32.
template <WeightFormat F>
__m256 Load8(const void* data, int64_t index) {
  if constexpr (F == WeightFormat::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(data) + index);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(data) + index));
    if constexpr (F == WeightFormat::kF16) {
      return _mm256_cvtph_ps(h);
    } else {
      return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <WeightFormat F>
float Load1(const void* data, int64_t index) {
  if constexpr (F == WeightFormat::kF32) {
    return static_cast<const float*>(data)[index];
  } else if constexpr (F == WeightFormat::kF16) {
    return _cvtsh_ss(static_cast<const uint16_t*>(data)[index]);
  } else {
    return BFloat16ToFloat(static_cast<const uint16_t*>(data)[index]);
  }
}

// One token: four accumulators to hide the FMA latency.
template <WeightFormat F>
void FloatRow(const Weight& w, const float* x, int64_t o, float* y, const float* bias) {
  const int64_t in = w.in;
  const int64_t base = o * in;
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
         a3 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= in; i += 32) {
    a0 = _mm256_fmadd_ps(Load8<F>(w.data, base + i), _mm256_loadu_ps(x + i), a0);
    a1 = _mm256_fmadd_ps(Load8<F>(w.data, base + i + 8), _mm256_loadu_ps(x + i + 8), a1);
    a2 = _mm256_fmadd_ps(Load8<F>(w.data, base + i + 16), _mm256_loadu_ps(x + i + 16), a2);
    a3 = _mm256_fmadd_ps(Load8<F>(w.data, base + i + 24), _mm256_loadu_ps(x + i + 24), a3);
  }
  for (; i + 8 <= in; i += 8) a0 = _mm256_fmadd_ps(Load8<F>(w.data, base + i), _mm256_loadu_ps(x + i), a0);
  float sum = HorizontalSum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < in; ++i) sum += Load1<F>(w.data, base + i) * x[i];
  y[o] = sum + (bias ? bias[o] : 0.0f);
}

template <WeightFormat F>
void FloatRows(const Weight& w, const float* x, float* y, const float* bias, int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; ++o) FloatRow<F>(w, x, o, y, bias);
}

// Row o of float weights widened to float32 (in floats).
template <WeightFormat F>
void WidenRowAs(const Weight& w, int64_t o, float* out) {
  int64_t i = 0;
  for (; i + 8 <= w.in; i += 8) _mm256_storeu_ps(out + i, Load8<F>(w.data, o * w.in + i));
  for (; i < w.in; ++i) out[i] = Load1<F>(w.data, o * w.in + i);
}

void WidenRow(const Weight& w, int64_t o, float* out) {
  switch (w.format) {
    case WeightFormat::kF16: return WidenRowAs<WeightFormat::kF16>(w, o, out);
    case WeightFormat::kBF16: return WidenRowAs<WeightFormat::kBF16>(w, o, out);
    default: return WidenRowAs<WeightFormat::kF32>(w, o, out);
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AddScaled(float alpha, const float* x, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// e^x in float32: x = k ln 2 + r with |r| <= ln 2 / 2, e^r from a degree-7 polynomial (Cephes'
// expf coefficients, within ~2 ulp), times 2^k built in the exponent bits. x is clamped to
// [-87.3, 88.3], so 2^k stays a normal float: no infinities or NaN from huge |x|.
__m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);  // ln 2 in two parts
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = Exp(_mm256_xor_ps(g, sign));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    const __m256 g = _mm256_set1_ps(gate[i]);
    const __m256 e = Exp(_mm256_xor_ps(g, sign));
    out[i] = _mm256_cvtss_f32(_mm256_div_ps(g, _mm256_add_ps(one, e))) * up[i];
  }
}

float ExpShiftedSum(float* x, int64_t n, float shift) {
  const __m256 m = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  float sum = 0;
  for (float lane : lanes) sum += lane;
  for (; i < n; ++i) {
    x[i] = _mm256_cvtss_f32(Exp(_mm256_set1_ps(x[i] - shift)));
    sum += x[i];
  }
  return sum;
}

// Rows [r0, r0 + R) of c for columns [j0, j0 + 8 * V), the last vector holding `tail` columns (1-8)
// through a mask (a plain load when kFull): R x V accumulators of one FMA chain per value.
template <int R, int V, bool kFull>
void MatMulTile(const float* a, int64_t lda, int64_t k, const float* const* b_rows, int64_t j0, int tail, float* c,
                int64_t ldc) {
  alignas(32) static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - tail));
  __m256 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i) {
    const float* b = b_rows[i] + j0;
    __m256 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) bv[v] = _mm256_loadu_ps(b + 8 * v);
    bv[V - 1] = kFull ? _mm256_loadu_ps(b + 8 * (V - 1)) : _mm256_maskload_ps(b + 8 * (V - 1), mask);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 av = _mm256_broadcast_ss(a + r * lda + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) _mm256_storeu_ps(c + r * ldc + j0 + 8 * v, acc[r][v]);
    _mm256_maskstore_ps(c + r * ldc + j0 + 8 * (V - 1), mask, acc[r][V - 1]);
  }
}

constexpr int64_t kMatMulVector = 8;
constexpr int kMatMulRows = 6;
#include "runtime/cpu/kernels_matmul_rows.h"

// Eight rows' floats [i0, i0 + 8) stored as eight columns: out[(i0 + i) * ldo + j] = r[j][i0 + i].
void Transpose8x8(const float* const* r, int64_t i0, float* out, int64_t ldo) {
  __m256 a[8], t[8], u[8];
  for (int j = 0; j < 8; ++j) a[j] = _mm256_loadu_ps(r[j] + i0);
  for (int j = 0; j < 8; j += 2) {
    t[j] = _mm256_unpacklo_ps(a[j], a[j + 1]);  // r_j0 r_j+1,0 r_j1 r_j+1,1 | the same for 4, 5
    t[j + 1] = _mm256_unpackhi_ps(a[j], a[j + 1]);
  }
  for (int j = 0; j < 8; j += 4) {
    u[j] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(1, 0, 1, 0));  // column 0 (4) of rows j..j+3
    u[j + 1] = _mm256_shuffle_ps(t[j], t[j + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[j + 2] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[j + 3] = _mm256_shuffle_ps(t[j + 1], t[j + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(out + (i0 + c) * ldo, _mm256_permute2f128_ps(u[c], u[c + 4], 0x20));
    _mm256_storeu_ps(out + (i0 + c + 4) * ldo, _mm256_permute2f128_ps(u[c], u[c + 4], 0x31));
  }
}

void TransposeRows(const float* const* rows, int64_t n, int64_t d, float* out, int64_t ldo) {
  int64_t j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) {
    const float* const* r = rows + j0;
    int64_t i0 = 0;
    for (; i0 + 8 <= d; i0 += 8) Transpose8x8(r, i0, out + j0, ldo);
    for (; i0 < d; ++i0) {
      for (int64_t j = 0; j < 8; ++j) out[i0 * ldo + j0 + j] = r[j][i0];
    }
  }
  for (; j0 < n; ++j0) {
    for (int64_t i = 0; i < d; ++i) out[i * ldo + j0] = rows[j0][i];
  }
}

// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

}  // namespace

void LinearFloatPanels(const Weight& w, const float* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                       int64_t o_end, int64_t panel_rows, MatMulRowsFn matmul) {
  const int64_t in = w.in;
  const size_t floats = static_cast<size_t>(2 * panel_rows * in);
  uint8_t* scratch = ThreadScratch(floats * sizeof(float) + static_cast<size_t>(in + panel_rows) * sizeof(float*));
  float* rows = reinterpret_cast<float*>(scratch);  // [panel_rows][in]
  float* panel = rows + panel_rows * in;            // [in][panel_rows]
  auto** row_at = reinterpret_cast<const float**>(scratch + floats * sizeof(float));  // [panel_rows]
  const float** panel_at = row_at + panel_rows;                                        // [in]
  for (int64_t i = 0; i < in; ++i) panel_at[i] = panel + i * panel_rows;
  for (int64_t o0 = o_begin; o0 < o_end; o0 += panel_rows) {
    const int64_t cols = o_end - o0 < panel_rows ? o_end - o0 : panel_rows;
    for (int64_t r = 0; r < cols; ++r) {
      WidenRow(w, o0 + r, rows + r * in);
      row_at[r] = rows + r * in;
    }
    TransposeRows(row_at, cols, in, panel, panel_rows);
    matmul(x, in, n, in, panel_at, cols, y + o0, w.out);
    if (bias == nullptr) continue;
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < cols; ++r) y[t * w.out + o0 + r] += bias[o0 + r];
    }
  }
}

namespace {

// One token: a row's dot products. Several: 16-row panels through this path's MatMulRows.
void LinearFloat(const Weight& w, const float* x, int64_t n, float* y, const float* bias,
                 int64_t o_begin, int64_t o_end) {
  if (n > 1) return LinearFloatPanels(w, x, n, y, bias, o_begin, o_end, 16, MatMulRows);
  switch (w.format) {
    case WeightFormat::kF16: return FloatRows<WeightFormat::kF16>(w, x, y, bias, o_begin, o_end);
    case WeightFormat::kBF16: return FloatRows<WeightFormat::kBF16>(w, x, y, bias, o_begin, o_end);
    default: return FloatRows<WeightFormat::kF32>(w, x, y, bias, o_begin, o_end);
  }
}

}  // namespace

const KernelTable* Avx2Kernels() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                CpuHasF16c();
  static const KernelTable table{Quantize, LinearQ4<MaddDot>, LinearFloat, Dot, AddScaled, SiluMul, ExpShiftedSum,
                                 MatMulRows, TransposeRows, nullptr};
  return supported ? &table : nullptr;
}

#else

const KernelTable* Avx2Kernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
