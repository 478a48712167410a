// Internal seam between the kernel dispatcher (kernels.cc) and its instruction-set paths
// (kernels_portable.cc, kernels_avx2.cc, kernels_avxvnni.cc, kernels_avx512.cc, kernels_amx.cc): the int8 activation blocks the 4-bit products use and
// one table of entry points per path. Not for the model families: they call kernels.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/cpu/kernels.h"

namespace mlc::cpu::detail {

// Activations of n tokens rounded to int8 per block of 32 (llama.cpp's Q8_0 rounding: scale
// d = max|x| / 127, q = nearest-even(x / d)). Each block's 32 values are stored in the order the
// 4-bit weights unpack to: the 16 even input indices, then the 16 odd ones (a weight word's
// low nibbles come first). offset is 7 * sum(q) * d: sum over a block of (q_w - 7) * x is
// d * sum(q_w * q) - offset, so the kernels sum q_w * q exactly in int32 and subtract the offsets,
// weighted by the row's scales, once per row. start is -7 * sum(q), the same offset in units of d,
// exact in int32: kernels that scale each block's sum on its own start the sum there instead.
struct Q8Activations {
  int64_t blocks = 0;              // in / 32 per token
  const int8_t* q = nullptr;       // [n][blocks][32]
  const float* d = nullptr;        // [n][blocks]
  const float* offset = nullptr;   // [n][blocks]
  const int32_t* start = nullptr;  // [n][blocks]
};

// The products of a path that takes many tokens' activations as bfloat16 instead (AMX-BF16 tiles
// accumulate in float32 over a whole row, so no per-block scaling is left for vector code).
struct WideProducts {
  int64_t min_tokens;  // fewer tokens go through the table's linear_q4
  // Rows [t_begin, t_end) of x ([n, in], in a multiple of 32) rounded to bfloat16 (nearest even) into out.
  void (*round)(const float* x, int64_t in, int64_t t_begin, int64_t t_end, uint16_t* out);
  // y[t][o] for o in [o_begin, o_end) (o_begin a multiple of 16), every t < n; x holds n rounded up
  // to a multiple of 32 rows ([rows][in] bfloat16), the rows past n zero.
  void (*linear_q4)(const Weight& w, const uint16_t* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                    int64_t o_end);
  // Half and bfloat16 weights' products of float_min_tokens or more tokens, as split bfloat16 (each
  // value the sum of two bfloat16 halves, hi and lo; the products hi x hi + lo x hi + hi x lo).
  int64_t float_min_tokens;
  // Rows [t_begin, t_end) of x ([n, in]) split into hi and lo ([n][in_pad], in_pad = in rounded up
  // to a multiple of 32, the values past in zero).
  void (*split)(const float* x, int64_t in, int64_t in_pad, int64_t t_begin, int64_t t_end, uint16_t* hi,
                uint16_t* lo);
  // y[t][o] for o in [o_begin, o_end) (o_begin a multiple of 16), every t < n; x_hi and x_lo hold n
  // rounded up to a multiple of 32 rows of in_pad values, the rows past n zero.
  void (*linear_float)(const Weight& w, const uint16_t* x_hi, const uint16_t* x_lo, int64_t in_pad, int64_t n,
                       float* y, const float* bias, int64_t o_begin, int64_t o_end);
};

// MatMulRows (kernels.h) of one path.
using MatMulRowsFn = void (*)(const float* a, int64_t lda, int64_t m, int64_t k, const float* const* b_rows,
                              int64_t n, float* c, int64_t ldc);

struct KernelTable {
  // Rounds row t of x ([n, in], in a multiple of 32) for t in [t_begin, t_end).
  void (*quantize)(const float* x, int64_t in, int64_t t_begin, int64_t t_end, int8_t* q,
                   float* d, float* offset, int32_t* start);
  // y[t][o] for o in [o_begin, o_end), every t < n, 4-bit weights against quantized activations.
  void (*linear_q4)(const Weight& w, const Q8Activations& x, int64_t n, float* y,
                    const float* bias, int64_t o_begin, int64_t o_end);
  // The same for float32 / float16 / bfloat16 weights against float32 x.
  void (*linear_float)(const Weight& w, const float* x, int64_t n, float* y, const float* bias,
                       int64_t o_begin, int64_t o_end);
  float (*dot)(const float* a, const float* b, int64_t n);
  void (*add_scaled)(float alpha, const float* x, float* y, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  float (*exp_shifted_sum)(float* x, int64_t n, float shift);
  MatMulRowsFn matmul_rows;
  void (*transpose_rows)(const float* const* rows, int64_t n, int64_t d, float* out, int64_t ldo);
  const WideProducts* wide;  // null on the paths without
};

// Float weights (float32, float16, bfloat16) against n tokens, rows [o_begin, o_end): per panel of
// panel_rows output rows, the rows widened to float32 and transposed ([in][panel_rows]) once, then
// every token meets the panel through `matmul` (a path's MatMulRows: each output one fused
// multiply-add chain over the inputs in order), then its bias. In kernels_avx2.cc (AVX2 builds).
void LinearFloatPanels(const Weight& w, const float* x, int64_t n, float* y, const float* bias, int64_t o_begin,
                       int64_t o_end, int64_t panel_rows, MatMulRowsFn matmul);

// The 16-row panels of 4-bit weights (Weight::packed on the AVX-512 and AMX paths): for each group of 16
// rows (the last one padded with zero rows), first 256 bytes per block of 32 inputs: word k of
// rows 0 .. 15 at bytes 64k + 4r (so one 64-byte load holds word k of all 16 rows, VNNI's 4-byte
// groups); then per block the 16 rows' scales as the weight stores them (half or float32; 0 for
// the padding rows), padded to 64 bytes. Two sequential streams per group, each aligned to its loads.
constexpr int64_t kPackRows = 16;
constexpr int64_t kPackWeightBytes = 256;
constexpr int64_t PackScaleBytes(WeightFormat f) { return kPackRows * (f == WeightFormat::kQ4F16 ? 2 : 4); }
// The scales are padded to 64 bytes, so every group (and its weights) starts on a cache line.
constexpr int64_t PackGroupBytes(WeightFormat f, int64_t blocks) {
  return blocks * kPackWeightBytes + (blocks * PackScaleBytes(f) + 63) / 64 * 64;
}
std::shared_ptr<const void> PackQ4Panels(const Weight& w);
// Group g of those panels (rows 16g .. 16g + 15, zero past w.out) written at `group`
// (PackGroupBytes bytes).
void PackQ4Group(const Weight& w, int64_t g, uint8_t* group);

// Per-thread scratch memory of at least `bytes` (64-byte aligned, not initialised), valid until the thread's
// next call.
uint8_t* ThreadScratch(size_t bytes);

const KernelTable& PortableKernels();
// Null when the build has no such path (non-x86 compilers) or the CPU cannot run it.
const KernelTable* Avx2Kernels();
const KernelTable* AvxVnniKernels();
const KernelTable* Avx512Kernels();
const KernelTable* AmxKernels();

}  // namespace mlc::cpu::detail
