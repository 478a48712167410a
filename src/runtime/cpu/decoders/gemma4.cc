// Gemma 4 (model_type gemma4; the E2B layout of ../shared/reference/gemma-4-E2B-it, numerics of
// Hugging Face's Gemma4ForConditionalGeneration): the decoder under "language_model." read from
// model_config.text_config, exporting the token pair. Sliding layers (head_dim, window, default
// rotary base) and full layers (global_head_dim, proportional rotary: only partial_rotary_factor of
// the pairs turn) by layer_types; unfused q/k/v with per-head q/k RMSNorm and a gainless v norm,
// attention scale 1; the last num_kv_shared_layers layers read the keys and values of the last
// earlier layer of their type (no projections of their own) and have double-wide MLPs with
// use_double_wide_mlp; per-layer embeddings looked up by token id and mixed with a projection of
// the input rows; each layer's output times its layer_scalar; tied LM head, logits capped at 30.
// The audio tower (towers/gemma4_audio.h) serves the manifest's audio input when model_config has
// an audio_config. vision_config is not read: the E2B text-and-audio package has no vision tower.
#include <cmath>

#include "runtime/cpu/decoders/decoders.h"
#include "runtime/cpu/towers/gemma4_audio.h"

namespace mlc::cpu {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 20;

// rope_parameters.<type>: the rotary of one layer type.
Rope ReadRope(ConfigReader& r, const char* type, int64_t head_dim) {
  Rope rope;
  rope.rotary_dim = head_dim;
  const std::string path = r.Path("rope_parameters") + "/" + type;
  if (!r.Has("rope_parameters") || !r.Get("rope_parameters").is_object() ||
      !r.Get("rope_parameters").contains(type) || !r.Get("rope_parameters")[type].is_object()) {
    r.Fail(path, "required: an object with rope_type and rope_theta");
    return rope;
  }
  const Json& p = r.Get("rope_parameters")[type];
  const std::string kind = p.value("rope_type", std::string("default"));
  if (!p.contains("rope_theta") || !p["rope_theta"].is_number() || p["rope_theta"].get<double>() <= 1) {
    r.Fail(path + "/rope_theta", "expected a number > 1");
    return rope;
  }
  rope.theta = p["rope_theta"].get<double>();
  if (p.contains("factor") && (!p["factor"].is_number() || p["factor"].get<double>() != 1.0)) {
    r.Unsupported(path + "/factor", "only factor 1 is supported");
  }
  if (kind == "proportional") {
    const double part = p.value("partial_rotary_factor", 1.0);
    if (!(part > 0 && part <= 1)) {
      r.Fail(path + "/partial_rotary_factor", "expected a number in (0, 1]");
      return rope;
    }
    rope.scaling = RopeScaling::kProportional;
    rope.rotated_pairs = static_cast<int64_t>(std::floor(part * static_cast<double>(head_dim) / 2));
    if (rope.rotated_pairs < 1) r.Fail(path + "/partial_rotary_factor", "turns no pair of the head");
  } else if (kind != "default") {
    r.Unsupported(path + "/rope_type", "expected default or proportional, got \"" + kind + "\"");
  }
  return rope;
}

// The features of the Gemma 4 configurations this program does not implement.
void RejectUnsupported(ConfigReader& r) {
  if (r.Bool("attention_k_eq_v", false)) {
    r.Unsupported(r.Path("attention_k_eq_v"), "keys shared with values (the larger Gemma 4 models) are not supported");
  }
  if (r.Bool("enable_moe_block", false)) {
    r.Unsupported(r.Path("enable_moe_block"), "the mixture-of-experts block is not supported");
  }
  if (r.Has("use_bidirectional_attention") && !r.Get("use_bidirectional_attention").is_null()) {
    r.Unsupported(r.Path("use_bidirectional_attention"), "expected null (causal attention everywhere)");
  }
}


void Configure(ConfigReader& r, ModelConfig& c) {
  ConfigureGemma(r, c);
  RejectUnsupported(r);
  c.final_logit_softcap = r.Number("final_logit_softcapping", 0, 0);
  c.query_pre_attn_scalar = 1.0;  // attention scale 1: q and k are normalized per head
  c.v_norm = true;
  c.layer_scalar = true;
  const int64_t global_head_dim = r.Int("global_head_dim", 2, 4096, c.head_dim);
  const int64_t window = r.Int("sliding_window", 1, int64_t{1} << 30);
  const int64_t shared = r.Int("num_kv_shared_layers", 0, c.num_layers, 0);
  const bool double_wide = r.Bool("use_double_wide_mlp", false);
  c.per_layer.width = r.Int("hidden_size_per_layer_input", 0, kMaxDim, 0);
  c.per_layer.vocab = r.Int("vocab_size_per_layer_input", 1, int64_t{1} << 24, c.vocab_size);
  c.per_layer.pad_token_id = r.Int("pad_token_id", 0, c.per_layer.vocab - 1, 0);
  c.layer_sliding_window = window;
  const std::vector<bool> full = ReadLayerTypes(r, c.num_layers);
  if (r.failed()) return;
  c.ropes = {ReadRope(r, "sliding_attention", c.head_dim), ReadRope(r, "full_attention", global_head_dim)};
  if (c.quantized() && c.per_layer.width % 32 != 0) {
    r.Fail(r.Path("hidden_size_per_layer_input"), "must be a multiple of 32 for " + c.quantization);
  }
  // The layers from first_shared on read the keys and values of the last earlier layer of their type.
  const int64_t first_shared = c.num_layers - shared;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerPlan& p = c.layers[static_cast<size_t>(l)];
    const bool is_full = full[static_cast<size_t>(l)];
    p.head_dim = is_full ? global_head_dim : c.head_dim;
    p.sliding_window = is_full ? 0 : window;
    p.rope = is_full ? 1 : 0;
    if (l < first_shared) continue;
    p.kv = KvUse::kShared;
    p.kv_source = -1;
    for (int64_t j = first_shared - 1; j >= 0; --j) {
      if (full[static_cast<size_t>(j)] == is_full) {
        p.kv_source = j;
        break;
      }
    }
    if (double_wide && first_shared > 0) p.intermediate_size *= 2;
  }
  ConfigReader top = r.Top();
  if (top.Has("audio_config") && !r.failed()) {
    if (auto tower = ReadGemma4AudioTower(top, c)) c.towers.push_back(std::move(tower));
  }
}

// The converter's order: embeddings, per-layer tables and projection, the layers, the final norm,
// then the audio tower and its embedder.
std::vector<ParamSpec> Params(const ModelConfig& c) {
  const Names& n = c.family->names;
  const int64_t hs = c.hidden_size, plw = c.per_layer.width;
  ParamListBuilder b(c);
  b.Matrix(n.embed, c.vocab_size, hs);
  if (plw > 0) {
    for (int64_t l = 0; l < c.num_layers; ++l) b.Matrix(n.per_layer_embed + "." + std::to_string(l), c.per_layer.vocab, plw);
    b.Matrix(n.per_layer_model_projection, c.num_layers * plw, hs);
    b.Vector(n.per_layer_projection_norm + ".weight", plw);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerPlan& p = c.layers[static_cast<size_t>(l)];
    const std::string pre = n.Layer(l);
    b.Matrix(pre + n.q, p.q_size(), hs);
    b.Vector(pre + n.q_norm + ".weight", p.head_dim);
    if (p.kv == KvUse::kOwn) {
      b.Matrix(pre + n.k, p.kv_size(), hs);
      b.Matrix(pre + n.v, p.kv_size(), hs);
      b.Vector(pre + n.k_norm + ".weight", p.head_dim);
    }
    b.Matrix(pre + n.o, hs, p.q_size());
    b.Matrix(pre + n.gate_up, 2 * p.intermediate_size, hs);
    b.Matrix(pre + n.down, hs, p.intermediate_size);
    for (const std::string* norm : {&n.attn_norm, &n.attn_out_norm, &n.mlp_norm, &n.mlp_out_norm}) {
      b.Vector(pre + *norm + ".weight", hs);
    }
    if (plw > 0) {
      b.Float(pre + n.per_layer_gate + ".weight", {plw, hs});  // kept in float by the converter
      b.Matrix(pre + n.per_layer_projection, hs, plw);
      b.Vector(pre + n.per_layer_norm + ".weight", hs);
    }
    b.Float(pre + "layer_scalar", {1});
  }
  b.Vector(n.final_norm + ".weight", hs);
  for (const auto& tower : c.towers) tower->AppendParams(b);
  return b.Take();
}

// text_config from the common fields; tiny: six layers (two sliding, one full, twice, the last three
// sharing KV: like E2B's, the unshared layers end sliding, full, which llama.cpp's gemma4 assumes),
// else E2B's 35 (every fifth full, the last 20 sharing); with shape.audio the audio
// tower's config and prompt ids (the reference vocabulary's audio tokens for tiny).
void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  Json text = mc;
  const int64_t layers = tiny ? 6 : 35;
  Json types = Json::array();
  for (int64_t l = 0; l < layers; ++l) types.push_back((l % (tiny ? 3 : 5)) == (tiny ? 2 : 4) ? "full_attention" : "sliding_attention");
  text["num_hidden_layers"] = layers;
  text["global_head_dim"] = 2 * text["head_dim"].get<int64_t>();
  text["hidden_activation"] = "gelu_pytorch_tanh";
  text["max_position_embeddings"] = 131072;
  text["pad_token_id"] = 0;
  text["tie_word_embeddings"] = true;
  text["attention_bias"] = false;
  text["sliding_window"] = tiny ? 8 : 512;
  text["layer_types"] = types;
  text["final_logit_softcapping"] = 30.0;
  text["use_bidirectional_attention"] = nullptr;
  text["vocab_size_per_layer_input"] = text["vocab_size"];
  text["hidden_size_per_layer_input"] = tiny ? 32 : 256;
  text["attention_k_eq_v"] = false;
  text["num_global_key_value_heads"] = nullptr;
  text["num_kv_shared_layers"] = tiny ? 3 : 20;
  text["enable_moe_block"] = false;
  text["use_double_wide_mlp"] = true;
  text["rope_parameters"] = {
      {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}},
      {"full_attention", {{"rope_type", "proportional"}, {"partial_rotary_factor", 0.25}, {"rope_theta", 1000000.0}}}};
  for (const char* k : {"context_window_size", "prefill_chunk_size", "tensor_parallel_shards", "max_batch_size"}) {
    text.erase(k);
  }
  Json out = {{"text_config", text}};
  if (shape.audio) {
    out["audio_config"] = Gemma4AudioConfigJson(tiny);
    out["boa_token_id"] = tiny ? 3 : 256000;         // ReferenceTokens::kAudioStart for tiny
    out["audio_token_id"] = tiny ? 4 : 258881;       // kAudioPlaceholder
    out["eoa_token_index"] = tiny ? 5 : 258883;      // kAudioEnd
  }
  for (const char* k : {"tensor_parallel_shards", "max_batch_size", "context_window_size", "prefill_chunk_size"}) {
    out[k] = mc[k];
  }
  out["sliding_window_size"] = -1;
  mc = out;
}

// Gemma 4's turns (its published chat template: "<|turn>role\n ... <turn|>\n", the system turn
// left out when empty) over the reference vocabulary's begin and end ids; its thinking mode is
// read from the assistant role (ParseConvTemplate).
Json Gemma4Template() {
  return {{"name", "gemma4"},
          {"system_template", "<|turn>system\n{system_message}<turn|>\n"},
          {"system_message", ""},
          {"render_empty_system_message", false},
          {"system_prefix_token_ids", {1}},
          {"add_role_after_system_message", true},
          {"roles", {{"user", "<|turn>user"}, {"assistant", "<|turn>model"}}},
          {"seps", {"<turn|>\n"}},
          {"role_content_sep", "\n"},
          {"role_empty_sep", "\n"},
          {"stop_str", {"<turn|>"}},
          {"stop_token_ids", {2}}};
}

}  // namespace

const FamilySpec& Gemma4Family() {
  static const FamilySpec kSpec = [] {
    FamilySpec f;
    f.model_type = "gemma4";
    f.text_config = "text_config";
    f.default_rms_norm_eps = 1e-6;
    Names& n = f.names;
    const std::string root = "language_model.";
    SetGemmaNames(n, root);
    n.per_layer_embed = root + "embed_tokens_per_layer";
    n.per_layer_model_projection = root + "per_layer_model_projection";
    n.per_layer_projection_norm = root + "per_layer_projection_norm";
    n.per_layer_gate = "per_layer_input_gate";
    n.per_layer_projection = "per_layer_projection";
    n.per_layer_norm = "post_per_layer_input_norm";
    f.configure = Configure;
    f.params = Params;
    f.pair = GenerationPair::kTokens;
    f.writer.tiny_kv_heads = 1;
    f.writer.tiny_head_dim = 32;
    f.writer.model_config = WriteConfig;
    f.writer.conv_template = Gemma4Template;
    f.writer.audio_tower = true;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
