// The CPU program's decoder: the weights of a family bound from a ParameterSet (matrices as
// kernel views into the mapped shards, norms and biases widened to float), the embedding lookup
// and the forward pass over rows of input embeddings with the paged KV cache.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/kv_cache.h"

namespace mlc::cpu {

struct LayerWeights {
  Weight qkv, o, gate_up, down;
  std::vector<float> qkv_bias;  // qwen2
  std::vector<float> norm_attn, norm_post_attn, norm_pre_ff, norm_post_ff;
};

struct ModelWeights {
  Weight embed;
  Weight lm_head;  // the embedding when tied
  std::vector<float> final_norm;
  std::vector<LayerWeights> layers;
  std::vector<double> inv_freq;  // rotary_dim / 2 rotation frequencies
  double rope_magnitude = 1.0;
};

// Binds the parameters (which must be `order`, the program's list: names, shapes, dtypes).
Result<ModelWeights> BindWeights(const ModelConfig& c, const std::vector<ParamSpec>& order,
                                 const ParameterSet& params);

// Embedding rows of ids (each checked against the vocabulary) into out [ids.size(), hidden].
Status EmbedTokens(const ModelConfig& c, const ModelWeights& w, std::span<const int32_t> ids,
                   float* out);

// Runs n rows of input embeddings [n, hidden] through the decoder: the rows of the sequences
// the call names (PagedKvCache::Prepare: those of begin_forward laid end to end, else the only
// sequence), each appending its keys and values to its sequence. The Linear layers take all n
// rows in one product; attention is per sequence. Returns the logits of each sequence's last
// row ([sequences, vocab]). `function` names the call in errors.
Result<std::vector<float>> Forward(const ModelConfig& c, const ModelWeights& w, PagedKvCache& kv,
                                   const float* embeds, int64_t n, const std::string& function);

}  // namespace mlc::cpu
