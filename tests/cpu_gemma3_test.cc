// Gemma 3 on the CPU program (model_type gemma3 and gemma3_text): the package's parameter list in
// MLC's order, the layer plan (sliding layers with the local rotary, every pattern-th layer global
// with the linearly scaled one), the decoder against a float64 Gemma 3 written here from Hugging
// Face's Gemma3TextModel over prompts longer than the window and split at every chunk size, a batch
// equal to runs alone, greedy tokens through `run --messages` whatever the prefill chunk, and the
// configurations it refuses, each at its JSON Pointer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/decoder.h"
#include "support/family_checks.h"
#include "support/gemma3_64.h"
#include "support/llama_cpp_util.h"
#include "support/reference64.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Params64;
using test::Vec;

double LogitTolerance(const std::string& quant) { return quant.rfind("q4", 0) == 0 ? 3e-2 : 2e-4; }

std::string WriteGemma3(const test::TempDir& dir, const std::string& quant, FamilyModelOptions o = {},
                        const std::string& family = "gemma3") {
  o.family = family;
  o.quantization = quant;
  o.seed = 5;
  std::string pkg = dir.File(family + "-" + quant + "-" + std::to_string(o.prefill_chunk_size));
  auto report = WriteFamilyModel(pkg, o);
  EXPECT_TRUE(report) << report.error().ToString();
  return pkg;
}

Result<cpu::ModelConfig> ParseChat(const Json& chat_json) {
  auto chat = ParseChatConfig(chat_json);
  MLC_RETURN_IF_ERROR(chat);
  return cpu::ParseModelConfig(*chat);
}

Json ChatJsonOf(const std::string& pkg) { return Json::parse(test::ReadText(JoinPath(pkg, kChatConfigFileName))); }

cpu::ModelConfig ConfigOf(const std::string& pkg) {
  auto c = ParseChat(ChatJsonOf(pkg));
  EXPECT_TRUE(c) << FormatErrors(c.errors());
  return c ? *c : cpu::ModelConfig{};
}

using Gemma3Reference = test::Gemma3Reference64;

std::vector<int32_t> Prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(10 + (i * 41) % (vocab - 20)));
  return ids;
}

// The parameter list in MLC's order (unfused projections, then the q/k norms, the MLP, the four
// norms), tied embeddings, and the layer plan: the local rotary and the window on the sliding layers.
TEST(CpuGemma3, TinyPackageLayoutAndLayerPlan) {
  test::TempDir dir;
  cpu::ModelConfig c = ConfigOf(WriteGemma3(dir, "q4f16_1"));
  ASSERT_EQ(c.num_layers, 2);
  std::vector<std::string> names;
  for (const ParamSpec& p : cpu::ParamSpecs(c)) names.push_back(p.name);
  const std::string l0 = "language_model.model.layers.0.";
  const std::vector<std::string> want = {
      "language_model.model.embed_tokens.q_weight", "language_model.model.embed_tokens.q_scale",
      l0 + "self_attn.q_proj.q_weight", l0 + "self_attn.q_proj.q_scale", l0 + "self_attn.k_proj.q_weight",
      l0 + "self_attn.k_proj.q_scale", l0 + "self_attn.v_proj.q_weight", l0 + "self_attn.v_proj.q_scale",
      l0 + "self_attn.o_proj.q_weight", l0 + "self_attn.o_proj.q_scale", l0 + "self_attn.q_norm.weight",
      l0 + "self_attn.k_norm.weight", l0 + "mlp.gate_up_proj.q_weight", l0 + "mlp.gate_up_proj.q_scale",
      l0 + "mlp.down_proj.q_weight", l0 + "mlp.down_proj.q_scale", l0 + "input_layernorm.weight",
      l0 + "post_attention_layernorm.weight", l0 + "pre_feedforward_layernorm.weight",
      l0 + "post_feedforward_layernorm.weight"};
  ASSERT_GE(names.size(), want.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(want.size())), want);
  EXPECT_EQ(names.back(), "language_model.model.norm.weight");  // tied: no lm_head
  EXPECT_EQ(names.size(), 2 + 2 * 18 + 1u);
  ASSERT_EQ(c.ropes.size(), 2u);
  EXPECT_EQ(c.layers[0].sliding_window, 8);
  EXPECT_EQ(c.layers[0].rope, 1u);
  EXPECT_DOUBLE_EQ(c.ropes[1].theta, 10000.0);
  EXPECT_EQ(c.ropes[1].scaling, cpu::RopeScaling::kNone);
  EXPECT_EQ(c.layers[1].sliding_window, 0);
  EXPECT_EQ(c.layers[1].rope, 0u);
  EXPECT_DOUBLE_EQ(c.ropes[0].theta, 1000000.0);
  EXPECT_EQ(c.ropes[0].scaling, cpu::RopeScaling::kLinear);
  EXPECT_DOUBLE_EQ(c.ropes[0].factor, 8.0);
  EXPECT_DOUBLE_EQ(c.query_pre_attn_scalar, 48.0);
}

class CpuGemma3Reference : public ::testing::TestWithParam<std::string> {};

// The logits after every chunk agree with the float64 model whatever the split (one row at a time,
// uneven chunks, all at once), over a prompt longer than the sliding window.
TEST_P(CpuGemma3Reference, LogitsMatchFloat64AtEveryChunkSplit) {
  const std::string quant = GetParam();
  test::TempDir dir;
  const std::string pkg = WriteGemma3(dir, quant);
  cpu::ModelConfig c = ConfigOf(pkg);
  auto params = LoadParameters(pkg, cpu::ParamSpecs(c));
  ASSERT_TRUE(params) << params.error().ToString();
  auto w = cpu::BindWeights(c, cpu::ParamSpecs(c), **params);
  ASSERT_TRUE(w) << w.error().ToString();
  const size_t n = 21;  // the tiny window is 8
  std::vector<int32_t> ids = Prompt(static_cast<int64_t>(n), c.vocab_size);
  std::vector<float> embeds(n * static_cast<size_t>(c.hidden_size));
  ASSERT_TRUE(cpu::EmbedTokens(c, *w, ids, embeds.data()));
  Params64 p64(**params);
  const Json text = ChatJsonOf(pkg)["model_config"]["text_config"];
  std::vector<Vec> want = Gemma3Reference{text, p64, quant.rfind("q4", 0) == 0}.Run(ids);
  test::ExpectEveryChunkSplitMatches(
      n, {1, 4, 9, n}, [&](const std::vector<size_t>& chunks) { return test::RunDecoderChunks(c, *w, embeds, chunks); }, want,
      LogitTolerance(quant));
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuGemma3Reference, ::testing::Values("q0f32", "q4f16_1", "q4f32_1", "q0f16"),
                         [](const auto& i) { return i.param; });

// The text-only model_type reads the same layout: the same parameters give the same logits.
TEST(CpuGemma3, TextModelTypeRunsTheSameDecoder) {
  test::TempDir dir;
  const std::string a = WriteGemma3(dir, "q4f32_1"), b = WriteGemma3(dir, "q4f32_1", {}, "gemma3_text");
  EXPECT_EQ(cpu::ParamSpecs(ConfigOf(a)).size(), cpu::ParamSpecs(ConfigOf(b)).size());
  const std::string messages = dir.Write("m.json", R"([{"role": "user", "content": "Hello there, how are you?"}])");
  std::vector<std::vector<int32_t>> tokens;
  for (const std::string& pkg : {a, b}) {
    auto r = test::RunCli({"run", pkg, "--messages", messages, "--max-tokens", "6", "--temperature", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    tokens.push_back(Json::parse(r.out)["tokens"].get<std::vector<int32_t>>());
  }
  EXPECT_FALSE(tokens[0].empty());
  EXPECT_EQ(tokens[0], tokens[1]);
}

// Continuous batching: each request's greedy tokens equal its run alone (sliding and global layers
// of several sequences in one call).
TEST(CpuGemma3Batch, RequestsInABatchMatchRunsAlone) {
  const FamilyModelOptions o = test::TinyOptions("gemma3", "q4f16_1", 6);
  test::ExpectBatchMatchesRunsAlone(o, {test::Text(Prompt(13, 512)), test::Text({1, 60, 61}), test::Text(Prompt(19, 300))}, 8);
}

// `run --messages` on the tiny package: the conversation template, the same greedy tokens whatever
// the prefill chunk.
TEST(CpuGemma3Run, TextPromptTokensEqualAcrossPrefillChunks) {
  test::TempDir dir;
  const FamilyModelOptions o = test::TinyOptions("gemma3", "q4f16_1", 5);
  test::ExpectSameTokensAcrossPrefillChunks(
      dir, o, dir.Write("m.json", R"([{"role": "user", "content": "Tell me a story about the sea, please."}])"), {64, 5});
}

// What the program refuses, each at its JSON Pointer: another rope scaling, bad layer types, a
// missing window, attention biases; MLC's rope_scaling 0 and a null one mean none.
TEST(CpuGemma3, UnsupportedConfigurationsNameTheirField) {
  test::TempDir dir;
  const Json chat = ChatJsonOf(WriteGemma3(dir, "q0f32"));
  auto with = [&](const char* key, Json value) {
    Json j = chat;
    if (value.is_discarded()) {
      j["model_config"]["text_config"].erase(key);
    } else {
      j["model_config"]["text_config"][key] = std::move(value);
    }
    return ParseChat(j);
  };
  auto expect_error = [](const Result<cpu::ModelConfig>& r, const std::string& path, const std::string& words) {
    ASSERT_FALSE(r.ok());
    const std::string text = FormatErrors(r.errors());
    EXPECT_NE(text.find(path), std::string::npos) << text;
    EXPECT_NE(text.find(words), std::string::npos) << text;
  };
  expect_error(with("rope_scaling", Json{{"rope_type", "yarn"}, {"factor", 4.0}}), "/model_config/text_config/rope_scaling",
               "\"yarn\" is not supported for gemma3 (supported: linear)");
  expect_error(with("rope_scaling", Json{{"rope_type", "linear"}, {"factor", 0.5}}),
               "/model_config/text_config/rope_scaling/factor", "expected a number >= 1");
  expect_error(with("layer_types", Json::array({"sliding_attention", "chunked_attention"})),
               "/model_config/text_config/layer_types/1", "expected \"sliding_attention\" or \"full_attention\"");
  expect_error(with("sliding_window_size", Json(Json::value_t::discarded)), "/model_config/text_config/sliding_window",
               "required: an integer");
  expect_error(with("attention_bias", true), "/model_config/text_config/attention_bias", "attention biases");
  for (Json none : {Json(0), Json(nullptr), Json::object()}) {
    auto r = with("rope_scaling", none);
    ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
    EXPECT_EQ(r->ropes[0].scaling, cpu::RopeScaling::kNone);
  }
  // MLC keeps the Hugging Face fields it has no member for in text_config.kwargs.
  Json mlc = chat;
  Json& text = mlc["model_config"]["text_config"];
  text.erase("rope_local_base_freq");
  text.erase("sliding_window_pattern");
  text["kwargs"] = {{"rope_local_base_freq", 20000.0}, {"sliding_window_pattern", 1}};
  auto from_kwargs = ParseChat(mlc);
  ASSERT_TRUE(from_kwargs.ok()) << FormatErrors(from_kwargs.errors());
  EXPECT_DOUBLE_EQ(from_kwargs->ropes[1].theta, 20000.0);
  EXPECT_EQ(from_kwargs->layers[0].sliding_window, 0);  // pattern 1: every layer global
  // layer_types, when given, decides which layers are global.
  auto typed = with("layer_types", Json::array({"full_attention", "sliding_attention"}));
  ASSERT_TRUE(typed.ok()) << FormatErrors(typed.errors());
  EXPECT_EQ(typed->layers[0].sliding_window, 0);
  EXPECT_EQ(typed->layers[1].sliding_window, 8);
}

// text_config as MLC's Gemma3Config reads it: the Hugging Face fields its converter wrote under
// "kwargs" folded in, the outer vocab_size.
Json TextConfigAsRead(const Json& model_config) {
  Json text = model_config["text_config"];
  if (text.contains("kwargs")) {
    for (const auto& [key, value] : text["kwargs"].items()) text[key] = value;
    text.erase("kwargs");
  }
  if (!text.contains("vocab_size")) text["vocab_size"] = model_config["vocab_size"];
  return text;
}

// The float64 model's greedy continuation of the prompt, one token at a time.
std::vector<int32_t> ReferenceGreedy(const Gemma3Reference& model, std::vector<int32_t> ids,
                                     int steps) {
  std::vector<int32_t> out;
  for (int i = 0; i < steps; ++i) {
    const Vec last = model.Run(ids).back();
    out.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
    ids.push_back(out.back());
  }
  return out;
}

// A package written without this project's writer (tests/support/gemma3_package.py, numpy: its own
// parameter list, q4f16_1 quantization and mlc-chat-config.json, the Hugging Face fields under
// text_config's kwargs as MLC's converter writes them for gemma-3-1b-it) of six layers, five
// sliding and one global: the greedy tokens of a prompt three windows long through `run --request`
// are the float64 model's, and llama.cpp's on its GGUF (a difference only where llama.cpp's best
// two logits tie); `run --messages` answers, the same with the manifest `emit package` adds.
TEST(CpuGemma3Run, SeparatelyWrittenPackageMatchesLlamaCppAndFloat64) {
  constexpr int kPromptLength = 24, kSteps = 8;
  test::TempDir dir;
  const std::string tokenizer = JoinPath(WriteGemma3(dir, "q0f32"), "tokenizer.json");
  const std::string pkg = dir.File("separate"), tasks = dir.File("tasks.json");
  auto written =
      test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/gemma3_package.py"),
                        pkg, tokenizer, "--seed", "13", "--tasks", tasks});
  ASSERT_EQ(written.exit_code, 0) << written.out << written.err;
  const cpu::ModelConfig c = ConfigOf(pkg);
  ASSERT_EQ(c.num_layers, 6);
  for (size_t l = 0; l < c.layers.size(); ++l)
    EXPECT_EQ(c.layers[l].sliding_window, l == 5 ? 0 : 8) << "layer " << l;

  // (a) The CPU program against the float64 model.
  const std::vector<int32_t> prompt = test::PromptIds(kPromptLength, c.vocab_size, 5);
  const std::string request =
      dir.Write("request.json", R"({"turns": [[{"tokens": [)" + test::JoinIds(prompt) + "]}]]}");
  auto r = test::RunCli({"run", pkg, "--request", request, "--max-tokens", std::to_string(kSteps),
                         "--temperature", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::vector<int32_t> ours = Json::parse(r.out)["tokens"].get<std::vector<int32_t>>();
  ASSERT_EQ(ours.size(), size_t{kSteps}) << r.out;
  EXPECT_GT(std::set<int32_t>(ours.begin(), ours.end()).size(), 1u)
      << "a continuation of one repeated token";
  auto params = LoadParameters(pkg, cpu::ParamSpecs(c));
  ASSERT_TRUE(params) << params.error().ToString();
  Params64 p64(**params);
  const Json text = TextConfigAsRead(ChatJsonOf(pkg)["model_config"]);
  EXPECT_EQ(ours, ReferenceGreedy(Gemma3Reference{text, p64, true}, prompt, kSteps));

  // (b) llama.cpp on the package converted to GGUF.
  const std::string node_llama_cpp = test::NpmPackage(test::kNodeLlamaCpp);
  ASSERT_FALSE(node_llama_cpp.empty());
  test::LlamaCppRun theirs = test::RunLlamaCpp(node_llama_cpp, pkg, dir, prompt, kSteps);
  ASSERT_EQ(theirs.vocab, c.vocab_size);
  ASSERT_EQ(theirs.generated.size(), size_t{kSteps});
  for (int t = 0; t < kSteps; ++t) {
    if (ours[static_cast<size_t>(t)] == theirs.generated[static_cast<size_t>(t)]) continue;
    test::ExpectTie(theirs, kPromptLength - 1 + t, t, ours[static_cast<size_t>(t)]);
    break;
  }

  // (c) A conversation through the template, before and after the manifest.
  const std::string messages = dir.Write(
      "m.json", R"([{"role": "user", "content": "Tell me a story about the sea, please."}])");
  std::vector<std::vector<int32_t>> answers;
  for (bool manifest : {false, true}) {
    if (manifest) {
      auto emitted = test::RunCli({"emit", "package", pkg, "--tasks", tasks});
      ASSERT_EQ(emitted.exit_code, 0) << emitted.out << emitted.err;
    }
    auto m = test::RunCli(
        {"run", pkg, "--messages", messages, "--max-tokens", "6", "--temperature", "0", "--json"});
    ASSERT_EQ(m.exit_code, 0) << m.out << m.err;
    Json j = Json::parse(m.out);
    EXPECT_EQ(j["legacy"], !manifest) << m.out;
    answers.push_back(j["tokens"].get<std::vector<int32_t>>());
    EXPECT_FALSE(answers.back().empty()) << m.out;
  }
  EXPECT_EQ(answers[0], answers[1]);
}

}  // namespace
}  // namespace mlc
