// The float64 Gemma 3 text decoder of the Gemma 3 tests (see gemma3_64.h).
#include "support/gemma3_64.h"

#include <cmath>
#include <string>

namespace mlc::test {

namespace {
const std::string kRoot = "language_model.model.";
}  // namespace

std::vector<Vec> Gemma3Reference64::TokenRows(const std::vector<int32_t>& ids) const {
  const int64_t H = text["hidden_size"], V = text["vocab_size"];
  Vec emb = p.Matrix(kRoot + "embed_tokens", V, H);
  std::vector<Vec> rows;
  for (int32_t id : ids) {
    Vec x(emb.begin() + id * H, emb.begin() + (id + 1) * H);
    for (double& v : x) v *= std::sqrt(static_cast<double>(H));
    rows.push_back(std::move(x));
  }
  return rows;
}

std::vector<Vec> Gemma3Reference64::RunRows(const std::vector<Vec>& rows) const {
  const int64_t H = text["hidden_size"], L = text["num_hidden_layers"], NH = text["num_attention_heads"];
  const int64_t NKV = text["num_key_value_heads"], D = text["head_dim"], I = text["intermediate_size"];
  const int64_t V = text["vocab_size"], window = text["sliding_window_size"], pattern = text["sliding_window_pattern"];
  const double eps = text["rms_norm_eps"], scalar = text["query_pre_attn_scalar"];
  const double global_theta = text["position_embedding_base"], local_theta = text["rope_local_base_freq"];
  const double global_scale = text["rope_scaling"].is_object() ? text["rope_scaling"]["factor"].get<double>() : 1.0;
  auto lin = [&](const std::string& base, const Vec& x, int64_t out, int64_t in) {
    return MatVec(p.Matrix(base, out, in), q8 ? RoundToQ8Blocks(x) : x, out, in);
  };
  std::vector<std::vector<Vec>> keys(static_cast<size_t>(L)), values(keys.size());
  std::vector<Vec> out;
  for (size_t t = 0; t < rows.size(); ++t) {
    const int64_t pos = static_cast<int64_t>(t);
    Vec x = rows[t];
    for (int64_t l = 0; l < L; ++l) {
      const bool global = (l + 1) % pattern == 0;
      const std::string pre = kRoot + "layers." + std::to_string(l) + ".";
      Vec h = RmsNorm(x, p.Floats(pre + "input_layernorm.weight"), eps);
      Vec q = lin(pre + "self_attn.q_proj", h, NH * D, H);
      Vec k = lin(pre + "self_attn.k_proj", h, NKV * D, H);
      Vec v = lin(pre + "self_attn.v_proj", h, NKV * D, H);
      HeadNorm64(q, D, p.Floats(pre + "self_attn.q_norm.weight"), eps);
      HeadNorm64(k, D, p.Floats(pre + "self_attn.k_norm.weight"), eps);
      const double theta = global ? global_theta : local_theta, scale = global ? global_scale : 1.0;
      Rotate64(q, D, theta, D / 2, pos, scale);
      Rotate64(k, D, theta, D / 2, pos, scale);
      keys[static_cast<size_t>(l)].push_back(k);
      values[static_cast<size_t>(l)].push_back(v);
      Vec attn = Attend64(q, keys[static_cast<size_t>(l)], values[static_cast<size_t>(l)], NH, NKV, D, pos,
                          1 / std::sqrt(scalar), [&](int64_t j) { return global || pos - j < window; });
      GemmaAttnOutAndMlp64(x, attn, p, pre, I, eps, q8);
    }
    out.push_back(lin(kRoot + "embed_tokens", RmsNorm(x, p.Floats(kRoot + "norm.weight"), eps), V, H));
  }
  return out;
}

std::vector<Vec> Gemma3Reference64::Run(const std::vector<int32_t>& ids) const {
  return RunRows(TokenRows(ids));
}

}  // namespace mlc::test
