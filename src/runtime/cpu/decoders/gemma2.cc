// Gemma 2 (MLC's gemma2 model): Gemma with norms around both attention and MLP outputs
// (post_attention_layernorm on the attention output, pre_ / post_feedforward_layernorm), soft-capped
// attention and final logits, query_pre_attn_scalar, and a sliding window on the even layers.
#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

void Configure(ConfigReader& r, ModelConfig& c) {
  ConfigureGemma(r, c);
  c.attn_logit_softcap = r.Number("attn_logit_softcapping", 0, 0);
  c.final_logit_softcap = r.Number("final_logit_softcapping", 0, 0);
  c.query_pre_attn_scalar = r.Number("query_pre_attn_scalar", 0, 0);
  c.layer_sliding_window = r.Int("sliding_window", 0, int64_t{1} << 30, 0);
  for (size_t l = 0; l < c.layers.size(); l += 2) c.layers[l].sliding_window = c.layer_sliding_window;
  if (!r.failed()) RequireNoRopeScaling(r, c);
}

void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  mc["hidden_activation"] = "gelu_pytorch_tanh";
  mc["attention_bias"] = false;
  mc["position_embedding_base"] = 10000.0;
  mc["attn_logit_softcapping"] = 50.0;
  mc["final_logit_softcapping"] = 30.0;
  mc["query_pre_attn_scalar"] = tiny ? 48 : mc["head_dim"].get<int64_t>();
  mc["sliding_window"] = tiny ? 16 : 4096;
}

}  // namespace

const FamilySpec& Gemma2Family() {
  static const FamilySpec kSpec = [] {
    FamilySpec f = GemmaFamily();
    f.model_type = "gemma2";
    f.names.attn_out_norm = "post_attention_layernorm";
    f.names.mlp_norm = "pre_feedforward_layernorm";
    f.names.mlp_out_norm = "post_feedforward_layernorm";
    f.configure = Configure;
    f.writer.tiny_kv_heads = 2;
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
