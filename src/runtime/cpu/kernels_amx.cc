// The AMX path (this file alone is compiled with the AVX-512 flags plus -mamx-tile -mamx-int8
// -mamx-bf16; see CMakeLists.txt). AmxKernels() hands it out only when the CPU reports AMX-TILE and
// AMX-INT8 (CPUID leaf 7 EDX bits 24, 25), the AVX-512 VNNI path runs, and Linux grants this
// process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM). Several tokens (prefill, batched
// decode with at least kAmxMinTokens rows) go through tile products: for each block of 32 inputs
// one TDPBSSD multiplies 16 tokens' int8 activations (read in place) by a 16-row panel of
// unpacked weight nibbles (the AVX-512 path's panel, already in the B tile's layout), giving the
// same exact int32 block sums as the AVX-512 path; each sum starts at the activations'
// -7 * sum(q) and is scaled by the row's and the token's block scales in float32.
// Fewer tokens and everything else are the AVX-512 path's.
// No standard-library template is instantiated here (see kernels_avx2.cc).
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__) && \
    defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__)
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

#include "runtime/cpu/kernels_x86_q4.h"
#include "runtime/cpu/kernels_avx512_panel.h"

constexpr int kTokens = 16;  // tokens per tile (A and C tile rows)
// Below this many tokens the AVX-512 path's register tiles win (a tile holds 16 tokens).
constexpr int64_t kAmxMinTokens = 8;

// The tile configuration (palette 1): tmm0-3 = C (16 tokens x 16 rows, int32), tmm4-5 = A (16
// tokens x one block's 32 activation bytes), tmm6-7 = B (a panel block: 8 groups x 16 rows x 4 bytes).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 32, 32, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 8, 8};
};

// Block b's 16 x 16 int32 sums into tile C (zeroed first), with A and B tiles of their own, so
// the products of consecutive blocks overlap (a macro: the tile numbers are immediates). Both
// operands are signed bytes: the activations and the weights' nibbles 0 .. 15.
#define MLC_AMX_BLOCK_PRODUCT(C, A, B, tokens, stride, panel, b)    \
  do {                                                             \
    _tile_zero(C);                                                 \
    _tile_loadd(A, (tokens) + (b) * 32, stride);                   \
    _tile_loadd(B, (panel) + (b) * kPanelBlockBytes, 64);          \
    _tile_dpbssd(C, A, B);                                         \
  } while (0)

// acc[t] (16 rows of token t) += (sums[t] + start[t]) * scale * d[t] over block b's stored sums.
void ScaleBlock(const int32_t (*sums)[kPanelRows], const float* scales, const Q8Activations& x, int64_t t0,
                int64_t b, __m512* acc) {
  const __m512 ws = _mm512_loadu_ps(scales + b * kPanelRows);
  const int64_t blocks = x.blocks;
  for (int t = 0; t < kTokens; ++t) {
    const int64_t at = (t0 + t) * blocks + b;
    const __m512 sum = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_load_si512(sums[t]), _mm512_set1_epi32(x.start[at])));
    acc[t] = _mm512_fmadd_ps(sum, _mm512_mul_ps(ws, _mm512_set1_ps(x.d[at])), acc[t]);
  }
}

// The panel's 16 rows against 16 tokens from t0 (their int8 blocks at `tokens`, rows `stride`
// bytes apart; x's d and start hold 16 tokens from t0): y[t0 + t][o0 + r] for t < valid_tokens,
// r < rows. Blocks go in pairs through two sets of tiles (C in tmm0/1 or tmm2/3): a pair's
// products are issued before the previous pair's sums are scaled.
void PanelTimesTokens(const uint8_t* panel, const float* scales, const uint8_t* tokens, int64_t stride,
                      const Q8Activations& x, int64_t t0, int valid_tokens, int64_t o0, int rows, int64_t out,
                      float* y, const float* bias) {
  const int64_t blocks = x.blocks;
  __m512 acc[kTokens];
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  alignas(64) int32_t sums[4][kTokens][kPanelRows];  // two sets of two blocks
  int64_t pending = -1;                              // the first block of the pair in the other set
  int set = 0;
  for (int64_t b = 0; b < blocks; b += 2, set ^= 1) {
    const bool two = b + 1 < blocks;
    if (set == 0) {
      MLC_AMX_BLOCK_PRODUCT(0, 4, 6, tokens, stride, panel, b);
      if (two) MLC_AMX_BLOCK_PRODUCT(1, 5, 7, tokens, stride, panel, b + 1);
    } else {
      MLC_AMX_BLOCK_PRODUCT(2, 4, 6, tokens, stride, panel, b);
      if (two) MLC_AMX_BLOCK_PRODUCT(3, 5, 7, tokens, stride, panel, b + 1);
    }
    if (pending >= 0) {  // the previous pair, while this one multiplies
      ScaleBlock(sums[2 * (set ^ 1)], scales, x, t0, pending, acc);
      ScaleBlock(sums[2 * (set ^ 1) + 1], scales, x, t0, pending + 1, acc);
    }
    if (set == 0) {
      _tile_stored(0, sums[0], 64);
      if (two) _tile_stored(1, sums[1], 64);
    } else {
      _tile_stored(2, sums[2], 64);
      if (two) _tile_stored(3, sums[3], 64);
    }
    pending = two ? b : -1;
    if (!two) ScaleBlock(sums[2 * set], scales, x, t0, b, acc);
  }
  if (pending >= 0) {
    ScaleBlock(sums[2 * (set ^ 1)], scales, x, t0, pending, acc);
    ScaleBlock(sums[2 * (set ^ 1) + 1], scales, x, t0, pending + 1, acc);
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << rows) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + o0) : _mm512_setzero_ps();
  for (int t = 0; t < valid_tokens; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * out + o0, mask, _mm512_add_ps(acc[t], bv));
}

void MatMulQ4Amx(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias, int64_t o_begin,
                 int64_t o_end) {
  const int64_t blocks = x.blocks, stride = blocks * 32;
  const int64_t full = n / kTokens * kTokens, tail = n - full;
  // The last partial group of tokens, zero-padded to 16 (with its d and start), so that no tile
  // load reads past x.
  const size_t panel_bytes = static_cast<size_t>(blocks * kPanelBlockBytes);
  const size_t tail_bytes = tail > 0 ? static_cast<size_t>(kTokens * stride) : 0;
  const size_t scale_floats = static_cast<size_t>((kPanelRows + 1) * blocks);
  const size_t tail_floats = tail > 0 ? static_cast<size_t>(2 * kTokens * blocks) : 0;
  uint8_t* scratch = ThreadScratch(panel_bytes + tail_bytes + (scale_floats + tail_floats) * sizeof(float) + 64);
  auto* panel = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(scratch) + 63) & ~uintptr_t{63});
  int8_t* tail_q = reinterpret_cast<int8_t*>(panel + panel_bytes);
  float* scales = reinterpret_cast<float*>(panel + panel_bytes + tail_bytes);  // [blocks][16]
  float* row_scale = scales + kPanelRows * blocks;                             // [blocks]
  Q8Activations tail_x{blocks, tail_q, row_scale + blocks, nullptr, nullptr};
  if (tail > 0) {
    auto* tail_d = const_cast<float*>(tail_x.d);
    auto* tail_start = reinterpret_cast<int32_t*>(tail_d + kTokens * blocks);
    tail_x.start = tail_start;
    for (int64_t k = 0; k < kTokens * stride; ++k) tail_q[k] = k < tail * stride ? x.q[full * stride + k] : 0;
    for (int64_t k = 0; k < kTokens * blocks; ++k) {
      const bool real = k < tail * blocks;
      tail_d[k] = real ? x.d[full * blocks + k] : 0.0f;
      tail_start[k] = real ? x.start[full * blocks + k] : 0;
    }
  }
  static const TileConfig config;
  _tile_loadconfig(&config);
  for (int64_t o0 = o_begin; o0 < o_end; o0 += kPanelRows) {
    const int rows = static_cast<int>(o_end - o0 < kPanelRows ? o_end - o0 : kPanelRows);
    UnpackPanel(w, blocks, o0, rows, panel, scales, row_scale);
    for (int64_t t0 = 0; t0 < full; t0 += kTokens) {
      PanelTimesTokens(panel, scales, reinterpret_cast<const uint8_t*>(x.q + t0 * stride), stride, x, t0, kTokens,
                       o0, rows, w.out, y, bias);
    }
    if (tail > 0) {
      // tail_x's rows are tokens full .. n - 1, written at y + full * out.
      PanelTimesTokens(panel, scales, reinterpret_cast<const uint8_t*>(tail_q), stride, tail_x, 0,
                       static_cast<int>(tail), o0, rows, w.out, y + full * w.out, bias);
    }
  }
  _tile_release();
}

void (*avx512_linear_q4)(const Weight&, const Q8Activations&, int64_t, float*, const float*, int64_t,
                         int64_t) = nullptr;

void LinearQ4Amx(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias, int64_t o_begin,
                 int64_t o_end) {
  if (n < kAmxMinTokens) {
    avx512_linear_q4(w, x, n, y, bias, o_begin, o_end);
  } else {
    MatMulQ4Amx(w, x, n, y, bias, o_begin, o_end);
  }
}

// CPUID leaf 7: AMX-TILE (EDX 24) and AMX-INT8 (EDX 25); then Linux's permission for the tile
// data state (XFEATURE_XTILEDATA = 18), which must be asked for before the first tile instruction.
bool CpuAndOsRunAmx() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace

const KernelTable* AmxKernels() {
  static const KernelTable* table = []() -> const KernelTable* {
    const KernelTable* avx512 = Avx512Kernels();
    if (avx512 == nullptr || !CpuAndOsRunAmx()) return nullptr;
    avx512_linear_q4 = avx512->linear_q4;
    static const KernelTable amx{avx512->quantize, LinearQ4Amx,         avx512->linear_float,
                                 avx512->dot,      avx512->add_scaled, avx512->silu_mul,
                                 avx512->exp_shifted_sum, avx512->matmul_rows,
                                 avx512->transpose_rows};
    return &amx;
  }();
  return table;
}

#else

const KernelTable* AmxKernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
