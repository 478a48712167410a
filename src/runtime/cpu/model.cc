// The CPU decoder of the MLC families: pre-norm layers with a fused q/k/v projection (qwen2: with
// bias), rotary positions (rotate-half over rotary_dim, llama3 / longrope frequencies), grouped
// query attention over the paged KV cache (sliding windows, sinks, Gemma 2's soft-capping and
// query_pre_attn_scalar), a fused gate/up MLP (SiLU; Gemma: tanh GeLU), Gemma 2's extra norms,
// the final norm and the LM head (tied to the embedding where the family ties it). Matrix work
// goes through kernels.h; attention is spread over (row, head) pairs on the pool.
#include "runtime/cpu/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace mlc::cpu {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Parameters by name, each checked against the program's list.
class ParamIndex {
 public:
  static Result<ParamIndex> Make(const std::vector<ParamSpec>& order, const ParameterSet& params) {
    if (params.names.size() != order.size() || params.tensors.size() != order.size()) {
      return Invalid("", "params: expected " + std::to_string(order.size()) +
                                   " parameters in the program's order, got " +
                                   std::to_string(params.tensors.size()));
    }
    ParamIndex index;
    for (size_t i = 0; i < order.size(); ++i) {
      const ParamSpec& spec = order[i];
      const NDArray& t = params.tensors[i];
      std::vector<int64_t> shape;
      for (const auto& d : spec.shape) shape.push_back(std::get<int64_t>(d));
      if (params.names[i] != spec.name || !t.defined() || t.shape() != shape ||
          DlDtypeName(t.dtype()) != spec.dtype) {
        return Invalid("", "params: parameter " + std::to_string(i) + " is \"" + params.names[i] +
                                     "\" " + (t.defined() ? t.Describe() : "undefined") +
                                     ", expected \"" + spec.name + "\" " + ShapeText(shape) + " " +
                                     spec.dtype);
      }
      index.by_name_[spec.name] = &t;
    }
    return index;
  }
  const NDArray& operator[](const std::string& name) const { return *by_name_.at(name); }
  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }

 private:
  std::map<std::string, const NDArray*> by_name_;
};

Weight MatrixOf(const ModelConfig& c, const ParamIndex& p, const std::string& base, int64_t out,
                int64_t in) {
  Weight w;
  w.out = out;
  w.in = in;
  if (c.quantized()) {
    w.format = c.quant == Quant::kQ4F16 ? WeightFormat::kQ4F16 : WeightFormat::kQ4F32;
    w.data = p[base + ".q_weight"].dl().data;
    w.scale = p[base + ".q_scale"].dl().data;
  } else {
    w.format = c.quant == Quant::kQ0F16 ? WeightFormat::kF16 : WeightFormat::kF32;
    w.data = p[base + ".weight"].dl().data;
  }
  return w;
}

std::vector<float> FloatsOf(const NDArray& t) {
  std::vector<float> out(static_cast<size_t>(t.Elements()));
  if (SameDtype(t.dtype(), DlFloat32())) {
    std::memcpy(out.data(), t.data<float>(), out.size() * sizeof(float));
  } else {
    const uint16_t* h = t.data<uint16_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = HalfToFloat(h[i]);
  }
  return out;
}

void RmsNorm(const float* x, const std::vector<float>& gain, int64_t n, double eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * gain[static_cast<size_t>(i)];
}

void RmsNormRows(const float* x, const std::vector<float>& gain, int64_t rows, int64_t n, double eps,
                 float* out) {
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) RmsNorm(x + r * n, gain, n, eps, out + r * n);
  });
}

// Rotate-half rotary positions of `heads` heads of head_dim at position pos.
void ApplyRope(const ModelConfig& c, const ModelWeights& w, float* x, int64_t heads, int64_t pos) {
  int64_t half = c.rotary_dim / 2;
  for (int64_t j = 0; j < half; ++j) {
    double angle = static_cast<double>(pos) * w.inv_freq[static_cast<size_t>(j)];
    float cs = static_cast<float>(std::cos(angle) * w.rope_magnitude);
    float sn = static_cast<float>(std::sin(angle) * w.rope_magnitude);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * c.head_dim;
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

// Where row t of a call sits: its sequence and its absolute position.
struct RowPlace {
  int64_t seq_id = 0;
  int64_t pos = 0;
};

// out[t] (heads x head_dim) = attention of the queries of rows t over their sequence's cache,
// per (row, head).
void Attention(const ModelConfig& c, PagedKvCache& kv, int64_t layer, const float* qkv,
               const std::vector<RowPlace>& rows, float* out) {
  const int64_t n = static_cast<int64_t>(rows.size());
  const int64_t d = c.head_dim, heads = c.num_heads, group = c.num_heads / c.num_kv_heads;
  const int64_t stride = c.qkv_size();
  const double qpas = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(d);
  const float scale = static_cast<float>(1.0 / std::sqrt(qpas));
  const float cap = static_cast<float>(c.attn_logit_softcap);
  const bool slides = c.LayerSlides(layer);
  ParallelFor(n * heads, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<const float*> keys, values;  // rows the task's (row, KV head) sees, found once
    int64_t found_t = -1, found_kvh = -1;
    for (int64_t task = begin; task < end; ++task) {
      int64_t t = task / heads, h = task % heads, kvh = h / group;
      const RowPlace& place = rows[static_cast<size_t>(t)];
      const int64_t seq_id = place.seq_id, pos = place.pos;
      const float* q = qkv + t * stride + h * d;
      if (t != found_t || kvh != found_kvh) {
        int64_t lo = kv.WindowStart(pos);
        if (slides) lo = std::max<int64_t>(lo, pos - c.layer_sliding_window + 1);
        keys.clear();
        values.clear();
        auto see = [&](int64_t j) {
          keys.push_back(kv.Key(seq_id, layer, j) + kvh * d);
          values.push_back(kv.Value(seq_id, layer, j) + kvh * d);
        };
        for (int64_t j = 0; j < std::min(kv.SinkEnd(), lo); ++j) see(j);
        for (int64_t j = lo; j <= pos; ++j) see(j);
        found_t = t;
        found_kvh = kvh;
      }
      scores.resize(keys.size());
      float max_s = -INFINITY;
      for (size_t i = 0; i < keys.size(); ++i) {
        float s = Dot(q, keys[i], d) * scale;
        if (cap > 0) s = cap * std::tanh(s / cap);
        scores[i] = s;
        max_s = std::max(max_s, s);
      }
      float sum = 0;
      for (float& s : scores) {
        s = std::exp(s - max_s);
        sum += s;
      }
      float* o = out + t * heads * d + h * d;
      std::fill(o, o + d, 0.0f);
      for (size_t i = 0; i < values.size(); ++i) AddScaled(scores[i] / sum, values[i], o, d);
    }
  });
}

}  // namespace

Result<ModelWeights> BindWeights(const ModelConfig& c, const std::vector<ParamSpec>& order,
                                 const ParameterSet& params) {
  auto index = ParamIndex::Make(order, params);
  MLC_RETURN_IF_ERROR(index);
  const ParamIndex& p = *index;
  Names n = NamesOf(c.family);
  ModelWeights w;
  w.embed = MatrixOf(c, p, n.embed, c.vocab_size, c.hidden_size);
  w.lm_head = c.tie_word_embeddings ? w.embed : MatrixOf(c, p, n.lm_head, c.vocab_size, c.hidden_size);
  w.final_norm = FloatsOf(p[n.final_norm + ".weight"]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string pre = n.Layer(l);
    LayerWeights lw;
    lw.qkv = MatrixOf(c, p, pre + n.qkv, c.qkv_size(), c.hidden_size);
    lw.o = MatrixOf(c, p, pre + n.o, c.hidden_size, c.q_size());
    lw.gate_up = MatrixOf(c, p, pre + n.gate_up, 2 * c.intermediate_size, c.hidden_size);
    lw.down = MatrixOf(c, p, pre + n.down, c.hidden_size, c.intermediate_size);
    if (p.Has(pre + n.qkv + ".bias")) lw.qkv_bias = FloatsOf(p[pre + n.qkv + ".bias"]);
    lw.norm_attn = FloatsOf(p[pre + n.norm_attn + ".weight"]);
    lw.norm_post_attn = FloatsOf(p[pre + n.norm_post_attn + ".weight"]);
    if (c.family == Family::kGemma2) {
      lw.norm_pre_ff = FloatsOf(p[pre + n.norm_pre_ff + ".weight"]);
      lw.norm_post_ff = FloatsOf(p[pre + n.norm_post_ff + ".weight"]);
    }
    w.layers.push_back(std::move(lw));
  }
  for (int64_t j = 0; j < c.rotary_dim / 2; ++j) w.inv_freq.push_back(c.InvFrequency(j));
  w.rope_magnitude = c.RopeMagnitude();
  return w;
}

Status EmbedTokens(const ModelConfig& c, const ModelWeights& w, std::span<const int32_t> ids,
                   float* out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab_size) {
      return Invalid("", "embed: token id " + std::to_string(ids[i]) + " at position " +
                                  std::to_string(i) + " is outside the vocabulary [0, " +
                                  std::to_string(c.vocab_size) + ")");
    }
  }
  ParallelFor(static_cast<int64_t>(ids.size()), 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      DequantizeRow(w.embed, ids[static_cast<size_t>(i)], out + i * c.hidden_size);
    }
  });
  return Status::Ok();
}

Result<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w, PagedKvCache& kv,
                                   const float* embeds, int64_t n, const std::string& function) {
  if (n < 1) return Invalid("", function + ": expected at least one position");
  const KvCacheShape& ks = kv.shape();
  if (ks.num_layers != c.num_layers || ks.num_kv_heads != c.num_kv_heads || ks.head_dim != c.head_dim) {
    return Invalid("", "kv_cache: the KV cache was made for another model");
  }
  auto segments = kv.Prepare(function, n);
  MLC_RETURN_IF_ERROR(segments);
  std::vector<RowPlace> places;
  for (const PagedKvCache::Segment& s : *segments) {
    for (int64_t t = 0; t < s.length; ++t) places.push_back(RowPlace{s.seq_id, s.start + t});
  }
  const int64_t hs = c.hidden_size;
  std::vector<float> x(embeds, embeds + n * hs);
  if (c.gemma()) {
    const float normalizer = std::sqrt(static_cast<float>(hs));
    for (float& v : x) v *= normalizer;
  }
  std::vector<float> h(static_cast<size_t>(n * hs)), qkv(static_cast<size_t>(n * c.qkv_size()));
  std::vector<float> attn(static_cast<size_t>(n * c.q_size())), o(static_cast<size_t>(n * hs));
  std::vector<float> gu(static_cast<size_t>(n * 2 * c.intermediate_size));
  std::vector<float> act(static_cast<size_t>(n * c.intermediate_size));
  const int64_t kvs = c.kv_size();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    RmsNormRows(x.data(), lw.norm_attn, n, hs, c.rms_norm_eps, h.data());
    Linear(lw.qkv, h.data(), n, qkv.data(), lw.qkv_bias.empty() ? nullptr : lw.qkv_bias.data());
    ParallelFor(n, 8, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const RowPlace& at = places[static_cast<size_t>(t)];
        float* row = qkv.data() + t * c.qkv_size();
        ApplyRope(c, w, row, c.num_heads + c.num_kv_heads, at.pos);  // q heads, then k heads
        std::memcpy(kv.Key(at.seq_id, l, at.pos), row + c.q_size(), static_cast<size_t>(kvs) * sizeof(float));
        std::memcpy(kv.Value(at.seq_id, l, at.pos), row + c.q_size() + kvs,
                    static_cast<size_t>(kvs) * sizeof(float));
      }
    });
    Attention(c, kv, l, qkv.data(), places, attn.data());
    Linear(lw.o, attn.data(), n, o.data());
    if (c.family == Family::kGemma2) {
      RmsNormRows(o.data(), lw.norm_post_attn, n, hs, c.rms_norm_eps, o.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      RmsNormRows(x.data(), lw.norm_pre_ff, n, hs, c.rms_norm_eps, h.data());
    } else {
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      RmsNormRows(x.data(), lw.norm_post_attn, n, hs, c.rms_norm_eps, h.data());
    }
    Linear(lw.gate_up, h.data(), n, gu.data());
    const int64_t inter = c.intermediate_size;
    ParallelFor(n, 1, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const float* gate = gu.data() + t * 2 * inter;
        const float* up = gate + inter;
        float* a = act.data() + t * inter;
        if (c.gemma()) {
          for (int64_t i = 0; i < inter; ++i) a[i] = GeluTanh(gate[i]) * up[i];
        } else {
          SiluMul(gate, up, a, inter);
        }
      }
    });
    Linear(lw.down, act.data(), n, o.data());
    if (c.family == Family::kGemma2) RmsNormRows(o.data(), lw.norm_post_ff, n, hs, c.rms_norm_eps, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  // Each sequence's last row through the final norm and the LM head, in one product.
  const int64_t rows = static_cast<int64_t>(segments->size());
  int64_t end = 0;
  for (int64_t s = 0; s < rows; ++s) {
    const PagedKvCache::Segment& seg = (*segments)[static_cast<size_t>(s)];
    kv.Commit(seg);
    end += seg.length;
    RmsNorm(x.data() + (end - 1) * hs, w.final_norm, hs, c.rms_norm_eps, h.data() + s * hs);
  }
  std::vector<float> logits(static_cast<size_t>(rows * c.vocab_size));
  Linear(w.lm_head, h.data(), rows, logits.data());
  if (c.final_logit_softcap > 0) {
    const float cap = static_cast<float>(c.final_logit_softcap);
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  return logits;
}

}  // namespace mlc::cpu
