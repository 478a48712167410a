// Gemma 3 (MLC's gemma3 model, python/mlc_llm/model/gemma3/: model_type gemma3 for the published
// text-and-vision packages' decoder, gemma3_text for the 1B text-only ones; numerics of Hugging
// Face's Gemma3TextModel): the decoder under "language_model.model." read from
// model_config.text_config; unfused q/k/v with per-head q/k RMSNorm, query_pre_attn_scalar, norms
// around both attention and MLP as Gemma 2's, tanh GeLU, tied embeddings scaled by sqrt(hidden).
// Every sliding_window_pattern-th layer attends to everything with the global rotary (rope_theta,
// with a linear rope_scaling); the others attend to the last sliding_window positions with the local
// rotary (rope_local_base_freq, unscaled). MLC's own build uses one rotary (rope_theta, unscaled) for
// all layers; this program follows Hugging Face (README).
#include <cmath>

#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {
namespace {

// rope_scaling of the global layers: absent, null, MLC's default 0 or an empty object (none), or
// {"rope_type": "linear", "factor": f}.
void ReadGlobalRopeScaling(ConfigReader& r, const std::string& model_type, Rope& rope) {
  if (!r.Has("rope_scaling")) return;
  const Json& v = r.Get("rope_scaling");
  if (v.is_number() && v.get<double>() == 0) return;
  std::string type;
  const Json* s = r.RopeScaling(&type);
  if (!s || (type.empty() && s->empty())) return;
  if (type != "linear") return r.RejectRopeScaling(type, model_type, "linear");
  if (!s->contains("factor") || !(*s)["factor"].is_number() || !((*s)["factor"].get<double>() >= 1) ||
      !std::isfinite((*s)["factor"].get<double>())) {
    return r.Fail(r.Path("rope_scaling") + "/factor", "expected a number >= 1");
  }
  rope.scaling = RopeScaling::kLinear;
  rope.factor = (*s)["factor"].get<double>();
}

// Which layers attend to everything: layer_types when given, else every pattern-th layer.
std::vector<bool> ReadFullLayers(ConfigReader& r, int64_t layers) {
  if (r.Has("layer_types")) return ReadLayerTypes(r, layers);
  std::vector<bool> full(static_cast<size_t>(layers), false);
  const int64_t pattern = r.Int("sliding_window_pattern", 1, 4096, 6);
  for (int64_t l = 0; l < layers; ++l) full[static_cast<size_t>(l)] = (l + 1) % pattern == 0;
  return full;
}

void Configure(ConfigReader& r, ModelConfig& c) {
  ConfigureGemma(r, c);
  c.tie_word_embeddings = true;
  // MLC's Gemma3TextConfig keeps the Hugging Face fields it has no member for in text_config.kwargs:
  // each of those is read from text_config, else from kwargs.
  ConfigReader kwargs = r.Has("kwargs") ? r.Sub("kwargs") : r;
  auto from = [&](const char* key) -> ConfigReader& { return r.Has(key) ? r : kwargs; };
  c.attn_logit_softcap = from("attn_logit_softcapping").Number("attn_logit_softcapping", 0, 0);
  c.final_logit_softcap = from("final_logit_softcapping").Number("final_logit_softcapping", 0, 0);
  c.query_pre_attn_scalar = r.Number("query_pre_attn_scalar", 1, 256);
  const char* window_key = r.Has("sliding_window_size") ? "sliding_window_size" : "sliding_window";
  const int64_t window = from(window_key).Int(window_key, 1, int64_t{1} << 30);
  const bool typed = r.Has("layer_types") || kwargs.Has("layer_types");
  const std::vector<bool> full = ReadFullLayers(from(typed ? "layer_types" : "sliding_window_pattern"), c.num_layers);
  Rope local = c.rope();
  ConfigReader& local_base = from("rope_local_base_freq");
  local.theta = local_base.Number("rope_local_base_freq", 1, 10000.0);
  if (local.theta <= 1) local_base.Fail(local_base.Path("rope_local_base_freq"), "expected a number > 1");
  ReadGlobalRopeScaling(r, c.model_type, c.rope());
  if (r.failed()) return;
  c.layer_sliding_window = window;
  c.ropes = {c.rope(), local};
  for (size_t l = 0; l < c.layers.size(); ++l) {
    c.layers[l].sliding_window = full[l] ? 0 : window;
    c.layers[l].rope = full[l] ? 0 : 1;
  }
}

// text_config from the common fields, as MLC's converter writes it for Gemma 3: tiny (two layers:
// one sliding, one full; a linear scaling so the global rotary differs), gemma-3-1b's 26 layers
// or gemma-3-4b's 34 (a window of 1024 and a linear scaling of 8, as the larger models have).
void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  const bool large = shape.name == "gemma-3-4b";
  Json text = mc;
  text["hidden_activation"] = "gelu_pytorch_tanh";
  text["attention_bias"] = false;
  text["position_embedding_base"] = 1000000.0;
  text["rope_local_base_freq"] = 10000.0;
  text["rope_scaling"] = tiny || large ? Json{{"rope_type", "linear"}, {"factor", 8.0}} : Json(nullptr);
  text["query_pre_attn_scalar"] = tiny ? 48 : 256;
  text["sliding_window_size"] = tiny ? 8 : large ? 1024 : 512;
  text["sliding_window_pattern"] = tiny ? 2 : 6;
  text["attn_logit_softcapping"] = nullptr;
  text["final_logit_softcapping"] = nullptr;
  for (const char* k : {"context_window_size", "prefill_chunk_size", "tensor_parallel_shards", "max_batch_size"}) {
    text[k] = mc[k];
  }
  Json out = {{"text_config", text}, {"vocab_size", mc["vocab_size"]}, {"is_text_model", true}};
  for (const char* k : {"tensor_parallel_shards", "max_batch_size", "context_window_size", "prefill_chunk_size"}) {
    out[k] = mc[k];
  }
  out["sliding_window_size"] = text["sliding_window_size"];
  mc = out;
}

FamilySpec Gemma3Spec(const char* model_type) {
  FamilySpec f;
  f.model_type = model_type;
  f.text_config = "text_config";
  f.default_rms_norm_eps = 1e-6;
  SetGemmaNames(f.names, "language_model.model.");
  f.configure = Configure;
  f.params = DecoderParams;
  f.writer.tiny_kv_heads = 1;
  f.writer.tiny_head_dim = 64;
  f.writer.model_config = WriteConfig;
  f.writer.conv_template = [] { return GemmaInstructionTemplate("gemma3_instruction"); };
  return f;
}

}  // namespace

const FamilySpec& Gemma3Family() {
  static const FamilySpec kSpec = Gemma3Spec("gemma3");
  return kSpec;
}

const FamilySpec& Gemma3TextFamily() {
  static const FamilySpec kSpec = Gemma3Spec("gemma3_text");
  return kSpec;
}

}  // namespace mlc::cpu
