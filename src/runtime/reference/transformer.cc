// The reference transformer: token and modality embeddings, pre-norm causal decoder layers with
// rotary positions over its own KV cache, SiLU MLPs, an LM head, and the two adapters (PCM
// frames and image patches projected to the hidden size). Plain float32 loops, deterministic.
#include <cmath>

#include "runtime/reference/reference_internal.h"

namespace mlc::reference {
namespace {

std::string LayerName(int64_t l, const char* leaf) {
  return "layers." + std::to_string(l) + "." + leaf;
}

// out[o] = sum_i W[o, i] * in[i] (+ bias[o]); W row-major [rows, cols].
void MatVec(const float* w, const float* in, int64_t rows, int64_t cols, float* out,
            const float* bias = nullptr) {
  for (int64_t o = 0; o < rows; ++o) {
    const float* row = w + o * cols;
    float acc = bias ? bias[o] : 0.0f;
    for (int64_t i = 0; i < cols; ++i) acc += row[i] * in[i];
    out[o] = acc;
  }
}

void RmsNorm(const float* x, const float* gain, int64_t n, double eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * gain[i];
}

// Rotates pairs (2j, 2j+1) of each head by position * theta^(-2j / head_dim).
void Rope(float* v, int64_t heads, int64_t head_dim, int64_t pos, double theta) {
  for (int64_t h = 0; h < heads; ++h) {
    float* x = v + h * head_dim;
    for (int64_t j = 0; j < head_dim / 2; ++j) {
      double freq = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
      double a = static_cast<double>(pos) * freq;
      float c = static_cast<float>(std::cos(a)), s = static_cast<float>(std::sin(a));
      float x0 = x[2 * j], x1 = x[2 * j + 1];
      x[2 * j] = x0 * c - x1 * s;
      x[2 * j + 1] = x0 * s + x1 * c;
    }
  }
}

// Attention of one query row over the sequence's cache positions [0, upto].
void Attend(const Config& c, KvCache& kv, int64_t l, int64_t seq, const float* q, int64_t upto,
            float* out) {
  int64_t hd = c.head_dim();
  std::vector<float> scores(static_cast<size_t>(upto + 1));
  float inv = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  for (int64_t h = 0; h < c.num_heads; ++h) {
    float max_s = -INFINITY;
    for (int64_t p = 0; p <= upto; ++p) {
      const float* k = kv.Key(l, seq, p) + h * hd;
      float s = 0;
      for (int64_t d = 0; d < hd; ++d) s += q[h * hd + d] * k[d];
      scores[p] = s * inv;
      max_s = std::max(max_s, scores[p]);
    }
    float sum = 0;
    for (int64_t p = 0; p <= upto; ++p) {
      scores[p] = std::exp(scores[p] - max_s);
      sum += scores[p];
    }
    for (int64_t d = 0; d < hd; ++d) out[h * hd + d] = 0;
    for (int64_t p = 0; p <= upto; ++p) {
      const float* v = kv.Value(l, seq, p) + h * hd;
      float wgt = scores[p] / sum;
      for (int64_t d = 0; d < hd; ++d) out[h * hd + d] += wgt * v[d];
    }
  }
}

// One decoder layer over a segment's rows (positions [start, start + n) of its sequence); x is
// updated in place.
void Layer(const Config& c, const Weights& w, KvCache& kv, int64_t l, float* x,
           const KvCache::Segment& seg) {
  int64_t hs = c.hidden_size, ff = c.intermediate_size, n = seg.length, start = seg.start;
  std::vector<float> h(hs), q(static_cast<size_t>(n * hs)), attn(hs), tmp(hs), up(ff);
  for (int64_t i = 0; i < n; ++i) {  // projections and cache writes first (causal order kept)
    RmsNorm(x + i * hs, w[LayerName(l, "attn_norm.weight")], hs, c.rms_norm_eps, h.data());
    MatVec(w[LayerName(l, "attn.wq")], h.data(), hs, hs, q.data() + i * hs);
    float* k = kv.Key(l, seg.seq_id, start + i);
    float* v = kv.Value(l, seg.seq_id, start + i);
    MatVec(w[LayerName(l, "attn.wk")], h.data(), hs, hs, k);
    MatVec(w[LayerName(l, "attn.wv")], h.data(), hs, hs, v);
    Rope(q.data() + i * hs, c.num_heads, c.head_dim(), start + i, c.rope_theta);
    Rope(k, c.num_heads, c.head_dim(), start + i, c.rope_theta);
  }
  for (int64_t i = 0; i < n; ++i) {
    float* xi = x + i * hs;
    Attend(c, kv, l, seg.seq_id, q.data() + i * hs, start + i, attn.data());
    MatVec(w[LayerName(l, "attn.wo")], attn.data(), hs, hs, tmp.data());
    for (int64_t d = 0; d < hs; ++d) xi[d] += tmp[d];
    RmsNorm(xi, w[LayerName(l, "mlp_norm.weight")], hs, c.rms_norm_eps, h.data());
    MatVec(w[LayerName(l, "mlp.w_up")], h.data(), ff, hs, up.data());
    for (float& u : up) u = u / (1.0f + std::exp(-u));  // SiLU
    MatVec(w[LayerName(l, "mlp.w_down")], up.data(), hs, ff, tmp.data());
    for (int64_t d = 0; d < hs; ++d) xi[d] += tmp[d];
  }
}

}  // namespace

Json ConfigJson(const Config& c) {
  return {{"vocab_size", c.vocab_size},
          {"hidden_size", c.hidden_size},
          {"num_hidden_layers", c.num_layers},
          {"num_attention_heads", c.num_heads},
          {"intermediate_size", c.intermediate_size},
          {"audio_frame_size", c.audio_frame_size},
          {"image_size", c.image_size},
          {"patch_size", c.patch_size},
          {"modality_embedding", c.modality_embedding},
          {"rms_norm_eps", c.rms_norm_eps},
          {"rope_theta", c.rope_theta}};
}

Result<Config> ParseConfig(const Json& mc) {
  Errors errors;
  FieldChecker check(&errors);
  Config c;
  if (!check.Object(mc, "/model_config")) return errors;
  auto dim = [&](const char* key, int64_t& out, int64_t minimum, int64_t maximum) {
    std::string p = PointerAppend("/model_config", key);
    if (!mc.contains(key)) {
      check.Fail(p, "the reference model needs this dimension");
      return;
    }
    if (auto v = check.Integer(mc[key], p, minimum)) {
      if (*v > maximum) check.Fail(p, "expected at most " + std::to_string(maximum));
      out = *v;
    }
  };
  dim("vocab_size", c.vocab_size, 16, 1 << 20);
  dim("hidden_size", c.hidden_size, 2, 4096);
  dim("num_hidden_layers", c.num_layers, 1, 64);
  dim("num_attention_heads", c.num_heads, 1, 256);
  dim("intermediate_size", c.intermediate_size, 1, 16384);
  dim("audio_frame_size", c.audio_frame_size, 0, 1 << 16);
  dim("image_size", c.image_size, 0, 4096);
  dim("patch_size", c.patch_size, 1, 4096);
  if (!mc.contains("modality_embedding") || !mc["modality_embedding"].is_string() ||
      (mc["modality_embedding"] != "prefill" && mc["modality_embedding"] != "inputs")) {
    check.Fail("/model_config/modality_embedding", "expected \"prefill\" or \"inputs\"");
  } else {
    c.modality_embedding = mc["modality_embedding"].get<std::string>();
  }
  for (const char* key : {"rms_norm_eps", "rope_theta"}) {
    if (mc.contains(key) && mc[key].is_number() && mc[key].get<double>() > 0) {
      (std::string(key) == "rope_theta" ? c.rope_theta : c.rms_norm_eps) = mc[key].get<double>();
    }
  }
  if (errors.empty()) {
    if (c.hidden_size % c.num_heads != 0 || c.head_dim() % 2 != 0) {
      check.Fail("/model_config/num_attention_heads",
                 "hidden_size must split into heads of an even size");
    }
    if (c.image_size && c.image_size % c.patch_size != 0) {
      check.Fail("/model_config/patch_size", "image_size must be a multiple of patch_size");
    }
  }
  if (!errors.empty()) return errors;
  return c;
}

std::vector<ParamSpec> ParamSpecs(const Config& c) {
  std::vector<ParamSpec> out;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    ParamSpec p;
    p.name = std::move(name);
    for (int64_t d : shape) p.shape.emplace_back(d);
    p.dtype = "float32";
    out.push_back(std::move(p));
  };
  int64_t hs = c.hidden_size;
  add("embed_tokens.weight", {c.vocab_size, hs});
  add("modality_embed.weight", {2, hs});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    add(LayerName(l, "attn_norm.weight"), {hs});
    for (const char* m : {"attn.wq", "attn.wk", "attn.wv", "attn.wo"}) add(LayerName(l, m), {hs, hs});
    add(LayerName(l, "mlp_norm.weight"), {hs});
    add(LayerName(l, "mlp.w_up"), {c.intermediate_size, hs});
    add(LayerName(l, "mlp.w_down"), {hs, c.intermediate_size});
  }
  add("final_norm.weight", {hs});
  add("lm_head.weight", {c.vocab_size, hs});
  if (c.audio_frame_size) {
    add("audio.proj.weight", {hs, c.audio_frame_size});
    add("audio.proj.bias", {hs});
  }
  if (c.image_size) {
    add("image.proj.weight", {hs, c.patch_size * c.patch_size * 3});
    add("image.proj.bias", {hs});
    add("image.pos_embed", {c.num_patches(), hs});
  }
  return out;
}

Result<Weights> Weights::From(const Config& c, const ParameterSet& params) {
  Weights w;
  std::map<std::string, const NDArray*> given;
  for (size_t i = 0; i < params.names.size() && i < params.tensors.size(); ++i) {
    given[params.names[i]] = &params.tensors[i];
  }
  Errors errors;
  for (const ParamSpec& spec : ParamSpecs(c)) {
    auto it = given.find(spec.name);
    int64_t elements = 1;
    for (const auto& d : spec.shape) elements *= std::get<int64_t>(d);
    if (it == given.end() || !SameDtype(it->second->dtype(), DlFloat32()) ||
        it->second->Elements() != elements) {
      errors.push_back(Invalid(spec.name, "the reference model needs parameter \"" + spec.name +
                                              "\" as float32 with " + std::to_string(elements) +
                                              " elements"));
      continue;
    }
    w.by_name_[spec.name] = it->second->data<float>();
  }
  if (!errors.empty()) return errors;
  return w;
}

Result<std::vector<float>> Forward(const Config& c, const Weights& w, KvCache& kv,
                                   std::vector<float> x, int64_t n, const std::string& function) {
  if (n < 1) return Invalid("", function + ": a forward pass needs at least one position");
  auto segments = kv.Prepare(function, n);
  MLC_RETURN_IF_ERROR(segments);
  int64_t hs = c.hidden_size, row = 0;
  std::vector<float> h(hs), logits(static_cast<size_t>(segments->size() * c.vocab_size));
  for (size_t s = 0; s < segments->size(); ++s) {  // each sequence on its own rows
    const KvCache::Segment& seg = (*segments)[s];
    float* rows = x.data() + row * hs;
    for (int64_t l = 0; l < c.num_layers; ++l) Layer(c, w, kv, l, rows, seg);
    kv.Commit(seg);
    row += seg.length;
    RmsNorm(rows + (seg.length - 1) * hs, w["final_norm.weight"], hs, c.rms_norm_eps, h.data());
    MatVec(w["lm_head.weight"], h.data(), c.vocab_size, hs, logits.data() + s * c.vocab_size);
  }
  return logits;
}

void EmbedTokens(const Config& c, const Weights& w, std::span<const int32_t> ids, float* out) {
  const float* table = w["embed_tokens.weight"];
  for (size_t i = 0; i < ids.size(); ++i) {
    std::copy_n(table + static_cast<int64_t>(ids[i]) * c.hidden_size, c.hidden_size,
                out + i * c.hidden_size);
  }
}

void AddModality(const Config& c, const Weights& w, int32_t modality, float* row) {
  const float* m = w["modality_embed.weight"] + modality * c.hidden_size;
  for (int64_t d = 0; d < c.hidden_size; ++d) row[d] += m[d];
}

std::vector<float> AudioAdapter(const Config& c, const Weights& w, std::span<const float> pcm,
                                int64_t* rows) {
  int64_t f = c.audio_frame_size, hs = c.hidden_size;
  int64_t n = static_cast<int64_t>(pcm.size());
  *rows = std::max<int64_t>(1, (n + f - 1) / f);
  std::vector<float> out(static_cast<size_t>(*rows * hs)), frame(f);
  for (int64_t r = 0; r < *rows; ++r) {
    for (int64_t i = 0; i < f; ++i) frame[i] = r * f + i < n ? pcm[r * f + i] : 0.0f;
    MatVec(w["audio.proj.weight"], frame.data(), hs, f, out.data() + r * hs, w["audio.proj.bias"]);
    for (int64_t d = 0; d < hs; ++d) out[r * hs + d] = std::tanh(out[r * hs + d]) * 2.0f;
    if (c.modality_in_inputs()) AddModality(c, w, kModalityAdapter, out.data() + r * hs);
  }
  return out;
}

std::vector<float> ImageAdapter(const Config& c, const Weights& w,
                                std::span<const uint32_t> pixels) {
  int64_t s = c.image_size, p = c.patch_size, hs = c.hidden_size, per_side = s / p;
  std::vector<float> out(static_cast<size_t>(c.num_patches() * hs)), patch(p * p * 3);
  for (int64_t py = 0; py < per_side; ++py) {
    for (int64_t px = 0; px < per_side; ++px) {
      int64_t k = 0;
      for (int64_t y = 0; y < p; ++y) {
        for (int64_t x = 0; x < p; ++x) {
          for (int64_t ch = 0; ch < 3; ++ch) {
            uint32_t v = pixels[((py * p + y) * s + (px * p + x)) * 3 + ch];
            patch[k++] = (static_cast<float>(v) / 255.0f - 0.5f) / 0.5f;
          }
        }
      }
      int64_t row = py * per_side + px;
      float* o = out.data() + row * hs;
      MatVec(w["image.proj.weight"], patch.data(), hs, p * p * 3, o, w["image.proj.bias"]);
      const float* pos = w["image.pos_embed"] + row * hs;
      for (int64_t d = 0; d < hs; ++d) o[d] += pos[d];
      if (c.modality_in_inputs()) AddModality(c, w, kModalityAdapter, o);
    }
  }
  return out;
}

}  // namespace mlc::reference
