// LLaVA 1.5 (MLC's llava model, python/mlc_llm/model/llava/): the llama decoder under
// "language_model." read from model_config.text_config, and the CLIP tower with its projector
// (towers/clip.h) read from model_config.vision_config, serving the image input of the manifest
// (center crop to image_size, (image_size / patch_size)^2 rows at image_token_index).
#include "runtime/cpu/decoders/decoders.h"
#include "runtime/cpu/towers/clip.h"

namespace mlc::cpu {
namespace {

void Configure(ConfigReader& r, ModelConfig& c) {
  RequireSilu(r);
  if (!r.failed()) RequireNoRopeScaling(r, c);
  ConfigReader top = r.Top();
  const int64_t feature_layer = top.Int("vision_feature_layer", -1024, -1, -2);
  const int64_t image_token = top.Int("image_token_index", 0, c.vocab_size - 1);
  std::string strategy = top.String({"vision_feature_select_strategy"});
  if (!strategy.empty() && strategy != "default") {
    top.Unsupported(top.Path("vision_feature_select_strategy"), "expected \"default\" (the class row dropped)");
  }
  std::string act = top.String({"projector_hidden_act"});
  if (!act.empty() && act != "gelu") top.Unsupported(top.Path("projector_hidden_act"), "expected gelu");
  if (r.failed()) return;
  ConfigReader vision = top.Sub("vision_config");
  if (auto tower = ReadClipTower(vision, c, feature_layer, image_token)) c.towers.push_back(std::move(tower));
}

// The converter's order: vision tower, projector, then the language model.
std::vector<ParamSpec> Params(const ModelConfig& c) {
  ParamListBuilder b(c);
  for (const auto& tower : c.towers) tower->AppendParams(b);
  std::vector<ParamSpec> out = b.Take();
  for (ParamSpec& p : DecoderParams(c)) out.push_back(std::move(p));
  return out;
}

// The decoder's fields move into text_config; the tower's config beside it (tiny: a small tower
// over 28 x 28 images in 16 patches; else CLIP ViT-L/14 at 336 pixels, LLaVA 1.5's).
void WriteConfig(const WriterShape& shape, Json& mc) {
  const bool tiny = shape.tiny;
  const int64_t context = shape.context_window_size;
  Json text = mc;
  text["hidden_act"] = "silu";
  text["rope_theta"] = 10000.0;
  text["tie_word_embeddings"] = false;
  text["rms_norm_eps"] = 1e-5;
  text["max_position_embeddings"] = context;
  Json vision = tiny ? Json{{"hidden_size", 64}, {"intermediate_size", 128}, {"num_attention_heads", 2},
                            {"num_hidden_layers", 3}, {"patch_size", 7}, {"image_size", 28},
                            {"projection_dim", 64}}
                     : Json{{"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_attention_heads", 16},
                            {"num_hidden_layers", 24}, {"patch_size", 14}, {"image_size", 336},
                            {"projection_dim", 768}};
  vision["layer_norm_eps"] = 1e-5;
  vision["num_channels"] = 3;
  vision["vocab_size"] = 32000;
  const int64_t vocab = mc["vocab_size"].get<int64_t>();
  mc = Json{{"text_config", text},
            {"vision_config", vision},
            {"vocab_size", vocab},
            {"image_token_index", tiny ? vocab - 1 : 32000},
            {"vision_feature_layer", -2},
            {"vision_feature_select_strategy", "default"},
            {"projector_hidden_act", "gelu"},
            {"context_window_size", text["context_window_size"]},
            {"prefill_chunk_size", text["prefill_chunk_size"]},
            {"tensor_parallel_shards", 1},
            {"max_batch_size", 1}};
}

// MLC's "llava" conversation template.
Json ConvTemplate() {
  return {{"name", "llava"},
          {"system_template", "{system_message}"},
          {"system_message", "\n"},
          {"system_prefix_token_ids", {1}},
          {"add_role_after_system_message", false},
          {"roles", {{"user", "USER"}, {"assistant", "ASSISTANT"}}},
          {"seps", {" "}},
          {"role_content_sep", ": "},
          {"role_empty_sep", ":"},
          {"stop_str", {"</s>"}},
          {"stop_token_ids", {2}}};
}

}  // namespace

const FamilySpec& LlavaFamily() {
  static const FamilySpec kSpec = [] {
    FamilySpec f = LlamaFamily();
    f.model_type = "llava";
    f.text_config = "text_config";
    const std::string p = "language_model.";
    f.names.embed = p + f.names.embed;
    f.names.final_norm = p + f.names.final_norm;
    f.names.lm_head = p + f.names.lm_head;
    f.names.layer_root = p + f.names.layer_root;
    f.configure = Configure;
    f.params = Params;
    f.writer.model_config = WriteConfig;
    f.writer.conv_template = ConvTemplate;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
