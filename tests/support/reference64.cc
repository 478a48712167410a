// Float64 building blocks of the tests' references (reference64.h).
#include "support/reference64.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu/kernels.h"

namespace mlc::test {

double HalfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, mant = h & 1023;
  double v = exp == 0 ? std::ldexp(mant, -24) : std::ldexp(1024 + mant, exp - 25);
  return sign ? -v : v;
}

Params64::Params64(const ParameterSet& set) {
  for (size_t i = 0; i < set.names.size(); ++i) by_name_[set.names[i]] = &set.tensors[i];
}

Vec Params64::Floats(const std::string& name) const {
  const NDArray& t = *by_name_.at(name);
  Vec out(static_cast<size_t>(t.Elements()));
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = SameDtype(t.dtype(), DlFloat32()) ? t.data<float>()[i] : HalfToDouble(t.data<uint16_t>()[i]);
  }
  return out;
}

Vec Params64::Matrix(const std::string& base, int64_t rows, int64_t cols) const {
  if (Has(base + ".weight")) return Floats(base + ".weight");
  const NDArray& q = *by_name_.at(base + ".q_weight");
  Vec scale = Floats(base + ".q_scale");
  // Row strides from the stored shapes: whole groups, a partial last one padded.
  const int64_t words = q.shape()[1], groups = by_name_.at(base + ".q_scale")->shape()[1];
  Vec out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      uint32_t word = q.data<uint32_t>()[r * words + c / 8];
      double v = static_cast<double>((word >> (4 * (c % 8))) & 15u) - 7.0;
      out[static_cast<size_t>(r * cols + c)] = v * scale[static_cast<size_t>(r * groups + c / 32)];
    }
  }
  return out;
}

Vec MatVec(const Vec& w, const Vec& x, int64_t rows, int64_t cols) {
  Vec y(static_cast<size_t>(rows), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) y[static_cast<size_t>(r)] += w[static_cast<size_t>(r * cols + c)] * x[static_cast<size_t>(c)];
  }
  return y;
}

Vec RmsNorm(const Vec& x, const Vec& g, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  double s = 1 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * s * g[i];
  return y;
}

Vec LayerNorm(const Vec& x, const Vec& g, const Vec& b, double eps) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + eps) * g[i] + b[i];
  return y;
}

Vec RoundToQ8Blocks(const Vec& x) {
  Vec out(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    const size_t len = std::min<size_t>(32, x.size() - b);  // a partial last block: its own values
    float amax = 0.0f;
    for (size_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(static_cast<float>(x[b + i])));
    const float d = amax / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    for (size_t i = 0; i < len; ++i) {
      long q = std::clamp(std::lrint(static_cast<float>(x[b + i]) * inverse), -128L, 127L);
      out[b + i] = static_cast<double>(q) * static_cast<double>(d);
    }
  }
  return out;
}

Q4Rounding RoundingFor(bool quantized, int64_t product_rows) {
  if (!quantized) return Q4Rounding::kExact;
  const int64_t bf16 = cpu::Bf16MinTokens();
  return bf16 > 0 && product_rows >= bf16 ? Q4Rounding::kBf16 : Q4Rounding::kQ8;
}

namespace {

// v as float, then to the nearest bfloat16 (ties to even), as the kernels round.
double ToBf16(double v) {
  const auto f = static_cast<float>(v);
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  bits = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  float r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}

Vec ToBf16(const Vec& x) {
  Vec out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = ToBf16(x[i]);
  return out;
}

}  // namespace

Vec RoundedMatVec(const Vec& w, const Vec& x, int64_t rows, int64_t cols, Q4Rounding rounding) {
  switch (rounding) {
    case Q4Rounding::kExact:
      return MatVec(w, x, rows, cols);
    case Q4Rounding::kQ8:
      return MatVec(w, RoundToQ8Blocks(x), rows, cols);
    case Q4Rounding::kBf16:
      return MatVec(ToBf16(w), ToBf16(x), rows, cols);
  }
  return {};
}

double RelError(const std::vector<float>& a, const Vec& b) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    err = std::max(err, std::fabs(a[i] - b[i]));
    norm = std::max(norm, std::fabs(b[i]));
  }
  return err / std::max(norm, 1e-9);
}

double GeluTanh64(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

void HeadNorm64(Vec& x, int64_t d, const Vec& gain, double eps) {
  const Vec g = gain.empty() ? Vec(static_cast<size_t>(d), 1.0) : gain;
  for (size_t h = 0; h * static_cast<size_t>(d) < x.size(); ++h) {
    const auto begin = x.begin() + static_cast<std::ptrdiff_t>(h * static_cast<size_t>(d));
    Vec n = RmsNorm(Vec(begin, begin + d), g, eps);
    std::copy(n.begin(), n.end(), begin);
  }
}

void Rotate64(Vec& x, int64_t d, double theta, int64_t pairs, int64_t pos, double scale) {
  const int64_t half = d / 2;
  for (size_t h = 0; h * static_cast<size_t>(d) < x.size(); ++h) {
    for (int64_t j = 0; j < pairs; ++j) {
      const double a = static_cast<double>(pos) / scale *
                       std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(d));
      double& x0 = x[h * static_cast<size_t>(d) + static_cast<size_t>(j)];
      double& x1 = x[h * static_cast<size_t>(d) + static_cast<size_t>(j + half)];
      const double a0 = x0, a1 = x1;
      x0 = a0 * std::cos(a) - a1 * std::sin(a);
      x1 = a1 * std::cos(a) + a0 * std::sin(a);
    }
  }
}

void GemmaAttnOutAndMlp64(Vec& x, const Vec& attn, const Params64& p, const std::string& pre, int64_t inter,
                          double eps, bool q8) {
  const int64_t h = static_cast<int64_t>(x.size()), qs = static_cast<int64_t>(attn.size());
  auto lin = [&](const std::string& base, const Vec& in, int64_t rows, int64_t cols) {
    return MatVec(p.Matrix(base, rows, cols), q8 ? RoundToQ8Blocks(in) : in, rows, cols);
  };
  Vec o = RmsNorm(lin(pre + "self_attn.o_proj", attn, h, qs), p.Floats(pre + "post_attention_layernorm.weight"), eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  Vec gu = lin(pre + "mlp.gate_up_proj", RmsNorm(x, p.Floats(pre + "pre_feedforward_layernorm.weight"), eps), 2 * inter, h);
  Vec act(static_cast<size_t>(inter));
  for (size_t i = 0; i < act.size(); ++i) act[i] = GeluTanh64(gu[i]) * gu[i + act.size()];
  Vec m = RmsNorm(lin(pre + "mlp.down_proj", act, h, inter), p.Floats(pre + "post_feedforward_layernorm.weight"), eps);
  for (size_t i = 0; i < x.size(); ++i) x[i] += m[i];
}

}  // namespace mlc::test
