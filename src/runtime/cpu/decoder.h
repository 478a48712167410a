// The CPU program's text decoder, shared by every family of the table: the weights bound from a
// ParameterSet by the family's names (matrices as kernel views into the mapped shards, norms and
// biases widened to float), the embedding lookup, and the forward pass over rows of input
// embeddings with the paged KV cache, layer by layer as the config's per-layer plan says.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/blocks.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kv_cache.h"

namespace mlc::cpu {

struct LayerWeights {
  Weight qkv, o, gate_up, down;
  Weight q, k, v;                // unfused projections (Names::q, k, v); k and v only with own KV
  std::vector<float> qkv_bias;  // empty: none
  std::vector<float> attn_norm, attn_out_norm, mlp_norm, mlp_out_norm;  // empty: none
  std::vector<float> q_norm, k_norm;  // per-head gains, empty: none
  // Per-layer input (Gemma 4): gate [width, hidden], projection [hidden, width], its norm.
  Weight per_layer_gate, per_layer_projection;
  std::vector<float> per_layer_norm;
  float layer_scalar = 1.0f;
};

struct ModelWeights {
  Weight embed;
  Weight lm_head;  // the embedding when tied
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
  std::vector<RopeTable> ropes;  // per ModelConfig::ropes
  // Per-layer inputs (Gemma 4): one embedding table per layer [vocab, width], the projection of
  // the input rows [layers * width, hidden] and its norm [width].
  std::vector<Weight> per_layer_embed;
  Weight per_layer_model_projection;
  std::vector<float> per_layer_projection_norm;
};

// Binds the parameters (which must be `order`, the program's list: names, shapes, dtypes).
Result<ModelWeights> BindWeights(const ModelConfig& c, const std::vector<ParamSpec>& order,
                                 const ParameterSet& params);

// The KV cache layout of the config: per layer its own keys and values, another layer's, or none.
std::vector<KvLayerPlan> KvPlan(const ModelConfig& c);

// Embedding rows of ids (each checked against the vocabulary), times the family's embed_scale,
// into out [ids.size(), embed_width].
Status EmbedTokens(const ModelConfig& c, const ModelWeights& w, std::span<const int32_t> ids,
                   float* out);

// The token ids of a step's rows (the token pair), for the families whose layers look tokens up
// (per-layer embeddings): ids[t], and modality[t] != 0 where row t is an adapter's (looked up as
// the pad id). Empty spans: the embeddings pair (no ids).
struct RowTokens {
  std::span<const int32_t> ids;
  std::span<const int32_t> modality;  // empty: all text
};

// What a forward pass returns: the logits of each sequence's last row ([sequences, vocab]), or
// every row's final-normed hidden state ([n, hidden]: the embeddings' prefill_to_last_hidden_states).
enum class ForwardOutput { kLastLogits, kHiddenStates };

// Runs n rows of input embeddings [n, embed_width] through the decoder: the rows of the sequences
// the call names (PagedKvCache::Prepare: those of begin_forward laid end to end, else the only
// sequence), each appending its keys and values to its sequence. The Linear layers take all n
// rows in one product; attention is per sequence. Returns `output`. `function` names the call in
// errors. The logits vector comes from TakeLogitsVector: hand it back to RecycleLogitsVector.
Result<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w, PagedKvCache& kv,
                                   const float* embeds, int64_t n, const std::string& function,
                                   RowTokens tokens = {}, ForwardOutput output = ForwardOutput::kLastLogits);

// Logits storage kept between steps: a vector of n floats whose values are left to be
// overwritten, taken from those given back when one fits (no zero fill, no fresh pages to fault
// in: a batch's logits are megabytes a step), and given back (up to four are kept).
std::vector<float> TakeLogitsVector(size_t n);
void RecycleLogitsVector(std::vector<float> v);

}  // namespace mlc::cpu
