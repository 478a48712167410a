// Gemma 3 with vision on the CPU program (model_type gemma3_v): MLC's parameter list and the
// manifest's image input (Gemma 3's preset at the real shapes), image_embed against a float64 SigLIP
// and projector, greedy tokens of an image prompt against the float64 Gemma 3 fed those rows, image
// prompts through `run --messages` (any prefill chunk) and `serve`, batches, refused inputs.
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
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "support/gemma3_64.h"
#include "support/reference64.h"
#include "support/siglip64.h"
#include "support/test_util.h"
#include "support/vision_checks.h"

namespace mlc {
namespace {

using test::ImageEmbed;
using test::ImageMessages;
using test::OpenedPackage;
using test::OpenPackage;
using test::Params64;
using test::PixelTensor;
using test::RunImageTokens;
using test::Vec;

// The tiny shape: 32-pixel images, 16 rows of the text width 128 at the reference ids 6 / 7 / 8.
constexpr int64_t kImage = 32, kRows = 16, kTextHidden = 128;

std::string WriteGemma3V(const test::TempDir& dir, const std::string& quant, FamilyModelOptions o = {}) {
  o.family = "gemma3_v";
  o.quantization = quant;
  o.seed = 7;
  std::string pkg = dir.File("gemma3_v-" + quant + "-" + std::to_string(o.prefill_chunk_size));
  auto report = WriteFamilyModel(pkg, o);
  EXPECT_TRUE(report) << report.error().ToString();
  return pkg;
}

Json ModelConfigOf(const std::string& pkg) {
  return Json::parse(test::ReadText(JoinPath(pkg, kChatConfigFileName)))["model_config"];
}

// text_config as the decoder reads it (the outer vocab_size when it has none).
Json TextConfigOf(const Json& mc) {
  Json text = mc["text_config"];
  if (!text.contains("vocab_size")) text["vocab_size"] = mc["vocab_size"];
  return text;
}

// A deterministic image (RGB, NHWC).
std::vector<uint8_t> Pixels(int64_t s, int offset = 0) {
  std::vector<uint8_t> px(static_cast<size_t>(s * s * 3));
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>((i * 29 + i / 3 + static_cast<size_t>(offset)) % 256);
  return px;
}

// The float64 tower's rows for px under the package's weights.
std::vector<Vec> ReferenceRows(const Params64& p, const Json& mc, const std::vector<uint8_t>& px, bool q8) {
  return test::SiglipReference64{mc["vision_config"], p, q8, mc["mm_tokens_per_image"].get<int64_t>()}.Run(
      px, mc["text_config"]["hidden_size"].get<int64_t>());
}

const ParamSpec* FindParam(const std::vector<ParamSpec>& params, const std::string& name) {
  for (const ParamSpec& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::vector<int64_t> ShapeOf(const ParamSpec& p) {
  std::vector<int64_t> shape;
  for (const auto& d : p.shape) shape.push_back(std::get<int64_t>(d));
  return shape;
}

// MLC's order (language model, vision tower, projector) and shapes, a partial 4-bit group where the
// tower's widths are not multiples of 32, and the manifest's image input bound to image_embed.
TEST(CpuGemma3V, PackageFollowsMlcLayout) {
  test::TempDir dir;
  const std::string pkg = WriteGemma3V(dir, "q4f16_1");
  OpenedPackage o = OpenPackage(pkg);
  ASSERT_TRUE(o.lib);
  const auto& params = o.lib->Metadata().params;
  EXPECT_EQ(params.front().name, "language_model.model.embed_tokens.q_weight");
  EXPECT_EQ(params.back().name, "multi_modal_projector.mm_input_projection.q_scale");
  size_t last_text = 0, first_tower = params.size();
  for (size_t i = 0; i < params.size(); ++i) {
    if (params[i].name.rfind("language_model.", 0) == 0) last_text = i;
    if (params[i].name.rfind("vision_tower.", 0) == 0) first_tower = std::min(first_tower, i);
  }
  EXPECT_LT(last_text, first_tower);
  struct Want {
    std::string name, dtype;
    std::vector<int64_t> shape;
  };
  // Vision hidden 48 (two groups, the second partial) and MLP 80 (three, the last partial): the
  // rows padded to whole groups, as MLC's group quantizer stores them.
  for (const Want& w : std::vector<Want>{
           {"language_model.model.layers.1.self_attn.q_norm.weight", "float16", {64}},
           {"vision_tower.vision_model.embeddings.patch_embedding.weight", "float16", {48, 3, 4, 4}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc1.q_weight", "uint32", {80, 8}},
           {"vision_tower.vision_model.encoder.layers.0.mlp.fc1.q_scale", "float16", {80, 2}},
           {"vision_tower.vision_model.encoder.layers.1.mlp.fc2.q_weight", "uint32", {48, 12}},
           {"vision_tower.vision_model.encoder.layers.1.mlp.fc2.q_scale", "float16", {48, 3}},
           {"vision_tower.vision_model.post_layernorm.bias", "float16", {48}},
           {"multi_modal_projector.mm_soft_emb_norm.weight", "float16", {48}},
           {"multi_modal_projector.mm_input_projection.q_weight", "uint32", {kTextHidden, 8}}}) {
    const ParamSpec* p = FindParam(params, w.name);
    ASSERT_NE(p, nullptr) << w.name;
    EXPECT_EQ(p->dtype, w.dtype) << w.name;
    EXPECT_EQ(ShapeOf(*p), w.shape) << w.name;
  }
  auto model = BindModel(pkg, *o.lib);
  ASSERT_TRUE(model) << model.error().ToString();
  ASSERT_NE(model->image_adapter, nullptr);
  ASSERT_TRUE(model->contract.image);
  const BoundImage& image = *model->contract.image;
  EXPECT_EQ(image.processor.mode, ResizeMode::kStretch);
  EXPECT_EQ(image.processor.height, kImage);
  EXPECT_EQ(image.processor.width, kImage);
  EXPECT_EQ(image.processor.num_embeddings, kRows);
  EXPECT_EQ(image.prompt.prefix_token_ids, (std::vector<int64_t>{ReferenceTokens::kImageStart}));
  EXPECT_EQ(image.prompt.placeholder_token_id, ReferenceTokens::kImagePlaceholder);
  EXPECT_EQ(image.prompt.suffix_token_ids, (std::vector<int64_t>{ReferenceTokens::kImageEnd}));
}

// Gemma 3 4B's shapes as the writer's gemma-3-4b model_config gives them: the program serves
// exactly the task of the `gemma-3` preset (stretch to 896, 256 rows between 255999 and 256000 at
// placeholder 262144), and the float tower holds SigLIP-so400m's 416,866,032 weights.
TEST(CpuGemma3V, RealShapesServeTheGemma3Preset) {
  Json text = {{"hidden_size", 2560}, {"intermediate_size", 10240}, {"num_attention_heads", 8},
               {"num_hidden_layers", 34}, {"num_key_value_heads", 4}, {"head_dim", 256},
               {"rms_norm_eps", 1e-6}, {"vocab_size", 262208}, {"hidden_activation", "gelu_pytorch_tanh"},
               {"position_embedding_base", 1000000.0}, {"rope_local_base_freq", 10000.0},
               {"rope_scaling", {{"rope_type", "linear"}, {"factor", 8.0}}}, {"query_pre_attn_scalar", 256},
               {"sliding_window_size", 1024}, {"sliding_window_pattern", 6},
               {"context_window_size", 4096}, {"prefill_chunk_size", 1024}};
  Json vision = {{"hidden_size", 1152}, {"intermediate_size", 4304}, {"num_attention_heads", 16},
                 {"num_hidden_layers", 27}, {"patch_size", 14}, {"image_size", 896}, {"num_channels", 3},
                 {"layer_norm_eps", 1e-6}};
  Json doc = {{"model_type", "gemma3_v"}, {"quantization", "q0f16"}, {"vocab_size", 262208},
              {"context_window_size", 4096}, {"prefill_chunk_size", 1024}, {"sliding_window_size", 1024},
              {"model_config", {{"text_config", text}, {"vision_config", vision}, {"vocab_size", 262208}}}};
  auto chat = ParseChatConfig(doc);
  ASSERT_TRUE(chat) << chat.error().ToString();
  auto program = CpuCompiledProgram(*chat);
  ASSERT_TRUE(program) << FormatErrors(program.errors());
  auto preset = PresetTasks("gemma-3");
  ASSERT_TRUE(preset);
  auto preset_id = ComputeInterfaceId(*preset);
  ASSERT_TRUE(preset_id);
  EXPECT_EQ(program->interface_id, *preset_id);
  EXPECT_EQ(program->programs.at("generation").adapters->at("image"), "image_embed");
  auto params = CpuParamSpecs(*chat);
  ASSERT_TRUE(params);
  int64_t tower = 0;
  for (const ParamSpec& p : *params) {
    int64_t n = 1;
    for (int64_t d : ShapeOf(p)) n *= d;
    if (p.name.rfind("vision_tower.", 0) == 0) tower += n;
  }
  EXPECT_EQ(tower, 416866032);
}

class CpuGemma3VAdapter : public ::testing::TestWithParam<std::string> {};

// image_embed of the package agrees with the float64 SigLIP and projector; uint32 pixels give the
// same rows.
TEST_P(CpuGemma3VAdapter, RowsMatchFloat64Reference) {
  const std::string quant = GetParam();
  test::TempDir dir;
  const std::string pkg = WriteGemma3V(dir, quant);
  OpenedPackage o = OpenPackage(pkg);
  ASSERT_TRUE(o.params);
  const std::vector<uint8_t> px = Pixels(kImage);
  auto out = ImageEmbed(o, PixelTensor(px, kImage));
  ASSERT_TRUE(out) << out.error().ToString();
  const NDArray& rows = std::get<NDArray>(out->front());
  ASSERT_EQ(rows.shape(), (std::vector<int64_t>{kRows, kTextHidden}));
  const bool q4 = quant.rfind("q4", 0) == 0;
  const std::vector<Vec> want = ReferenceRows(Params64(*o.params), ModelConfigOf(pkg), px, q4);
  Vec flat;
  for (const Vec& r : want) flat.insert(flat.end(), r.begin(), r.end());
  std::vector<float> got(rows.data<float>(), rows.data<float>() + rows.Elements());
  // Float weights: float32 rounding only; 4-bit: an activation near an int8 step may round the other
  // way in float32 than in float64 (see cpu_model_test's LogitTolerance).
  EXPECT_LT(test::RelError(got, flat), q4 ? 3e-2 : 1e-3);
  auto wide = ImageEmbed(o, test::WidePixelTensor(px, kImage));
  ASSERT_TRUE(wide) << wide.error().ToString();
  EXPECT_EQ(std::memcmp(std::get<NDArray>(wide->front()).data<float>(), rows.data<float>(), rows.Bytes()), 0);
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuGemma3VAdapter, ::testing::Values("q0f32", "q0f16", "q4f16_1", "q4f32_1"),
                         [](const auto& i) { return i.param; });

// A tiny gemma3_v package written and loaded with its library (m->library empty after a failure).
std::unique_ptr<test::LoadedPackage> LoadGemma3V(const std::string& quant, uint64_t seed) {
  auto m = std::make_unique<test::LoadedPackage>();
  FamilyModelOptions o;
  o.family = "gemma3_v";
  o.quantization = quant;
  o.seed = seed;
  o.force = true;
  auto w = WriteFamilyModel(m->dir.path(), o);
  EXPECT_TRUE(w) << (w ? "" : FormatErrors(w.errors()));
  if (w) test::LoadInto(*m, OpenCpuLibrary(m->dir.path()));
  return m;
}

// A turn: text, the image between its begin and end ids (the pixels as the adapter takes them),
// text.
TurnInput ImageTurn(const std::vector<int32_t>& before, const std::vector<uint8_t>& px, const std::vector<int32_t>& after) {
  MediaPiece image;
  image.kind = MediaKind::kImage;
  image.input = "image";
  image.adapter = "image";
  image.prompt = PromptInsertion{{ReferenceTokens::kImageStart}, ReferenceTokens::kImagePlaceholder,
                                 {ReferenceTokens::kImageEnd}};
  image.rows = kRows;
  TurnInput in = test::Text(before);
  in.pieces.push_back(PromptPiece{image, "/1"});
  in.media.push_back(PixelTensor(px, kImage));
  in.pieces.push_back(PromptPiece{TextPiece{after}, "/2"});
  in.media.emplace_back();
  return in;
}

class CpuGemma3VRun : public ::testing::TestWithParam<std::string> {};

// Greedy tokens of an image prompt longer than the sliding window (3 + 1 + 16 + 1 + 2 rows, window
// 8, the chat config's sliding_window_size 8 as MLC writes it) equal those of the float64 Gemma 3
// fed the float64 tower's rows, unscaled, between the scaled token rows.
TEST_P(CpuGemma3VRun, GreedyTokensMatchFloat64Reference) {
  const std::string quant = GetParam();
  const bool q4 = quant.rfind("q4", 0) == 0;
  auto m = LoadGemma3V(quant, 9);
  ASSERT_TRUE(m->library);
  EXPECT_FALSE(m->loaded.limits.HasSlidingWindow()) << "the layers' window read as a sliding cache";
  const std::vector<int32_t> before = {1, 40, 41}, after = {50, 51};
  const std::vector<uint8_t> px = Pixels(kImage);
  constexpr int kSteps = 6;
  std::vector<int32_t> got = test::Alone(m->loaded, ImageTurn(before, px, after), kSteps);
  ASSERT_EQ(got.size(), size_t{kSteps});

  const Json mc = ModelConfigOf(m->dir.path());
  const Json text = TextConfigOf(mc);
  Params64 p64(*m->loaded.params);
  const test::Gemma3Reference64 decoder{text, p64, q4};
  std::vector<Vec> rows = decoder.TokenRows(before);
  rows.push_back(decoder.TokenRows({ReferenceTokens::kImageStart}).front());
  for (Vec& r : ReferenceRows(p64, mc, px, q4)) rows.push_back(std::move(r));
  for (Vec& r : decoder.TokenRows({ReferenceTokens::kImageEnd, after[0], after[1]})) rows.push_back(std::move(r));
  std::vector<int32_t> want;
  for (int step = 0; step < kSteps; ++step) {
    const Vec last = decoder.RunRows(rows).back();
    want.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
    rows.push_back(decoder.TokenRows({want.back()}).front());
  }
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuGemma3VRun, ::testing::Values("q0f32", "q4f32_1"),
                         [](const auto& i) { return i.param; });

// Continuous batching with image prompts: each request's tokens equal its run alone.
TEST(CpuGemma3VBatch, ImageRequestsInABatchMatchRunsAlone) {
  auto m = LoadGemma3V("q4f16_1", 5);
  ASSERT_TRUE(m->library);
  std::vector<TurnInput> prompts = {ImageTurn({1, 40, 41, 42}, Pixels(kImage), {50, 51}), test::Text({1, 60, 61}),
                                    ImageTurn({1, 70}, Pixels(kImage, 37), {52})};
  EngineOptions eo;
  eo.batch.max_batch_size = 3;
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  std::vector<test::EngineReply> got = test::SubmitAll(**engine, prompts, 6);
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].finish_reason, "length") << i;
    EXPECT_EQ(got[i].tokens, test::Alone(m->loaded, prompts[i], 6)) << i;
  }
  (*engine)->Shutdown(true);
}

// An image question end to end: a PNG as a file and as a data URL through `run --messages` (the
// same greedy tokens whatever the prefill chunk; chunks of 3 split the 18 image positions over
// seven calls), and through `serve`.
TEST(CpuGemma3VRun, ImageQuestionRunsEndToEnd) {
  test::TempDir dir;
  RgbImage rgb;
  rgb.width = 45;
  rgb.height = 20;  // stretched to 32 x 32
  rgb.pixels = Pixels(45);
  rgb.pixels.resize(45 * 20 * 3);
  auto png = EncodePng(rgb);
  ASSERT_TRUE(png.ok()) << png.error().ToString();
  const std::string file = dir.Write("question.png", *png);
  const std::string url = "data:image/png;base64," + test::Base64(*png);
  std::vector<int32_t> first;
  for (int64_t chunk : {64, 7, 3}) {
    FamilyModelOptions o;
    o.prefill_chunk_size = chunk;
    const std::string pkg = WriteGemma3V(dir, "q4f16_1", o);
    std::string report;
    std::vector<int32_t> tokens = RunImageTokens(pkg, ImageMessages(dir, file), &report);
    ASSERT_FALSE(tokens.empty()) << report;
    EXPECT_GT(Json::parse(report)["prompt_length"].get<int64_t>(), kRows + 2) << report;
    if (first.empty()) {
      first = tokens;
      EXPECT_EQ(RunImageTokens(pkg, ImageMessages(dir, url)), first);
      test::ExpectServeAnswersImage(dir, pkg, url, kRows + 2);
    }
    EXPECT_EQ(tokens, first) << "prefill_chunk_size " << chunk;
  }
}

// Refused before any token: an empty image file; an image for the text-only gemma3 package; pixels
// of another size given to image_embed directly.
TEST(CpuGemma3VRun, BadImagesAreRefusedBeforeAnyToken) {
  test::TempDir dir;
  const std::string pkg = WriteGemma3V(dir, "q0f32");
  const std::string empty = dir.Write("empty.png", "");
  auto r = test::RunCli({"run", pkg, "--messages", ImageMessages(dir, empty), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("empty.png"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;

  FamilyModelOptions text;
  text.family = "gemma3";
  text.quantization = "q0f32";
  const std::string gemma3 = dir.File("gemma3");
  ASSERT_TRUE(WriteFamilyModel(gemma3, text));
  r = test::RunCli({"run", gemma3, "--messages", ImageMessages(dir, dir.Write("x.bmp", test::BmpImage(8, 8))), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("image"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;

  OpenedPackage o = OpenPackage(pkg);
  ASSERT_TRUE(o.params);
  auto out = ImageEmbed(o, NDArray::Empty({1, 28, 32, 3}, DlUInt8()));
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("image_embed"), std::string::npos) << out.error().message;
}

// A package whose chat config gives no context window cannot take the sliding layers' window as
// its bound: the global layers see everything (refused at /context_window_size).
TEST(CpuGemma3V, LayerWindowDoesNotBoundTheContext) {
  test::TempDir dir;
  const std::string pkg = WriteGemma3V(dir, "q0f32");
  const std::string path = JoinPath(pkg, kChatConfigFileName);
  Json chat = Json::parse(test::ReadText(path));
  ASSERT_EQ(chat["sliding_window_size"], 8);
  chat["context_window_size"] = -1;
  chat["model_config"]["context_window_size"] = -1;
  chat["model_config"]["text_config"]["context_window_size"] = -1;
  std::ofstream(path) << chat.dump(2);
  auto r = test::RunCli({"run", pkg, "--messages", dir.Write("t.json", R"([{"role": "user", "content": "Hi"}])"), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("/context_window_size"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
}

}  // namespace
}  // namespace mlc
