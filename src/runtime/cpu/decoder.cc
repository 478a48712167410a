// The CPU decoder of the table's families (decoder.h): pre-norm layers with a fused q/k/v
// projection (with bias where the family has one), rotary positions per layer, grouped query
// attention over the paged KV cache (per-layer windows, shared KV, sinks, soft-capping,
// query_pre_attn_scalar), a fused gate/up MLP with the family's activation, the optional norms on
// the attention and MLP outputs, the final norm and the LM head (tied where the family ties it).
#include "runtime/cpu/decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "base/interrupt.h"
#include "runtime/cpu/huge_pages.h"
#include "runtime/cpu/phase_clock.h"
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

void AddInto(std::span<float> x, std::span<const float> y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

// Each of `heads` heads of head_dim at x RMS-normalized in place, times gain (nullptr: 1).
void HeadNorms(float* x, int64_t heads, int64_t head_dim, const float* gain, double eps) {
  for (int64_t hd = 0; hd < heads; ++hd) RmsNorm(x + hd * head_dim, gain, head_dim, eps, x + hd * head_dim);
}

// Where a layer's queries, keys and values of row t are: q + t * q_stride, k / v + t * kv_stride.
struct QkvRows {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  int64_t q_stride = 0, kv_stride = 0;
};

// The projections of n normalized rows h into buf (room for n * qkv_size floats): the fused
// product's rows, or the queries, keys and values one block after another.
QkvRows ProjectQkv(const LayerPlan& plan, const LayerWeights& lw, bool fused,
                   const float* h, int64_t n, float* buf) {
  const int64_t qs = plan.q_size(), kvs = plan.kv_size();
  if (fused) {
    Linear(lw.qkv, h, n, buf, lw.qkv_bias.empty() ? nullptr : lw.qkv_bias.data());
    return {buf, buf + qs, buf + qs + kvs, plan.qkv_size(), plan.qkv_size()};
  }
  QkvRows rows{buf, buf + n * qs, buf + n * (qs + kvs), qs, kvs};
  Linear(lw.q, h, n, rows.q);
  if (plan.kv == KvUse::kOwn) {
    Linear(lw.k, h, n, rows.k);
    Linear(lw.v, h, n, rows.v);
  }
  return rows;
}

// Gemma 4's per-layer inputs of n rows [n, layers * width]: the projection of the input rows
// (scaled by 1 / sqrt(hidden), each layer's slice RMS-normalized) plus each row's token looked up
// in every layer's table (scaled by sqrt(width); the pad id at adapter rows), the sum times
// 1 / sqrt(2).
Result<std::vector<float>> PerLayerInputs(const ModelConfig& c, const ModelWeights& w, const float* embeds,
                                          int64_t n, RowTokens tokens, const std::string& function) {
  const int64_t plw = c.per_layer.width, layers = c.num_layers, width = layers * plw;
  if (static_cast<int64_t>(tokens.ids.size()) != n ||
      (!tokens.modality.empty() && static_cast<int64_t>(tokens.modality.size()) != n)) {
    return Invalid("", function + ": this model looks up per-layer embeddings by token id: every row needs "
                                  "its token id (the token pair)");
  }
  std::vector<int32_t> ids(tokens.ids.begin(), tokens.ids.end());
  for (int64_t t = 0; t < n; ++t) {
    if (!tokens.modality.empty() && tokens.modality[static_cast<size_t>(t)] != 0) {
      ids[static_cast<size_t>(t)] = static_cast<int32_t>(c.per_layer.pad_token_id);
    }
    const int32_t id = ids[static_cast<size_t>(t)];
    if (id < 0 || id >= c.per_layer.vocab) {
      return Invalid("", function + ": token id " + std::to_string(id) + " at position " + std::to_string(t) +
                             " is outside the per-layer vocabulary [0, " + std::to_string(c.per_layer.vocab) + ")");
    }
  }
  std::vector<float> out(static_cast<size_t>(n * width));
  Linear(w.per_layer_model_projection, embeds, n, out.data());
  const float proj_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.hidden_size)));
  const float embed_scale = static_cast<float>(std::sqrt(static_cast<double>(plw)));
  const float mix = static_cast<float>(1.0 / std::sqrt(2.0));
  ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(plw));
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t l = 0; l < layers; ++l) {
        float* slice = out.data() + t * width + l * plw;
        for (int64_t i = 0; i < plw; ++i) slice[i] *= proj_scale;
        RmsNorm(slice, w.per_layer_projection_norm.data(), plw, c.rms_norm_eps, slice);
        DequantizeRow(w.per_layer_embed[static_cast<size_t>(l)], ids[static_cast<size_t>(t)], row.data());
        for (int64_t i = 0; i < plw; ++i) slice[i] = (slice[i] + row[static_cast<size_t>(i)] * embed_scale) * mix;
      }
    }
  });
  return out;
}

// Forward's activations for n rows: spans of one block kept per thread between calls (its huge
// pages are mapped once for the longest step yet, not per step; every element a step reads, it
// wrote first).
struct ForwardBuffers {
  std::span<float> x, h, o, qkv, attn, gu, act;
};

ForwardBuffers StepBuffers(const ModelConfig& c, int64_t n) {
  constexpr size_t kAlign = 16;  // floats: each buffer starts on a cache line
  const size_t sizes[7] = {
      static_cast<size_t>(n * c.hidden_size),
      static_cast<size_t>(n * c.hidden_size),
      static_cast<size_t>(n * c.hidden_size),
      static_cast<size_t>(n * c.max_qkv_size()),
      static_cast<size_t>(n * c.max_q_size()),
      static_cast<size_t>(n * 2 * c.max_intermediate_size()),
      static_cast<size_t>(n * std::max(c.max_intermediate_size(), c.per_layer.width)),
  };
  size_t total = 0;
  for (size_t size : sizes) total += (size + kAlign - 1) / kAlign * kAlign;
  thread_local HugeScratch block;
  float* at = static_cast<float*>(block.Reserve(total * sizeof(float)));
  std::span<float> spans[7];
  for (size_t i = 0; i < 7; ++i) {
    spans[i] = {at, sizes[i]};
    at += (sizes[i] + kAlign - 1) / kAlign * kAlign;
  }
  return {spans[0], spans[1], spans[2], spans[3], spans[4], spans[5], spans[6]};
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
  w.embed = TableOf(c, p, n.embed, c.vocab_size, c.embed_width());
  w.lm_head = c.tie_word_embeddings ? w.embed : MatrixOf(c, p, n.lm_head, c.vocab_size, hs);
  if (c.tie_word_embeddings) PackForProducts(w.lm_head);
  w.final_norm = FloatsOf(p[n.final_norm + ".weight"]);
  const int64_t plw = c.per_layer.width;
  if (plw > 0) {
    for (int64_t l = 0; l < c.num_layers; ++l) {
      w.per_layer_embed.push_back(TableOf(c, p, n.per_layer_embed + "." + std::to_string(l), c.per_layer.vocab, plw));
    }
    w.per_layer_model_projection = MatrixOf(c, p, n.per_layer_model_projection, c.num_layers * plw, hs);
    w.per_layer_projection_norm = FloatsOf(p[n.per_layer_projection_norm + ".weight"]);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerPlan& plan = c.layers[static_cast<size_t>(l)];
    std::string pre = n.Layer(l);
    LayerWeights lw;
    if (!n.qkv.empty()) {
      lw.qkv = MatrixOf(c, p, pre + n.qkv, plan.qkv_size(), hs);
    } else {
      lw.q = MatrixOf(c, p, pre + n.q, plan.q_size(), hs);
      if (plan.kv == KvUse::kOwn) {
        lw.k = MatrixOf(c, p, pre + n.k, plan.kv_size(), hs);
        lw.v = MatrixOf(c, p, pre + n.v, plan.kv_size(), hs);
      }
    }
    lw.o = MatrixOf(c, p, pre + n.o, hs, plan.q_size());
    lw.gate_up = MatrixOf(c, p, pre + n.gate_up, 2 * plan.intermediate_size, hs);
    lw.down = MatrixOf(c, p, pre + n.down, hs, plan.intermediate_size);
    if (n.qkv_bias) lw.qkv_bias = FloatsOf(p[pre + n.qkv + ".bias"]);
    lw.attn_norm = NormOf(p, pre, n.attn_norm);
    lw.attn_out_norm = NormOf(p, pre, n.attn_out_norm);
    lw.mlp_norm = NormOf(p, pre, n.mlp_norm);
    lw.mlp_out_norm = NormOf(p, pre, n.mlp_out_norm);
    lw.q_norm = NormOf(p, pre, n.q_norm);
    if (plan.kv == KvUse::kOwn) lw.k_norm = NormOf(p, pre, n.k_norm);
    if (plw > 0) {
      lw.per_layer_gate = FloatMatrixOf(p, pre + n.per_layer_gate, plw, hs);
      lw.per_layer_projection = MatrixOf(c, p, pre + n.per_layer_projection, hs, plw);
      lw.per_layer_norm = FloatsOf(p[pre + n.per_layer_norm + ".weight"]);
    }
    if (c.layer_scalar) lw.layer_scalar = FloatsOf(p[pre + "layer_scalar"]).at(0);
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
  PhaseScope clock(ids.size() == 1 ? StepKind::kDecode : StepKind::kPrefill, Phase::kEmbedding);
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

namespace {

struct LogitsPool {
  static constexpr size_t kKept = 4;
  std::mutex mu;
  std::vector<std::vector<float>> kept;
};

LogitsPool& Pool() {
  static LogitsPool* pool = new LogitsPool;  // outlives every tensor that gives one back
  return *pool;
}

}  // namespace

std::vector<float> TakeLogitsVector(size_t n) {
  std::vector<float> v;
  {
    LogitsPool& pool = Pool();
    std::lock_guard<std::mutex> lock(pool.mu);
    auto fits = std::find_if(pool.kept.begin(), pool.kept.end(), [n](const auto& k) { return k.size() == n; });
    if (fits == pool.kept.end()) {
      fits = std::find_if(pool.kept.begin(), pool.kept.end(), [n](const auto& k) { return k.capacity() >= n; });
    }
    if (fits != pool.kept.end()) {
      v = std::move(*fits);
      pool.kept.erase(fits);
    }
  }
  ResizeHuge(v, n);  // fills only what it adds
  return v;
}

void RecycleLogitsVector(std::vector<float> v) {
  LogitsPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  if (pool.kept.size() < LogitsPool::kKept) pool.kept.push_back(std::move(v));
}

Result<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w, PagedKvCache& kv,
                                   const float* embeds, int64_t n, const std::string& function,
                                   RowTokens tokens, ForwardOutput output) {
  if (n < 1) return Invalid("", function + ": expected at least one position");
  if (kv.shape().layers != KvPlan(c)) {
    return Invalid("", "kv_cache: the KV cache was made for another model");
  }
  auto segments = kv.Prepare(function, n);
  MLC_RETURN_IF_ERROR(segments);
  // Decode: one row per sequence.
  PhaseLap lap(n == static_cast<int64_t>(segments->size()) ? StepKind::kDecode : StepKind::kPrefill, n);
  std::vector<float> per_layer;  // [n, layers * width]
  if (c.per_layer.width > 0) {
    auto inputs = PerLayerInputs(c, w, embeds, n, tokens, function);
    MLC_RETURN_IF_ERROR(inputs);
    per_layer = std::move(*inputs);
    lap.Mark(Phase::kLayerProducts);
  }
  std::vector<RowPlace> places;
  for (const PagedKvCache::Segment& s : *segments) {
    for (int64_t t = 0; t < s.length; ++t) places.push_back(RowPlace{s.seq_id, s.start + t});
  }
  const int64_t hs = c.hidden_size, plw = c.per_layer.width;
  const bool fused = !c.family->names.qkv.empty();
  const ForwardBuffers buffers = StepBuffers(c, n);
  const std::span<float> x = buffers.x, h = buffers.h, o = buffers.o, qkv = buffers.qkv, attn = buffers.attn,
                         gu = buffers.gu, act = buffers.act;
  std::copy_n(embeds, n * hs, x.data());
  // Each row's rotary angles, once per table for all the layers that use it.
  std::vector<std::vector<float>> angles(w.ropes.size());
  for (size_t r = 0; r < w.ropes.size(); ++r) {
    const int64_t width = 2 * static_cast<int64_t>(w.ropes[r].inv_freq.size());
    angles[r].resize(static_cast<size_t>(n * width));
    for (int64_t t = 0; t < n; ++t) w.ropes[r].Angles(places[static_cast<size_t>(t)].pos, angles[r].data() + t * width);
  }
  lap.Skip();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // An interrupted call stops between layers; nothing is committed to the cache before the end.
    MLC_RETURN_IF_ERROR(CheckInterrupt(function));
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    const LayerPlan& plan = c.layers[static_cast<size_t>(l)];
    const RopeTable& rope = w.ropes[plan.rope];
    const float* rope_angles = angles[plan.rope].data();
    const int64_t angle_width = 2 * static_cast<int64_t>(rope.inv_freq.size());
    const bool own = plan.kv == KvUse::kOwn;
    RmsNormRows(x.data(), lw.attn_norm, n, hs, c.rms_norm_eps, h.data());
    lap.Mark(Phase::kNormsRotaryActs);
    // Queries, keys and values of each row: one fused product, or three (keys and values only
    // where the layer keeps its own).
    const QkvRows rows = ProjectQkv(plan, lw, fused, h.data(), n, qkv.data());
    lap.Mark(Phase::kLayerProducts);
    ParallelFor(n, 8, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const RowPlace& at = places[static_cast<size_t>(t)];
        float* q = rows.q + t * rows.q_stride;
        if (!lw.q_norm.empty()) HeadNorms(q, plan.num_heads, plan.head_dim, lw.q_norm.data(), c.rms_norm_eps);
        rope.Rotate(q, plan.num_heads, plan.head_dim, rope_angles + t * angle_width);
        if (!own) continue;
        float* k = rows.k + t * rows.kv_stride;
        float* v = rows.v + t * rows.kv_stride;
        if (!lw.k_norm.empty()) HeadNorms(k, plan.num_kv_heads, plan.head_dim, lw.k_norm.data(), c.rms_norm_eps);
        if (c.v_norm) HeadNorms(v, plan.num_kv_heads, plan.head_dim, nullptr, c.rms_norm_eps);
        rope.Rotate(k, plan.num_kv_heads, plan.head_dim, rope_angles + t * angle_width);
        const size_t bytes = static_cast<size_t>(plan.kv_size()) * sizeof(float);
        kv.WriteKey(at.seq_id, l, at.pos, k);
        std::memcpy(kv.Value(at.seq_id, l, at.pos), v, bytes);
      }
    });
    lap.Mark(Phase::kNormsRotaryActs);
    PagedAttention(AttentionOf(c, plan), kv, l, rows.q, rows.q_stride, places, attn.data());
    lap.Mark(Phase::kAttention);
    Linear(lw.o, attn.data(), n, o.data());
    lap.Mark(Phase::kLayerProducts);
    if (!lw.attn_out_norm.empty()) RmsNormRows(o.data(), lw.attn_out_norm, n, hs, c.rms_norm_eps, o.data());
    AddInto(x, o);
    RmsNormRows(x.data(), lw.mlp_norm, n, hs, c.rms_norm_eps, h.data());
    lap.Mark(Phase::kNormsRotaryActs);
    Linear(lw.gate_up, h.data(), n, gu.data());
    lap.Mark(Phase::kLayerProducts);
    const int64_t inter = plan.intermediate_size;
    ParallelFor(n, 1, [&](int64_t t_begin, int64_t t_end) {
      for (int64_t t = t_begin; t < t_end; ++t) {
        const float* gate = gu.data() + t * 2 * inter;
        GatedActivation(c.activation, gate, gate + inter, act.data() + t * inter, inter);
      }
    });
    lap.Mark(Phase::kNormsRotaryActs);
    Linear(lw.down, act.data(), n, o.data());
    lap.Mark(Phase::kLayerProducts);
    if (!lw.mlp_out_norm.empty()) RmsNormRows(o.data(), lw.mlp_out_norm, n, hs, c.rms_norm_eps, o.data());
    AddInto(x, o);
    lap.Mark(Phase::kNormsRotaryActs);
    if (plw > 0) {  // the per-layer input: gate(x) * input, projected, normalized, added
      Linear(lw.per_layer_gate, x.data(), n, act.data());
      ParallelFor(n, 1, [&](int64_t t_begin, int64_t t_end) {
        for (int64_t t = t_begin; t < t_end; ++t) {
          const float* in = per_layer.data() + (t * c.num_layers + l) * plw;
          float* g = act.data() + t * plw;
          for (int64_t i = 0; i < plw; ++i) g[i] = GeluTanh(g[i]) * in[i];
        }
      });
      Linear(lw.per_layer_projection, act.data(), n, o.data());
      RmsNormRows(o.data(), lw.per_layer_norm, n, hs, c.rms_norm_eps, o.data());
      AddInto(x, o);
      lap.Mark(Phase::kLayerProducts);  // the per-layer input's gate and projection, mostly
    }
    if (lw.layer_scalar != 1.0f) {
      for (float& v : x) v *= lw.layer_scalar;
    }
    lap.Mark(Phase::kNormsRotaryActs);
  }
  for (const PagedKvCache::Segment& seg : *segments) kv.Commit(seg);
  if (output == ForwardOutput::kHiddenStates) {  // every row through the final norm
    std::vector<float> hidden(static_cast<size_t>(n * hs));
    RmsNormRows(x.data(), w.final_norm, n, hs, c.rms_norm_eps, hidden.data());
    lap.Mark(Phase::kNormsRotaryActs);
    return hidden;
  }
  // Each sequence's last row through the final norm and the LM head, in one product.
  const int64_t rows = static_cast<int64_t>(segments->size());
  int64_t end = 0;
  for (int64_t s = 0; s < rows; ++s) {
    end += (*segments)[static_cast<size_t>(s)].length;
    RmsNorm(x.data() + (end - 1) * hs, w.final_norm.data(), hs, c.rms_norm_eps, h.data() + s * hs);
  }
  lap.Mark(Phase::kNormsRotaryActs);
  std::vector<float> logits = TakeLogitsVector(static_cast<size_t>(rows * c.vocab_size));
  Linear(w.lm_head, h.data(), rows, logits.data());
  if (c.final_logit_softcap > 0) {
    const float cap = static_cast<float>(c.final_logit_softcap);
    for (float& v : logits) v = cap * std::tanh(v / cap);
  }
  lap.Mark(Phase::kLmHead);
  return logits;
}

}  // namespace mlc::cpu
