// Phi-3 (MLC's phi3 model): "transformer.h.N.mixer" names, the layer norm listed first, partial
// rotary dims, "su" / "longrope" scaling with long and short factors, multi-head attention.
#include <cmath>

#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

void ReadLongRope(ConfigReader& r, const Json& s, Rope& rope) {
  const std::string path = r.Path("rope_scaling");
  rope.scaling = RopeScaling::kLongRope;
  auto factors = [&](const char* key, std::vector<double>& out) {
    if (!s.contains(key) || !s[key].is_array() ||
        static_cast<int64_t>(s[key].size()) != rope.rotary_dim / 2) {
      r.Fail(path + "/" + key, "expected an array of rotary_dim / 2 = " +
                                   std::to_string(rope.rotary_dim / 2) + " numbers");
      return;
    }
    for (size_t i = 0; i < s[key].size(); ++i) {
      const Json& v = s[key][i];
      if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
        r.Fail(PointerAppend(path + "/" + key, i), "expected a positive number");
        return;
      }
      out.push_back(v.get<double>());
    }
  };
  factors("long_factor", rope.long_factor);
  factors("short_factor", rope.short_factor);
  rope.original_max_position = r.Int("original_max_position_embeddings", 1, int64_t{1} << 30);
  rope.max_position = r.Int("max_position_embeddings", 1, int64_t{1} << 30);
}

void Configure(ConfigReader& r, ModelConfig& c) {
  double partial = r.Number("partial_rotary_factor", 0, 1.0);
  Rope& rope = c.rope();
  rope.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (rope.rotary_dim < 2 || rope.rotary_dim % 2 || rope.rotary_dim > c.head_dim) {
    r.Fail(r.Path("partial_rotary_factor"),
           "expected an even rotary dimension in [2, head_dim]");
    return;
  }
  std::string type;
  const Json* s = r.RopeScaling(&type);
  if (s && (type == "su" || type == "longrope")) {
    ReadLongRope(r, *s, rope);
  } else if (s && (!type.empty() || !s->empty())) {
    r.RejectRopeScaling(type, c.model_type, "su, longrope");
  }
}

void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  const int64_t context = shape.context_window_size;
  mc["model_type"] = "phi3";
  mc["position_embedding_base"] = 10000.0;
  mc["max_position_embeddings"] = context;
  mc["tie_word_embeddings"] = false;
  if (tiny) {  // longrope with a short original window: the long factors are in use
    Json long_f = Json::array(), short_f = Json::array();
    for (int64_t j = 0; j < mc["head_dim"].get<int64_t>() / 2; ++j) {
      long_f.push_back(1.0 + 0.25 * static_cast<double>(j));
      short_f.push_back(1.0 + 0.01 * static_cast<double>(j));
    }
    mc["rope_scaling"] = {{"type", "longrope"}, {"long_factor", long_f}, {"short_factor", short_f}};
    mc["original_max_position_embeddings"] = 64;
  }
}

}  // namespace

const FamilySpec& Phi3Family() {
  static const FamilySpec kSpec = [] {
    FamilySpec f;
    f.model_type = "phi3";
    f.names.embed = "transformer.embd";
    f.names.final_norm = "transformer.norm";
    f.names.layer_root = "transformer.h.";
    f.names.qkv = "mixer.qkv_proj";
    f.names.o = "mixer.out_proj";
    f.names.attn_norm = "ln";
    f.names.mlp_norm = "post_attention_layernorm";
    f.names.norm_first = true;
    f.configure = Configure;
    f.params = DecoderParams;
    f.writer.tiny_kv_heads = 4;
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
