// Gemma 4 on the CPU program: the E2B parameter list and program document of the shipped example,
// the tiny package's layout and KV plan (shared layers without projections of their own), the
// decoder against a float64 Gemma 4 written here from Hugging Face's definitions (per-layer
// embeddings, q/k/v norms, proportional rotary, sliding windows, KV sharing, layer scalars, capped
// logits) over prompts longer than the window and split at every chunk size, the token pair's
// adapter rows (per-layer lookups at the pad id), a batch equal to runs alone, bad calls, and a
// package written by a separate tool (tests/support/gemma4_package.py) answering a spoken question.
#include <gtest/gtest.h>

#include <atomic>

#include "base/interrupt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"
#include "base/hash.h"
#include "runtime/cpu/decoder.h"
#include "runtime/cpu/towers/gemma4_audio.h"
#include "support/family_checks.h"
#include "support/media_checks.h"
#include "support/reference64.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using test::Params64;
using test::GeluTanh64;
using test::HeadNorm64;
using test::Rotate64;
using test::Vec;

double LogitTolerance(const std::string& quant) { return quant.rfind("q4", 0) == 0 ? 3e-2 : 2e-4; }

std::string WriteGemma4(const test::TempDir& dir, const std::string& quant, FamilyModelOptions o = {}) {
  o.family = "gemma4";
  o.quantization = quant;
  o.seed = 3;
  std::string pkg = dir.File("gemma4-" + quant + "-" + std::to_string(o.prefill_chunk_size) + (o.audio ? "-audio" : ""));
  auto report = WriteFamilyModel(pkg, o);
  EXPECT_TRUE(report) << report.error().ToString();
  return pkg;
}

cpu::ModelConfig ConfigOf(const std::string& pkg) {
  auto chat = ReadChatConfig(JoinPath(pkg, kChatConfigFileName));
  EXPECT_TRUE(chat) << chat.error().ToString();
  auto c = cpu::ParseModelConfig(*chat);
  EXPECT_TRUE(c) << FormatErrors(c.errors());
  return *c;
}

std::shared_ptr<ParameterSet> ParamsOf(const std::string& pkg, const cpu::ModelConfig& c) {
  auto params = LoadParameters(pkg, cpu::ParamSpecs(c));
  EXPECT_TRUE(params) << params.error().ToString();
  return params ? *params : nullptr;
}

// A float64 Gemma 4 text decoder from Hugging Face's Gemma4TextModel, over the package's config
// (model_config.text_config) and parameters; inputs are rows of input embeddings with their token
// ids and modality ids (adapter rows: modality 1, looked up at the pad id for the per-layer part).
struct Gemma4Reference {
  const Json& text;  // text_config
  const Params64& p;
  bool q8 = false;  // 4-bit weights: activations rounded to int8 blocks as the kernels do

  Vec Lin(const std::string& base, const Vec& x, int64_t rows, int64_t cols) const {
    return test::MatVec(p.Matrix(base, rows, cols), q8 ? test::RoundToQ8Blocks(x) : x, rows, cols);
  }

  Vec EmbedRow(int32_t id) const {
    const int64_t h = text["hidden_size"], vocab = text["vocab_size"];
    Vec e = p.Matrix("language_model.embed_tokens", vocab, h);
    Vec row(e.begin() + id * h, e.begin() + (id + 1) * h);
    for (double& v : row) v *= std::sqrt(static_cast<double>(h));
    return row;
  }

  // Logits at every position.
  std::vector<Vec> Run(const std::vector<Vec>& inputs, const std::vector<int32_t>& ids,
                       const std::vector<int32_t>& modality) const {
    const int64_t H = text["hidden_size"], L = text["num_hidden_layers"], NH = text["num_attention_heads"];
    const int64_t NKV = text["num_key_value_heads"], D = text["head_dim"], GD = text["global_head_dim"];
    const int64_t I = text["intermediate_size"], P = text["hidden_size_per_layer_input"], V = text["vocab_size"];
    const int64_t window = text["sliding_window"], shared = text["num_kv_shared_layers"];
    const double eps = text["rms_norm_eps"];
    const Json& rope = text["rope_parameters"];
    const std::string lm = "language_model.";
    std::vector<bool> full;
    for (const Json& t : text["layer_types"]) full.push_back(t == "full_attention");
    const int64_t first_shared = L - shared;
    auto source = [&](int64_t l) {
      if (l < first_shared) return l;
      for (int64_t j = first_shared - 1; j >= 0; --j) {
        if (full[static_cast<size_t>(j)] == full[static_cast<size_t>(l)]) return j;
      }
      return int64_t{-1};
    };
    std::vector<std::vector<Vec>> keys(static_cast<size_t>(L)), values(keys.size());
    std::vector<Vec> out;
    for (size_t t = 0; t < inputs.size(); ++t) {
      const int64_t pos = static_cast<int64_t>(t);
      Vec x = inputs[t];
      // Per-layer inputs: (norm(projection(x) / sqrt(H)) + table[id] * sqrt(P)) / sqrt(2).
      const int32_t pl_id = modality[t] != 0 ? static_cast<int32_t>(text["pad_token_id"]) : ids[t];
      Vec proj = Lin(lm + "per_layer_model_projection", x, L * P, H);
      std::vector<Vec> per_layer;
      for (int64_t l = 0; l < L; ++l) {
        Vec slice(proj.begin() + l * P, proj.begin() + (l + 1) * P);
        for (double& v : slice) v /= std::sqrt(static_cast<double>(H));
        slice = test::RmsNorm(slice, p.Floats(lm + "per_layer_projection_norm.weight"), eps);
        Vec table = p.Matrix(lm + "embed_tokens_per_layer." + std::to_string(l), text["vocab_size_per_layer_input"], P);
        for (int64_t i = 0; i < P; ++i) {
          slice[static_cast<size_t>(i)] = (slice[static_cast<size_t>(i)] + table[static_cast<size_t>(pl_id * P + i)] *
                                                                               std::sqrt(static_cast<double>(P))) /
                                          std::sqrt(2.0);
        }
        per_layer.push_back(std::move(slice));
      }
      for (int64_t l = 0; l < L; ++l) {
        const bool is_full = full[static_cast<size_t>(l)];
        const int64_t d = is_full ? GD : D, src = source(l);
        const int64_t inter = l >= first_shared && text["use_double_wide_mlp"].get<bool>() ? 2 * I : I;
        const Json& rp = rope[is_full ? "full_attention" : "sliding_attention"];
        const int64_t pairs = rp.value("rope_type", std::string("default")) == "proportional"
                                  ? static_cast<int64_t>(std::floor(rp.value("partial_rotary_factor", 1.0) * d / 2))
                                  : d / 2;
        const double theta = rp["rope_theta"];
        const std::string pre = lm + "layers." + std::to_string(l) + ".";
        Vec h = test::RmsNorm(x, p.Floats(pre + "input_layernorm.weight"), eps);
        Vec q = Lin(pre + "self_attn.q_proj", h, NH * d, H);
        HeadNorm64(q, d, p.Floats(pre + "self_attn.q_norm.weight"), eps);
        Rotate64(q, d, theta, pairs, pos);
        if (src == l) {
          Vec k = Lin(pre + "self_attn.k_proj", h, NKV * d, H);
          Vec v = Lin(pre + "self_attn.v_proj", h, NKV * d, H);
          HeadNorm64(k, d, p.Floats(pre + "self_attn.k_norm.weight"), eps);
          HeadNorm64(v, d, {}, eps);
          Rotate64(k, d, theta, pairs, pos);
          keys[static_cast<size_t>(l)].push_back(k);
          values[static_cast<size_t>(l)].push_back(v);
        }
        // Attention scale 1: q and k are normalized per head.
        Vec attn = test::Attend64(q, keys[static_cast<size_t>(src)], values[static_cast<size_t>(src)], NH, NKV, d, pos, 1.0,
                                  [&](int64_t j) { return is_full || pos - j < window; });
        test::GemmaAttnOutAndMlp64(x, attn, p, pre, inter, eps, q8);
        // The per-layer input: gate (kept in float: no int8 steps), product, projection, norm.
        Vec g = test::MatVec(p.Matrix(pre + "per_layer_input_gate", P, H), x, P, H);
        for (int64_t i = 0; i < P; ++i) g[static_cast<size_t>(i)] = GeluTanh64(g[static_cast<size_t>(i)]) * per_layer[static_cast<size_t>(l)][static_cast<size_t>(i)];
        Vec pl = test::RmsNorm(Lin(pre + "per_layer_projection", g, H, P), p.Floats(pre + "post_per_layer_input_norm.weight"), eps);
        const double scalar = p.Floats(pre + "layer_scalar").at(0);
        for (int64_t i = 0; i < H; ++i) x[static_cast<size_t>(i)] = (x[static_cast<size_t>(i)] + pl[static_cast<size_t>(i)]) * scalar;
      }
      Vec logits = Lin(lm + "embed_tokens", test::RmsNorm(x, p.Floats(lm + "norm.weight"), eps), V, H);
      for (double& v : logits) v = 30.0 * std::tanh(v / 30.0);
      out.push_back(std::move(logits));
    }
    return out;
  }
};

Json TextConfigOf(const std::string& pkg) {
  return Json::parse(test::ReadText(JoinPath(pkg, kChatConfigFileName)))["model_config"]["text_config"];
}

std::vector<int32_t> Prompt(int64_t n, int64_t vocab) {
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(10 + (i * 37) % (vocab - 20)));
  return ids;
}

TEST(CpuGemma4, TinyPackageLayoutAndKvPlan) {
  test::TempDir dir;
  std::string pkg = WriteGemma4(dir, "q4f16_1");
  cpu::ModelConfig c = ConfigOf(pkg);
  ASSERT_EQ(c.num_layers, 6);
  std::vector<ParamSpec> specs = cpu::ParamSpecs(c);
  auto has = [&](const std::string& name) {
    return std::any_of(specs.begin(), specs.end(), [&](const ParamSpec& p) { return p.name == name; });
  };
  const std::string l = "language_model.layers.";
  EXPECT_TRUE(has(l + "2.self_attn.k_proj.q_weight"));
  EXPECT_TRUE(has(l + "2.self_attn.k_norm.weight"));
  for (const char* part : {"k_proj.q_weight", "v_proj.q_scale", "k_norm.weight"}) {
    for (const char* layer : {"3.", "4.", "5."}) {
      EXPECT_FALSE(has(l + layer + "self_attn." + part)) << layer << part;  // shared: no KV projections
    }
  }
  EXPECT_TRUE(has("language_model.embed_tokens_per_layer.5.q_weight"));
  EXPECT_TRUE(has(l + "0.per_layer_input_gate.weight"));
  EXPECT_TRUE(has(l + "5.layer_scalar"));
  EXPECT_FALSE(has("lm_head.q_weight"));  // tied
  // The cache plan: layers 3 and 4 (sliding) read layer 1, layer 5 (full) layer 2, with no rows of
  // their own.
  std::vector<cpu::KvLayerPlan> plan = cpu::KvPlan(c);
  ASSERT_EQ(plan.size(), 6u);
  for (size_t shared : {3u, 4u, 5u}) EXPECT_EQ(plan[shared].use, cpu::KvUse::kShared) << shared;
  EXPECT_EQ(plan[3].source, 1);
  EXPECT_EQ(plan[4].source, 1);
  EXPECT_EQ(plan[5].source, 2);
  EXPECT_EQ(plan[2].row_size, 64);  // one KV head of global_head_dim 64
  EXPECT_EQ(plan[1].row_size, 32);
  EXPECT_EQ(c.layers[3].intermediate_size, 2 * c.layers[2].intermediate_size);  // double-wide MLP
  // The program exports the token pair.
  auto lib = OpenCpuLibrary(pkg);
  ASSERT_TRUE(lib) << lib.error().ToString();
  const auto& exports = (*lib)->Metadata().program->programs.at("generation").exports;
  EXPECT_EQ(exports.at("prefill_tokens"), "prefill_tokens");
  EXPECT_EQ(exports.at("decode_tokens"), "decode_tokens");
  EXPECT_EQ(exports.count("prefill_embeds"), 0u);
}

class CpuGemma4Reference : public ::testing::TestWithParam<std::string> {};

// The logits after every chunk agree with the float64 model, whatever the split (one row at a
// time, uneven chunks, all at once); the prompt is longer than the sliding window.
TEST_P(CpuGemma4Reference, LogitsMatchFloat64AtEveryChunkSplit) {
  const std::string quant = GetParam();
  test::TempDir dir;
  std::string pkg = WriteGemma4(dir, quant);
  cpu::ModelConfig c = ConfigOf(pkg);
  auto params = ParamsOf(pkg, c);
  ASSERT_TRUE(params);
  auto w = cpu::BindWeights(c, cpu::ParamSpecs(c), *params);
  ASSERT_TRUE(w) << w.error().ToString();
  const size_t n = 20;  // the tiny window is 8
  std::vector<int32_t> ids = Prompt(static_cast<int64_t>(n), c.vocab_size);
  std::vector<int32_t> modality(n, 0);
  std::vector<float> embeds(n * static_cast<size_t>(c.hidden_size));
  ASSERT_TRUE(cpu::EmbedTokens(c, *w, ids, embeds.data()));
  Params64 p64(*params);
  const Json text = TextConfigOf(pkg);
  Gemma4Reference ref{text, p64, quant.rfind("q4", 0) == 0};
  std::vector<Vec> rows;
  for (int32_t id : ids) rows.push_back(ref.EmbedRow(id));
  std::vector<Vec> want = ref.Run(rows, ids, modality);
  test::ExpectEveryChunkSplitMatches(
      n, {1, 3, 7, n}, [&](const std::vector<size_t>& chunks) { return test::RunDecoderChunks(c, *w, embeds, chunks, "prefill_tokens", ids, modality); },
      want, LogitTolerance(quant));
}

INSTANTIATE_TEST_SUITE_P(Quantizations, CpuGemma4Reference, ::testing::Values("q0f32", "q4f16_1", "q4f32_1", "q0f16"),
                         [](const auto& i) { return i.param; });

// Adapter rows (modality 1) enter as given and look the pad id up for their per-layer part.
TEST(CpuGemma4, AdapterRowsUseThePadIdForPerLayerInputs) {
  test::TempDir dir;
  std::string pkg = WriteGemma4(dir, "q0f32");
  cpu::ModelConfig c = ConfigOf(pkg);
  auto params = ParamsOf(pkg, c);
  ASSERT_TRUE(params);
  auto w = cpu::BindWeights(c, cpu::ParamSpecs(c), *params);
  ASSERT_TRUE(w);
  std::vector<int32_t> ids = {1, 30, 4, 4, 4, 40, 41};  // 4: a placeholder id
  std::vector<int32_t> modality = {0, 0, 1, 1, 1, 0, 0};
  const size_t h = static_cast<size_t>(c.hidden_size);
  std::vector<float> embeds(ids.size() * h);
  ASSERT_TRUE(cpu::EmbedTokens(c, *w, ids, embeds.data()));
  Params64 p64(*params);
  const Json text = TextConfigOf(pkg);
  Gemma4Reference ref{text, p64, false};
  std::vector<Vec> rows;
  for (size_t t = 0; t < ids.size(); ++t) {
    if (modality[t] == 0) {
      rows.push_back(ref.EmbedRow(ids[t]));
      continue;
    }
    Vec r(h);  // an adapter's row: unscaled values
    for (size_t i = 0; i < h; ++i) r[i] = std::sin(0.1 * static_cast<double>(i + 7 * t));
    for (size_t i = 0; i < h; ++i) embeds[t * h + i] = static_cast<float>(r[i]);
    rows.push_back(std::move(r));
  }
  std::vector<Vec> want = ref.Run(rows, ids, modality);
  std::vector<std::vector<float>> got = test::RunDecoderChunks(c, *w, embeds, {ids.size()}, "prefill_tokens", ids, modality);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LT(test::RelError(got[0], want.back()), LogitTolerance("q0f32"));
  // The same rows marked as text look the placeholder id up instead: other logits.
  std::vector<int32_t> as_text(ids.size(), 0);
  std::vector<Vec> other = ref.Run(rows, ids, as_text);
  EXPECT_GT(test::RelError(got[0], other.back()), 1e-3);
}

// A tiny q0f32 Gemma 4 package bound to its weights, with a one-sequence cache of 32 positions.
struct Bound {
  test::TempDir dir;
  cpu::ModelConfig c;
  std::shared_ptr<ParameterSet> params;  // the weights are views into it
  std::unique_ptr<cpu::ModelWeights> w;
  std::unique_ptr<cpu::PagedKvCache> kv;
};

void BindQ0(Bound& t) {
  const std::string pkg = WriteGemma4(t.dir, "q0f32");
  t.c = ConfigOf(pkg);
  t.params = ParamsOf(pkg, t.c);
  ASSERT_TRUE(t.params);
  auto w = cpu::BindWeights(t.c, cpu::ParamSpecs(t.c), *t.params);
  ASSERT_TRUE(w);
  t.w = std::make_unique<cpu::ModelWeights>(std::move(*w));
  cpu::KvCacheShape shape;
  shape.layers = cpu::KvPlan(t.c);
  shape.max_total_seq_len = 32;
  shape.prefill_chunk_size = 16;
  t.kv = std::make_unique<cpu::PagedKvCache>(shape);
}

TEST(CpuGemma4, CallsWithoutTokenIdsOrWithBadIdsAreRefused) {
  Bound t;
  ASSERT_NO_FATAL_FAILURE(BindQ0(t));
  const cpu::ModelConfig& c = t.c;
  const cpu::ModelWeights* w = t.w.get();
  cpu::PagedKvCache& kv = *t.kv;
  std::vector<float> row(static_cast<size_t>(c.hidden_size), 0.5f);
  auto no_ids = cpu::Forward(c, *w, kv, row.data(), 1, "prefill_tokens");
  ASSERT_FALSE(no_ids);
  EXPECT_NE(no_ids.error().message.find("token pair"), std::string::npos) << no_ids.error().message;
  std::vector<int32_t> bad = {static_cast<int32_t>(c.vocab_size)}, zero = {0};
  auto out_of_range = cpu::Forward(c, *w, kv, row.data(), 1, "prefill_tokens", cpu::RowTokens{bad, zero});
  ASSERT_FALSE(out_of_range);
  EXPECT_NE(out_of_range.error().message.find("outside the per-layer vocabulary"), std::string::npos);
}

// An interrupted forward stops between layers and commits nothing to the cache: the sequence's
// length is as before, and the same call then runs.
TEST(CpuGemma4, InterruptedForwardCommitsNothing) {
  Bound t;
  ASSERT_NO_FATAL_FAILURE(BindQ0(t));
  const cpu::ModelConfig& c = t.c;
  const cpu::ModelWeights* w = t.w.get();
  cpu::PagedKvCache& kv = *t.kv;
  std::vector<float> rows(static_cast<size_t>(3 * c.hidden_size), 0.25f);
  std::vector<int32_t> ids = {5, 6, 7}, text = {0, 0, 0};
  std::atomic<bool> flag{true};
  const InterruptScope scope(&flag);
  auto stopped = cpu::Forward(c, *w, kv, rows.data(), 3, "prefill_tokens", cpu::RowTokens{ids, text});
  ASSERT_FALSE(stopped);
  EXPECT_NE(stopped.error().message.find("prefill_tokens: interrupted"), std::string::npos);
  EXPECT_EQ(*kv.SequenceLength(0), 0);
  flag = false;
  auto ran = cpu::Forward(c, *w, kv, rows.data(), 3, "prefill_tokens", cpu::RowTokens{ids, text});
  ASSERT_TRUE(ran) << ran.error().ToString();
  EXPECT_EQ(*kv.SequenceLength(0), 3);
}

// Continuous batching: each request's greedy tokens equal its run alone (token pair decode of
// several sequences in one call, shared layers reading their sources' rows per sequence).
TEST(CpuGemma4Batch, RequestsInABatchMatchRunsAlone) {
  const FamilyModelOptions o = test::TinyOptions("gemma4", "q4f16_1", 4);
  test::ExpectBatchMatchesRunsAlone(o, {test::Text(Prompt(12, 512)), test::Text({1, 60, 61}), test::Text(Prompt(17, 300))}, 8);
}

// Text through `run --messages` on the tiny package: the conversation template, greedy tokens the
// same whatever the prefill chunk.
TEST(CpuGemma4Run, TextPromptTokensEqualAcrossPrefillChunks) {
  test::TempDir dir;
  const FamilyModelOptions o = test::TinyOptions("gemma4", "q4f16_1", 3);
  test::ExpectSameTokensAcrossPrefillChunks(
      dir, o, dir.Write("m.json", R"([{"role": "user", "content": "Tell me about the sea, please."}])"), {64, 5});
}

// A spoken question through `run --messages` on a package with the audio tower: the clip decoded,
// resampled to 16 kHz, its rows between the begin- and end-of-audio ids, and the same greedy tokens
// whatever the prefill chunk (chunks of 5 split the 13 audio rows over several calls, with their
// modality ids); a clip too short for one frame is refused before any token.
TEST(CpuGemma4Run, SpokenQuestionTokensEqualAcrossPrefillChunks) {
  test::TempDir dir;
  std::vector<double> tone;
  for (int i = 0; i < 22050; ++i) tone.push_back(0.4 * std::sin(2 * M_PI * 330.0 * i / 22050.0));
  test::WavLayout layout;
  layout.sample_rate_hz = 22050;  // resampled to the processor's 16 kHz
  const std::string wav = dir.Write("question.wav", test::EncodeWav(layout, tone));
  const std::string messages = dir.Write("m.json", R"([{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": ")" + wav + R"(", "format": "wav"}},
      {"type": "text", "text": " What was said?"}]}])");
  std::vector<int32_t> first;
  for (int64_t chunk : {64, 5}) {
    FamilyModelOptions o;
    o.prefill_chunk_size = chunk;
    o.audio = true;
    std::string pkg = WriteGemma4(dir, "q4f16_1", o);
    auto r = test::RunCli({"run", pkg, "--messages", messages, "--max-tokens", "8", "--temperature", "0", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    Json j = Json::parse(r.out);
    EXPECT_GT(j["timings"]["adapter_ms"].get<double>(), 0.0);
    EXPECT_GT(j["prompt_length"].get<int64_t>(), 25) << j.dump();  // 25 audio rows for 1 s
    std::vector<int32_t> tokens = j["tokens"].get<std::vector<int32_t>>();
    ASSERT_FALSE(tokens.empty());
    if (first.empty()) first = tokens;
    EXPECT_EQ(tokens, first) << "prefill_chunk_size " << chunk;
  }
  FamilyModelOptions o;
  o.audio = true;
  std::string pkg = WriteGemma4(dir, "q0f32", o);
  test::WavLayout short_layout;
  const std::string tiny = dir.Write("short.wav", test::EncodeWav(short_layout, std::vector<double>(100, 0.1)));
  const std::string short_messages = dir.Write("s.json", R"([{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": ")" + tiny + R"(", "format": "wav"}}]}])");
  auto r = test::RunCli({"run", pkg, "--messages", short_messages, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("161"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
}

// A package that holds keys for a layer that shares another's (a layer plan the config does not
// have) is refused before any token, naming the tensor: by its parameter_schema_id with a manifest,
// by the loader without one.
TEST(CpuGemma4Run, SharedLayerTensorInThePackageIsRefused) {
  for (bool manifest : {true, false}) {
    test::TempDir dir;
    FamilyModelOptions o;
    o.manifest = manifest;
    std::string pkg = WriteGemma4(dir, "q0f32", o);
    const std::string cache_path = JoinPath(pkg, kTensorCacheFileName);
    Json cache = Json::parse(test::ReadText(cache_path));
    Json& shard = cache["records"][0];
    Json extra;
    for (const Json& rec : shard["records"]) {
      if (rec["name"] == "language_model.layers.2.self_attn.k_norm.weight") extra = rec;
    }
    ASSERT_TRUE(extra.is_object());
    const std::string name = "language_model.layers.5.self_attn.k_norm.weight";  // layer 5 shares
    const std::string shard_path = JoinPath(pkg, shard["dataPath"].get<std::string>());
    std::string bytes = test::ReadText(shard_path);
    extra["name"] = name;
    extra["byteOffset"] = bytes.size();
    bytes += std::string(extra["nbytes"].get<size_t>(), '\0');
    shard["nbytes"] = bytes.size();
    shard["records"].push_back(extra);
    auto md5 = Md5Hex(bytes);
    ASSERT_TRUE(md5);
    shard["md5sum"] = *md5;
    std::ofstream(shard_path, std::ios::binary) << bytes;
    std::ofstream(cache_path) << cache.dump(1);
    std::string messages = dir.Write("m.json", R"([{"role": "user", "content": "Hi"}])");
    auto r = test::RunCli({"run", pkg, "--messages", messages, "--json"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find(manifest ? "/weights/parameter_schema_id" : name), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\"tokens\""), std::string::npos) << r.out;
  }
}

// The shipped example's chat config: the CPU program's parameter list is the converted E2B
// package's (../shared/reference, 1682 tensors, in order), and its program document carries the
// example's interface_id and parameter_schema_id, so the example's manifest binds to it.
TEST(CpuGemma4, ShippedExampleBindsToTheCpuProgram) {
  const std::string example = test::SourcePath("examples/gemma-4-E2B-it-q4f16_1");
  auto chat = ReadChatConfig(JoinPath(example, kChatConfigFileName));
  ASSERT_TRUE(chat) << chat.error().ToString();
  auto params = CpuParamSpecs(*chat);
  ASSERT_TRUE(params) << FormatErrors(params.errors());
  Json want = Json::parse(test::ReadText(test::SharedPath("reference/gemma-4-E2B-it/params-q4f16_1.json")));
  for (size_t i = 0; i < std::min(want.size(), params->size()); ++i) {
    const ParamSpec& got = (*params)[i];
    ASSERT_EQ(got.name, want[i]["name"].get<std::string>()) << i;
    std::vector<int64_t> shape;
    for (const auto& d : got.shape) shape.push_back(std::get<int64_t>(d));
    EXPECT_EQ(shape, want[i]["shape"].get<std::vector<int64_t>>()) << got.name;
    EXPECT_EQ(got.dtype, want[i]["dtype"].get<std::string>()) << got.name;
  }
  ASSERT_EQ(params->size(), want.size());
  // reference-model --family gemma4 --audio --shape e2b writes the same parameter list.
  FamilyModelOptions e2b;
  e2b.family = "gemma4";
  e2b.shape = "e2b";
  e2b.audio = true;
  auto written = FamilyChatConfig(e2b);
  ASSERT_TRUE(written) << FormatErrors(written.errors());
  auto written_params = CpuParamSpecs(*written);
  ASSERT_TRUE(written_params) << FormatErrors(written_params.errors());
  auto written_id = ComputeParameterSchemaId(*written_params);
  auto example_id = ComputeParameterSchemaId(*params);
  ASSERT_TRUE(written_id && example_id);
  EXPECT_EQ(*written_id, *example_id);
  auto program = CpuCompiledProgram(*chat);
  ASSERT_TRUE(program) << FormatErrors(program.errors());
  auto manifest = ReadModelPackage(JoinPath(example, kManifestFileName));
  ASSERT_TRUE(manifest) << manifest.error().ToString();
  EXPECT_EQ(program->interface_id, manifest->interface_id);
  EXPECT_EQ(program->parameter_schema_id, manifest->parameter_schema_id);
  EXPECT_EQ(program->programs.at("generation").adapters->at("audio"), "audio_embed");
}

// The issue's done-when: a random-weight E2B-layout package written by a separate tool
// (tests/support/gemma4_package.py: its own parameter list, 4-bit quantization, bfloat16 tables
// and configs, only the tokenizer taken from the writer's package; the manifest from its tasks by
// `emit package`) answers a spoken question through `run --messages` and `serve`, and its
// audio_embed gives finite rows of the adapter's shape.
TEST(CpuGemma4Run, SeparatelyWrittenPackageAnswersASpokenQuestion) {
  test::TempDir dir;
  FamilyModelOptions o;
  o.manifest = false;
  const std::string tokenizer = JoinPath(WriteGemma4(dir, "q4f16_1", o), "tokenizer.json");
  const std::string pkg = dir.File("separate"), tasks = dir.File("tasks.json");
  auto written = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/gemma4_package.py"), pkg,
                                   tokenizer, "--seed", "11", "--tasks", tasks});
  ASSERT_EQ(written.exit_code, 0) << written.out << written.err;
  auto emitted = test::RunCli({"emit", "package", pkg, "--tasks", tasks});
  ASSERT_EQ(emitted.exit_code, 0) << emitted.out << emitted.err;

  constexpr int64_t kSamples = 16000;  // 1 s at the processor's rate
  std::vector<double> tone;
  for (int64_t i = 0; i < kSamples; ++i) tone.push_back(0.3 * std::sin(2 * M_PI * 440.0 * static_cast<double>(i) / 16000.0));
  const std::string wav_bytes = test::EncodeWav(test::WavLayout{}, tone);
  const int64_t rows = cpu::Gemma4AudioConfig::Rows(kSamples);

  auto lib = OpenCpuLibrary(pkg);
  ASSERT_TRUE(lib) << lib.error().ToString();
  auto params = LoadParameters(pkg, (*lib)->Metadata().params);
  ASSERT_TRUE(params) << params.error().ToString();
  NDArray clip = NDArray::Empty({kSamples}, DlFloat32());
  for (int64_t i = 0; i < kSamples; ++i) clip.data<float>()[i] = static_cast<float>(tone[static_cast<size_t>(i)]);
  std::vector<Value> args = {clip, ObjectRef(*params)};
  auto out = (*(*lib)->GetFunction("audio_embed"))(args);
  ASSERT_TRUE(out) << out.error().ToString();
  const NDArray& embedded = std::get<NDArray>(out->front());
  ASSERT_EQ(embedded.shape(), (std::vector<int64_t>{rows, 128}));
  for (int64_t i = 0; i < embedded.Elements(); ++i) ASSERT_TRUE(std::isfinite(embedded.data<float>()[i])) << i;

  const std::string wav = dir.Write("question.wav", wav_bytes);
  const std::string messages = dir.Write("m.json", R"([{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": ")" + wav + R"(", "format": "wav"}},
      {"type": "text", "text": " What was said?"}]}])");
  auto r = test::RunCli({"run", pkg, "--messages", messages, "--max-tokens", "6", "--temperature", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json j = Json::parse(r.out);
  EXPECT_FALSE(j["tokens"].get<std::vector<int32_t>>().empty()) << r.out;
  EXPECT_GT(j["timings"]["adapter_ms"].get<double>(), 0.0) << r.out;
  EXPECT_GT(j["prompt_length"].get<int64_t>(), rows) << r.out;

  const OrderedJson audio = {{"type", "input_audio"},
                             {"input_audio", {{"data", test::Base64(wav_bytes)}, {"format", "wav"}}}};
  test::ExpectServeAnswers(dir, pkg, audio, "What did you hear?", rows);
}

}  // namespace
}  // namespace mlc
