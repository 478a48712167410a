// Llama (MLC's llama model: Llama 2, Llama 3 with its "llama3" rope scaling, and the models laid out
// like it): fused q/k/v and gate/up projections, RMSNorm before attention and MLP, SiLU.
#include <cmath>

#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

void ReadLlama3Scaling(ConfigReader& r, const Json& s, Rope& rope) {
  const std::string path = r.Path("rope_scaling");
  auto number = [&](const char* key, double fallback) {
    if (!s.contains(key)) return fallback;
    if (!s[key].is_number() || !std::isfinite(s[key].get<double>()) || s[key].get<double>() <= 0) {
      r.Fail(path + "/" + key, "expected a positive number");
      return fallback;
    }
    return s[key].get<double>();
  };
  rope.scaling = RopeScaling::kLlama3;
  rope.factor = number("factor", 8.0);
  rope.low_freq_factor = number("low_freq_factor", 1.0);
  rope.high_freq_factor = number("high_freq_factor", 4.0);
  rope.original_max_position = static_cast<int64_t>(number("original_max_position_embeddings", 8192));
  if (rope.high_freq_factor <= rope.low_freq_factor) {
    r.Fail(path + "/high_freq_factor", "expected more than low_freq_factor");
  }
}

void Configure(ConfigReader& r, ModelConfig& c) {
  RequireSilu(r);
  if (r.failed()) return;
  std::string type;
  const Json* s = r.RopeScaling(&type);
  if (s && type == "llama3") {
    ReadLlama3Scaling(r, *s, c.rope());
  } else if (s && (!type.empty() || !s->empty())) {
    r.RejectRopeScaling(type, c.model_type, "llama3");
  }
}

void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  mc["hidden_act"] = "silu";
  mc["position_embedding_base"] = 500000.0;
  mc["tie_word_embeddings"] = false;
  if (tiny) {  // Llama 3.1-style scaling, with a short original window so it matters
    mc["rope_scaling"] = {{"rope_type", "llama3"},
                          {"factor", 8.0},
                          {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0},
                          {"original_max_position_embeddings", 64}};
  }
}

}  // namespace

void RequireSilu(ConfigReader& r) {
  std::string act = r.String({"hidden_act"});
  if (!act.empty() && act != "silu") r.Unsupported(r.Path("hidden_act"), "expected silu");
}

void RequireNoRopeScaling(ConfigReader& r, const ModelConfig& c) {
  std::string type;
  const Json* s = r.RopeScaling(&type);
  if (s && (!type.empty() || !s->empty())) r.RejectRopeScaling(type, c.model_type, "none");
}

const FamilySpec& LlamaFamily() {
  static const FamilySpec kSpec = [] {
    FamilySpec f;
    f.model_type = "llama";
    f.names.embed = "model.embed_tokens";
    f.names.final_norm = "model.norm";
    f.names.layer_root = "model.layers.";
    f.names.qkv = "self_attn.qkv_proj";
    f.names.o = "self_attn.o_proj";
    f.names.attn_norm = "input_layernorm";
    f.names.mlp_norm = "post_attention_layernorm";
    f.configure = Configure;
    f.params = DecoderParams;
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
