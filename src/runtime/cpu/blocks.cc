// The shared blocks of the CPU programs (blocks.h).
#include "runtime/cpu/blocks.h"

#include <algorithm>
#include <cmath>

#include "runtime/cpu/kernels.h"

namespace mlc::cpu {

void RmsNorm(const float* x, const float* gain, int64_t n, double eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  if (!gain) {
    for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale;
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * gain[i];
}

void RmsNormRows(const float* x, const std::vector<float>& gain, int64_t rows, int64_t n, double eps,
                 float* out) {
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) RmsNorm(x + r * n, gain.data(), n, eps, out + r * n);
  });
}

void LayerNormRows(const float* x, const std::vector<float>& gain, const std::vector<float>& bias,
                   int64_t rows, int64_t n, double eps, float* out) {
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* xr = x + r * n;
      float* o = out + r * n;
      double sum = 0, ss = 0;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      const double mean = sum / static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
      const float m = static_cast<float>(mean);
      for (int64_t i = 0; i < n; ++i) {
        o[i] = (xr[i] - m) * inv * gain[static_cast<size_t>(i)] + bias[static_cast<size_t>(i)];
      }
    }
  });
}

RopeTable RopeTable::Of(const Rope& rope, int64_t context_window_size) {
  RopeTable t;
  t.rotary_dim = rope.rotary_dim;
  for (int64_t j = 0; j < rope.rotary_dim / 2; ++j) {
    const double f = rope.InvFrequency(j, context_window_size);
    if (rope.scaling == RopeScaling::kProportional && f == 0.0) break;  // the pairs that stay still
    t.inv_freq.push_back(f);
  }
  t.magnitude = rope.Magnitude();
  return t;
}

void RopeTable::Apply(float* x, int64_t heads, int64_t head_dim, int64_t pos) const {
  const int64_t half = rotary_dim / 2;
  for (int64_t j = 0; j < static_cast<int64_t>(inv_freq.size()); ++j) {
    double angle = static_cast<double>(pos) * inv_freq[static_cast<size_t>(j)];
    float cs = static_cast<float>(std::cos(angle) * magnitude);
    float sn = static_cast<float>(std::sin(angle) * magnitude);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * head_dim;
      float a = v[j], b = v[j + half];
      v[j] = a * cs - b * sn;
      v[j + half] = b * cs + a * sn;
    }
  }
}

float GeluTanh(float x) {
  const float kC = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * x * (1.0f + std::tanh(kC * (x + 0.044715f * x * x * x)));
}

float GeluErf(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f)); }

float QuickGelu(float x) { return x / (1.0f + std::exp(-1.702f * x)); }

void ApplyRows(float (*f)(float), float* x, int64_t n) {
  ParallelFor(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = f(x[i]);
  });
}

void GatedActivation(Activation act, const float* gate, const float* up, float* out, int64_t n) {
  if (act == Activation::kSilu) {
    SiluMul(gate, up, out, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = GeluTanh(gate[i]) * up[i];
}

namespace {

// Query rows of DenseAttention scored at once: a [block, n] score matrix per head.
constexpr int64_t kAttentionBlock = 256;

// o (d floats) = the softmax over i of q . keys[i] * scale (soft-capped when softcap > 0) weighting
// values[i]; scores is scratch.
void AttendOne(const float* q, const std::vector<const float*>& keys, const std::vector<const float*>& values,
               int64_t d, float scale, float softcap, std::vector<float>& scores, float* o) {
  scores.resize(keys.size());
  float max_s = -INFINITY;
  for (size_t i = 0; i < keys.size(); ++i) {
    float s = Dot(q, keys[i], d) * scale;
    if (softcap > 0) s = softcap * std::tanh(s / softcap);
    scores[i] = s;
    max_s = std::max(max_s, s);
  }
  float sum = 0;
  for (float& s : scores) {
    s = std::exp(s - max_s);
    sum += s;
  }
  std::fill(o, o + d, 0.0f);
  for (size_t i = 0; i < values.size(); ++i) AddScaled(scores[i] / sum, values[i], o, d);
}

}  // namespace

void PagedAttention(const AttentionSpec& spec, PagedKvCache& kv, int64_t kv_layer, const float* q,
                    int64_t q_stride, const std::vector<RowPlace>& rows, float* out) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t d = spec.head_dim, heads = spec.num_heads, group = spec.num_heads / spec.num_kv_heads;
  ParallelFor(n * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<const float*> keys, values;  // rows the task's (row, KV head) sees, found once
    int64_t found_t = -1, found_kvh = -1;
    for (int64_t task = begin; task < end; ++task) {
      int64_t t = task / heads, h = task % heads, kvh = h / group;
      const RowPlace& place = rows[static_cast<size_t>(t)];
      const int64_t seq_id = place.seq_id, pos = place.pos;
      const float* qh = q + t * q_stride + h * d;
      if (t != found_t || kvh != found_kvh) {
        int64_t lo = kv.WindowStart(pos);
        if (spec.sliding_window > 0) lo = std::max<int64_t>(lo, pos - spec.sliding_window + 1);
        keys.clear();
        values.clear();
        auto see = [&](int64_t j) {
          keys.push_back(kv.Key(seq_id, kv_layer, j) + kvh * d);
          values.push_back(kv.Value(seq_id, kv_layer, j) + kvh * d);
        };
        for (int64_t j = 0; j < std::min(kv.SinkEnd(), lo); ++j) see(j);
        for (int64_t j = lo; j <= pos; ++j) see(j);
        found_t = t;
        found_kvh = kvh;
      }
      AttendOne(qh, keys, values, d, spec.scale, spec.softcap, scores, out + t * heads * d + h * d);
    }
  });
}

void DenseAttention(const float* q, const float* k, const float* v, int64_t stride, int64_t n,
                    int64_t heads, int64_t head_dim, float scale, float* out) {
  // Per head, as matrix products on the float kernels: scores = q (k * scale)^T for a block of
  // query rows, each row's softmax numerators, then numerators v, divided by the row's sum.
  const int64_t d = head_dim;
  const int64_t block = std::min<int64_t>(n, kAttentionBlock);
  std::vector<float> keys(static_cast<size_t>(n * d)), values_t(static_cast<size_t>(d * n));
  std::vector<float> queries(static_cast<size_t>(block * d)), scores(static_cast<size_t>(block * n));
  std::vector<float> sums(static_cast<size_t>(block)), heads_out(static_cast<size_t>(block * d));
  const Weight key_rows{WeightFormat::kF32, n, d, keys.data(), nullptr};
  const Weight value_cols{WeightFormat::kF32, d, n, values_t.data(), nullptr};
  for (int64_t h = 0; h < heads; ++h) {
    ParallelFor(n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        for (int64_t i = 0; i < d; ++i) {
          keys[static_cast<size_t>(j * d + i)] = k[j * stride + h * d + i] * scale;
          values_t[static_cast<size_t>(i * n + j)] = v[j * stride + h * d + i];
        }
      }
    });
    for (int64_t r0 = 0; r0 < n; r0 += block) {
      const int64_t rows = std::min(block, n - r0);
      for (int64_t t = 0; t < rows; ++t) {
        std::copy_n(q + (r0 + t) * stride + h * d, d, queries.data() + t * d);
      }
      Linear(key_rows, queries.data(), rows, scores.data());
      ParallelFor(rows, 4, [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          float* row = scores.data() + t * n;
          const float max_s = *std::max_element(row, row + n);
          sums[static_cast<size_t>(t)] = ExpShiftedSum(row, n, max_s);
        }
      });
      Linear(value_cols, scores.data(), rows, heads_out.data());
      for (int64_t t = 0; t < rows; ++t) {
        const float inv = 1.0f / sums[static_cast<size_t>(t)];
        float* o = out + (r0 + t) * heads * d + h * d;
        for (int64_t i = 0; i < d; ++i) o[i] = heads_out[static_cast<size_t>(t * d + i)] * inv;
      }
    }
  }
}

std::vector<float> PatchRows(const float* chw, int64_t channels, int64_t height, int64_t width,
                             int64_t patch) {
  const int64_t gx = width / patch, gy = height / patch, row = channels * patch * patch;
  std::vector<float> out(static_cast<size_t>(gx * gy * row));
  for (int64_t py = 0; py < gy; ++py) {
    for (int64_t px = 0; px < gx; ++px) {
      float* o = out.data() + (py * gx + px) * row;
      for (int64_t ch = 0; ch < channels; ++ch) {
        for (int64_t y = 0; y < patch; ++y) {
          const float* src = chw + (ch * height + py * patch + y) * width + px * patch;
          std::copy(src, src + patch, o + (ch * patch + y) * patch);
        }
      }
    }
  }
  return out;
}

}  // namespace mlc::cpu
