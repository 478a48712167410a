// The AVX-512 VNNI kernel path (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni beside the AVX2 flags; see CMakeLists.txt). Avx512Kernels() hands it out only when
// the CPU reports those features and the OS saves the zmm state. The 4-bit products run on 16-row
// panels whose 64-byte vectors hold four consecutive block inputs of each of the 16 rows, so one
// vpdpbusd against four broadcast activation bytes advances 16 rows of one token, and a block
// costs 8 vpdpbusd + 3 float operations per token over 16 rows; tiles are 16 rows x up to 8
// tokens. A bound model's weights come packed that way (Weight::packed, kernels_internal.h), so
// every token count, one included, reads them as one stream per panel and unpacks the nibbles in
// registers; weights without it are unpacked into a per-thread panel (several tokens) or take a
// matrix-vector product on zmm (one token, two blocks per vpdpbusd).
// Activation rounding, the float formats and the vector helpers are the AVX2 path's.
// No standard-library template is instantiated here (see kernels_avx2.cc).
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define MLC_HAVE_AVX512_PATH 1
#include <cpuid.h>
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start some results from a self-initialised "undefined" vector,
// which -Wmaybe-uninitialized reports once inlined (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#endif

namespace mlc::cpu::detail {

#ifdef MLC_HAVE_AVX512_PATH
namespace {

#include "runtime/cpu/kernels_x86_q4.h"

// Exact int32 partial sums of one block on ymm (the one-token product).
struct Vnni256Dot {
  static __m256i Block(__m256i w, __m256i x) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), w, x); }
};

#include "runtime/cpu/kernels_avx512_panel.h"

constexpr int kTileTokens = 8;

int32_t LoadInt32(const void* p) {
  int32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// One block of a 16-row panel against T tokens from t0: WV holds the block's eight VNNI vectors
// (group g's bytes meet activation positions 4g .. 4g + 3 of every 32), WS the rows' scales. Each
// token's int32 sum starts at its block's -7 * sum(q) (the weights' offset), takes one vpdpbusd per
// group (two chains when kTwoChains: the adds' latency with one or two tokens), and is scaled in
// float32 into acc[t]. The unpacked and the packed panels both go through it, so their results are
// the same bits whatever the token count.
template <int T, bool kTwoChains>
inline void MeetTokens(const __m512i (&wv)[8], __m512 ws, const Q8Activations& x, int64_t t0, int64_t b,
                       __m512 (&acc)[T]) {
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
    const int64_t at = (t0 + t) * x.blocks + b;
    const int8_t* q = x.q + at * 32;
    __m512i s = _mm512_set1_epi32(x.start[at]);
    __m512i s2 = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i xg = _mm512_set1_epi32(LoadInt32(q + g * 4));
      if (kTwoChains && (g & 1)) {
        s2 = _mm512_dpbusd_epi32(s2, wv[g], xg);
      } else {
        s = _mm512_dpbusd_epi32(s, wv[g], xg);
      }
    }
    if (kTwoChains) s = _mm512_add_epi32(s, s2);
    acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(ws, _mm512_set1_ps(x.d[at])), acc[t]);
  }
}

// A tile's T rows of sums, plus the bias, into y[t0 + t][o0 + r] for r < valid.
template <int T>
inline void StoreTile(const __m512 (&acc)[T], int64_t t0, int64_t o0, int valid, int64_t out, float* y,
                      const float* bias) {
  const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + o0) : _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * out + o0, mask, _mm512_add_ps(acc[t], bv));
}

// An unpacked panel (MatMulQ4Panels' scratch: per block its eight VNNI vectors, then float32
// scales) against T tokens from t0.
template <int T>
void PanelTile(const uint8_t* panel, const float* scales, const Q8Activations& x, int64_t t0, int64_t o0, int valid, int64_t out, float* y, const float* bias) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < x.blocks; ++b) {
    const auto* wp = reinterpret_cast<const __m512i*>(panel + b * kPanelBlockBytes);
    __m512i wv[8];
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) wv[g] = _mm512_loadu_si512(wp + g);
    MeetTokens<T, (T <= 2)>(wv, _mm512_loadu_ps(scales + b * kPanelRows), x, t0, b, acc);
  }
  StoreTile<T>(acc, t0, o0, valid, out, y, bias);
}

using TileFn = void (*)(const uint8_t*, const float*, const Q8Activations&, int64_t, int64_t, int, int64_t,
                        float*, const float*);
constexpr TileFn kTiles[kTileTokens + 1] = {nullptr,       PanelTile<1>, PanelTile<2>, PanelTile<3>, PanelTile<4>,
                                            PanelTile<5>, PanelTile<6>, PanelTile<7>, PanelTile<8>};

// Several tokens: each 16-row panel is unpacked once, then meets the tokens 8 at a time.
void MatMulQ4Panels(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
                    int64_t o_begin, int64_t o_end) {
  const int64_t blocks = x.blocks;
  const size_t panel_bytes = static_cast<size_t>(blocks * kPanelBlockBytes);
  const size_t scale_bytes = static_cast<size_t>((kPanelRows + 1) * blocks) * sizeof(float);
  uint8_t* scratch = ThreadScratch(panel_bytes + scale_bytes);
  float* scales = reinterpret_cast<float*>(scratch + panel_bytes);  // [blocks][16]
  float* row_scale = scales + kPanelRows * blocks;                   // [blocks]
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kPanelRows) {
    const int valid = static_cast<int>(o_end - o0 < kPanelRows ? o_end - o0 : kPanelRows);
    UnpackPanel(w, blocks, o0, valid, scratch, scales, row_scale);
    for (int64_t t0 = 0; t0 < n; t0 += kTileTokens) {
      const int64_t tokens = n - t0 < kTileTokens ? n - t0 : kTileTokens;
      kTiles[tokens](scratch, scales, x, t0, o0, valid, w.out, y, bias);
    }
  }
}

// One token on zmm: two blocks per vpdpbusd. A row's 32 bytes of two blocks unpack to the 128-bit
// lanes (first block's low nibbles, second's low nibbles, first's high, second's high); the
// token's blocks are reordered once per call to match (pairs [lo0, lo1, hi0, hi1], 16 bytes each).
// The int32 lanes 0-3 and 8-11 are the first block's partial sums, 4-7 and 12-15 the second's, so
// the pair's two scales are spread over the lanes by one permute. An odd last block takes the ymm
// product.
void MatVecQ4Zmm(const Weight& w, const Q8Activations& x, float* y, const float* bias, int64_t o_begin,
                 int64_t o_end) {
  const int64_t blocks = x.blocks, pairs = blocks / 2;
  uint8_t* scratch = ThreadScratch(static_cast<size_t>(pairs * 64 + blocks * 4 + 64));
  auto* xr = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  float* scale = reinterpret_cast<float*>(xr + pairs * 64);
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512i v = _mm512_loadu_si512(x.q + p * 64);  // lo0 hi0 lo1 hi1
    _mm512_store_si512(xr + p * 64, _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(3, 1, 2, 0)));
  }
  const auto* data = static_cast<const uint8_t*>(w.data);
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i low256 = _mm256_set1_epi8(0x0F);
  for (int64_t o = o_begin; o < o_end; ++o) {
    RowScales(w, o, blocks, scale);
    const float offset = TokenScales(x, blocks, scale);
    const uint8_t* row = data + o * blocks * 16;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t p = 0;
    for (; p + 2 <= pairs; p += 2) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + p * 32));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + p * 32 + 32));
      const __m512i z0 = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(w0), _mm256_srli_epi16(w0, 4), 1), low);
      const __m512i z1 = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(w1), _mm256_srli_epi16(w1, 4), 1), low);
      const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z0, _mm512_load_si512(xr + p * 64));
      const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z1, _mm512_load_si512(xr + p * 64 + 64));
      const __m512 s01 = _mm512_castps128_ps512(_mm_loadu_ps(scale + p * 2));  // s0 s1 s2 s3
      const __m512 sc0 = _mm512_permutexvar_ps(spread, s01);
      const __m512 sc1 = _mm512_permutexvar_ps(_mm512_add_epi32(spread, _mm512_set1_epi32(2)), s01);
      acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), sc0, acc0);
      acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), sc1, acc1);
    }
    for (; p < pairs; ++p) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + p * 32));
      const __m512i z0 = _mm512_and_si512(
          _mm512_inserti64x4(_mm512_castsi256_si512(w0), _mm256_srli_epi16(w0, 4), 1), low);
      const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), z0, _mm512_load_si512(xr + p * 64));
      const __m512 s01 = _mm512_castps128_ps512(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(scale + p * 2))));
      acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), _mm512_permutexvar_ps(spread, s01), acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (blocks % 2 == 1) {
      const int64_t b = blocks - 1;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.q + b * 32));
      const __m256i p0 = Vnni256Dot::Block(UnpackBlock(row + b * 16, low256), x0);
      sum += HorizontalSum(_mm256_cvtepi32_ps(p0)) * scale[b];
    }
    y[o] = sum - offset + (bias ? bias[o] : 0.0f);
  }
}

// One packed panel (kernels_internal.h: 16 rows, `blocks` blocks of nibbles from `run`, their
// scales from `scale`, half when kHalf) against T tokens from t0: y[t][o0 + r] for r < valid.
// Each block's 64-byte words unpack in registers to the eight VNNI vectors (word k's low nibbles
// meet activation positions 4k .. 4k + 3, its high ones 16 + 4k ..), which every token meets with
// MeetTokens, as the unpacked panels do.
template <int T, bool kHalf>
void PackedTile(const uint8_t* run, const uint8_t* scale, int64_t blocks, const Q8Activations& x, int64_t t0,
                int64_t o0, int valid, int64_t out, float* y, const float* bias) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks; ++b) {
    const auto* wp = reinterpret_cast<const __m512i*>(run + b * kPackWeightBytes);
    // Eight blocks ahead (prefetches never fault, past the end included): the streams of both
    // threads stay ahead of the products where the hardware's prefetch falls behind.
    const char* ahead = reinterpret_cast<const char*>(run + (b + 8) * kPackWeightBytes);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) _mm_prefetch(ahead + 64 * k, _MM_HINT_T0);
    __m512i wv[8];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i d = _mm512_loadu_si512(wp + k);
      wv[k] = _mm512_and_si512(d, low);
      wv[4 + k] = _mm512_and_si512(_mm512_srli_epi16(d, 4), low);
    }
    __m512 ws;
    if constexpr (kHalf) {
      ws = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scale + b * 32)));
    } else {
      ws = _mm512_loadu_ps(reinterpret_cast<const float*>(scale + b * 64));
    }
    MeetTokens<T, (T <= 2)>(wv, ws, x, t0, b, acc);
  }
  StoreTile<T>(acc, t0, o0, valid, out, y, bias);
}

using PackedTileFn = void (*)(const uint8_t*, const uint8_t*, int64_t, const Q8Activations&, int64_t, int64_t, int,
                              int64_t, float*, const float*);
template <bool kHalf>
constexpr PackedTileFn kPackedTiles[kTileTokens + 1] = {
    nullptr, PackedTile<1, kHalf>, PackedTile<2, kHalf>, PackedTile<3, kHalf>, PackedTile<4, kHalf>,
    PackedTile<5, kHalf>, PackedTile<6, kHalf>, PackedTile<7, kHalf>, PackedTile<8, kHalf>};

// Rows [o_begin, o_end) (o_begin a multiple of 16) from the packed panels: each panel meets the
// tokens eight at a time while its blocks are still in cache.
void MatMulQ4Packed(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
                    int64_t o_begin, int64_t o_end) {
  const int64_t blocks = x.blocks, group_bytes = PackGroupBytes(w.format, blocks);
  const PackedTileFn* tiles = w.format == WeightFormat::kQ4F16 ? kPackedTiles<true> : kPackedTiles<false>;
  const auto* base = static_cast<const uint8_t*>(w.packed.get());
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kPackRows) {
    const int valid = static_cast<int>(o_end - o0 < kPackRows ? o_end - o0 : kPackRows);
    const uint8_t* run = base + (o0 / kPackRows) * group_bytes;
    for (int64_t t0 = 0; t0 < n; t0 += kTileTokens) {
      const int64_t tokens = n - t0 < kTileTokens ? n - t0 : kTileTokens;
      tiles[tokens](run, run + blocks * kPackWeightBytes, blocks, x, t0, o0, valid, w.out, y, bias);
    }
  }
}

// Weights without the packed panels (bound before this path was chosen, or never bound): one
// token streams the rows, several unpack each panel once.
void LinearQ4Avx512(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
                    int64_t o_begin, int64_t o_end) {
  if (w.packed) return MatMulQ4Packed(w, x, n, y, bias, o_begin, o_end);
  if (n == 1) return MatVecQ4Zmm(w, x, y, bias, o_begin, o_end);
  MatMulQ4Panels(w, x, n, y, bias, o_begin, o_end);
}

// Rows [0, R) of c for columns [j0, j0 + 16 * V), the last vector masked to `tail` columns (1-16;
// a plain load when kFull): R x V accumulators of one FMA chain per value, the row's a value
// broadcast from memory.
template <int R, int V, bool kFull>
void MatMulTile(const float* a, int64_t lda, int64_t k, const float* const* b_rows, int64_t j0, int tail, float* c,
                int64_t ldc) {
  const __mmask16 mask = static_cast<__mmask16>((1u << tail) - 1u);
  __m512 acc[R][V];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < k; ++i) {
    const float* b = b_rows[i] + j0;
    __m512 bv[V];
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) bv[v] = _mm512_loadu_ps(b + 16 * v);
    bv[V - 1] = kFull ? _mm512_loadu_ps(b + 16 * (V - 1)) : _mm512_maskz_loadu_ps(mask, b + 16 * (V - 1));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + i]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
    for (int v = 0; v + 1 < V; ++v) _mm512_storeu_ps(c + r * ldc + j0 + 16 * v, acc[r][v]);
    _mm512_mask_storeu_ps(c + r * ldc + j0 + 16 * (V - 1), mask, acc[r][V - 1]);
  }
}

constexpr int64_t kMatMulVector = 16;
constexpr int kMatMulRows = 8;
#include "runtime/cpu/kernels_matmul_rows.h"

// Float weights: one token through the AVX2 path's row dot products, several through 32-row
// panels and this path's 8 x 32 tiles.
const KernelTable* avx2_table = nullptr;  // set with the path's table

void LinearFloatAvx512(const Weight& w, const float* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                       int64_t o_end) {
  if (n == 1) return avx2_table->linear_float(w, x, n, y, bias, o_begin, o_end);
  LinearFloatPanels(w, x, n, y, bias, o_begin, o_end, 32, MatMulRows);
}

// CPUID leaf 7: AVX512F (EBX 16), AVX512BW (EBX 30), AVX512VL (EBX 31), AVX512_VNNI (ECX 11);
// XCR0 bits 1, 2 and 5-7: the OS saves the xmm, ymm, opmask and zmm state.
bool CpuHasAvx512Vnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0) return false;  // OSXSAVE
  unsigned xcr0_low = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0_low), "=d"(xcr0_high) : "c"(0));
  if ((xcr0_low & 0xE6u) != 0xE6u) return false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  const unsigned need_ebx = (1u << 16) | (1u << 30) | (1u << 31);
  return (ebx & need_ebx) == need_ebx && (ecx & (1u << 11)) != 0;
}

}  // namespace

const KernelTable* Avx512Kernels() {
  static const KernelTable* table = []() -> const KernelTable* {
    const KernelTable* avx2 = Avx2Kernels();
    if (avx2 == nullptr || !CpuHasAvx512Vnni()) return nullptr;
    avx2_table = avx2;
    static const KernelTable avx512{avx2->quantize, LinearQ4Avx512, LinearFloatAvx512, avx2->dot,
                                    avx2->add_scaled, avx2->silu_mul, avx2->exp_shifted_sum, MatMulRows,
                                    avx2->transpose_rows, nullptr};
    return &avx512;
  }();
  return table;
}

#else

const KernelTable* Avx512Kernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
