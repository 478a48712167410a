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

// Widens two groups (or one) a block at a time: the next pair's blocks are widened between the
// tile products of the current pair, so the vector units work while the tile unit multiplies.
struct PairWidening {
  const Widener* widener;
  const uint8_t* group[2];  // null: no such group
  uint8_t* out[2];
  int64_t blocks, next = 0;
  bool half;

  void Step() {
    if (next >= blocks) return;
    for (int g = 0; g < 2; ++g) {
      if (group[g] == nullptr) continue;
      if (half) {
        widener->Block<true>(group[g], blocks, next, out[g]);
      } else {
        widener->Block<false>(group[g], blocks, next, out[g]);
      }
    }
    ++next;
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

// One or two widened groups (rows o0 .. o0 + rows0 - 1 in `b0`, and, when kTwo, the next rows1
// in `b1`) against every token, 32 at a time: per block two A tiles (16 tokens each, read in
// place from x) meet both B tiles, accumulating in C over the whole row.
template <bool kTwo>
void WideGroups(const uint8_t* b0, const uint8_t* b1, const uint16_t* x, int64_t in, int64_t n, int64_t o0,
                int rows0, int rows1, int64_t out, float* y, const float* bias, PairWidening& next) {
  const int64_t blocks = in / 32, stride = in * 2;
  const int64_t passes = (n + 2 * kTokens - 1) / (2 * kTokens);
  int64_t count = 0;  // block steps since the next pair's last widened block
  alignas(64) float c[kTokens][16];
  for (int64_t t0 = 0; t0 < n; t0 += 2 * kTokens) {
    const uint16_t* a = x + t0 * in;
    const bool second = t0 + kTokens < n;  // tokens t0 + 16 .. exist
    _tile_zero(0);
    _tile_zero(2);
    if constexpr (kTwo) {
      _tile_zero(1);
      _tile_zero(3);
    }
    for (int64_t b = 0; b < blocks; ++b) {
      _tile_loadd(4, a + b * 32, stride);
      _tile_loadd(6, b0 + b * kWideBlockBytes, 64);
      _tile_dpbf16ps(0, 4, 6);
      if (second) {
        _tile_loadd(5, a + kTokens * in + b * 32, stride);
        _tile_dpbf16ps(2, 5, 6);
      }
      if constexpr (kTwo) {
        _tile_loadd(7, b1 + b * kWideBlockBytes, 64);
        _tile_dpbf16ps(1, 4, 7);
        if (second) _tile_dpbf16ps(3, 5, 7);
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

// Rows [o_begin, o_end) two groups at a time: each group widened once (from the packed panels, or
// packed here first for weights without them; the next pair while this one multiplies), then
// every token meets it.
void LinearQ4Wide(const Weight& w, const uint16_t* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                  int64_t o_end) {
  const int64_t blocks = w.in / 32, group_bytes = PackGroupBytes(w.format, blocks);
  const size_t wide_bytes = static_cast<size_t>(blocks * kWideBlockBytes);
  const size_t packing_bytes = w.packed ? 0 : static_cast<size_t>(4 * group_bytes);
  uint8_t* scratch = ThreadScratch(4 * wide_bytes + packing_bytes);
  const auto* packed = static_cast<const uint8_t*>(w.packed.get());
  static const Widener widener;
  // The pair from row o0 (its groups packed into `packing` first when the weights are not).
  auto pair = [&](int64_t o0, int slot) {
    PairWidening p{&widener, {nullptr, nullptr}, {}, blocks, 0, w.format == WeightFormat::kQ4F16};
    for (int g = 0; g < 2; ++g) {
      p.out[g] = scratch + (2 * slot + g) * wide_bytes;
      const int64_t group = o0 / kPanelRows + g;
      if (o0 + g * kPanelRows >= o_end) continue;
      if (packed != nullptr) {
        p.group[g] = packed + group * group_bytes;
      } else {
        uint8_t* packing = scratch + 4 * wide_bytes + (2 * slot + g) * group_bytes;
        PackQ4Group(w, group, packing);
        p.group[g] = packing;
      }
    }
    return p;
  };
  static const WideTileConfig config;
  _tile_loadconfig(&config);
  PairWidening current = pair(o_begin, 0);
  current.Finish();
  int slot = 0;
  for (int64_t o0 = o_begin; o0 < o_end; o0 += 2 * kPanelRows, slot ^= 1) {
    const int rows0 = static_cast<int>(o_end - o0 < kPanelRows ? o_end - o0 : kPanelRows);
    const int64_t left = o_end - o0 - kPanelRows;
    const int rows1 = static_cast<int>(left <= 0 ? 0 : left < kPanelRows ? left : kPanelRows);
    PairWidening next = pair(o0 + 2 * kPanelRows, slot ^ 1);
    if (rows1 > 0) {
      WideGroups<true>(current.out[0], current.out[1], x, w.in, n, o0, rows0, rows1, w.out, y, bias, next);
    } else {
      WideGroups<false>(current.out[0], nullptr, x, w.in, n, o0, rows0, 0, w.out, y, bias, next);
    }
    next.Finish();
    current = next;
  }
  _tile_release();
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
    static const WideProducts wide{kWideMinTokens, RoundBf16, LinearQ4Wide};
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
