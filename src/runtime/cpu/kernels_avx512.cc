// The AVX-512 VNNI kernel path (this file alone is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni beside the AVX2 flags; see CMakeLists.txt). Avx512Kernels() hands it out only when
// the CPU reports those features and the OS saves the zmm state. Several tokens (prefill, batched
// decode) use a register-tiled 4-bit product: 16 output rows at a time are unpacked once into a
// per-thread panel whose 64-byte vectors hold four consecutive block inputs of each of the 16 rows,
// so one vpdpbusd against four broadcast activation bytes advances 16 rows of one token, and a
// block costs 8 vpdpbusd + 3 float operations per token over 16 rows; tiles are 16 rows x 8
// tokens. One token goes through kernels_x86_q4.h's matrix-vector product (vpdpbusd on ymm).
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

// The panel's 16 rows against T tokens from t0: y[t][o0 + r] for r < valid. Each block's int32
// sum starts at the activations' -7 * sum(q) (the weights' offset), then is scaled in float32.
template <int T>
void PanelTile(const uint8_t* panel, const float* scales, const Q8Activations& x, int64_t t0, int64_t o0, int valid, int64_t out, float* y, const float* bias) {
  const int64_t blocks = x.blocks;
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  const int8_t* xq = x.q + t0 * blocks * 32;
  const float* xd = x.d + t0 * blocks;
  const int32_t* xo = x.start + t0 * blocks;
  for (int64_t b = 0; b < blocks; ++b) {
    const auto* wp = reinterpret_cast<const __m512i*>(panel + b * kPanelBlockBytes);
    const int8_t* q = xq + b * 32;
    __m512i s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(xo[t * blocks + b]);
    // Group by group, so the T sums are independent chains.
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i wv = _mm512_loadu_si512(wp + g);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        s[t] = _mm512_dpbusd_epi32(s[t], wv, _mm512_set1_epi32(LoadInt32(q + t * blocks * 32 + g * 4)));
      }
    }
    const __m512 ws = _mm512_loadu_ps(scales + b * kPanelRows);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(ws, _mm512_set1_ps(xd[t * blocks + b])),
                               acc[t]);
    }
  }
  const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(mask, bias + o0) : _mm512_setzero_ps();
  for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * out + o0, mask, _mm512_add_ps(acc[t], bv));
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

void LinearQ4Avx512(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
                    int64_t o_begin, int64_t o_end) {
  if (n == 1) {
    MatVecQ4<Vnni256Dot>(w, x, y, bias, o_begin, o_end);
  } else {
    MatMulQ4Panels(w, x, n, y, bias, o_begin, o_end);
  }
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
    static const KernelTable avx512{avx2->quantize, LinearQ4Avx512, avx2->linear_float, avx2->dot,
                                    avx2->add_scaled, avx2->silu_mul};
    return &avx512;
  }();
  return table;
}

#else

const KernelTable* Avx512Kernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
