// Qwen2 (MLC's qwen2 model): the llama layout with a bias on the fused q/k/v projection
// ("self_attn.c_attn") and tied embeddings where the config says so.
#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

void Configure(ConfigReader& r, ModelConfig& c) {
  RequireSilu(r);
  if (!r.failed()) RequireNoRopeScaling(r, c);
}

void WriteConfig(const WriterShape&, Json& mc) {
  mc["hidden_act"] = "silu";
  mc["rope_theta"] = 1000000.0;
  mc["tie_word_embeddings"] = true;
}

}  // namespace

const FamilySpec& Qwen2Family() {
  static const FamilySpec kSpec = [] {
    FamilySpec f = LlamaFamily();
    f.model_type = "qwen2";
    f.names.qkv = "self_attn.c_attn";
    f.names.qkv_bias = true;
    f.configure = Configure;
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
