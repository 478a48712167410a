// Float64 building blocks of the tests' independent model implementations: a package's parameters
// dequantised straight from their stored records (IEEE half, float32, MLC's 4-bit groups), products,
// norms, the int8 activation rounding the 4-bit kernels apply, the error measure the tests use, and
// a float64 decoder of the CPU families (Reference64) over tokens or input rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/family.h"

namespace mlc::test {

using Vec = std::vector<double>;

double HalfToDouble(uint16_t h);

// Parameters of a package as float64, read from the stored records.
class Params64 {
 public:
  explicit Params64(const ParameterSet& set);
  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }
  Vec Floats(const std::string& name) const;
  // [rows, cols] row-major from "<base>.weight" or q_weight / q_scale ((q - 7) * scale).
  Vec Matrix(const std::string& base, int64_t rows, int64_t cols) const;

 private:
  std::map<std::string, const NDArray*> by_name_;
};

// y = W x for W [rows, cols] row-major.
Vec MatVec(const Vec& w, const Vec& x, int64_t rows, int64_t cols);
Vec RmsNorm(const Vec& x, const Vec& g, double eps);
Vec LayerNorm(const Vec& x, const Vec& g, const Vec& b, double eps);

// The kernels round activations to int8 per block of 32 before a 4-bit product, as llama.cpp
// does for Q4_0 (d = max|x| / 127 in float, q = nearest-even(x / d)); the references do the same
// so that their tolerance can stay tight. A partial last block is rounded over its own values.
Vec RoundToQ8Blocks(const Vec& x);

// How the kernels round the operands of a 4-bit product of `product_rows` rows: the activations to
// int8 blocks, or, where the path in use takes that many rows as bfloat16 (cpu::Bf16MinTokens),
// the activations and the weights to bfloat16 (nearest even); kExact for float weights.
enum class Q4Rounding { kExact, kQ8, kBf16 };
Q4Rounding RoundingFor(bool quantized, int64_t product_rows);
// W x (W [rows, cols]) with its operands rounded that way.
Vec RoundedMatVec(const Vec& w, const Vec& x, int64_t rows, int64_t cols, Q4Rounding rounding);

// Relative max error of a against the float64 reference b (max |a - b| / max |b|).
double RelError(const std::vector<float>& a, const Vec& b);

// Tanh-approximated GeLU (gelu_pytorch_tanh).
double GeluTanh64(double x);
// Each head of d values RMS-normalized, times gain (empty: 1).
void HeadNorm64(Vec& x, int64_t d, const Vec& gain, double eps);
// Hugging Face's rotate-half rotary over heads of d values at position pos / scale (linear scaling):
// pair (j, j + d / 2) turns at theta^(-2j / d) for j < pairs (fewer than d / 2: the proportional
// rotary of Gemma 4's full layers).
void Rotate64(Vec& x, int64_t d, double theta, int64_t pairs, int64_t pos, double scale = 1.0);

// Grouped-query attention of one query row q [heads * d] over the cached keys and values of the
// positions 0..pos, scores times `scale`, the positions where `seen(j)` is false left out.
template <class Seen>
Vec Attend64(const Vec& q, const std::vector<Vec>& keys, const std::vector<Vec>& values, int64_t heads,
             int64_t kv_heads, int64_t d, int64_t pos, double scale, Seen seen) {
  Vec out(static_cast<size_t>(heads * d), 0.0);
  for (int64_t hq = 0; hq < heads; ++hq) {
    const size_t kvh = static_cast<size_t>(hq / (heads / kv_heads));
    std::vector<std::pair<int64_t, double>> scores;
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j <= pos; ++j) {
      if (!seen(j)) continue;
      double s = 0;
      for (int64_t e = 0; e < d; ++e) s += q[static_cast<size_t>(hq * d + e)] * keys[static_cast<size_t>(j)][kvh * static_cast<size_t>(d) + static_cast<size_t>(e)];
      scores.emplace_back(j, s * scale);
      mx = std::max(mx, s * scale);
    }
    for (auto& [j, s] : scores) sum += std::exp(s - mx);
    for (auto& [j, s] : scores) {
      for (int64_t e = 0; e < d; ++e) {
        out[static_cast<size_t>(hq * d + e)] += std::exp(s - mx) / sum * values[static_cast<size_t>(j)][kvh * static_cast<size_t>(d) + static_cast<size_t>(e)];
      }
    }
  }
  return out;
}

// The rest of a Gemma 2/3/4 layer after attention, on the residual x: o_proj, post_attention_layernorm,
// add; pre_feedforward_layernorm, gate_up (tanh GeLU gate), down_proj of `inter` wide,
// post_feedforward_layernorm, add. `q8`: activations rounded to int8 blocks before each product.
void GemmaAttnOutAndMlp64(Vec& x, const Vec& attn, const Params64& p, const std::string& pre, int64_t inter,
                          double eps, bool q8);

// ---- a float64 decoder of the CPU families, written from Hugging Face's definitions ----

// Rotation frequencies written from the definitions (HF's llama3 and longrope rules).
inline double Frequency(const cpu::ModelConfig& c, int64_t j) {
  double inv = 1.0 / std::pow(c.rope().theta, 2.0 * static_cast<double>(j) / static_cast<double>(c.rope().rotary_dim));
  if (c.rope().scaling == cpu::RopeScaling::kLlama3) {
    double wl = 2 * M_PI / inv, orig = static_cast<double>(c.rope().original_max_position);
    if (wl < orig / c.rope().high_freq_factor) return inv;
    if (wl > orig / c.rope().low_freq_factor) return inv / c.rope().factor;
    double sm = (orig / wl - c.rope().low_freq_factor) / (c.rope().high_freq_factor - c.rope().low_freq_factor);
    return (1 - sm) * inv / c.rope().factor + sm * inv;
  }
  if (c.rope().scaling == cpu::RopeScaling::kLongRope) {
    bool long_ctx = c.context_window_size > c.rope().original_max_position;
    return inv / (long_ctx ? c.rope().long_factor : c.rope().short_factor)[static_cast<size_t>(j)];
  }
  return inv;
}

struct Reference64 {
  const cpu::ModelConfig& c;
  const Params64& p;
  int64_t cache_window = 0;  // > 0: the cache's sliding window
  int64_t sink = 0;

  // The input rows of a token sequence: embedding rows (times sqrt(hidden) for Gemma).
  std::vector<Vec> EmbedRows(const std::vector<int32_t>& tokens) const {
    const bool gemma = c.model_type == "gemma2" || c.model_type == "gemma";
    const int64_t H = c.hidden_size;
    Vec emb = p.Matrix(c.family->names.embed, c.vocab_size, H);
    std::vector<Vec> rows;
    for (int32_t token : tokens) {
      Vec x(emb.begin() + token * H, emb.begin() + (token + 1) * H);
      if (gemma) for (double& v : x) v *= std::sqrt(static_cast<double>(H));
      rows.push_back(std::move(x));
    }
    return rows;
  }

  // Logits at every position of the token sequence.
  std::vector<Vec> Run(const std::vector<int32_t>& tokens) const { return RunRows(EmbedRows(tokens)); }

  // The final-normed hidden state at every position of the token sequence (the embeddings').
  std::vector<Vec> Hidden(const std::vector<int32_t>& tokens) const { return HiddenRows(EmbedRows(tokens)); }

  // Logits at every position of a sequence of input rows (embeddings, adapter rows).
  std::vector<Vec> RunRows(const std::vector<Vec>& inputs) const {
    const cpu::Names& n = c.family->names;
    const bool q8 = p.Has(n.embed + ".q_weight");  // 4-bit weights: activations rounded to int8
    const int64_t H = c.hidden_size;
    Vec head = p.Matrix(c.tie_word_embeddings ? n.embed : n.lm_head, c.vocab_size, H);
    std::vector<Vec> out;
    for (const Vec& h : HiddenRows(inputs)) {
      Vec logits = MatVec(head, q8 ? RoundToQ8Blocks(h) : h, c.vocab_size, H);
      if (c.final_logit_softcap > 0) for (double& v : logits) v = c.final_logit_softcap * std::tanh(v / c.final_logit_softcap);
      out.push_back(std::move(logits));
    }
    return out;
  }

  // The final-normed hidden state at every position of a sequence of input rows.
  std::vector<Vec> HiddenRows(const std::vector<Vec>& inputs) const {
    const cpu::Names& n = c.family->names;
    const bool gemma2 = c.model_type == "gemma2", gemma = gemma2 || c.model_type == "gemma";
    const bool q8 = p.Has(n.embed + ".q_weight");  // 4-bit weights: activations rounded to int8
    auto Lin = [q8](const Vec& w, const Vec& x, int64_t rows, int64_t cols) {
      return MatVec(w, q8 ? RoundToQ8Blocks(x) : x, rows, cols);
    };
    const int64_t H = c.hidden_size;
    double mag = 1.0;
    if (c.rope().scaling == cpu::RopeScaling::kLongRope && c.rope().max_position > c.rope().original_max_position) {
      double s = static_cast<double>(c.rope().max_position) / static_cast<double>(c.rope().original_max_position);
      mag = std::sqrt(1 + std::log(s) / std::log(static_cast<double>(c.rope().original_max_position)));
    }
    std::vector<std::vector<Vec>> keys(static_cast<size_t>(c.num_layers)), values(keys.size());
    std::vector<Vec> out;
    for (size_t t = 0; t < inputs.size(); ++t) {
      int64_t pos = static_cast<int64_t>(t);
      Vec x = inputs[t];
      for (int64_t l = 0; l < c.num_layers; ++l) {
        // The layer's sizes, window and KV source from its plan (one rotary table for all).
        const cpu::LayerPlan& plan = c.layers[static_cast<size_t>(l)];
        const int64_t D = plan.head_dim, I = plan.intermediate_size, NH = plan.num_heads, NKV = plan.num_kv_heads;
        const int64_t QS = NH * D, KVS = NKV * D, QKVS = QS + 2 * KVS;
        const size_t kv_layer = static_cast<size_t>(plan.kv == cpu::KvUse::kShared ? plan.kv_source : l);
        std::string pre = n.Layer(l);
        Vec h = RmsNorm(x, p.Floats(pre + n.attn_norm + ".weight"), c.rms_norm_eps);
        Vec qkv = Lin(p.Matrix(pre + n.qkv, QKVS, H), h, QKVS, H);
        if (p.Has(pre + n.qkv + ".bias")) {
          Vec b = p.Floats(pre + n.qkv + ".bias");
          for (size_t i = 0; i < qkv.size(); ++i) qkv[i] += b[i];
        }
        int64_t half = c.rope().rotary_dim / 2;
        for (int64_t hd = 0; hd < NH + NKV; ++hd) {
          for (int64_t j = 0; j < half; ++j) {
            double a = static_cast<double>(pos) * Frequency(c, j);
            double cs = std::cos(a) * mag, sn = std::sin(a) * mag;
            double& x0 = qkv[static_cast<size_t>(hd * D + j)];
            double& x1 = qkv[static_cast<size_t>(hd * D + j + half)];
            double a0 = x0, a1 = x1;
            x0 = a0 * cs - a1 * sn;
            x1 = a1 * cs + a0 * sn;
          }
        }
        if (plan.kv == cpu::KvUse::kOwn) {
          keys[l].push_back(Vec(qkv.begin() + QS, qkv.begin() + QS + KVS));
          values[l].push_back(Vec(qkv.begin() + QS + KVS, qkv.end()));
        }
        Vec attn(static_cast<size_t>(QS), 0.0);
        double scale = 1 / std::sqrt(c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(D));
        for (int64_t hq = 0; hq < NH; ++hq) {
          int64_t kvh = hq / (NH / NKV);
          std::vector<std::pair<int64_t, double>> scores;
          for (int64_t j = 0; j <= pos; ++j) {
            bool layer_ok = plan.sliding_window <= 0 || pos - j < plan.sliding_window;
            bool cache_ok = cache_window <= 0 || pos - j < cache_window || j < sink;
            if (!layer_ok || !cache_ok) continue;
            double s = 0;
            for (int64_t d = 0; d < D; ++d) s += qkv[static_cast<size_t>(hq * D + d)] * keys[kv_layer][j][static_cast<size_t>(kvh * D + d)];
            s *= scale;
            if (c.attn_logit_softcap > 0) s = c.attn_logit_softcap * std::tanh(s / c.attn_logit_softcap);
            scores.emplace_back(j, s);
          }
          double mx = -1e300, sum = 0;
          for (auto& [j, s] : scores) mx = std::max(mx, s);
          for (auto& [j, s] : scores) sum += std::exp(s - mx);
          for (auto& [j, s] : scores) {
            double w = std::exp(s - mx) / sum;
            for (int64_t d = 0; d < D; ++d) attn[static_cast<size_t>(hq * D + d)] += w * values[kv_layer][j][static_cast<size_t>(kvh * D + d)];
          }
        }
        Vec o = Lin(p.Matrix(pre + n.o, H, QS), attn, H, QS);
        if (gemma2) o = RmsNorm(o, p.Floats(pre + std::string("post_attention_layernorm") + ".weight"), c.rms_norm_eps);
        for (int64_t i = 0; i < H; ++i) x[static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
        Vec hn = gemma2
                     ? RmsNorm(x, p.Floats(pre + n.mlp_norm + ".weight"), c.rms_norm_eps)
                     : RmsNorm(x, p.Floats(pre + std::string("post_attention_layernorm") + ".weight"), c.rms_norm_eps);
        Vec gu = Lin(p.Matrix(pre + n.gate_up, 2 * I, H), hn, 2 * I, H);
        Vec act(static_cast<size_t>(I));
        for (int64_t i = 0; i < I; ++i) {
          double g = gu[static_cast<size_t>(i)], u = gu[static_cast<size_t>(I + i)];
          double a = gemma ? 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)))
                               : g / (1 + std::exp(-g));
          act[static_cast<size_t>(i)] = a * u;
        }
        Vec m = Lin(p.Matrix(pre + n.down, H, I), act, H, I);
        if (gemma2) m = RmsNorm(m, p.Floats(pre + n.mlp_out_norm + ".weight"), c.rms_norm_eps);
        for (int64_t i = 0; i < H; ++i) x[static_cast<size_t>(i)] += m[static_cast<size_t>(i)];
      }
      out.push_back(RmsNorm(x, p.Floats(n.final_norm + ".weight"), c.rms_norm_eps));
    }
    return out;
  }
};

}  // namespace mlc::test
