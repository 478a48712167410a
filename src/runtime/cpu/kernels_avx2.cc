// The AVX2/FMA/F16C kernel path (this file alone is compiled with -mavx2 -mfma -mf16c; see
// CMakeLists.txt). Avx2Kernels() hands it out only when the CPU reports all three features.
// 4-bit products: a block's 16 bytes unpack to 32 unsigned nibbles (low nibbles, then high ones,
// matching the order of the int8 activation block), multiplied with vpmaddubsw / vpmaddwd into
// exact int32 sums, scaled and accumulated in float32; the weights' offset of 7 is taken off once
// per row from the blocks' offset terms (see Q8Activations). Decode
// (one token) unpacks on the fly; prefill unpacks four rows once and reuses them over the tokens in
// tiles of 4 rows x 2 tokens. Float weights: 8-wide FMA, one row against up to 4 tokens at a time.
// No standard-library template is instantiated here: a copy compiled for AVX2 could be the one the
// linker keeps for the whole program (scratch memory comes from ThreadScratch in kernels.cc).
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define MLC_HAVE_AVX2_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace mlc::cpu::detail {

#ifdef MLC_HAVE_AVX2_PATH
namespace {

float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

void Quantize(const float* x, int64_t in, int64_t t_begin, int64_t t_end, int8_t* q, float* d,
              float* offset) {
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
    }
  }
}

// The 32 nibbles of one block as bytes: inputs 0, 2, .., 30, then 1, 3, .., 31.
__m256i UnpackBlock(const uint8_t* p, __m256i low_mask) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
                          low_mask);
}

// Exact int32 partial sums of one block: sum q_w * q over 8 lanes (at most 15 * 128 * 4 each).
__m256i BlockDot(__m256i w, __m256i x, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
}

// Row o's group scales as float32 (8 at a time from half), into out[0, blocks).
void RowScales(const Weight& w, int64_t o, int64_t blocks, float* out) {
  if (w.format == WeightFormat::kQ4F32) {
    const float* s = static_cast<const float*>(w.scale) + o * blocks;
    for (int64_t b = 0; b < blocks; ++b) out[b] = s[b];
    return;
  }
  const uint16_t* s = static_cast<const uint16_t*>(w.scale) + o * blocks;
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    _mm256_storeu_ps(out + b, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + b))));
  }
  for (; b < blocks; ++b) out[b] = _cvtsh_ss(s[b]);
}

// One token: scale[b] becomes the row's scale times the token's, and the row's offset term
// sum_b scale_w[b] * offset[b] is returned.
float TokenScales(const Q8Activations& x, int64_t blocks, float* scale) {
  __m256 offset = _mm256_setzero_ps();
  int64_t b = 0;
  for (; b + 8 <= blocks; b += 8) {
    const __m256 ws = _mm256_loadu_ps(scale + b);
    _mm256_storeu_ps(scale + b, _mm256_mul_ps(ws, _mm256_loadu_ps(x.d + b)));
    offset = _mm256_fmadd_ps(ws, _mm256_loadu_ps(x.offset + b), offset);
  }
  float sum = HorizontalSum(offset);
  for (; b < blocks; ++b) {
    sum += scale[b] * x.offset[b];
    scale[b] *= x.d[b];
  }
  return sum;
}

// One token: every row streams once, unpacked on the fly.
void MatVecQ4(const Weight& w, const Q8Activations& x, float* y, const float* bias, int64_t o_begin,
              int64_t o_end) {
  const int64_t blocks = x.blocks;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  float* scale = reinterpret_cast<float*>(ThreadScratch(static_cast<size_t>(blocks) * sizeof(float)));
  for (int64_t o = o_begin; o < o_end; ++o) {
    RowScales(w, o, blocks, scale);
    const float offset = TokenScales(x, blocks, scale);
    const uint8_t* row = data + o * blocks * 16;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32 + 32));
      const __m256i p0 = BlockDot(UnpackBlock(row + b * 16, low_mask), x0, ones);
      const __m256i p1 = BlockDot(UnpackBlock(row + b * 16 + 16, low_mask), x1, ones);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(scale + b), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_broadcast_ss(scale + b + 1), acc1);
    }
    for (; b < blocks; ++b) {
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      const __m256i p0 = BlockDot(UnpackBlock(row + b * 16, low_mask), x0, ones);
      acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_broadcast_ss(scale + b), acc0);
    }
    y[o] = HorizontalSum(_mm256_add_ps(acc0, acc1)) - offset + (bias ? bias[o] : 0.0f);
  }
}

constexpr int kTileRows = 4;

// Four unpacked rows (stride blocks * 32 bytes; scales [blocks][4]) against T tokens from t0;
// rows at and past `valid` are padding and not stored.
template <int T>
void Tile(const uint8_t* rows, const float* scales, const Q8Activations& x, int64_t t0, int64_t o0,
          int valid, int64_t out, float* y, const float* bias) {
  const int64_t blocks = x.blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[kTileRows][T];
  __m128 offset[T];
  alignas(16) float s[T][kTileRows];
  for (int t = 0; t < T; ++t) {
    offset[t] = _mm_setzero_ps();
    for (int r = 0; r < kTileRows; ++r) acc[r][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const __m128 ws = _mm_loadu_ps(scales + b * kTileRows);
    __m256i xv[T];
    for (int t = 0; t < T; ++t) {
      const int64_t at = (t0 + t) * blocks + b;
      xv[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + at * 32));
      _mm_store_ps(s[t], _mm_mul_ps(ws, _mm_set1_ps(x.d[at])));
      offset[t] = _mm_fmadd_ps(ws, _mm_set1_ps(x.offset[at]), offset[t]);
    }
    for (int r = 0; r < kTileRows; ++r) {
      const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + (r * blocks + b) * 32));
      for (int t = 0; t < T; ++t) {
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(BlockDot(wv, xv[t], ones)),
                                    _mm256_broadcast_ss(&s[t][r]), acc[r][t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    alignas(16) float off[kTileRows];
    _mm_store_ps(off, offset[t]);
    for (int r = 0; r < valid; ++r) {
      y[(t0 + t) * out + o0 + r] = HorizontalSum(acc[r][t]) - off[r] + (bias ? bias[o0 + r] : 0.0f);
    }
  }
}

// Several tokens: four rows at a time are unpacked once into a per-thread buffer, then meet the
// tokens two at a time.
void MatMulQ4(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
              int64_t o_begin, int64_t o_end) {
  const int64_t blocks = x.blocks;
  const auto* data = static_cast<const uint8_t*>(w.data);
  const __m256i low_mask = _mm256_set1_epi8(0x0F);
  const size_t unpacked_bytes = static_cast<size_t>(kTileRows * blocks * 32);
  uint8_t* unpacked =
      ThreadScratch(unpacked_bytes + static_cast<size_t>((kTileRows + 1) * blocks) * sizeof(float));
  float* scales = reinterpret_cast<float*>(unpacked + unpacked_bytes);  // [blocks][4]
  float* row_scale = scales + kTileRows * blocks;                         // [blocks]
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kTileRows) {
    const int valid = static_cast<int>(o_end - o0 < kTileRows ? o_end - o0 : kTileRows);
    for (int r = 0; r < kTileRows; ++r) {
      uint8_t* dst = unpacked + r * blocks * 32;
      if (r >= valid) {  // padding rows: zero weights
        for (int64_t b = 0; b < blocks; ++b) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), _mm256_setzero_si256());
          scales[b * kTileRows + r] = 0.0f;
        }
        continue;
      }
      const uint8_t* row = data + (o0 + r) * blocks * 16;
      for (int64_t b = 0; b < blocks; ++b) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + b * 32), UnpackBlock(row + b * 16, low_mask));
      }
      RowScales(w, o0 + r, blocks, row_scale);
      for (int64_t b = 0; b < blocks; ++b) scales[b * kTileRows + r] = row_scale[b];
    }
    int64_t t = 0;
    for (; t + 2 <= n; t += 2) Tile<2>(unpacked, scales, x, t, o0, valid, w.out, y, bias);
    if (t < n) Tile<1>(unpacked, scales, x, t, o0, valid, w.out, y, bias);
  }
}

void LinearQ4(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
              int64_t o_begin, int64_t o_end) {
  if (n == 1) {
    MatVecQ4(w, x, y, bias, o_begin, o_end);
  } else {
    MatMulQ4(w, x, n, y, bias, o_begin, o_end);
  }
}

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

// Row o against T tokens from t0.
template <WeightFormat F, int T>
void FloatTile(const Weight& w, const float* x, int64_t t0, int64_t o, float* y, const float* bias) {
  const int64_t in = w.in;
  const int64_t base = o * in;
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= in; i += 8) {
    const __m256 wv = Load8<F>(w.data, base + i);
    for (int t = 0; t < T; ++t) acc[t] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + (t0 + t) * in + i), acc[t]);
  }
  for (int t = 0; t < T; ++t) {
    float sum = HorizontalSum(acc[t]);
    for (int64_t j = i; j < in; ++j) sum += Load1<F>(w.data, base + j) * x[(t0 + t) * in + j];
    y[(t0 + t) * w.out + o] = sum + (bias ? bias[o] : 0.0f);
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
void LinearFloatAs(const Weight& w, const float* x, int64_t n, float* y, const float* bias,
                   int64_t o_begin, int64_t o_end) {
  for (int64_t o = o_begin; o < o_end; ++o) {
    if (n == 1) {
      FloatRow<F>(w, x, o, y, bias);
      continue;
    }
    int64_t t = 0;
    for (; t + 4 <= n; t += 4) FloatTile<F, 4>(w, x, t, o, y, bias);
    for (; t < n; ++t) FloatTile<F, 1>(w, x, t, o, y, bias);
  }
}

void LinearFloat(const Weight& w, const float* x, int64_t n, float* y, const float* bias,
                 int64_t o_begin, int64_t o_end) {
  switch (w.format) {
    case WeightFormat::kF16:
      return LinearFloatAs<WeightFormat::kF16>(w, x, n, y, bias, o_begin, o_end);
    case WeightFormat::kBF16:
      return LinearFloatAs<WeightFormat::kBF16>(w, x, n, y, bias, o_begin, o_end);
    default:
      return LinearFloatAs<WeightFormat::kF32>(w, x, n, y, bias, o_begin, o_end);
  }
}

// CPUID leaf 1, ECX bit 29 (clang's __builtin_cpu_supports does not know "f16c").
bool CpuHasF16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

}  // namespace

const KernelTable* Avx2Kernels() {
  static const bool supported = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                                CpuHasF16c();
  static const KernelTable table{Quantize, LinearQ4, LinearFloat};
  return supported ? &table : nullptr;
}

#else

const KernelTable* Avx2Kernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
