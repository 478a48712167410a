// LLaVA 1.5 on the CPU program: the package layout of MLC's converter (vision tower in float,
// projector quantized, the llama decoder under language_model.), the image_embed adapter against
// a float64 CLIP + projector written here from Hugging Face's definitions, image prompts end to end
// through `run --messages` (equal greedy tokens across prefill chunk sizes), a batch equal to runs
// alone, bad inputs refused with errors naming them, and a package written by a separate tool
// (tests/support/llava_package.py) answering an image question.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/presets.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "support/family_checks.h"
#include "support/reference64.h"
#include "support/media_checks.h"
#include "support/vit64.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::FindParam;
using test::ImageEmbed;
using test::ModelConfigOf;
using test::ImageMessages;
using test::OpenedPackage;
using test::OpenPackage;
using test::Params64;
using test::PixelTensor;
using test::RunImageTokens;
using test::Vec;

std::string WriteLlava(const test::TempDir& dir, const std::string& quant, FamilyModelOptions o = {},
                       FamilyModelReport* written = nullptr) {
  o.family = "llava";
  o.quantization = quant;
  o.seed = 5;
  std::string pkg = dir.File("llava-" + quant + "-" + std::to_string(o.prefill_chunk_size));
  auto report = WriteFamilyModel(pkg, o);
  EXPECT_TRUE(report) << report.error().ToString();
  if (report && written) *written = *report;
  return pkg;
}

// A deterministic image of side s (RGB, NHWC).
std::vector<uint8_t> Pixels(int64_t s) {
  std::vector<uint8_t> px(static_cast<size_t>(s * s * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 53 + i / 7) % 256);
  return px;
}

double QuickGelu64(double x) { return x / (1 + std::exp(-1.702 * x)); }
double GeluErf64(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }

// image_embed in float64, from Hugging Face's CLIPVisionModel and LlavaMultiModalProjector:
// rows [num_patches][text hidden].
std::vector<Vec> ClipReference(const Params64& p, const Json& mc, const std::vector<uint8_t>& px, bool q8) {
  const Json& v = mc["vision_config"];
  const int64_t hs = v["hidden_size"], inter = v["intermediate_size"], heads = v["num_attention_heads"];
  const int64_t layers = v["num_hidden_layers"], patch = v["patch_size"], s = v["image_size"];
  const int64_t th = mc["text_config"]["hidden_size"];
  const double eps = v["layer_norm_eps"];
  const double mean[3] = {0.48145466, 0.4578275, 0.40821073}, std[3] = {0.26862954, 0.26130258, 0.27577711};
  const std::string r = "vision_tower.vision_model.";
  std::vector<Vec> x = {p.Floats(r + "embeddings.class_embedding")};
  for (Vec& row : test::PatchEmbeddings64(p.Floats(r + "embeddings.patch_embedding.weight"), {}, px, s, patch, hs, mean, std)) {
    x.push_back(std::move(row));
  }
  Vec pos = p.Floats(r + "embeddings.position_embedding.weight");
  for (size_t t = 0; t < x.size(); ++t) {
    for (int64_t i = 0; i < hs; ++i) x[t][static_cast<size_t>(i)] += pos[t * static_cast<size_t>(hs) + static_cast<size_t>(i)];
    x[t] = test::LayerNorm(x[t], p.Floats(r + "pre_layrnorm.weight"), p.Floats(r + "pre_layrnorm.bias"), eps);
  }
  auto linear = [&](const std::string& base, const Vec& in, int64_t out, int64_t width, test::Q4Rounding rounding) {
    return test::BiasedLinear64(p, base, in, out, width, rounding);
  };
  // vision_feature_layer -2: the hidden state after all but the last layer.
  const test::VitLayer64 layer{hs, inter, heads, eps, QuickGelu64, /*q8=*/false};
  for (int64_t l = 0; l + 1 < layers; ++l) layer.Run(p, r + "encoder.layers." + std::to_string(l) + ".", x);
  std::vector<Vec> out;
  const test::Q4Rounding rounding = test::RoundingFor(q8, static_cast<int64_t>(x.size()) - 1);
  for (size_t t = 1; t < x.size(); ++t) {  // the class row dropped
    Vec a = linear("multi_modal_projector.linear_1", x[t], th, hs, rounding);
    for (double& z : a) z = GeluErf64(z);
    out.push_back(linear("multi_modal_projector.linear_2", a, th, th, rounding));
  }
  return out;
}

// image_embed's rows for `px` agree with the float64 CLIP and projector of the package's weights.
void ExpectRowsMatchReference(const NDArray& rows, const OpenedPackage& o, const std::string& pkg,
                              const std::vector<uint8_t>& px, const std::string& quant) {
  ASSERT_EQ(rows.shape(), (std::vector<int64_t>{16, 128}));
  for (int64_t i = 0; i < rows.Elements(); ++i) ASSERT_TRUE(std::isfinite(rows.data<float>()[i])) << i;
  const bool q4 = quant.rfind("q4", 0) == 0;
  std::vector<Vec> want = ClipReference(Params64(*o.params), ModelConfigOf(pkg), px, q4);
  // Float weights: float32 rounding only; 4-bit: the projector's int8 activation steps (see
  // cpu_model_test's LogitTolerance).
  const double tolerance = q4 ? 3e-2 : 1e-3;
  for (size_t t = 0; t < want.size(); ++t) {
    std::vector<float> got(rows.data<float>() + t * 128, rows.data<float>() + (t + 1) * 128);
    EXPECT_LT(test::RelError(got, want[t]), tolerance) << "row " << t;
  }
}

TEST(CpuLlava, PackageFollowsMlcLayout) {
  test::TempDir dir;
  std::string pkg = WriteLlava(dir, "q4f16_1");
  OpenedPackage o = OpenPackage(pkg);
  ASSERT_TRUE(o.lib);
  const auto& params = o.lib->Metadata().params;
  struct Want {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  // Tiny shape: vision hidden 64, patch 7 over 28 pixels (16 patches), text hidden 128.
  for (const Want& w : std::vector<Want>{
           {"vision_tower.vision_model.embeddings.class_embedding", "float16", {64}},
           {"vision_tower.vision_model.embeddings.patch_embedding.weight", "float16", {64, 3, 7, 7}},
           {"vision_tower.vision_model.embeddings.position_embedding.weight", "float16", {17, 64}},
           {"vision_tower.vision_model.pre_layrnorm.bias", "float16", {64}},
           {"vision_tower.vision_model.encoder.layers.2.self_attn.k_proj.weight", "float16", {64, 64}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc1.bias", "float16", {128}},
           {"vision_tower.vision_model.post_layernorm.weight", "float16", {64}},
           {"multi_modal_projector.linear_1.q_weight", "uint32", {128, 8}},
           {"multi_modal_projector.linear_1.q_scale", "float16", {128, 2}},
           {"multi_modal_projector.linear_1.bias", "float16", {128}},
           {"multi_modal_projector.linear_2.q_weight", "uint32", {128, 16}},
           {"language_model.model.embed_tokens.q_weight", "uint32", {512, 16}},
           {"language_model.model.layers.1.self_attn.qkv_proj.q_weight", "uint32", {256, 16}},
           {"language_model.model.norm.weight", "float16", {128}},
           {"language_model.lm_head.q_weight", "uint32", {512, 16}}}) {
    const ParamSpec* p = FindParam(params, w.name);
    ASSERT_NE(p, nullptr) << w.name;
    EXPECT_EQ(p->dtype, w.dtype) << w.name;
    std::vector<int64_t> shape;
    for (const auto& d : p->shape) shape.push_back(std::get<int64_t>(d));
    EXPECT_EQ(shape, w.shape) << w.name;
  }
  // The converter's order: tower, projector, language model.
  EXPECT_EQ(params.front().name, "vision_tower.vision_model.embeddings.class_embedding");
  EXPECT_EQ(params.back().name, "language_model.lm_head.q_scale");
  // The manifest's image input and the program's adapter, bound.
  auto model = BindModel(pkg, *o.lib);
  ASSERT_TRUE(model) << model.error().ToString();
  ASSERT_NE(model->image_adapter, nullptr);
  ASSERT_TRUE(model->contract.image);
  const BoundImage& image = *model->contract.image;
  EXPECT_EQ(image.processor.height, 28);
  EXPECT_EQ(image.processor.num_embeddings, 16);
  EXPECT_EQ(image.processor.mode, ResizeMode::kCenterCrop);
  EXPECT_EQ(image.prompt.placeholder_token_id, 511);
}

// LLaVA 1.5's real shapes: the program serves exactly the task `emit package --preset llava-1.5`
// declares (center crop to 336, 576 rows at placeholder 32000), so a package the converter wrote
// with that preset binds to it; the parameter list is the 7B model's.
TEST(CpuLlava, RealShapesServeTheLlavaPreset) {
  Json text = {{"hidden_size", 4096}, {"intermediate_size", 11008}, {"num_attention_heads", 32},
               {"num_hidden_layers", 32}, {"num_key_value_heads", 32}, {"rms_norm_eps", 1e-5},
               {"vocab_size", 32064}, {"hidden_act", "silu"}, {"rope_theta", 10000.0},
               {"context_window_size", 4096}, {"prefill_chunk_size", 2048}};
  Json vision = {{"hidden_size", 1024}, {"intermediate_size", 4096}, {"num_attention_heads", 16},
                 {"num_hidden_layers", 24}, {"patch_size", 14}, {"image_size", 336},
                 {"projection_dim", 768}, {"vocab_size", 32000}, {"layer_norm_eps", 1e-6}};
  Json doc = {{"model_type", "llava"}, {"quantization", "q4f16_1"}, {"vocab_size", 32064},
              {"context_window_size", 4096}, {"prefill_chunk_size", 2048},
              {"model_config", {{"text_config", text}, {"vision_config", vision}, {"vocab_size", 32064},
                                {"image_token_index", 32000}}}};
  auto chat = ParseChatConfig(doc);
  ASSERT_TRUE(chat) << chat.error().ToString();
  auto program = CpuCompiledProgram(*chat);
  ASSERT_TRUE(program) << FormatErrors(program.errors());
  auto preset = PresetTasks("llava-1.5");
  ASSERT_TRUE(preset);
  auto preset_id = ComputeInterfaceId(*preset);
  ASSERT_TRUE(preset_id);
  EXPECT_EQ(program->interface_id, *preset_id);
  ASSERT_TRUE(program->programs.at("generation").adapters);
  EXPECT_EQ(program->programs.at("generation").adapters->at("image"), "image_embed");
  auto params = CpuParamSpecs(*chat);
  ASSERT_TRUE(params);
  int64_t tower = 0, total = 0;
  for (const ParamSpec& p : *params) {
    int64_t n = 1;
    for (const auto& d : p.shape) n *= std::get<int64_t>(d);
    total += n;
    if (p.name.rfind("vision_tower.", 0) == 0) tower += n;
  }
  EXPECT_EQ(tower, 303507456);  // CLIP ViT-L/14-336's vision model (Hugging Face counts the same)
  EXPECT_GT(total, tower);
}

class CpuLlavaAdapter : public ::testing::TestWithParam<std::string> {};

// The adapter's rows agree with the float64 CLIP and projector; uint32 pixels give the same rows.
TEST_P(CpuLlavaAdapter, RowsMatchFloat64Reference) {
  const std::string quant = GetParam();
  test::TempDir dir;
  std::string pkg = WriteLlava(dir, quant);
  OpenedPackage o = OpenPackage(pkg);
  ASSERT_TRUE(o.params);
  std::vector<uint8_t> px = Pixels(28);
  auto out = ImageEmbed(o, PixelTensor(px, 28));
  ASSERT_TRUE(out) << out.error().ToString();
  const NDArray& rows = std::get<NDArray>(out->front());
  ExpectRowsMatchReference(rows, o, pkg, px, quant);
  auto out32 = ImageEmbed(o, test::WidePixelTensor(px, 28));
  ASSERT_TRUE(out32) << out32.error().ToString();
  const NDArray& rows32 = std::get<NDArray>(out32->front());
  EXPECT_EQ(std::memcmp(rows32.data<float>(), rows.data<float>(), rows.Bytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuLlavaAdapter,
                         ::testing::Values("q0f32", "q0f16", "q4f16_1", "q4f32_1"),
                         [](const auto& i) { return i.param; });

TEST(CpuLlava, WrongPixelsAreRefusedNamingTheAdapter) {
  test::TempDir dir;
  OpenedPackage o = OpenPackage(WriteLlava(dir, "q0f32"));
  ASSERT_TRUE(o.params);
  for (const NDArray& bad : {NDArray::Empty({1, 27, 28, 3}, DlUInt8()), NDArray::Empty({1, 28, 28, 4}, DlUInt8()),
                             NDArray::Empty({1, 28, 28, 3}, DlFloat32())}) {
    auto out = ImageEmbed(o, bad);
    ASSERT_FALSE(out) << bad.Describe();
    EXPECT_NE(out.error().message.find("image_embed: expected pixels uint8 or uint32 [1, 28, 28, 3]"),
              std::string::npos)
        << out.error().message;
  }
}

std::string WriteBmp(const test::TempDir& dir, const std::string& name, int w, int h) {
  return dir.Write(name, test::BmpImage(w, h));
}

// An image prompt through `run --messages`: the same greedy tokens whatever the prefill chunk
// (chunks of 3 split the 16 image rows over six calls).
TEST(CpuLlavaRun, ImagePromptTokensEqualAcrossPrefillChunks) {
  test::TempDir dir;
  std::string image = WriteBmp(dir, "cat.bmp", 40, 30);
  std::string messages = ImageMessages(dir, image);
  std::vector<int32_t> first;
  for (int64_t chunk : {64, 7, 3}) {
    FamilyModelOptions o;
    o.prefill_chunk_size = chunk;
    std::string report;
    std::vector<int32_t> tokens = RunImageTokens(WriteLlava(dir, "q4f16_1", o), messages, &report);
    ASSERT_FALSE(tokens.empty()) << report;
    if (first.empty()) first = tokens;
    EXPECT_EQ(tokens, first) << "prefill_chunk_size " << chunk;
  }
}

TEST(CpuLlavaRun, BadImagesAndTextOnlyPackagesFailBeforeAnyToken) {
  test::TempDir dir;
  std::string pkg = WriteLlava(dir, "q0f32");
  // An empty image file.
  std::string empty = dir.Write("empty.png", "");
  auto r = test::RunCli({"run", pkg, "--messages", ImageMessages(dir, empty), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("empty.png"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
  // An image for a text-only package.
  FamilyModelOptions text;
  text.family = "llama";
  text.quantization = "q0f32";
  std::string llama = dir.File("llama");
  ASSERT_TRUE(WriteFamilyModel(llama, text));
  r = test::RunCli({"run", llama, "--messages", ImageMessages(dir, WriteBmp(dir, "x.bmp", 8, 8)), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("image"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
}

// A package whose tower lost a tensor (or carries one of the wrong shape) is refused before any
// token: with a manifest, its parameter_schema_id no longer matches the weights; a legacy package
// names the tensor when its parameters load.
TEST(CpuLlavaRun, MissingOrMisshapenTowerTensorIsRefused) {
  for (const char* change : {"drop", "reshape"}) {
   for (bool manifest : {true, false}) {
    test::TempDir dir;
    FamilyModelOptions o;
    o.manifest = manifest;
    std::string pkg = WriteLlava(dir, "q0f32", o);
    const std::string cache_path = JoinPath(pkg, kTensorCacheFileName);
    Json cache = Json::parse(test::ReadText(cache_path));
    const std::string name = "vision_tower.vision_model.encoder.layers.1.self_attn.q_proj.weight";
    bool found = false;
    for (Json& shard : cache["records"]) {
      Json kept = Json::array();
      for (Json& rec : shard["records"]) {
        if (rec["name"] == name) {
          found = true;
          if (std::string(change) == "drop") continue;
          rec["shape"] = {64, 32};
          rec["nbytes"] = rec["nbytes"].get<int64_t>() / 2;
        }
        kept.push_back(rec);
      }
      shard["records"] = kept;
    }
    ASSERT_TRUE(found);
    std::ofstream(cache_path) << cache.dump(2);
    std::string messages = manifest ? ImageMessages(dir, WriteBmp(dir, "c.bmp", 28, 28))
                                    : dir.Write("t.json", R"([{"role": "user", "content": "Hi"}])");
    auto r = test::RunCli({"run", pkg, "--messages", messages, "--json"});
    EXPECT_NE(r.exit_code, 0) << change;
    EXPECT_NE(r.out.find(manifest ? "/weights/parameter_schema_id" : name), std::string::npos)
        << change << ": " << r.out;
    EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
   }
  }
}


// The tiny package's image input as a prompt piece: 16 rows at placeholder 511.
MediaPiece ImagePiece() {
  MediaPiece image;
  image.kind = MediaKind::kImage;
  image.input = "image";
  image.adapter = "image";
  image.prompt.placeholder_token_id = 511;
  image.rows = 16;
  return image;
}

// Greedy tokens of an image prompt equal those of the float64 decoder fed the float64 tower's rows
// between the text rows (float weights: no int8 activation steps to round apart).
TEST(CpuLlavaRun, GreedyTokensMatchFloat64Reference) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("llava", "q0f32", 9));
  ASSERT_TRUE(m->library);
  const MediaPiece image = ImagePiece();
  const std::vector<int32_t> before = {1, 40, 41}, after = {50, 51};
  std::vector<uint8_t> px = Pixels(28);
  TurnInput in = test::Text(before);
  in.pieces.push_back(PromptPiece{image, "/1"});
  in.media.push_back(PixelTensor(px, 28));
  in.pieces.push_back(PromptPiece{TextPiece{after}, "/2"});
  in.media.emplace_back();
  std::vector<int32_t> got = test::Alone(m->loaded, in, 6);
  ASSERT_EQ(got.size(), 6u);

  auto chat = ReadChatConfig(JoinPath(m->dir.path(), kChatConfigFileName));
  ASSERT_TRUE(chat);
  auto c = cpu::ParseModelConfig(*chat);
  ASSERT_TRUE(c);
  Params64 p64(*m->loaded.params);
  const int64_t h = c->hidden_size;
  Vec emb = p64.Matrix(c->family->names.embed, c->vocab_size, h);
  auto row_of = [&](int32_t id) { return Vec(emb.begin() + id * h, emb.begin() + (id + 1) * h); };
  std::vector<Vec> rows;
  for (int32_t id : before) rows.push_back(row_of(id));
  for (Vec& r : ClipReference(p64, ModelConfigOf(m->dir.path()), px, false)) rows.push_back(std::move(r));
  for (int32_t id : after) rows.push_back(row_of(id));
  std::vector<int32_t> want;
  test::Reference64 ref{*c, p64};
  for (int step = 0; step < 6; ++step) {
    Vec last = ref.RunRows(rows).back();
    int32_t next = static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin());
    want.push_back(next);
    rows.push_back(row_of(next));
  }
  EXPECT_EQ(got, want);
}

// Continuous batching with image prompts: each request's tokens equal its run alone.
TEST(CpuLlavaBatch, ImageRequestsInABatchMatchRunsAlone) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("llava", "q4f16_1", 5));
  ASSERT_TRUE(m->library);
  const MediaPiece image = ImagePiece();
  auto with_image = [&](int seed_offset) {
    TurnInput in = test::Text({1, 40, 41, 42});
    in.pieces.push_back(PromptPiece{image, "/1"});
    std::vector<uint8_t> px = Pixels(28);
    for (uint8_t& v : px) v = static_cast<uint8_t>(v + seed_offset);
    in.media.push_back(PixelTensor(px, 28));
    in.pieces.push_back(PromptPiece{TextPiece{{50, 51}}, "/2"});
    in.media.emplace_back();
    return in;
  };
  std::vector<TurnInput> prompts = {with_image(0), test::Text({1, 60, 61}), with_image(37)};
  test::ExpectEngineMatchesRunsAlone(m->loaded, prompts, 6);
}

// A LLaVA 1.5-layout package written by a separate tool (tests/support/llava_package.py: its own
// parameter list, quantization and configs; legacy, given a manifest by `emit package`) declares
// the parameter list and interface of the project's own writer, and answers an image question:
// image_embed rows of a decoded PNG equal the float64 tower's, `run --messages` and `serve` take
// the image as a data URL.
TEST(CpuLlavaRun, SeparatelyWrittenPackageAnswersAnImageQuestion) {
  test::TempDir dir;
  const std::vector<uint8_t> px = Pixels(28);
  RgbImage rgb;
  rgb.width = 28;
  rgb.height = 28;
  rgb.pixels = px;
  auto png = EncodePng(rgb);
  ASSERT_TRUE(png.ok()) << png.error().ToString();
  const std::string image = dir.Write("question.png", *png);
  const std::string url = "data:image/png;base64," + test::Base64(*png);
  for (const std::string quant : {"q4f16_1", "q0f16"}) {
    SCOPED_TRACE(quant);
    FamilyModelOptions o;
    o.manifest = false;
    FamilyModelReport own;
    const std::string tokenizer = JoinPath(WriteLlava(dir, quant, o, &own), "tokenizer.json");
    const std::string pkg = dir.File("separate-" + quant), tasks = dir.File("tasks-" + quant + ".json");
    auto written = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/llava_package.py"), pkg,
                                     tokenizer, "--seed", "11", "--quantization", quant, "--tasks", tasks});
    ASSERT_EQ(written.exit_code, 0) << written.out << written.err;
    auto emitted = test::RunCli({"emit", "package", pkg, "--tasks", tasks});
    ASSERT_EQ(emitted.exit_code, 0) << emitted.out << emitted.err;
    Json manifest = Json::parse(test::ReadText(JoinPath(pkg, kManifestFileName)));
    EXPECT_EQ(manifest["weights"]["parameter_schema_id"], own.parameter_schema_id);
    EXPECT_EQ(manifest["interface_id"], own.interface_id);

    // The PNG decoded as the package's processor declares (28 x 28: no resize), then the tower.
    OpenedPackage opened = OpenPackage(pkg);
    ASSERT_TRUE(opened.params);
    auto model = BindModel(pkg, *opened.lib);
    ASSERT_TRUE(model) << model.error().ToString();
    ASSERT_TRUE(model->contract.image);
    auto prepared = PrepareImageFile(image, model->contract.image->processor);
    ASSERT_TRUE(prepared.ok()) << prepared.error().ToString();
    ASSERT_EQ(prepared->rgb.pixels, px);
    auto out = ImageEmbed(opened, PixelTensor(prepared->rgb.pixels, 28));
    ASSERT_TRUE(out) << out.error().ToString();
    ExpectRowsMatchReference(std::get<NDArray>(out->front()), opened, pkg, px, quant);

    std::string report;
    EXPECT_FALSE(RunImageTokens(pkg, ImageMessages(dir, url), &report).empty()) << report;
    EXPECT_GT(Json::parse(report)["prompt_length"].get<int64_t>(), 16) << report;

    test::ExpectServeAnswers(dir, pkg, test::ImageUrlPart(url), "What is in the picture?", 16);
  }
}

}  // namespace
}  // namespace mlc
