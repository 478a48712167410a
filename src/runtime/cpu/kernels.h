// The CPU program's numeric kernels: linear layers over the weight formats MLC's converter writes
// (float32, float16, bfloat16 and the 4-bit group quantization with its dequantisation fused in),
// embedding-row lookup, and a thread pool that spreads rows over every core. The model families
// (src/runtime/cpu/) call only these for their matrix work; the implementation chooses AVX2/FMA
// at run time when the CPU has it and a portable path otherwise.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

namespace mlc::cpu {

enum class WeightFormat {
  kF32,    // data: float [out, in]
  kF16,    // data: IEEE half [out, in]
  kBF16,   // data: bfloat16 [out, in]
  kQ4F16,  // data: uint32 [out, groups * 4], scale: half [out, groups] (groups = ceil(in / 32))
  kQ4F32,  // data: uint32 [out, groups * 4], scale: float [out, groups]
};

// A linear weight as the converter stores it: row o holds the `in` weights of output feature o.
// 4-bit formats (MLC group quantization, group size 32 along the input axis): input index i of
// row o is nibble (i % 8) of word data[o][i / 8] (bits 4k..4k+3 for nibble k), an unsigned value
// q in [0, 15]; the weight is (q - 7) * scale[o][i / 32]. When `in` is not a multiple of 32 the
// last group is partial: each row still holds whole groups (the converter pads with zeros), and
// the values past `in` are never read.
struct Weight {
  // Groups of 32 in a 4-bit row of `in` inputs (the last one partial when in % 32 != 0).
  static constexpr int64_t Q4Groups(int64_t in) { return (in + 31) / 32; }
  WeightFormat format = WeightFormat::kF32;
  int64_t out = 0;
  int64_t in = 0;
  const void* data = nullptr;
  const void* scale = nullptr;  // 4-bit formats only
  // The same 4-bit weights laid out for the chosen kernel path's products (PackForProducts), or
  // null: the kernels then read `data` and `scale` as above.
  std::shared_ptr<const void> packed;
};

// Attaches to a 4-bit weight the layout the chosen kernel path multiplies fastest (the AVX-512
// path's 16-row panels: each block of 16 rows' nibbles and scales in one 320-byte run), made
// once at binding; changes nothing for other formats and paths. Costs the weight's size again in
// memory (the original stays, e.g. for embedding lookups); every path gives the same results
// with or without it, and a path that does not use it ignores it.
void PackForProducts(Weight& w);

// y[t][o] = sum_i x[t][i] * W[o][i] (+ bias[o] when bias is not null), for t < n rows of x
// (row-major [n, in] in, [n, out] out). float32 accumulation; runs on every core.
// For the 4-bit formats x is first rounded to int8 per block of 32 (scale max|x| / 127, as
// llama.cpp does for Q4_0 x Q8_0), so each block's products are summed exactly in int32 and the
// blocks are accumulated in float32 (many tokens on the AMX path: both rounded to bfloat16 instead,
// Bf16MinTokens); the other formats multiply float32 x directly (half and bfloat16 weights and many
// tokens on the AMX path: as split bfloat16, SplitBf16MinTokens). Any `out`; any `in` for the float formats. Not to be called with y aliasing x.
void Linear(const Weight& w, const float* x, int64_t n, float* y, const float* bias = nullptr);

// sum_i a[i] * b[i] in float32 (attention scores), vectorised where the CPU allows.
float Dot(const float* a, const float* b, int64_t n);

// y[i] += alpha * x[i] for i < n (attention's weighted sum of values).
void AddScaled(float alpha, const float* x, float* y, int64_t n);

// out[i] = SiLU(gate[i]) * up[i] = gate[i] / (1 + exp(-gate[i])) * up[i] for i < n (the gated MLP's
// activation), vectorised where the CPU allows (exp within a few float32 ulps).
void SiluMul(const float* gate, const float* up, float* out, int64_t n);

// x[i] = exp(x[i] - shift) for i < n, returning their sum (a softmax's numerators and
// denominator), vectorised where the CPU allows (within a few float32 ulps of exp).
float ExpShiftedSum(float* x, int64_t n, float shift);

// c[r * ldc + j] = sum over i < k of a[r * lda + i] * b_rows[i][j], for r < m and j < n: float32
// matrices with the right-hand one given by its rows (the KV cache's key columns of a page, or
// the value rows where the KV cache holds them). Each c value is one chain of fused multiply-adds over i in
// order, on every vector path alike, so it does not depend on m, n or the other rows. On the
// calling thread.
void MatMulRows(const float* a, int64_t lda, int64_t m, int64_t k, const float* const* b_rows, int64_t n, float* c,
                int64_t ldc);

// out[i * ldo + j] = rows[j][i] for j < n, i < d: n rows of d floats as the columns of a
// [d, n] matrix (attention's keys, for MatMulRows). On the calling thread.
void TransposeRows(const float* const* rows, int64_t n, int64_t d, float* out, int64_t ldo);

// Row `row` of W as `in` floats (an embedding lookup of a quantized or half table).
void DequantizeRow(const Weight& w, int64_t row, float* out);

// Calls fn(begin, end) on disjoint ranges covering [0, n), each at least `grain` long except the
// last, on the pool's threads (the calling thread takes part). Returns when all are done.
void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Threads the pool uses (the cores this process may run on).
int ThreadCount();

// The kernels in use: "amx" (the AVX-512 path with AMX-BF16 tile products for many tokens:
// Bf16MinTokens, SplitBf16MinTokens), "avx512" (the AVX2 path with AVX-512 VNNI register-tiled 4-bit products),
// "avxvnni" (the AVX2 path with AVX-VNNI 4-bit products), "avx2" (AVX2, FMA and F16C) or "portable".
const char* KernelIsa();

// The fewest tokens whose 4-bit products the path in use takes as bfloat16 (AMX-BF16 tiles: each
// weight and activation rounded to bfloat16, relative error at most 2^-9 each, then summed in
// float32) instead of int8 blocks; 0 when it never does.
int64_t Bf16MinTokens();

// The fewest tokens whose half and bfloat16 weights' products the path in use takes as split
// bfloat16 (AMX-BF16 tiles): each weight and activation v the sum of hi = v rounded to bfloat16 and
// lo = v - hi rounded to bfloat16 (exact for the weights, within 2^-17 |v| for the activations), the
// products hi x hi + lo x hi + hi x lo summed in float32 (lo x lo, at most 2^-16 |w x|, left out):
// within 2^-15 of sum |w x| in all. 0 when it never does. float32 weights never are.
int64_t SplitBf16MinTokens();

// Chooses the kernels for tests and benchmarks that compare paths: "portable", "avx2", "avxvnni",
// "avx512", "amx" (each only when the CPU has its features; "amx" also needs Linux's permission
// for the tile state) or "auto" (the best the CPU has; the default).
// Returns false, changing nothing, for an unknown name or a path this CPU cannot run.
bool SetKernelIsa(std::string_view isa);

// IEEE half and bfloat16 <-> float32.
float HalfToFloat(uint16_t h);
uint16_t FloatToHalf(float f);
float BFloat16ToFloat(uint16_t b);

}  // namespace mlc::cpu
