// The AMX path (this file alone is compiled with the AVX-512 flags plus -mavx512bf16 -mavx512vbmi
// -mamx-tile -mamx-bf16; see CMakeLists.txt): the AVX-512 VNNI path, except that the 4-bit products
// of many tokens (prefill: kWideMinTokens or more rows) go through AMX-BF16 tiles (WideProducts,
// kernels_internal.h). The tokens are rounded to bfloat16 once per product; each 16-row group of
// the packed panels is widened once to bfloat16 weights ((q - 7) * scale, rounded to nearest even)
// in the B tile's layout, while the tile unit multiplies the previous pair of groups; then TDPBF16PS
// sums 16 tokens x 16 rows x 32 inputs at a time in float32 over the whole row, so no block is
// scaled on its own. On the one AMX machine measured (issue 29) this ran at 1.2x the AVX-512
// register tiles at 32 tokens and 2.4x at 128; int8 tiles (TDPBSSD), whose every block's sums
// must be scaled by vector code, were 0.35-0.65x them at 8-16 tokens and are not used.
// Half and bfloat16 weights (the vision and audio towers' products) take the same tiles from 2
// tokens on as split bfloat16 (FloatPair: each value hi + lo, three products per block), within
// 2^-15 of sum |w x|: on that machine 2.0-2.3x the AVX-512 FMA panels at 16-577 tokens, 1.4x at 2.
// float32 weights keep the FMA panels (kernels.cc).
// AmxKernels() hands the path out only when the CPU reports AMX-TILE and AMX-BF16, AVX512-BF16 and
// AVX512-VBMI, the AVX-512 VNNI path runs, and Linux grants this process the tile data state
// (arch_prctl ARCH_REQ_XCOMP_PERM).
// No standard-library template is instantiated here (see kernels_avx2.cc).
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__AVX512BF16__) && defined(__AVX512VBMI__) && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
    (defined(__AMX_BF16__) || defined(__AMXBF16__)) && defined(__linux__)  // GCC's and Clang's spellings
#define MLC_HAVE_AMX_PATH 1
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 intrinsics (bug 105593)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace mlc::cpu::detail {

#ifdef MLC_HAVE_AMX_PATH
namespace {

constexpr int kTokens = 16;     // tokens per tile (A and C tile rows)
constexpr int kPanelRows = 16;  // weight rows per group (B and C tile columns)
// From this many tokens the bfloat16 tiles take the 4-bit products (below, the AVX-512 register
// tiles win: 0.7-0.8x at 16-24 tokens, 1.1-1.2x at 28-32).
constexpr int64_t kWideMinTokens = 32;

// From this many tokens half and bfloat16 weights' products go through split bfloat16 tiles
// (FloatPair; measured 1.1-1.5x the AVX-512 panels at 2 tokens, where the weights' reads dominate).
constexpr int64_t kSplitMinTokens = 2;

// One block of a bfloat16 B tile: 16 input pairs x 16 rows x 2 values x 2 bytes.
constexpr int64_t kWideBlockBytes = 1024;

// The tile configuration of the bfloat16 products: tmm0-3 = C (16 tokens x 16 rows, float32;
// tmm0/1 tokens 0-15 of rows 0-15 / 16-31, tmm2/3 tokens 16-31), tmm4-5 = A (16 tokens x 32
// inputs), tmm6-7 = B (16 input pairs x 16 rows).
struct alignas(64) WideTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

// Packed groups (kernels_internal.h: 16 rows) as bfloat16 B tiles, [blocks][16 pairs][16 rows]
// [2]: pair p of block b holds the row's weights at inputs 32b + 2p and 32b + 2p + 1, each
// (q - 7) * scale rounded to nearest even. Byte m of the group's word k (one per row, 16 to a
// vector) holds inputs 8k + 2m (low nibble) and 8k + 2m + 1: pair 4k + m. One byte permute
// (VBMI) per half of the rows puts each row's two nibbles of pair 4k + m side by side in the
// order the bfloat16 conversion of two vectors leaves its values: rows 0-7, then 8-15.
struct Widener {
  // [m][rows 0-7 / 8-15]: the low byte of dword d <- the nibble of byte m of row d / 2's word
  // (rows 8 + d / 2 for the second half), the low nibble for even d, the high one for odd d.
  __m512i pick[4][2];
  __m512i scale_pairs[2];  // dword d <- scale of row d / 2 (+ 8)
  __mmask64 low_bytes;

  Widener() : low_bytes(0x1111111111111111ull) {
    alignas(64) uint8_t idx[64];
    alignas(64) int32_t rows[16];
    for (int m = 0; m < 4; ++m) {
      for (int half = 0; half < 2; ++half) {
        for (int d = 0; d < 16; ++d) {
          for (int j = 0; j < 4; ++j) idx[4 * d + j] = static_cast<uint8_t>((d % 2) * 64 + 4 * (8 * half + d / 2) + m);
        }
        pick[m][half] = _mm512_load_si512(idx);
      }
    }
    for (int half = 0; half < 2; ++half) {
      for (int d = 0; d < 16; ++d) rows[d] = 8 * half + d / 2;
      scale_pairs[half] = _mm512_load_si512(rows);
    }
  }

  // Block b of the group at `group` (`blocks` blocks, half scales when kHalf) into out.
  template <bool kHalf>
  void Block(const uint8_t* group, int64_t blocks, int64_t b, uint8_t* out) const {
    const uint8_t* scales = group + blocks * kPackWeightBytes;
    __m512 scale;
    if constexpr (kHalf) {
      scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales + b * 32)));
    } else {
      scale = _mm512_loadu_ps(reinterpret_cast<const float*>(scales + b * 64));
    }
    const __m512 s0 = _mm512_permutexvar_ps(scale_pairs[0], scale), s1 = _mm512_permutexvar_ps(scale_pairs[1], scale);
    const __m512 minus7 = _mm512_set1_ps(-7.0f);
    const __m512 o0 = _mm512_mul_ps(s0, minus7), o1 = _mm512_mul_ps(s1, minus7);
    const __m512i low = _mm512_set1_epi8(0x0F);
    auto* dst = reinterpret_cast<__m512i*>(out + b * kWideBlockBytes);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m512i word = _mm512_loadu_si512(group + b * kPackWeightBytes + 64 * k);
      const __m512i nib_low = _mm512_and_si512(word, low), nib_high = _mm512_and_si512(_mm512_srli_epi16(word, 4), low);
#pragma GCC unroll 4
      for (int m = 0; m < 4; ++m) {
        const __m512i q0 = _mm512_maskz_permutex2var_epi8(low_bytes, nib_low, pick[m][0], nib_high);
        const __m512i q1 = _mm512_maskz_permutex2var_epi8(low_bytes, nib_low, pick[m][1], nib_high);
        const __m512 v0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q0), s0, o0);
        const __m512 v1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q1), s1, o1);
        _mm512_storeu_si512(dst + 4 * k + m, (__m512i)_mm512_cvtne2ps_pbh(v1, v0));
      }
    }
  }
};

// Block b of one or two 4-bit groups (null: no such group) widened into out.
struct Q4Pair {
  const Widener* widener;
  const uint8_t* group[2];
  uint8_t* out[2];
  int64_t blocks;
  bool half;

  void operator()(int64_t b) const {
    for (int g = 0; g < 2; ++g) {
      if (group[g] == nullptr) continue;
      if (half) {
        widener->Block<true>(group[g], blocks, b, out[g]);
      } else {
        widener->Block<false>(group[g], blocks, b, out[g]);
      }
    }
  }
};

// Widens a pair of groups a block at a time (Pair: a callable widening block b of both): the next
// pair's blocks are widened between the tile products of the current pair, so the vector units
// work while the tile unit multiplies.
template <class Pair>
struct PairWidening {
  Pair pair;
  int64_t blocks, next = 0;

  void Step() {
    if (next < blocks) pair(next++);
  }
  void Finish() {
    while (next < blocks) Step();
  }
};

// c's first `tokens` (at most 16) rows x `rows` columns into y (rows `out` apart, from column o0),
// plus bias.
void StoreRows(const float (*c)[16], int64_t tokens, int64_t o0, int rows, int64_t out, float* y, const float* bias) {
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + o0) : _mm512_setzero_ps();
  const int valid = static_cast<int>(tokens < kTokens ? tokens : kTokens);
  for (int t = 0; t < valid; ++t) _mm512_mask_storeu_ps(y + t * out + o0, mask, _mm512_add_ps(_mm512_load_ps(c[t]), bv));
}

// Tile C (a literal: tile numbers are immediates) through `c` into StoreRows.
#define MLC_AMX_STORE_TILE(C, c, tokens, o0, rows, out, y, bias) \
  do {                                                          \
    _tile_stored(C, c, 64);                                     \
    StoreRows(c, tokens, o0, rows, out, y, bias);               \
  } while (0)

// The bfloat16 operands of one product: the tokens (n rows of `in` values, a multiple of 32, read
// in place as A tiles; `lo` the second halves of split floats, or null) and the widened groups
// (B tiles, `block_bytes` per block of 32 inputs: the weights, then, when split, their second halves).
struct TileOperands {
  const uint16_t* hi;
  const uint16_t* lo;
  int64_t in;
  int64_t block_bytes;
};

// One or two widened groups (rows o0 .. o0 + rows0 - 1 in `b0`, and, when kTwo, the next rows1
// in `b1`) against every token, 32 at a time: per block two A tiles (16 tokens each) meet both B
// tiles, accumulating in C over the whole row. kTerms products per block: the tokens against the
// weights (1), the tokens' second halves against the weights (2), the tokens against the weights'
// second halves (3).
template <bool kTwo, int kTerms, class Next>
void WideGroups(const TileOperands& x, const uint8_t* b0, const uint8_t* b1, int64_t n, int64_t o0, int rows0,
                int rows1, int64_t out, float* y, const float* bias, Next& next) {
  const int64_t in = x.in, blocks = in / 32, stride = in * 2;
  const int64_t passes = (n + 2 * kTokens - 1) / (2 * kTokens);
  int64_t count = 0;  // block steps since the next pair's last widened block
  alignas(64) float c[kTokens][16];
  for (int64_t t0 = 0; t0 < n; t0 += 2 * kTokens) {
    const bool second = t0 + kTokens < n;  // tokens t0 + 16 .. exist
    _tile_zero(0);
    _tile_zero(2);
    if constexpr (kTwo) {
      _tile_zero(1);
      _tile_zero(3);
    }
    // Tiles 4/5 (tokens) against 6/7 (groups) into C.
    auto products = [&] {
      _tile_dpbf16ps(0, 4, 6);
      if (second) _tile_dpbf16ps(2, 5, 6);
      if constexpr (kTwo) {
        _tile_dpbf16ps(1, 4, 7);
        if (second) _tile_dpbf16ps(3, 5, 7);
      }
    };
    auto tokens = [&](const uint16_t* a, int64_t b) {
      _tile_loadd(4, a + t0 * in + b * 32, stride);
      if (second) _tile_loadd(5, a + (t0 + kTokens) * in + b * 32, stride);
    };
    auto groups = [&](int64_t offset) {
      _tile_loadd(6, b0 + offset, 64);
      if constexpr (kTwo) _tile_loadd(7, b1 + offset, 64);
    };
    for (int64_t b = 0; b < blocks; ++b) {
      tokens(x.hi, b);
      groups(b * x.block_bytes);
      products();
      if constexpr (kTerms >= 2) {
        tokens(x.lo, b);
        products();
      }
      if constexpr (kTerms >= 3) {
        tokens(x.hi, b);
        groups(b * x.block_bytes + kWideBlockBytes);
        products();
      }
      if (++count == passes) {  // the next pair's blocks spread evenly over this pair's passes
        count = 0;
        next.Step();
      }
    }
    float* y0 = y + t0 * out;
    float* y1 = y0 + kTokens * out;
    MLC_AMX_STORE_TILE(0, c, n - t0, o0, rows0, out, y0, bias);
    if (second) MLC_AMX_STORE_TILE(2, c, n - t0 - kTokens, o0, rows0, out, y1, bias);
    if constexpr (kTwo) {
      MLC_AMX_STORE_TILE(1, c, n - t0, o0 + kPanelRows, rows1, out, y0, bias);
      if (second) MLC_AMX_STORE_TILE(3, c, n - t0 - kTokens, o0 + kPanelRows, rows1, out, y1, bias);
    }
  }
}

// Rows [o_begin, o_end) two groups at a time: make_pair(o0, slot) names the pair from row o0
// (a PairWidening<Pair> writing into scratch slot 0 or 1); the first is widened whole, then each
// pair is multiplied (multiply(pair, next, o0, rows0, rows1), kTwo when rows1 > 0) while the next
// one is widened.
template <class Pair, class MakePair, class Multiply>
void OverGroupPairs(int64_t o_begin, int64_t o_end, MakePair make_pair, Multiply multiply) {
  static const WideTileConfig config;
  _tile_loadconfig(&config);
  PairWidening<Pair> current = make_pair(o_begin, 0);
  current.Finish();
  int slot = 0;
  for (int64_t o0 = o_begin; o0 < o_end; o0 += 2 * kPanelRows, slot ^= 1) {
    const int rows0 = static_cast<int>(o_end - o0 < kPanelRows ? o_end - o0 : kPanelRows);
    const int64_t left = o_end - o0 - kPanelRows;
    const int rows1 = static_cast<int>(left <= 0 ? 0 : left < kPanelRows ? left : kPanelRows);
    PairWidening<Pair> next = make_pair(o0 + 2 * kPanelRows, slot ^ 1);
    multiply(current.pair, next, o0, rows0, rows1);
    next.Finish();
    current = next;
  }
  _tile_release();
}

// Rows [o_begin, o_end) of 4-bit weights: each group widened once (from the packed panels, or
// packed here first for weights without them), then every token meets it.
void LinearQ4Wide(const Weight& w, const uint16_t* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                  int64_t o_end) {
  const int64_t blocks = w.in / 32, group_bytes = PackGroupBytes(w.format, blocks);
  const size_t wide_bytes = static_cast<size_t>(blocks * kWideBlockBytes);
  const size_t packing_bytes = w.packed ? 0 : static_cast<size_t>(4 * group_bytes);
  uint8_t* scratch = ThreadScratch(4 * wide_bytes + packing_bytes);
  const auto* packed = static_cast<const uint8_t*>(w.packed.get());
  static const Widener widener;
  auto make_pair = [&](int64_t o0, int slot) {
    PairWidening<Q4Pair> p{{&widener, {nullptr, nullptr}, {}, blocks, w.format == WeightFormat::kQ4F16}, blocks};
    for (int g = 0; g < 2; ++g) {
      p.pair.out[g] = scratch + (2 * slot + g) * wide_bytes;
      const int64_t group = o0 / kPanelRows + g;
      if (o0 + g * kPanelRows >= o_end) continue;
      if (packed != nullptr) {
        p.pair.group[g] = packed + group * group_bytes;
      } else {
        uint8_t* packing = scratch + 4 * wide_bytes + (2 * slot + g) * group_bytes;
        PackQ4Group(w, group, packing);
        p.pair.group[g] = packing;
      }
    }
    return p;
  };
  const TileOperands tiles{x, nullptr, w.in, kWideBlockBytes};
  OverGroupPairs<Q4Pair>(o_begin, o_end, make_pair, [&](const Q4Pair& pair, PairWidening<Q4Pair>& next, int64_t o0,
                                                        int rows0, int rows1) {
    if (rows1 > 0) {
      WideGroups<true, 1>(tiles, pair.out[0], pair.out[1], n, o0, rows0, rows1, w.out, y, bias, next);
    } else {
      WideGroups<false, 1>(tiles, pair.out[0], nullptr, n, o0, rows0, 0, w.out, y, bias, next);
    }
  });
}

// Half and bfloat16 weights and float32 tokens as split bfloat16: a float32 value v is hi = v
// rounded to bfloat16 (nearest even) plus lo = v - hi (exact in float32) rounded again, so hi + lo
// is v within 2^-17 |v|, exactly for half and bfloat16 values (a bfloat16 weight's lo is zero). Its
// products hi x hi + lo x hi + hi x lo leave out lo x lo (at most 2^-16 |w x|).

// The lanes of 16 values at `at` that `mask` selects (zero elsewhere), from a half (kF16) or
// bfloat16 row.
template <WeightFormat F>
__m512 LoadSixteen(const uint16_t* row, int64_t at, __mmask16 mask) {
  const __m256i h = _mm256_maskz_loadu_epi16(mask, row + at);
  if constexpr (F == WeightFormat::kF16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// The lanes of 16 values from `at` that lie before `end`.
__mmask16 LanesBefore(int64_t at, int64_t end) {
  const int64_t left = end - at;
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : left <= 0 ? 0 : static_cast<__mmask16>((1u << left) - 1);
}

// 32 values (v0: 0-15, v1: 16-31) split into their bfloat16 halves, each 32 values in order.
void SplitThirtyTwo(__m512 v0, __m512 v1, __m512i& hi, __m512i& lo) {
  const __m512bh h = _mm512_cvtne2ps_pbh(v1, v0);
  const __m512i wide0 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256((__m512i)h)), 16);
  const __m512i wide1 = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64((__m512i)h, 1)), 16);
  hi = (__m512i)h;
  lo = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(v1, _mm512_castsi512_ps(wide1)),
                                    _mm512_sub_ps(v0, _mm512_castsi512_ps(wide0)));
}

// A 16 x 16 matrix of 32-bit values (r[row], lane = column) stored by columns: column c's 16 values
// (one per row) at out + 64c.
void StoreTransposed(const __m512i (&r)[16], uint8_t* out) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {  // per 128-bit lane: rows 2k, 2k + 1 interleaved
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // u[4g + j], lane L: column 4L + j of rows 4g .. 4g + 3
    u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
    u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
    u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
  }
  auto* dst = reinterpret_cast<__m512i*>(out);
  for (int j = 0; j < 4; ++j) {  // lanes 0 and 2 (0x88) or 1 and 3 (0xDD) of rows 0-7, then 8-15
    const __m512i a = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88), b = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
    const __m512i c = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i d = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
    _mm512_store_si512(dst + j, _mm512_shuffle_i32x4(a, c, 0x88));
    _mm512_store_si512(dst + 4 + j, _mm512_shuffle_i32x4(b, d, 0x88));
    _mm512_store_si512(dst + 8 + j, _mm512_shuffle_i32x4(a, c, 0xDD));
    _mm512_store_si512(dst + 12 + j, _mm512_shuffle_i32x4(b, d, 0xDD));
  }
}

// Block b of the 16 rows from o0 (zero past w.out and past w.in) as split B tiles at
// out + b * 2 * kWideBlockBytes: the hi halves, then the lo halves (left out for bfloat16 weights).
template <WeightFormat F>
void SplitFloatBlock(const Weight& w, int64_t o0, int64_t b, uint8_t* out) {
  const int64_t at = 32 * b;
  const __mmask16 m0 = LanesBefore(at, w.in), m1 = LanesBefore(at + 16, w.in);
  __m512i hi[16], lo[16];
  for (int r = 0; r < kPanelRows; ++r) {
    if (o0 + r >= w.out) {
      hi[r] = lo[r] = _mm512_setzero_si512();
      continue;
    }
    const uint16_t* row = static_cast<const uint16_t*>(w.data) + (o0 + r) * w.in;
    SplitThirtyTwo(LoadSixteen<F>(row, at, m0), LoadSixteen<F>(row, at + 16, m1), hi[r], lo[r]);
  }
  StoreTransposed(hi, out + b * 2 * kWideBlockBytes);
  if constexpr (F != WeightFormat::kBF16) StoreTransposed(lo, out + b * 2 * kWideBlockBytes + kWideBlockBytes);
}

// Block b of one or two half or bfloat16 groups (from rows o0 and o0 + 16; `groups` of them) split
// into out.
struct FloatPair {
  const Weight* w;
  int64_t o0;
  int groups;
  uint8_t* out[2];

  void operator()(int64_t b) const {
    for (int g = 0; g < groups; ++g) {
      if (w->format == WeightFormat::kF16) {
        SplitFloatBlock<WeightFormat::kF16>(*w, o0 + g * kPanelRows, b, out[g]);
      } else {
        SplitFloatBlock<WeightFormat::kBF16>(*w, o0 + g * kPanelRows, b, out[g]);
      }
    }
  }
};

// Rows [o_begin, o_end) of half or bfloat16 weights against split tokens (x_hi / x_lo: [rows][in_pad], in_pad
// the inputs rounded up to 32, zero past w.in and past n): each group split once, then every token
// meets it, three tile products per block (two for bfloat16 weights).
void LinearFloatWide(const Weight& w, const uint16_t* x_hi, const uint16_t* x_lo, int64_t in_pad, int64_t n,
                     float* y, const float* bias, int64_t o_begin, int64_t o_end) {
  const int64_t blocks = in_pad / 32;
  const int64_t wide_bytes = blocks * 2 * kWideBlockBytes;
  uint8_t* scratch = ThreadScratch(static_cast<size_t>(4 * wide_bytes));
  auto make_pair = [&](int64_t o0, int slot) {
    const int groups = o0 >= o_end ? 0 : o0 + kPanelRows >= o_end ? 1 : 2;
    uint8_t* out = scratch + 2 * slot * wide_bytes;
    return PairWidening<FloatPair>{{&w, o0, groups, {out, out + wide_bytes}}, blocks};
  };
  const TileOperands tiles{x_hi, x_lo, in_pad, 2 * kWideBlockBytes};
  OverGroupPairs<FloatPair>(o_begin, o_end, make_pair, [&](const FloatPair& pair, PairWidening<FloatPair>& next,
                                                           int64_t o0, int rows0, int rows1) {
    const bool split_weights = w.format != WeightFormat::kBF16;
    if (rows1 > 0 && split_weights) {
      WideGroups<true, 3>(tiles, pair.out[0], pair.out[1], n, o0, rows0, rows1, w.out, y, bias, next);
    } else if (rows1 > 0) {
      WideGroups<true, 2>(tiles, pair.out[0], pair.out[1], n, o0, rows0, rows1, w.out, y, bias, next);
    } else if (split_weights) {
      WideGroups<false, 3>(tiles, pair.out[0], nullptr, n, o0, rows0, 0, w.out, y, bias, next);
    } else {
      WideGroups<false, 2>(tiles, pair.out[0], nullptr, n, o0, rows0, 0, w.out, y, bias, next);
    }
  });
}

// Rows [t_begin, t_end) of x ([n, in]) split into hi / lo ([n][in_pad], zero from in to in_pad).
void SplitRows(const float* x, int64_t in, int64_t in_pad, int64_t t_begin, int64_t t_end, uint16_t* hi,
               uint16_t* lo) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t i = 0; i < in_pad; i += 32) {
      __m512i h, l;
      SplitThirtyTwo(_mm512_maskz_loadu_ps(LanesBefore(i, in), x + t * in + i),
                     _mm512_maskz_loadu_ps(LanesBefore(i + 16, in), x + t * in + i + 16), h, l);
      _mm512_storeu_si512(hi + t * in_pad + i, h);
      _mm512_storeu_si512(lo + t * in_pad + i, l);
    }
  }
}

// Rows of x to bfloat16, 16 values at a time (in is a multiple of 32).
void RoundBf16(const float* x, int64_t in, int64_t t_begin, int64_t t_end, uint16_t* out) {
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t i = 0; i < in; i += 16) {
      const __m256bh v = _mm512_cvtneps_pbh(_mm512_loadu_ps(x + t * in + i));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + t * in + i), (__m256i)v);
    }
  }
}

// CPUID leaf 7: AMX-TILE (EDX 24), AMX-BF16 (EDX 22), AVX512_VBMI (ECX 1), and subleaf 1's
// AVX512_BF16 (EAX 5); then Linux's permission for the tile data state (XFEATURE_XTILEDATA = 18),
// which must be asked for before the first tile instruction.
bool CpuAndOsRunBf16Tiles() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 22)) == 0 || (ecx & (1u << 1)) == 0) return false;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) == 0 || (eax & (1u << 5)) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

const KernelTable* AmxKernels() {
  static const KernelTable* table = []() -> const KernelTable* {
    const KernelTable* avx512 = Avx512Kernels();
    if (avx512 == nullptr || !CpuAndOsRunBf16Tiles()) return nullptr;
    static const WideProducts wide{kWideMinTokens, RoundBf16, LinearQ4Wide, kSplitMinTokens, SplitRows,
                                   LinearFloatWide};
    static const KernelTable amx{avx512->quantize, avx512->linear_q4, avx512->linear_float,
                                 avx512->dot,      avx512->add_scaled, avx512->silu_mul,
                                 avx512->exp_shifted_sum, avx512->matmul_rows,
                                 avx512->transpose_rows, &wide};
    return &amx;
  }();
  return table;
}

#else

const KernelTable* AmxKernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
