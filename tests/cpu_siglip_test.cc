// Gemma 3's SigLIP tower and projector (towers/siglip.h) on their own: tiny configs with random
// parameters in the package's dtypes for every quantization (widths that leave a partial last
// 4-bit group: hidden 48, intermediate 80), image_embed against a float64 implementation written
// here from Hugging Face's SiglipVisionModel and Gemma3MultiModalProjector, the manifest input and
// parameter list it declares (tiny and Gemma 3 4B's shapes), and the errors: pixels of the wrong
// shape or dtype, a missing or misshapen tower tensor, unsupported config values.
#include <gtest/gtest.h>

#include <atomic>

#include "base/interrupt.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/towers/siglip.h"
#include "runtime/cpu/weights.h"
#include "support/reference64.h"
#include "support/siglip64.h"
#include "support/tower_params.h"
#include "support/family_checks.h"
#include "support/media_checks.h"
#include "support/vit64.h"

namespace mlc {
namespace {

using test::Params64;
using test::Vec;

constexpr int64_t kTextHidden = 64;
constexpr int64_t kImage = 32;

Json TinyVision() {
  return Json{{"hidden_size", 48},     {"intermediate_size", 80}, {"num_attention_heads", 2},
              {"num_hidden_layers", 2}, {"patch_size", 4},         {"image_size", kImage},
              {"num_channels", 3},     {"layer_norm_eps", 1e-6},  {"hidden_act", "gelu_pytorch_tanh"}};
}

Json TopConfig(Json vision, int64_t tokens = 16) {
  return Json{{"vision_config", std::move(vision)}, {"mm_tokens_per_image", tokens},
              {"boi_token_index", 500}, {"image_token_index", 510}, {"eoi_token_index", 501}};
}

cpu::ModelConfig TextConfig(cpu::Quant quant, const std::string& name, int64_t hidden = kTextHidden,
                            int64_t vocab = 512) {
  return test::TowerTextConfig(quant, name, hidden, vocab);
}

using Built = test::ReadResult;

Built Read(const Json& model_config, const cpu::ModelConfig& c) {
  return test::ReadTower(cpu::ReadSiglipTower, model_config, c);
}

// A deterministic image (RGB, NHWC).
std::vector<uint8_t> Pixels(int64_t s) {
  std::vector<uint8_t> px(static_cast<size_t>(s * s * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 37 + i / 5) % 256);
  return px;
}

using test::PixelTensor;

using TinyTower = test::TowerCase;

TinyTower MakeTiny(cpu::Quant quant, const std::string& name, int64_t tokens = 16) {
  return test::MakeTowerCase(cpu::ReadSiglipTower, TopConfig(TinyVision(), tokens), TextConfig(quant, name),
                             [](const cpu::Tower&, const std::vector<ParamSpec>& specs) {
                               return test::RandomTowerParams(specs, 17);
                             });
}

struct QuantCase {
  cpu::Quant quant;
  const char* name;
};
void PrintTo(const QuantCase& q, std::ostream* os) { *os << q.name; }

class CpuSiglipRows : public ::testing::TestWithParam<QuantCase> {};

// image_embed agrees with the float64 SigLIP and projector; uint32 pixels give the same rows.
TEST_P(CpuSiglipRows, MatchFloat64Reference) {
  const QuantCase q = GetParam();
  for (int64_t tokens : {int64_t{16}, int64_t{4}}) {  // pool 2 x 2 and 4 x 4 over the 8 x 8 grid
    TinyTower t = MakeTiny(q.quant, q.name, tokens);
    ASSERT_TRUE(t.tower);
    auto bound = test::BindTower(t, t.specs, t.params);
    ASSERT_TRUE(bound) << bound.error().ToString();
    std::vector<uint8_t> px = Pixels(kImage);
    auto rows = (*bound)->Embed(PixelTensor(px, kImage), "image_embed");
    ASSERT_TRUE(rows) << rows.error().ToString();
    ASSERT_EQ(rows->shape(), (std::vector<int64_t>{tokens, kTextHidden}));
    Params64 p64(t.params);
    test::SiglipReference64 ref{t.mc["vision_config"], p64, t.c.quantized(), tokens};
    Vec flat;
    for (const Vec& r : ref.Run(px, kTextHidden)) flat.insert(flat.end(), r.begin(), r.end());
    std::vector<float> got(rows->data<float>(), rows->data<float>() + rows->Elements());
    const double err = test::RelError(got, flat);
    std::printf("%s tokens=%lld relative error %.2e\n", q.name, static_cast<long long>(tokens), err);
    // Where the kernels take the 8 x 8 patch rows as bfloat16 (the AMX path), the reference rounds the
    // same operands, but an activation that float32 and float64 put on either side of a rounding
    // boundary moves by a whole bfloat16 step (2^-8 relative) in one of them, and the layers after
    // it spread that: the bound is then 1e-2 (measured: 4e-3), still far below a wrong product.
    const bool bf16 = test::RoundingFor(t.c.quantized(), (kImage / 4) * (kImage / 4)) == test::Q4Rounding::kBf16;
    EXPECT_LT(err, bf16 ? 1e-2 : 1e-3) << q.name << " tokens " << tokens;

    auto rows32 = (*bound)->Embed(test::WidePixelTensor(px, kImage), "image_embed");
    ASSERT_TRUE(rows32) << rows32.error().ToString();
    EXPECT_EQ(std::memcmp(rows32->data<float>(), rows->data<float>(), rows->Bytes()), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuSiglipRows,
                         ::testing::Values(QuantCase{cpu::Quant::kQ4F16, "q4f16_1"}, QuantCase{cpu::Quant::kQ4F32, "q4f32_1"},
                                           QuantCase{cpu::Quant::kQ0F16, "q0f16"}, QuantCase{cpu::Quant::kQ0F32, "q0f32"}),
                         [](const auto& i) { return std::string(i.param.name); });

TEST(CpuSiglip, DeclaresTheManifestInputAndParameterOrder) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1");
  ASSERT_TRUE(t.tower);
  EXPECT_EQ(t.tower->adapter(), "image");
  EXPECT_EQ(t.tower->function(), "image_embed");
  TaskInput in = t.tower->Input();
  const ImageDecode* image = std::get_if<ImageDecode>(&in.processor);
  ASSERT_TRUE(image);
  EXPECT_EQ(image->mode, ResizeMode::kStretch);
  EXPECT_EQ(image->height, kImage);
  EXPECT_EQ(image->width, kImage);
  EXPECT_EQ(image->num_embeddings, 16);
  EXPECT_EQ(in.adapter, std::optional<std::string>("image"));
  EXPECT_EQ(in.prompt, std::optional<PromptInsertion>(PromptInsertion{{500}, 510, {501}}));
  ASSERT_FALSE(t.specs.empty());
  EXPECT_EQ(t.specs.front().name, "vision_tower.vision_model.embeddings.patch_embedding.weight");
  EXPECT_EQ(t.specs.back().name, "multi_modal_projector.mm_input_projection.q_scale");
  struct Want {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  // The partial groups: 48 inputs are two groups (8 words), 80 are three (12 words).
  for (const Want& w : std::vector<Want>{
           {"vision_tower.vision_model.embeddings.patch_embedding.weight", "float16", {48, 3, 4, 4}},
           {"vision_tower.vision_model.embeddings.patch_embedding.bias", "float16", {48}},
           {"vision_tower.vision_model.embeddings.position_embedding.q_weight", "uint32", {64, 8}},
           {"vision_tower.vision_model.embeddings.position_embedding.q_scale", "float16", {64, 2}},
           {"vision_tower.vision_model.encoder.layers.1.self_attn.k_proj.q_weight", "uint32", {48, 8}},
           {"vision_tower.vision_model.encoder.layers.1.self_attn.k_proj.bias", "float16", {48}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc1.q_weight", "uint32", {80, 8}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc2.q_weight", "uint32", {48, 12}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc2.q_scale", "float16", {48, 3}},
           {"vision_tower.vision_model.encoder.layers.0.layer_norm2.bias", "float16", {48}},
           {"vision_tower.vision_model.post_layernorm.weight", "float16", {48}},
           {"multi_modal_projector.mm_soft_emb_norm.weight", "float16", {48}},
           {"multi_modal_projector.mm_input_projection.q_weight", "uint32", {64, 8}}}) {
    const ParamSpec* p = test::FindParam(t.specs, w.name);
    ASSERT_NE(p, nullptr) << w.name;
    EXPECT_EQ(p->dtype, w.dtype) << w.name;
    EXPECT_EQ(test::SpecShape(*p), w.shape) << w.name;
  }
  // A layer's order as MLC's modules declare it.
  std::vector<std::string> layer;
  for (const ParamSpec& s : t.specs) {
    const std::string pre = "vision_tower.vision_model.encoder.layers.0.";
    if (s.name.rfind(pre, 0) == 0) layer.push_back(s.name.substr(pre.size()));
  }
  EXPECT_EQ(layer, (std::vector<std::string>{
                       "self_attn.k_proj.q_weight", "self_attn.k_proj.q_scale", "self_attn.k_proj.bias",
                       "self_attn.v_proj.q_weight", "self_attn.v_proj.q_scale", "self_attn.v_proj.bias",
                       "self_attn.q_proj.q_weight", "self_attn.q_proj.q_scale", "self_attn.q_proj.bias",
                       "self_attn.out_proj.q_weight", "self_attn.out_proj.q_scale", "self_attn.out_proj.bias",
                       "layer_norm1.weight", "layer_norm1.bias", "mlp.fc1.q_weight", "mlp.fc1.q_scale",
                       "mlp.fc1.bias", "mlp.fc2.q_weight", "mlp.fc2.q_scale", "mlp.fc2.bias",
                       "layer_norm2.weight", "layer_norm2.bias"}));
  // Float packages keep every matrix as a weight in the float dtype.
  TinyTower f = MakeTiny(cpu::Quant::kQ0F32, "q0f32");
  ASSERT_TRUE(f.tower);
  const ParamSpec* pos = test::FindParam(f.specs, "vision_tower.vision_model.embeddings.position_embedding.weight");
  ASSERT_NE(pos, nullptr);
  EXPECT_EQ(pos->dtype, "float32");
  EXPECT_EQ(test::SpecShape(*pos), (std::vector<int64_t>{64, 48}));
}

// Gemma 3 4B's vision side: SigLIP-so400m at 896 pixels (27 layers, 1152 wide, 4304 in the MLP:
// a partial last group of 16), 256 rows at placeholder 262144 between 255999 and 256000, the
// gemma-3 preset's input.
TEST(CpuSiglip, RealShapesAreGemma3s) {
  Json vision = {{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_attention_heads", 16},
                 {"num_hidden_layers", 27}, {"patch_size", 14}, {"image_size", 896},
                 {"layer_norm_eps", 1e-6}, {"hidden_act", "gelu_pytorch_tanh"}, {"vision_use_head", false}};
  Json mc = {{"vision_config", vision}, {"mm_tokens_per_image", 256}};  // MLC's default prompt ids
  cpu::ModelConfig c = TextConfig(cpu::Quant::kQ4F16, "q4f16_1", 2560, 262208);
  Built b = Read(mc, c);
  ASSERT_TRUE(b.tower) << ErrorsJson(b.errors).dump();
  TaskInput in = b.tower->Input();
  EXPECT_EQ(in.prompt, std::optional<PromptInsertion>(PromptInsertion{{255999}, 262144, {256000}}));
  const ImageDecode& image = std::get<ImageDecode>(in.processor);
  EXPECT_EQ(image.mode, ResizeMode::kStretch);
  EXPECT_EQ(image.height, 896);
  EXPECT_EQ(image.num_embeddings, 256);
  std::vector<ParamSpec> specs = test::TowerSpecs(*b.tower, c);
  const std::string fc2 = "vision_tower.vision_model.encoder.layers.26.mlp.fc2.";
  ASSERT_TRUE(test::FindParam(specs, fc2 + "q_weight") && test::FindParam(specs, fc2 + "q_scale"));
  EXPECT_EQ(test::SpecShape(*test::FindParam(specs, fc2 + "q_weight")), (std::vector<int64_t>{1152, 540}));
  EXPECT_EQ(test::SpecShape(*test::FindParam(specs, fc2 + "q_scale")), (std::vector<int64_t>{1152, 135}));
  EXPECT_EQ(test::SpecShape(*test::FindParam(specs, "vision_tower.vision_model.embeddings.position_embedding.q_weight")),
            (std::vector<int64_t>{4096, 144}));
  EXPECT_EQ(test::SpecShape(*test::FindParam(specs, "multi_modal_projector.mm_input_projection.q_weight")),
            (std::vector<int64_t>{2560, 144}));
  // In float the vision model's values are SigLIP-so400m-patch14's at 896 pixels.
  cpu::ModelConfig f = TextConfig(cpu::Quant::kQ0F32, "q0f32", 2560, 262208);
  int64_t tower = 0;
  for (const ParamSpec& s : test::TowerSpecs(*b.tower, f)) {
    int64_t n = 1;
    for (int64_t d : test::SpecShape(s)) n *= d;
    if (s.name.rfind("vision_tower.", 0) == 0) tower += n;
  }
  EXPECT_EQ(tower, 416866032);
}

TEST(CpuSiglip, WrongPixelsAreRefusedNamingTheFunction) {
  TinyTower t = MakeTiny(cpu::Quant::kQ0F32, "q0f32");
  ASSERT_TRUE(t.tower);
  auto bound = test::BindTower(t, t.specs, t.params);
  ASSERT_TRUE(bound) << bound.error().ToString();
  for (const NDArray& bad : {NDArray::Empty({1, 31, 32, 3}, DlUInt8()), NDArray::Empty({1, 32, 32, 4}, DlUInt8()),
                             NDArray::Empty({32, 32, 3}, DlUInt8()), NDArray::Empty({1, 32, 32, 3}, DlFloat32()),
                             NDArray()}) {
    auto rows = (*bound)->Embed(bad, "image_embed");
    ASSERT_FALSE(rows) << (bad.defined() ? bad.Describe() : "undefined");
    EXPECT_NE(rows.error().message.find("image_embed: expected pixels uint8 or uint32 [1, 32, 32, 3]"),
              std::string::npos)
        << rows.error().message;
  }
}

// An interrupted call (base/interrupt.h) stops between encoder layers with an error naming the
// function; the same call without the flag gives its rows.
TEST(CpuSiglip, InterruptedEmbedStopsBetweenLayers) {
  TinyTower t = MakeTiny(cpu::Quant::kQ0F32, "q0f32");
  ASSERT_TRUE(t.tower);
  auto bound = test::BindTower(t, t.specs, t.params);
  ASSERT_TRUE(bound) << bound.error().ToString();
  NDArray px = NDArray::Empty({1, 32, 32, 3}, DlUInt8());
  std::fill_n(px.data<uint8_t>(), px.Elements(), uint8_t{90});
  std::atomic<bool> flag{true};
  {
    const InterruptScope scope(&flag);
    auto rows = (*bound)->Embed(px, "image_embed");
    ASSERT_FALSE(rows);
    EXPECT_NE(rows.error().message.find("image_embed: interrupted"), std::string::npos) << rows.error().message;
    flag = false;
    EXPECT_TRUE((*bound)->Embed(px, "image_embed"));
  }
}

// A tower tensor missing from the set, or present with another shape or dtype, is refused at
// binding, naming it.
TEST(CpuSiglip, MissingOrMisshapenTowerTensorIsRefused) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1");
  ASSERT_TRUE(t.tower);
  const std::string name = "vision_tower.vision_model.encoder.layers.1.mlp.fc2.q_scale";
  auto at = std::find(t.params.names.begin(), t.params.names.end(), name);
  ASSERT_NE(at, t.params.names.end());
  const size_t i = static_cast<size_t>(at - t.params.names.begin());
  // Dropped from the set (and from the list the index is checked against).
  std::vector<ParamSpec> specs = t.specs;
  ParameterSet params = t.params;
  specs.erase(specs.begin() + static_cast<std::ptrdiff_t>(i));
  params.names.erase(params.names.begin() + static_cast<std::ptrdiff_t>(i));
  params.tensors.erase(params.tensors.begin() + static_cast<std::ptrdiff_t>(i));
  auto bound = test::BindTower(t, specs, params);
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.error().message.find("vision tower: the parameter set has no \"" + name + "\" [48, 3] float16"),
            std::string::npos)
      << bound.error().message;
  // Present with a full-group width (as if the partial group were dropped), and with another dtype.
  for (const char* change : {"shape", "dtype"}) {
    specs = t.specs;
    params = t.params;
    const bool shape = std::string(change) == "shape";
    if (shape) specs[i].shape = {int64_t{48}, int64_t{2}};
    specs[i].dtype = shape ? "float16" : "float32";
    params.tensors[i] = NDArray::Empty(shape ? std::vector<int64_t>{48, 2} : std::vector<int64_t>{48, 3},
                                       *ParseDlDtype(specs[i].dtype));
    bound = test::BindTower(t, specs, params);
    ASSERT_FALSE(bound) << change;
    EXPECT_NE(bound.error().message.find("parameter \"" + name + "\" is"), std::string::npos) << bound.error().message;
    EXPECT_NE(bound.error().message.find("expected \"" + name + "\" [48, 3] float16"), std::string::npos)
        << bound.error().message;
  }
}

TEST(CpuSiglip, ConfigErrorsNameTheirField) {
  const cpu::ModelConfig q4 = TextConfig(cpu::Quant::kQ4F16, "q4f16_1");
  auto error_at = [&](const Json& mc) {
    Built b = Read(mc, q4);
    EXPECT_FALSE(b.tower) << mc.dump();
    return b.errors.empty() ? std::string() : b.errors.front().path + ": " + b.errors.front().message;
  };
  auto vision_with = [](const char* key, Json value) {
    Json v = TinyVision();
    v[key] = std::move(value);
    return TopConfig(v);
  };
  EXPECT_EQ(error_at(vision_with("num_attention_heads", 5)).rfind("/model_config/vision_config/num_attention_heads:", 0), 0u);
  EXPECT_EQ(error_at(vision_with("patch_size", 5)).rfind("/model_config/vision_config/patch_size:", 0), 0u);
  EXPECT_EQ(error_at(vision_with("num_channels", 4)).rfind("/model_config/vision_config/num_channels:", 0), 0u);
  EXPECT_EQ(error_at(vision_with("hidden_act", "relu")).rfind("/model_config/vision_config/hidden_act:", 0), 0u);
  EXPECT_EQ(error_at(vision_with("vision_use_head", true)).rfind("/model_config/vision_config/vision_use_head:", 0), 0u);
  EXPECT_EQ(error_at(vision_with("hidden_size", "wide")).rfind("/model_config/vision_config/hidden_size:", 0), 0u);
  Json v = TinyVision();
  v.erase("num_hidden_layers");
  EXPECT_EQ(error_at(TopConfig(v)), "/model_config/vision_config/num_hidden_layers: required: an integer");
  // Pooling: 8 rows are no square; 9 (3 x 3) do not divide the 8 x 8 grid.
  for (int64_t tokens : {int64_t{8}, int64_t{9}}) {
    EXPECT_EQ(error_at(TopConfig(TinyVision(), tokens)).rfind("/model_config/mm_tokens_per_image:", 0), 0u) << tokens;
  }
  Json mc = TopConfig(TinyVision());
  mc["image_token_index"] = 512;  // past the vocabulary
  EXPECT_EQ(error_at(mc), "/model_config/image_token_index: token id 512 is outside the vocabulary [0, 512)");
  mc = TopConfig(TinyVision());
  mc.erase("boi_token_index");  // MLC's default 255999 is past the tiny vocabulary
  EXPECT_EQ(error_at(mc).rfind("/model_config/boi_token_index:", 0), 0u);
  mc = TopConfig(TinyVision());
  mc.erase("vision_config");
  EXPECT_EQ(error_at(mc), "/model_config/vision_config: expected an object");
  // gelu (the exact one) is read, and float packages take the same tower.
  EXPECT_TRUE(Read(vision_with("hidden_act", "gelu"), q4).tower);
  EXPECT_TRUE(Read(TopConfig(TinyVision()), TextConfig(cpu::Quant::kQ0F16, "q0f16")).tower);
}

}  // namespace
}  // namespace mlc
