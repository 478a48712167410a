// The CPU decoder of the table's families (decoder.h): pre-norm layers with a fused q/k/v
// projection (with bias where the family has one), rotary positions per layer, grouped query
// attention over the paged KV cache (per-layer windows, shared KV, sinks, soft-capping,
// query_pre_attn_scalar), a fused gate/up MLP with the family's activation, the optional norms on
// the attention and MLP outputs, the final norm and the LM head (tied where the family ties it).
#include "runtime/cpu/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/cpu/weights.h"

namespace mlc::cpu {
namespace {

// A layer's optional norm: its gain, empty when the family has none.
std::vector<float> NormOf(const ParamIndex& p, const std::string& layer, const std::string& name) {
  return name.empty() ? std::vector<float>{} : FloatsOf(p[layer + name + ".weight"]);
}

AttentionSpec AttentionOf(const ModelConfig& c, const LayerPlan& p) {
  AttentionSpec a;
  a.num_heads = p.num_heads;
  a.num_kv_heads = p.num_kv_heads;
  a.head_dim = p.head_dim;
  a.sliding_window = p.sliding_window;
  const double qpas = c.query_pre_attn_scalar > 0 ? c.query_pre_attn_scalar : static_cast<double>(p.head_dim);
  a.scale = static_cast<float>(1.0 / std::sqrt(qpas));
  a.softcap = static_cast<float>(c.attn_logit_softcap);
  return a;
}

void AddInto(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

}  // namespace

Result<ModelWeights> BindWeights(const ModelConfig& c, const std::vector<ParamSpec>& order,
                                 const ParameterSet& params) {
  auto index = ParamIndex::Make(order, params);
  MLC_RETURN_IF_ERROR(index);
  const ParamIndex& p = *index;
  const Names& n = c.family->names;
  const int64_t hs = c.hidden_size;
  ModelWeights w;
  w.embed = MatrixOf(c, p, n.embed, c.vocab_size, c.embed_width());
  w.lm_head = c.tie_word_embeddings ? w.embed : MatrixOf(c, p, n.lm_head, c.vocab_size, hs);
  w.final_norm = FloatsOf(p[n.final_norm + ".weight"]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerPlan& plan = c.layers[static_cast<size_t>(l)];
    std::string pre = n.Layer(l);
    LayerWeights lw;
    lw.qkv = MatrixOf(c, p, pre + n.qkv, plan.qkv_size(), hs);
    lw.o = MatrixOf(c, p, pre + n.o, hs, plan.q_size());
    lw.gate_up = MatrixOf(c, p, pre + n.gate_up, 2 * plan.intermediate_size, hs);
    lw.down = MatrixOf(c, p, pre + n.down, hs, plan.intermediate_size);
    if (n.qkv_bias) lw.qkv_bias = FloatsOf(p[pre + n.qkv + ".bias"]);
    lw.attn_norm = NormOf(p, pre, n.attn_norm);
    lw.attn_out_norm = NormOf(p, pre, n.attn_out_norm);
    lw.mlp_norm = NormOf(p, pre, n.mlp_norm);
    lw.mlp_out_norm = NormOf(p, pre, n.mlp_out_norm);
    w.layers.push_back(std::move(lw));
  }
  for (const Rope& rope : c.ropes) w.ropes.push_back(RopeTable::Of(rope, c.context_window_size));
  return w;
}

std::vector<KvLayerPlan> KvPlan(const ModelConfig& c) {
  std::vector<KvLayerPlan> plan;
  for (const LayerPlan& p : c.layers) plan.push_back(KvLayerPlan{p.kv, p.kv_source, p.kv_size()});
  return plan;
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
  const int64_t width = c.embed_width();
  const float scale = static_cast<float>(c.embed_scale);
  ParallelFor(static_cast<int64_t>(ids.size()), 8, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float* row = out + i * width;
      DequantizeRow(w.embed, ids[static_cast<size_t>(i)], row);
      if (scale != 1.0f) {
        for (int64_t j = 0; j < width; ++j) row[j] *= scale;
      }
    }
  });
  return Status::Ok();
}

Result<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w, PagedKvCache& kv,
                                   const float* embeds, int64_t n, const std::string& function) {
  if (n < 1) return Invalid("", function + ": expected at least one position");
  if (kv.shape().layers != KvPlan(c)) {
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
  std::vector<float> h(static_cast<size_t>(n * hs)), o(static_cast<size_t>(n * hs));
  std::vector<float> qkv(static_cast<size_t>(n * c.max_qkv_size()));
  std::vector<float> attn(static_cast<size_t>(n * c.max_q_size()));
  std::vector<float> gu(static_cast<size_t>(n * 2 * c.max_intermediate_size()));
  std::vector<float> act(static_cast<size_t>(n * c.max_intermediate_size()));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const LayerPlan& plan = c.layers[static_cast<size_t>(l)];
    const RopeTable& rope = w.ropes[plan.rope];
    const int64_t stride = plan.qkv_size(), qs = plan.q_size(), kvs = plan.kv_size();
    RmsNormRows(x.data(), lw.attn_norm, n, hs, c.rms_norm_eps, h.data());
    Linear(lw.qkv, h.data(), n, qkv.data(), lw.qkv_bias.empty() ? nullptr : lw.qkv_bias.data());
    ParallelFor(n, 8, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const RowPlace& at = places[static_cast<size_t>(t)];
        float* row = qkv.data() + t * stride;
        rope.Apply(row, plan.num_heads + plan.num_kv_heads, plan.head_dim, at.pos);  // q, then k
        if (plan.kv != KvUse::kOwn) continue;
        std::memcpy(kv.Key(at.seq_id, l, at.pos), row + qs, static_cast<size_t>(kvs) * sizeof(float));
        std::memcpy(kv.Value(at.seq_id, l, at.pos), row + qs + kvs, static_cast<size_t>(kvs) * sizeof(float));
      }
    });
    PagedAttention(AttentionOf(c, plan), kv, l, qkv.data(), stride, places, attn.data());
    Linear(lw.o, attn.data(), n, o.data());
    if (!lw.attn_out_norm.empty()) RmsNormRows(o.data(), lw.attn_out_norm, n, hs, c.rms_norm_eps, o.data());
    AddInto(x, o);
    RmsNormRows(x.data(), lw.mlp_norm, n, hs, c.rms_norm_eps, h.data());
    Linear(lw.gate_up, h.data(), n, gu.data());
    const int64_t inter = plan.intermediate_size;
    ParallelFor(n, 1, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const float* gate = gu.data() + t * 2 * inter;
        GatedActivation(c.activation, gate, gate + inter, act.data() + t * inter, inter);
      }
    });
    Linear(lw.down, act.data(), n, o.data());
    if (!lw.mlp_out_norm.empty()) RmsNormRows(o.data(), lw.mlp_out_norm, n, hs, c.rms_norm_eps, o.data());
    AddInto(x, o);
  }
  // Each sequence's last row through the final norm and the LM head, in one product.
  const int64_t rows = static_cast<int64_t>(segments->size());
  int64_t end = 0;
  for (int64_t s = 0; s < rows; ++s) {
    const PagedKvCache::Segment& seg = (*segments)[static_cast<size_t>(s)];
    kv.Commit(seg);
    end += seg.length;
    RmsNorm(x.data() + (end - 1) * hs, w.final_norm.data(), hs, c.rms_norm_eps, h.data() + s * hs);
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
