// Gemma (MLC's gemma model): the llama layout with tied embeddings scaled by sqrt(hidden_size) as
// they are looked up, tanh GeLU in the MLP, RMSNorm eps 1e-6, one KV head in the 2B model; and what
// the Gemma families share (settings, the names of the unfused layouts, the instruction template).
#include <cmath>

#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

void Configure(ConfigReader& r, ModelConfig& c) {
  ConfigureGemma(r, c);
  if (!r.failed()) RequireNoRopeScaling(r, c);
}

void WriteConfig(const WriterShape&, Json& mc) {
  mc["hidden_activation"] = "gelu_pytorch_tanh";
  mc["attention_bias"] = false;
  mc["position_embedding_base"] = 10000.0;
}

}  // namespace

void ConfigureGemma(ConfigReader& r, ModelConfig& c) {
  c.tie_word_embeddings = true;
  c.activation = Activation::kGeluTanh;
  c.embed_scale = std::sqrt(static_cast<float>(c.hidden_size));  // as a float, as MLC scales
  std::string act = r.String({"hidden_activation", "hidden_act"});
  if (!act.empty() && act != "gelu" && act != "gelu_pytorch_tanh") {
    r.Unsupported(r.Path("hidden_activation"), "expected gelu or gelu_pytorch_tanh");
  }
  if (r.Bool("attention_bias", false)) {
    r.Unsupported(r.Path("attention_bias"), "Gemma with attention biases is not supported");
  }
}

void SetGemmaNames(Names& n, const std::string& root) {
  n.embed = root + "embed_tokens";
  n.final_norm = root + "norm";
  n.layer_root = root + "layers.";
  n.qkv.clear();
  n.q = "self_attn.q_proj";
  n.k = "self_attn.k_proj";
  n.v = "self_attn.v_proj";
  n.o = "self_attn.o_proj";
  n.q_norm = "self_attn.q_norm";
  n.k_norm = "self_attn.k_norm";
  n.attn_norm = "input_layernorm";
  n.attn_out_norm = "post_attention_layernorm";
  n.mlp_norm = "pre_feedforward_layernorm";
  n.mlp_out_norm = "post_feedforward_layernorm";
}

std::vector<bool> ReadLayerTypes(ConfigReader& r, int64_t layers) {
  const std::string what = "an array of num_hidden_layers (" + std::to_string(layers) +
                           ") \"sliding_attention\" / \"full_attention\" strings";
  if (!r.Has("layer_types")) {
    r.Fail(r.Path("layer_types"), "required: " + what);
    return {};
  }
  const Json& types = r.Get("layer_types");
  if (!types.is_array() || static_cast<int64_t>(types.size()) != layers) {
    r.Fail(r.Path("layer_types"), "expected " + what);
    return {};
  }
  std::vector<bool> full;
  for (size_t l = 0; l < types.size(); ++l) {
    const Json& t = types[l];
    if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
      r.Fail(r.Path("layer_types") + "/" + std::to_string(l), "expected \"sliding_attention\" or \"full_attention\"");
      return {};
    }
    full.push_back(t == "full_attention");
  }
  return full;
}

// MLC's template (gemma_instruction; gemma3_instruction differs only in its stop id) over the
// reference vocabulary's begin and end ids.
Json GemmaInstructionTemplate(const std::string& name) {
  return {{"name", name},
          {"system_template", "{system_message}"},
          {"system_message", ""},
          {"system_prefix_token_ids", {1}},
          {"add_role_after_system_message", true},
          {"roles", {{"user", "<start_of_turn>user"}, {"assistant", "<start_of_turn>model"}}},
          {"seps", {"<end_of_turn>\n"}},
          {"role_content_sep", "\n"},
          {"role_empty_sep", "\n"},
          {"stop_str", {"<end_of_turn>"}},
          {"stop_token_ids", {2}}};
}

const FamilySpec& GemmaFamily() {
  static const FamilySpec kSpec = [] {
    FamilySpec f = LlamaFamily();
    f.model_type = "gemma";
    f.default_rms_norm_eps = 1e-6;
    f.configure = Configure;
    f.writer.tiny_kv_heads = 1;
    f.writer.tiny_head_dim = 64;  // wider than hidden / heads, as in the real models
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
