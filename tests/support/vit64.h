// Float64 parts of the vision towers' independent implementations (the CLIP and SigLIP tests),
// written from Hugging Face's CLIPEncoderLayer / SiglipEncoderLayer: the pre-LayerNorm encoder
// layer over the rows of one image, the patch convolution and a biased linear layer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "support/reference64.h"

namespace mlc::test {

// W x + bias for "<base>" ([out, in], float or 4-bit; no bias when the set has none), its operands
// rounded as the kernels round them (RoundingFor).
Vec BiasedLinear64(const Params64& p, const std::string& base, const Vec& x, int64_t out, int64_t in,
                   Q4Rounding rounding);

// The patch convolution (kernel = stride = patch, `bias` empty: none) over RGB pixels [size,
// size, 3] normalized as (p / 255 - mean[c]) / std[c]: one row of `hidden` per patch, row-major
// over the grid.
std::vector<Vec> PatchEmbeddings64(const Vec& conv, const Vec& bias, const std::vector<uint8_t>& px, int64_t size,
                                   int64_t patch, int64_t hidden, const double mean[3], const double std_dev[3]);

struct VitLayer64 {
  int64_t hidden = 0, intermediate = 0, heads = 0;
  double eps = 1e-5;
  double (*activation)(double) = nullptr;
  bool q8 = false;  // 4-bit matrices (rounded per RoundingFor over the layer's rows)

  // x (rows of `hidden`) through the layer under `prefix` ("...encoder.layers.3."): LayerNorm,
  // q/k/v, softmax(q k / sqrt(head_dim)) v per head over every row, out_proj, residual;
  // LayerNorm, fc1, activation, fc2, residual.
  void Run(const Params64& p, const std::string& prefix, std::vector<Vec>& x) const;
};

}  // namespace mlc::test
