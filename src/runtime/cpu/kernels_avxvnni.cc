// The AVX-VNNI kernel path (this file alone is compiled with -mavx2 -mfma -mf16c -mavxvnni; see
// CMakeLists.txt): the AVX2 path with the 4-bit products' block sums done by one vpdpbusd instead
// of vpmaddubsw + vpmaddwd. Activation rounding, the float formats and the vector helpers are the AVX2 path's.
// AvxVnniKernels() hands it out only when the CPU reports AVX-VNNI beside the AVX2 path's features.
#include "runtime/cpu/kernels_internal.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && defined(__AVXVNNI__)
#define MLC_HAVE_AVXVNNI_PATH 1
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace mlc::cpu::detail {

#ifdef MLC_HAVE_AVXVNNI_PATH
namespace {

#include "runtime/cpu/kernels_x86_q4.h"

// Exact int32 partial sums of one block: sum q_w * q over 8 lanes.
struct VnniDot {
  static __m256i Block(__m256i w, __m256i x) { return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w, x); }
};

// CPUID leaf 7 sub-leaf 1, EAX bit 4 (AVX-VNNI), as compilers' __builtin_cpu_supports may not know it.
bool CpuHasAvxVnni() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 4)) != 0;
}

}  // namespace

const KernelTable* AvxVnniKernels() {
  static const KernelTable* table = []() -> const KernelTable* {
    const KernelTable* avx2 = Avx2Kernels();
    if (avx2 == nullptr || !CpuHasAvxVnni()) return nullptr;
    static const KernelTable vnni{avx2->quantize, LinearQ4<VnniDot>, avx2->linear_float, avx2->dot,
                                  avx2->add_scaled, avx2->silu_mul, avx2->exp_shifted_sum,
                                  avx2->matmul_rows, avx2->transpose_rows, nullptr};
    return &vnni;
  }();
  return table;
}

#else

const KernelTable* AvxVnniKernels() { return nullptr; }

#endif

}  // namespace mlc::cpu::detail
