// The arithmetic of the image resize (image_resize.cc), in resize_kernels.cc: Pillow's filter
// kernels, the fixed-point weights of an axis and the passes over rows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "mlc_manifest/image.h"

namespace mlc::resize {

struct Kernel {
  double (*fn)(double);
  double support;
};

// Fixed-point weights of a run of output pixels along one axis.
struct AxisWeights {
  int ksize = 0;
  std::vector<int32_t> first;    // first source index per output pixel
  std::vector<int32_t> count;    // number of taps per output pixel
  std::vector<int32_t> weights;  // ksize per output pixel
};

// A filter's kernel and its support (Pillow's).
Kernel KernelFor(ResizeFilter filter);

// Weights for output pixels [begin, begin + n) of an axis of out_size pixels drawn from the
// source extent [in0, in1) of an axis of in_size pixels.
AxisWeights ComputeWeights(int64_t in_size, double in0, double in1, int64_t out_size,
                           int64_t begin, int64_t n, const Kernel& kernel);

// Horizontal pass over one source row into dst (cols x 3).
void HorizontalRow(const uint8_t* in, const AxisWeights& w, uint8_t* out);

// Horizontal pass over one RGBX source row (4 bytes a pixel; `in` is source column `c0`): the same
// sums as HorizontalRow, in the same integer arithmetic, so the result is identical.
void HorizontalRowRgbxScalar(const uint8_t* in, int64_t c0, const AxisWeights& w, uint8_t* out);

// Columns [x0, n) of one output row of the vertical pass:
// out[x] = Clip8(half + sum over taps of rows[t][x] * k[t]), rows[t] == nullptr counting as black.
void VerticalRowScalar(const uint8_t* const* rows, const int32_t* k, int32_t taps, int64_t x0,
                       int64_t n, uint8_t* out);

#if defined(__x86_64__) && defined(__GNUC__)
// Whether the CPU runs the AVX2 passes below.
bool HasAvx2();

// The horizontal weights laid out for vpmaddwd. Each 22-bit weight k is split exactly into
// k = hi * 2^11 + lo with lo in [0, 2^11), both 16-bit; the sum of pixel * k is then
// (sum of pixel * hi) * 2^11 + sum of pixel * lo, the same integer Pillow computes. Per output
// pixel, groups of four taps; per group one 256-bit vector of hi and one of lo, each holding
// the pairs (k[4g], k[4g+1]) four times (low half) and (k[4g+2], k[4g+3]) four times (high
// half), to meet four RGBX pixels shuffled to R0 R1 G0 G1 B0 B1 X0 X1 | R2 R3 G2 G3 ...
struct MaddWeights {
  int groups = 0;              // groups of four taps per output pixel (the widest pixel's)
  std::vector<int16_t> table;  // output pixels x groups x (16 hi, 16 lo)
  std::vector<int32_t> used;   // groups each output pixel uses: ceil(count / 4)
};

// nullopt when a weight does not split into 16-bit halves (never for normalized weights).
std::optional<MaddWeights> MakeMaddWeights(const AxisWeights& w);

// AVX2 horizontal pass over one RGBX row (`in` is source column c0; columns up to `c1` may be
// read): four taps per step, two vpmaddwd (hi and lo halves of the weights). Integer sums are
// exact, so the result is HorizontalRow's. A pixel whose last group would read past c1 is
// copied into `padded` (m.groups * 16 bytes) with zeros after it first.
__attribute__((target("avx2"))) void HorizontalRowRgbxAvx2(const uint8_t* in, int64_t c0,
                                                           int64_t c1, const AxisWeights& w,
                                                           const MaddWeights& m, uint8_t* padded,
                                                           uint8_t* out);

// VerticalRowScalar for all n columns, eight at a time with the sum held in a register across
// the taps.
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* const* rows, const int32_t* k,
                                                     int32_t taps, int64_t n, uint8_t* out);
#endif

}  // namespace mlc::resize
