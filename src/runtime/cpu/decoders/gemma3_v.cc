// Gemma 3 with vision (MLC's gemma3_v model, python/mlc_llm/model/gemma3/gemma3v_model.py): the
// gemma3 decoder (gemma3.cc) under "language_model." read from model_config.text_config, and
// SigLIP with Gemma 3's projector (towers/siglip.h) read from model_config.vision_config, serving
// the image input of the manifest (stretch to image_size, mm_tokens_per_image rows at
// image_token_index between boi_token_index and eoi_token_index: the gemma-3 preset at 4B's shape).
#include "mlc_manifest/reference_model.h"
#include "runtime/cpu/decoders/decoders.h"
#include "runtime/cpu/towers/siglip.h"

namespace mlc::cpu {
namespace {

void Configure(ConfigReader& r, ModelConfig& c) {
  Gemma3Family().configure(r, c);
  if (r.failed()) return;
  ConfigReader top = r.Top();
  if (auto tower = ReadSiglipTower(top, c)) c.towers.push_back(std::move(tower));
}

// The converter's order: the language model, then the vision tower and the projector.
std::vector<ParamSpec> Params(const ModelConfig& c) {
  ParamListBuilder b(c);
  for (const auto& tower : c.towers) tower->AppendParams(b);
  std::vector<ParamSpec> out = DecoderParams(c);
  for (ParamSpec& p : b.Take()) out.push_back(std::move(p));
  return out;
}

// Gemma 3's model_config with the tower's beside text_config, as MLC's Gemma3VConfig holds it: tiny
// (hidden 48 and an MLP of 80, both leaving a partial 4-bit group; 32-pixel images in an 8 x 8 grid
// pooled to 16 rows; the reference vocabulary's image ids) or the SigLIP of Gemma 3 4B and up.
void WriteConfig(const WriterShape& shape, Json& mc) {
  Gemma3Family().writer.model_config(shape, mc);
  const bool tiny = shape.tiny;
  mc.erase("is_text_model");
  mc["vision_config"] = Json{{"hidden_size", tiny ? 48 : 1152},
                             {"intermediate_size", tiny ? 80 : 4304},
                             {"num_attention_heads", tiny ? 2 : 16},
                             {"num_hidden_layers", tiny ? 2 : 27},
                             {"patch_size", tiny ? 4 : 14},
                             {"image_size", tiny ? 32 : 896},
                             {"num_channels", 3},
                             {"layer_norm_eps", 1e-6},
                             {"hidden_act", "gelu_pytorch_tanh"},
                             {"vision_use_head", false}};
  mc["mm_tokens_per_image"] = tiny ? 16 : 256;
  mc["boi_token_index"] = tiny ? ReferenceTokens::kImageStart : 255999;
  mc["image_token_index"] = tiny ? ReferenceTokens::kImagePlaceholder : 262144;
  mc["eoi_token_index"] = tiny ? ReferenceTokens::kImageEnd : 256000;
}

}  // namespace

const FamilySpec& Gemma3VFamily() {
  static const FamilySpec kSpec = [] {
    FamilySpec f = Gemma3Family();
    f.model_type = "gemma3_v";
    f.configure = Configure;
    f.params = Params;
    f.writer.model_config = WriteConfig;
    return f;
  }();
  return kSpec;
}

}  // namespace mlc::cpu
