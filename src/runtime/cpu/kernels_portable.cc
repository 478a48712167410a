// The portable kernel path: plain C++ loops any CPU runs, with the same numerics as the vector
// paths (int8 activation blocks for the 4-bit formats, float32 accumulation), so they can be
// checked against each other. Also the fallback when the CPU lacks AVX2/FMA/F16C.
#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/cpu/kernels_internal.h"

namespace mlc::cpu::detail {
namespace {

void Quantize(const float* x, int64_t in, int64_t t_begin, int64_t t_end, int8_t* q, float* d,
              float* offset, int32_t* start) {
  const int64_t blocks = in / 32;
  for (int64_t t = t_begin; t < t_end; ++t) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + t * in + b * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float scale = amax / 127.0f;
      const float inverse = scale != 0.0f ? 1.0f / scale : 0.0f;
      int8_t* qb = q + (t * blocks + b) * 32;
      int32_t sum = 0;
      for (int i = 0; i < 32; ++i) {
        long v = std::clamp(std::lrint(xb[i] * inverse), -128L, 127L);
        qb[(i % 2) * 16 + i / 2] = static_cast<int8_t>(v);
        sum += static_cast<int32_t>(v);
      }
      d[t * blocks + b] = scale;
      offset[t * blocks + b] = static_cast<float>(7 * sum) * scale;
      start[t * blocks + b] = -7 * sum;
    }
  }
}

float Q4Scale(const Weight& w, int64_t index) {
  return w.format == WeightFormat::kQ4F16 ? HalfToFloat(static_cast<const uint16_t*>(w.scale)[index])
                                          : static_cast<const float*>(w.scale)[index];
}

void LinearQ4(const Weight& w, const Q8Activations& x, int64_t n, float* y, const float* bias,
              int64_t o_begin, int64_t o_end) {
  const int64_t blocks = x.blocks;
  const auto* words = static_cast<const uint8_t*>(w.data);
  std::vector<float> scale(static_cast<size_t>(blocks));
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t b = 0; b < blocks; ++b) scale[static_cast<size_t>(b)] = Q4Scale(w, o * blocks + b);
    const uint8_t* row = words + o * blocks * 16;
    for (int64_t t = 0; t < n; ++t) {
      float acc = 0.0f, offset = 0.0f;
      for (int64_t b = 0; b < blocks; ++b) {
        const uint8_t* wb = row + b * 16;  // byte k: input 2k (low nibble), 2k + 1 (high)
        const int8_t* qb = x.q + (t * blocks + b) * 32;
        int32_t sum = 0;
        for (int k = 0; k < 16; ++k) {
          sum += (wb[k] & 0xF) * qb[k] + (wb[k] >> 4) * qb[16 + k];
        }
        const float ws = scale[static_cast<size_t>(b)];
        acc += static_cast<float>(sum) * (ws * x.d[t * blocks + b]);
        offset += ws * x.offset[t * blocks + b];
      }
      y[t * w.out + o] = acc - offset + (bias ? bias[o] : 0.0f);
    }
  }
}

void LinearFloat(const Weight& w, const float* x, int64_t n, float* y, const float* bias,
                 int64_t o_begin, int64_t o_end) {
  std::vector<float> row(static_cast<size_t>(w.in));
  for (int64_t o = o_begin; o < o_end; ++o) {
    DequantizeRow(w, o, row.data());
    for (int64_t t = 0; t < n; ++t) {
      const float* xt = x + t * w.in;
      float acc = 0.0f;
      for (int64_t i = 0; i < w.in; ++i) acc += xt[i] * row[static_cast<size_t>(i)];
      y[t * w.out + o] = acc + (bias ? bias[o] : 0.0f);
    }
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void AddScaled(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

float ExpShiftedSum(float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

void MatMulRows(const float* a, int64_t lda, int64_t m, int64_t k, const float* const* b_rows, int64_t n, float* c,
                int64_t ldc) {
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(a[r * lda + i], b_rows[i][j], acc);
      c[r * ldc + j] = acc;
    }
  }
}

void TransposeRows(const float* const* rows, int64_t n, int64_t d, float* out, int64_t ldo) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < d; ++i) out[i * ldo + j] = rows[j][i];
  }
}

}  // namespace

const KernelTable& PortableKernels() {
  static const KernelTable table{Quantize, LinearQ4,      LinearFloat, Dot,          AddScaled,
                                 SiluMul,  ExpShiftedSum, MatMulRows,  TransposeRows, nullptr};
  return table;
}

}  // namespace mlc::cpu::detail
