// The float64 ViT encoder layer of the tower tests (vit64.h).
#include "support/vit64.h"

#include <algorithm>
#include <cmath>

namespace mlc::test {

Vec BiasedLinear64(const Params64& p, const std::string& base, const Vec& x, int64_t out, int64_t in,
                   Q4Rounding rounding) {
  Vec y = RoundedMatVec(p.Matrix(base, out, in), x, out, in, rounding);
  if (p.Has(base + ".bias")) {
    Vec b = p.Floats(base + ".bias");
    for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
  }
  return y;
}

std::vector<Vec> PatchEmbeddings64(const Vec& conv, const Vec& bias, const std::vector<uint8_t>& px, int64_t size,
                                   int64_t patch, int64_t hidden, const double mean[3], const double std_dev[3]) {
  auto pixel = [&](int64_t ch, int64_t y, int64_t x) {
    return (px[static_cast<size_t>((y * size + x) * 3 + ch)] / 255.0 - mean[ch]) / std_dev[ch];
  };
  const int64_t g = size / patch;
  std::vector<Vec> rows;
  for (int64_t gy = 0; gy < g; ++gy) {
    for (int64_t gx = 0; gx < g; ++gx) {
      Vec row(static_cast<size_t>(hidden));
      for (int64_t o = 0; o < hidden; ++o) {
        double acc = bias.empty() ? 0.0 : bias[static_cast<size_t>(o)];
        for (int64_t ch = 0; ch < 3; ++ch) {
          for (int64_t ky = 0; ky < patch; ++ky) {
            for (int64_t kx = 0; kx < patch; ++kx) {
              acc += conv[static_cast<size_t>(((o * 3 + ch) * patch + ky) * patch + kx)] *
                     pixel(ch, gy * patch + ky, gx * patch + kx);
            }
          }
        }
        row[static_cast<size_t>(o)] = acc;
      }
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

void VitLayer64::Run(const Params64& p, const std::string& prefix, std::vector<Vec>& x) const {
  const int64_t d = hidden / heads;
  const Q4Rounding rounding = RoundingFor(q8, static_cast<int64_t>(x.size()));
  auto linear = [&](const std::string& name, const Vec& in, int64_t out, int64_t width) {
    return BiasedLinear64(p, prefix + name, in, out, width, rounding);
  };
  std::vector<Vec> q, k, v;
  for (const Vec& row : x) {
    Vec h = LayerNorm(row, p.Floats(prefix + "layer_norm1.weight"), p.Floats(prefix + "layer_norm1.bias"), eps);
    q.push_back(linear("self_attn.q_proj", h, hidden, hidden));
    k.push_back(linear("self_attn.k_proj", h, hidden, hidden));
    v.push_back(linear("self_attn.v_proj", h, hidden, hidden));
  }
  std::vector<Vec> next = x;
  for (size_t t = 0; t < x.size(); ++t) {
    Vec attn(static_cast<size_t>(hidden), 0.0);
    for (int64_t hd = 0; hd < heads; ++hd) {
      std::vector<double> score(x.size());
      double top = -1e300, sum = 0;
      for (size_t j = 0; j < x.size(); ++j) {
        double dot = 0;
        for (int64_t e = 0; e < d; ++e) dot += q[t][static_cast<size_t>(hd * d + e)] * k[j][static_cast<size_t>(hd * d + e)];
        score[j] = dot / std::sqrt(static_cast<double>(d));
        top = std::max(top, score[j]);
      }
      for (double& z : score) sum += (z = std::exp(z - top));
      for (size_t j = 0; j < x.size(); ++j) {
        for (int64_t e = 0; e < d; ++e) attn[static_cast<size_t>(hd * d + e)] += score[j] / sum * v[j][static_cast<size_t>(hd * d + e)];
      }
    }
    Vec o = linear("self_attn.out_proj", attn, hidden, hidden);
    for (int64_t i = 0; i < hidden; ++i) next[t][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
    Vec h = LayerNorm(next[t], p.Floats(prefix + "layer_norm2.weight"), p.Floats(prefix + "layer_norm2.bias"), eps);
    Vec m = linear("mlp.fc1", h, intermediate, hidden);
    for (double& z : m) z = activation(z);
    Vec m2 = linear("mlp.fc2", m, hidden, intermediate);
    for (int64_t i = 0; i < hidden; ++i) next[t][static_cast<size_t>(i)] += m2[static_cast<size_t>(i)];
  }
  x = std::move(next);
}

}  // namespace mlc::test
