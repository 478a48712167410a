// The built-in CPU program: its parameter lists against real converted packages, the random
// package writer, the 4-bit dequantisation against a direct computation, each family's forward
// pass against a float64 reimplementation written here from the model definitions, chunked
// prefill against token-by-token decode, sliding windows with sinks, the sampler's penalties,
// and the errors a broken package gives before any token.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/blocks.h"
#include "runtime/cpu/decoder.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/huge_pages.h"
#include "runtime/splitmix.h"
#include "support/reference64.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::HalfToDouble;
using test::MatVec;
using test::Params64;
using test::Reference64;
using test::RelError;
using test::RmsNorm;
using test::RoundToQ8Blocks;
using test::Vec;

// ---- parameter lists of real packages ----

TEST(CpuParams, SchemaIdEqualsRealTensorCaches) {
  for (const char* name : {"med-chatbot-qwen2", "readerlm-v2-q4f16_1", "phi-3-mini-128k-ndarray"}) {
    std::string dir = test::SharedPath(std::string("testdata/real/") + name);
    auto chat = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
    ASSERT_TRUE(chat) << chat.error().ToString();
    auto cache = ReadTensorCache(dir);
    ASSERT_TRUE(cache) << cache.error().ToString();
    auto specs = CpuParamSpecs(*chat);
    ASSERT_TRUE(specs) << specs.error().ToString();
    std::vector<ParamSpec> real = ParamSpecsOf(*cache);
    EXPECT_EQ(specs->size(), real.size()) << name;
    EXPECT_EQ(*ComputeParameterSchemaId(*specs), *ComputeParameterSchemaId(real)) << name;
    auto program = CpuCompiledProgram(*chat);
    ASSERT_TRUE(program);
    EXPECT_EQ(program->resources.estimated_device_memory_bytes, cache->param_bytes.value_or(-1)) << name;
    EXPECT_TRUE(program->resources.required_features.empty());
  }
}

TEST(CpuParams, UnsupportedModelTypeAndQuantizationListWhatIsSupported) {
  Json doc = {{"model_type", "mixtral"}, {"quantization", "q3f16_1"}, {"model_config", Json::object()},
              {"context_window_size", 128}, {"prefill_chunk_size", 16}};
  auto chat = ParseChatConfig(doc);
  ASSERT_TRUE(chat);
  auto specs = CpuParamSpecs(*chat);
  ASSERT_FALSE(specs);
  ASSERT_EQ(specs.errors().size(), 2u);
  EXPECT_NE(specs.errors()[0].message.find("llama, qwen2, gemma, gemma2, phi3"), std::string::npos);
  EXPECT_NE(specs.errors()[1].message.find("q0f32, q0f16, q4f16_1, q4f32_1"), std::string::npos);
  EXPECT_EQ(specs.errors()[0].code, ErrorCode::kUnsupported);
}

TEST(CpuParams, DimensionsAreChecked) {
  Json doc = {{"model_type", "llama"}, {"quantization", "q4f16_1"},
              {"model_config", {{"hidden_size", 100}, {"intermediate_size", 256},
                                {"num_attention_heads", 4}, {"num_hidden_layers", 2},
                                {"num_key_value_heads", 3}, {"vocab_size", 512}}},
              {"context_window_size", 128}, {"prefill_chunk_size", 16}};
  auto chat = ParseChatConfig(doc);
  ASSERT_TRUE(chat);
  auto specs = CpuParamSpecs(*chat);
  ASSERT_FALSE(specs);
  std::string all;
  for (const Error& e : specs.errors()) all += e.ToString() + "\n";
  EXPECT_NE(all.find("/model_config/num_key_value_heads"), std::string::npos) << all;
  EXPECT_NE(all.find("/model_config/hidden_size"), std::string::npos) << all;  // not a multiple of 32
}

// ---- a float64 reimplementation ----


// ---- driving the library as Session does ----

struct Driver {
  std::unique_ptr<ModelLibrary> lib;
  std::shared_ptr<ParameterSet> params;
  ObjectRef kv;

  static Driver Open(const std::string& dir) {
    Driver d;
    auto lib = OpenCpuLibrary(dir);
    EXPECT_TRUE(lib) << lib.error().ToString();
    d.lib = std::move(*lib);
    auto params = LoadParameters(dir, d.lib->Metadata().params);
    EXPECT_TRUE(params) << params.error().ToString();
    d.params = *params;
    return d;
  }
  void NewCache(int64_t window, int64_t chunk, bool sliding) {
    std::vector<Value> args = {int64_t{1}, window, chunk, int64_t{16}, int64_t{sliding ? 1 : 0}};
    auto out = (*lib->GetFunction("create_tir_paged_kv_cache"))(args);
    ASSERT_TRUE(out) << out.error().ToString();
    kv = std::get<ObjectRef>(out->front());
  }
  NDArray Embed(const std::vector<int32_t>& ids) {
    NDArray t = NDArray::Empty({static_cast<int64_t>(ids.size())}, DlInt32());
    std::memcpy(t.data<int32_t>(), ids.data(), ids.size() * 4);
    std::vector<Value> args = {t, ObjectRef(params)};
    auto out = (*lib->GetFunction("embed"))(args);
    EXPECT_TRUE(out) << out.error().ToString();
    return std::get<NDArray>(out->front());
  }
  // Logits of the last of ids, fed as one prefill call (decode when one id and use_decode).
  std::vector<float> Step(const std::vector<int32_t>& ids, bool use_decode) {
    NDArray e = Embed(ids);
    std::vector<Value> args = {e.Reshape({1, static_cast<int64_t>(ids.size()), e.shape()[1]}), kv,
                               ObjectRef(params)};
    auto out = (*lib->GetFunction(use_decode ? "decode" : "prefill"))(args);
    EXPECT_TRUE(out) << out.error().ToString();
    if (!out) return {};
    const NDArray& l = std::get<NDArray>(out->front());
    return std::vector<float>(l.data<float>(), l.data<float>() + l.Elements());
  }
};

std::vector<int32_t> Tokens(int64_t n, int64_t vocab) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11) % vocab));
  return t;
}

std::string WritePackage(const test::TempDir& dir, const std::string& family, const std::string& quant,
                         FamilyModelOptions o = {}) {
  o.family = family;
  o.quantization = quant;
  o.seed = 7;
  std::string pkg = dir.File(family + "-" + quant);
  auto report = WriteFamilyModel(pkg, o);
  EXPECT_TRUE(report) << report.error().ToString();
  return pkg;
}

cpu::ModelConfig ConfigOf(const std::string& pkg) {
  auto chat = ReadChatConfig(JoinPath(pkg, kChatConfigFileName));
  auto c = cpu::ParseModelConfig(*chat);
  EXPECT_TRUE(c);
  return *c;
}

// Bound on the max logit error relative to the largest logit. Float weights: float32 rounding.
// 4-bit weights: the kernels round activations to int8 per block of 32 (as llama.cpp does for
// Q4_0); the reference rounds the same way, but an activation that differs by float rounding may
// land on the other side of a rounding step, and a tiny random model amplifies that, so the bound
// is looser (a wrong rope, norm or scale still gives errors of order 1).
double LogitTolerance(const std::string& quant) { return quant.rfind("q4", 0) == 0 ? 3e-2 : 2e-4; }

struct FamilyCase {
  std::string name, family, quant;
};

class CpuForward : public ::testing::TestWithParam<FamilyCase> {};

// Decode token by token: the logits at every position agree with the float64 reference; a
// prefill in chunks gives the same logits at the chunks' last positions.
TEST_P(CpuForward, MatchesFloat64ReferenceAtEveryPosition) {
  test::TempDir dir;
  std::string pkg = WritePackage(dir, GetParam().family, GetParam().quant);
  cpu::ModelConfig c = ConfigOf(pkg);
  Driver d = Driver::Open(pkg);
  ASSERT_TRUE(d.params);
  const double tolerance = LogitTolerance(GetParam().quant);
  std::vector<int32_t> tokens = Tokens(24, c.vocab_size);  // past Gemma 2's window of 16
  Params64 p64(*d.params);
  std::vector<Vec> want = Reference64{c, p64}.Run(tokens);
  d.NewCache(c.context_window_size, c.prefill_chunk_size, false);
  std::vector<std::vector<float>> decoded;
  for (size_t t = 0; t < tokens.size(); ++t) {
    decoded.push_back(d.Step({tokens[t]}, true));
    ASSERT_EQ(decoded.back().size(), static_cast<size_t>(c.vocab_size));
    for (float v : decoded.back()) ASSERT_TRUE(std::isfinite(v));
    EXPECT_LT(RelError(decoded.back(), want[t]), tolerance) << "position " << t;
  }
  // Chunks of 5, 11 and 8 positions.
  d.NewCache(c.context_window_size, c.prefill_chunk_size, false);
  size_t at = 0;
  for (size_t len : {5u, 11u, 8u}) {
    std::vector<int32_t> chunk(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                               tokens.begin() + static_cast<std::ptrdiff_t>(at + len));
    std::vector<float> logits = d.Step(chunk, false);
    at += len;
    EXPECT_LT(RelError(logits, want[at - 1]), tolerance) << "chunk ending at " << at;
    Vec as_decoded(decoded[at - 1].begin(), decoded[at - 1].end());
    EXPECT_LT(RelError(logits, as_decoded), std::max(tolerance, 1e-4)) << "chunked prefill vs decode at " << at;
  }
}

// The families whose decoders Reference64 follows: fused q/k/v, the embeddings pair (Gemma 3 and
// Gemma 4, with unfused projections and per-head norms, have their own float64 models in
// cpu_gemma3_test and cpu_gemma4_test).
bool FollowedByReference64(const std::string& family) {
  const cpu::FamilySpec* f = cpu::FindFamily(family);
  return f->pair == GenerationPair::kEmbeds && !f->names.qkv.empty();
}

std::vector<FamilyCase> AllCases() {
  std::vector<FamilyCase> out;
  for (const std::string& f : CpuModelTypes()) {
    if (!FollowedByReference64(f)) continue;
    for (const std::string& q : CpuQuantizations()) out.push_back({f + "_" + q, f, q});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, CpuForward, ::testing::ValuesIn(AllCases()), test::CaseName());

TEST(CpuForward, SlidingWindowWithSinksKeepsTheWindowAndFreesPages) {
  test::TempDir dir;
  FamilyModelOptions o;
  o.sliding_window_size = 20;
  o.attention_sink_size = 4;
  std::string pkg = WritePackage(dir, "llama", "q4f16_1", o);
  cpu::ModelConfig c = ConfigOf(pkg);
  EXPECT_EQ(c.sliding_window_size, 20);
  Driver d = Driver::Open(pkg);
  std::vector<int32_t> tokens = Tokens(70, c.vocab_size);
  Params64 p64(*d.params);
  std::vector<Vec> want = Reference64{c, p64, 20, 4}.Run(tokens);
  d.NewCache(20, c.prefill_chunk_size, true);
  for (size_t t = 0; t < tokens.size(); ++t) {
    std::vector<float> got = d.Step({tokens[t]}, true);
    EXPECT_LT(RelError(got, want[t]), LogitTolerance("q4f16_1")) << "position " << t;
  }
  auto kv = std::dynamic_pointer_cast<KvState>(d.kv);
  EXPECT_EQ(kv->TotalLength(), 70);
  // A cache without sliding refuses to pass its window.
  d.NewCache(20, c.prefill_chunk_size, false);
  std::vector<int32_t> first(tokens.begin(), tokens.begin() + 20);
  d.Step(first, false);
  NDArray e = d.Embed({tokens[20]});
  std::vector<Value> args = {e.Reshape({1, 1, c.hidden_size}), d.kv, ObjectRef(d.params)};
  auto out = (*d.lib->GetFunction("decode"))(args);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("context window"), std::string::npos) << out.error().message;
}

// The families' plans: Gemma 2 slides its even layers (its published rule), the others none; every
// layer keeps its own keys and values.
TEST(CpuFamilies, LayerPlansFollowEachFamilysRules) {
  test::TempDir dir;
  for (const std::string& family : CpuModelTypes()) {
    if (!FollowedByReference64(family)) continue;  // their plans are cpu_gemma3_test's and cpu_gemma4_test's
    cpu::ModelConfig c = ConfigOf(WritePackage(dir, family, "q0f32"));
    ASSERT_EQ(c.layers.size(), static_cast<size_t>(c.num_layers)) << family;
    for (size_t l = 0; l < c.layers.size(); ++l) {
      const cpu::LayerPlan& p = c.layers[l];
      EXPECT_EQ(p.sliding_window, family == "gemma2" && l % 2 == 0 ? 16 : 0) << family << " layer " << l;
      EXPECT_EQ(p.kv, cpu::KvUse::kOwn) << family;
      EXPECT_EQ(p.kv_source, static_cast<int64_t>(l)) << family;
      EXPECT_EQ(p.head_dim, c.head_dim) << family;
    }
  }
}

// Random float32 parameters for a parameter list (norms near 1), in its order.
std::shared_ptr<ParameterSet> RandomParams(const std::vector<ParamSpec>& specs, uint64_t seed) {
  auto set = std::make_shared<ParameterSet>();
  SplitMix64 rng(seed);
  for (const ParamSpec& spec : specs) {
    std::vector<int64_t> shape;
    for (const auto& d : spec.shape) shape.push_back(std::get<int64_t>(d));
    NDArray t = NDArray::Empty(shape, DlFloat32());
    const bool vector = shape.size() == 1;
    const float scale = vector ? 0.1f : 1.7f / std::sqrt(static_cast<float>(shape.back()));
    for (int64_t i = 0; i < t.Elements(); ++i) t.data<float>()[i] = (vector ? 1.0f : 0.0f) + scale * rng.Symmetric();
    set->names.push_back(spec.name);
    set->tensors.push_back(t);
  }
  return set;
}

// A plan no published family has yet: layers of other head counts, head sizes and MLP widths, a
// sliding layer, and a layer reading an earlier layer's keys and values. The decoder and its KV
// cache follow it at every position and across chunks, as the float64 reference does.
TEST(CpuForward, MixedLayerPlanMatchesFloat64Reference) {
  test::TempDir dir;
  cpu::ModelConfig c = ConfigOf(WritePackage(dir, "llama", "q0f32"));
  ASSERT_EQ(c.num_layers, 2);
  cpu::LayerPlan wide = c.layers[1];
  wide.num_heads = 2;
  wide.num_kv_heads = 1;
  wide.head_dim = 64;  // the rotary table covers its first 32 dims
  wide.intermediate_size = 96;
  wide.sliding_window = 5;
  cpu::LayerPlan shared = c.layers[0];
  shared.kv = cpu::KvUse::kShared;
  shared.kv_source = 0;
  shared.intermediate_size = 160;
  c.layers = {c.layers[0], wide, shared};
  c.num_layers = 3;
  std::vector<ParamSpec> specs = cpu::ParamSpecs(c);
  auto params = RandomParams(specs, 11);
  auto w = cpu::BindWeights(c, specs, *params);
  ASSERT_TRUE(w) << w.error().ToString();
  std::vector<int32_t> tokens = Tokens(14, c.vocab_size);
  Params64 p64(*params);
  std::vector<Vec> want = Reference64{c, p64}.Run(tokens);
  auto run = [&](const std::vector<size_t>& chunks) {
    cpu::KvCacheShape shape;
    shape.layers = cpu::KvPlan(c);
    shape.max_total_seq_len = 64;
    shape.prefill_chunk_size = 16;
    cpu::PagedKvCache kv(shape);
    size_t at = 0;
    for (size_t len : chunks) {
      std::vector<int32_t> ids(tokens.begin() + static_cast<std::ptrdiff_t>(at),
                               tokens.begin() + static_cast<std::ptrdiff_t>(at + len));
      std::vector<float> embeds(len * static_cast<size_t>(c.embed_width()));
      ASSERT_TRUE(cpu::EmbedTokens(c, *w, ids, embeds.data()));
      auto logits = cpu::Forward(c, *w, kv, embeds.data(), static_cast<int64_t>(len), "prefill");
      ASSERT_TRUE(logits) << logits.error().ToString();
      at += len;
      EXPECT_LT(RelError(*logits, want[at - 1]), LogitTolerance("q0f32")) << "position " << at - 1;
    }
  };
  run(std::vector<size_t>(tokens.size(), 1));
  run({3, 7, 4});
  // A cache laid out for another plan is refused.
  cpu::KvCacheShape other;
  other.layers = {cpu::KvLayerPlan{cpu::KvUse::kOwn, 0, 64}};
  other.max_total_seq_len = 64;
  other.prefill_chunk_size = 16;
  cpu::PagedKvCache wrong(other);
  std::vector<float> row(static_cast<size_t>(c.embed_width()));
  ASSERT_TRUE(cpu::EmbedTokens(c, *w, std::vector<int32_t>{1}, row.data()));
  auto refused = cpu::Forward(c, *w, wrong, row.data(), 1, "decode");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("another model"), std::string::npos);
}

// The cache's pages hold only the layers that own keys and values; a sharing layer reads its
// source's rows, and forking copies every owned row.
TEST(CpuKvCache, PagesFollowThePerLayerPlan) {
  cpu::KvCacheShape shape;
  shape.layers = {cpu::KvLayerPlan{cpu::KvUse::kOwn, 0, 8}, cpu::KvLayerPlan{cpu::KvUse::kNone, 1, 0},
                  cpu::KvLayerPlan{cpu::KvUse::kOwn, 2, 24}, cpu::KvLayerPlan{cpu::KvUse::kShared, 0, 8}};
  shape.page_size = 4;
  shape.max_total_seq_len = 32;
  shape.prefill_chunk_size = 16;
  shape.max_batch_size = 2;
  cpu::PagedKvCache kv(shape);
  ASSERT_TRUE(kv.AddSequence(3));
  const int64_t n = 10;
  auto segments = kv.Prepare("prefill", n);
  ASSERT_TRUE(segments);
  // Distinct values in every owned row; none may overwrite another.
  auto value = [](int64_t layer, int64_t which, int64_t pos, int64_t i) {
    return static_cast<float>(layer * 100000 + which * 10000 + pos * 100 + i);
  };
  for (int64_t layer : {0, 2}) {
    const int64_t row = shape.layers[static_cast<size_t>(layer)].row_size;
    for (int64_t pos = 0; pos < n; ++pos) {
      for (int64_t i = 0; i < row; ++i) {
        kv.Value(3, layer, pos)[i] = value(layer, 1, pos, i);
      }
      std::vector<float> key(static_cast<size_t>(row));
      for (int64_t i = 0; i < row; ++i) key[static_cast<size_t>(i)] = value(layer, 0, pos, i);
      kv.WriteKey(3, layer, pos, key.data());
    }
  }
  kv.Commit((*segments)[0]);
  ASSERT_TRUE(kv.ForkSequence(3, 4));
  for (int64_t seq : {3, 4}) {
    for (int64_t layer : {0, 2}) {
      const int64_t row = shape.layers[static_cast<size_t>(layer)].row_size;
      for (int64_t pos = 0; pos < n; ++pos) {
        for (int64_t i = 0; i < row; ++i) {
          ASSERT_EQ(kv.KeyColumn(seq, layer, pos)[i * shape.page_size], value(layer, 0, pos, i))
              << seq << " " << layer << " " << pos;
          ASSERT_EQ(kv.Value(seq, layer, pos)[i], value(layer, 1, pos, i));
        }
      }
    }
    for (int64_t pos = 0; pos < n; ++pos) {
      EXPECT_EQ(kv.KeyColumn(seq, 3, pos), kv.KeyColumn(seq, 0, pos));
      EXPECT_EQ(kv.Value(seq, 3, pos), kv.Value(seq, 0, pos));
    }
  }
}

// Pages of 1 MB come four to a block: a sequence's six pages and its fork's six take three blocks,
// and no page overlaps another
// (every row keeps its own values, a fork's copies included).
TEST(CpuKvCache, PagesFromSeveralBlocksKeepTheirOwnRows) {
  cpu::KvCacheShape shape;
  shape.layers = {cpu::KvLayerPlan{cpu::KvUse::kOwn, 0, 32768}};  // a page: 2 x 4 x 32768 floats
  shape.page_size = 4;
  shape.max_total_seq_len = 48;
  shape.prefill_chunk_size = 24;
  shape.max_batch_size = 2;
  cpu::PagedKvCache kv(shape);
  ASSERT_TRUE(kv.AddSequence(0));
  auto first = kv.Prepare("prefill", 22);
  ASSERT_TRUE(first);
  const int64_t row = 32768;
  auto value = [](int64_t which, int64_t pos, int64_t i) { return static_cast<float>(which * 1000000 + pos * 1000 + i % 997); };
  std::vector<float> key(static_cast<size_t>(row));
  for (int64_t pos = 0; pos < 22; ++pos) {
    for (int64_t i = 0; i < row; ++i) {
      key[static_cast<size_t>(i)] = value(0, pos, i);
      kv.Value(0, 0, pos)[i] = value(1, pos, i);
    }
    kv.WriteKey(0, 0, pos, key.data());
  }
  kv.Commit((*first)[0]);
  ASSERT_TRUE(kv.ForkSequence(0, 1));
  EXPECT_EQ(kv.pages_in_use(), 12);
  for (int64_t seq : {0, 1}) {
    for (int64_t pos = 0; pos < 22; ++pos) {
      for (int64_t i = 0; i < row; i += 61) {
        ASSERT_EQ(kv.KeyColumn(seq, 0, pos)[i * shape.page_size], value(0, pos, i)) << seq << " " << pos << " " << i;
        ASSERT_EQ(kv.Value(seq, 0, pos)[i], value(1, pos, i)) << seq << " " << pos << " " << i;
      }
    }
  }
}

// Scratch kept between calls: 64-byte aligned, and a request a little larger than the last one
// (a step one row longer) is served from the same block instead of a new one.
TEST(CpuScratch, GrowsByHalfAgainAndStaysAligned) {
  cpu::HugeScratch scratch;
  void* small = scratch.Reserve(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small) % 64, 0u);
  EXPECT_EQ(scratch.Reserve(900), small);
  void* grown = scratch.Reserve(1200);  // by half again: room up to 1500 bytes
  EXPECT_EQ(reinterpret_cast<uintptr_t>(grown) % 64, 0u);
  EXPECT_EQ(scratch.Reserve(1500), grown);
  void* large = scratch.Reserve(size_t{3} << 20);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large) % (size_t{2} << 20), 0u);  // huge pages from 2 MB up
  std::memset(large, 1, size_t{3} << 20);
  EXPECT_EQ(scratch.Reserve((size_t{3} << 20) + 4096), large);
  void* larger = scratch.Reserve(size_t{5} << 20);
  EXPECT_NE(larger, nullptr);
  std::memset(larger, 2, size_t{5} << 20);
}

TEST(CpuBlocks, DenseAttentionMatchesFloat64) {
  // Row counts below, at and past the 32-row task blocks; rows wider than heads x head_dim.
  SplitMix64 rng(21);
  for (int64_t n : {1, 31, 32, 33, 70}) {
    const int64_t heads = 3, d = 8, stride = heads * d + 5;
    std::vector<float> q(static_cast<size_t>(n * stride)), k(q.size()), v(q.size());
    for (std::vector<float>* m : {&q, &k, &v}) {
      for (float& x : *m) x = 2 * rng.Symmetric();
    }
    std::vector<float> out(static_cast<size_t>(n * heads * d), std::nanf(""));
    const float scale = 0.35f;
    cpu::DenseAttention(q.data(), k.data(), v.data(), stride, n, heads, d, scale, out.data());
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t t = 0; t < n; ++t) {
        std::vector<double> p(static_cast<size_t>(n));
        double max_s = -1e300, sum = 0;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t i = 0; i < d; ++i) {
            dot += static_cast<double>(q[static_cast<size_t>(t * stride + h * d + i)]) * k[static_cast<size_t>(j * stride + h * d + i)];
          }
          p[static_cast<size_t>(j)] = dot * scale;
          max_s = std::max(max_s, dot * scale);
        }
        for (double& x : p) sum += (x = std::exp(x - max_s));
        for (int64_t i = 0; i < d; ++i) {
          double want = 0;
          for (int64_t j = 0; j < n; ++j) want += p[static_cast<size_t>(j)] / sum * v[static_cast<size_t>(j * stride + h * d + i)];
          ASSERT_NEAR(out[static_cast<size_t>(t * heads * d + h * d + i)], want, 1e-5)
              << "n " << n << " head " << h << " row " << t << " dim " << i;
        }
      }
    }
  }
}

TEST(CpuForward, ChunkLongerThanPrefillChunkSizeIsAnError) {
  test::TempDir dir;
  std::string pkg = WritePackage(dir, "qwen2", "q0f32");
  Driver d = Driver::Open(pkg);
  d.NewCache(512, 8, false);
  NDArray e = d.Embed(Tokens(9, 512));
  std::vector<Value> args = {e.Reshape({1, 9, e.shape()[1]}), d.kv, ObjectRef(d.params)};
  auto out = (*d.lib->GetFunction("prefill"))(args);
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("prefill_chunk_size"), std::string::npos);
}

// ---- the writer's quantisation against a direct computation ----

TEST(CpuQuant, Q4WeightsFollowMlcRuleAndDequantiseExactly) {
  test::TempDir dir;
  std::string q4 = WritePackage(dir, "llama", "q4f32_1");
  std::string f32 = WritePackage(dir, "llama", "q0f32");
  Driver dq = Driver::Open(q4), df = Driver::Open(f32);
  Params64 pq(*dq.params), pf(*df.params);
  const std::string base = "model.layers.1.mlp.down_proj";
  Vec w = pf.Matrix(base, 128, 256), deq = pq.Matrix(base, 128, 256);
  Vec scale = pq.Floats(base + ".q_scale");
  // Same random weights in both packages (bf16-rounded for q0f32); scale = max|w| / 7 per group,
  // and every dequantised weight within half a step of the original.
  for (int64_t r = 0; r < 128; ++r) {
    for (int64_t g = 0; g < 8; ++g) {
      double mx = 0;
      for (int64_t i = 0; i < 32; ++i) mx = std::max(mx, std::fabs(w[static_cast<size_t>(r * 256 + g * 32 + i)]));
      double s = scale[static_cast<size_t>(r * 8 + g)];
      EXPECT_NEAR(s, mx / 7, mx / 7 * 0.01 + 1e-6);
      for (int64_t i = 0; i < 32; ++i) {
        size_t k = static_cast<size_t>(r * 256 + g * 32 + i);
        EXPECT_LE(std::fabs(deq[k] - w[k]), s * 0.5 + mx * 0.01);
      }
    }
  }
  // The program's embedding lookup of a q4 row equals (q - 7) * scale.
  Vec emb = pq.Matrix("model.embed_tokens", 512, 128);
  NDArray row = dq.Embed({300});
  for (int64_t i = 0; i < 128; ++i) {
    EXPECT_NEAR(row.data<float>()[i], emb[static_cast<size_t>(300 * 128 + i)], 1e-6);
  }
}

// ---- the sampler's penalties ----

TEST(SamplerPenalties, RepetitionPresenceAndFrequencyChangeTheGreedyChoice) {
  std::vector<float> logits = {2.0f, 1.9f, -1.0f};
  SamplerConfig plain;
  Sampler s0(plain);
  EXPECT_EQ(s0.Sample(logits), 0);
  EXPECT_EQ(s0.Sample(logits), 0);  // no penalty: the same token again
  SamplerConfig rep;
  rep.repetition_penalty = 1.1;  // 2.0 / 1.1 = 1.82 < 1.9
  Sampler s1(rep);
  EXPECT_EQ(s1.Sample(logits), 0);
  EXPECT_EQ(s1.Sample(logits), 1);
  SamplerConfig freq;
  freq.frequency_penalty = 0.06;  // after two picks of 0: 2.0 - 0.12 < 1.9
  Sampler s2(freq);
  EXPECT_EQ(s2.Sample(logits), 0);
  EXPECT_EQ(s2.Sample(logits), 0);
  EXPECT_EQ(s2.Sample(logits), 1);
  SamplerConfig presence;
  presence.presence_penalty = 0.2;
  Sampler s3(presence);
  EXPECT_EQ(s3.Sample(logits), 0);
  EXPECT_EQ(s3.Sample(logits), 1);
  EXPECT_EQ(s3.Sample(logits), 0);  // both penalised once: 1.8 vs 1.7
  SamplerConfig bad;
  bad.repetition_penalty = 0;
  bad.presence_penalty = 3;
  EXPECT_FALSE(CheckSamplerConfig(bad));
}

// Logprobs are the log-softmax of the penalized logits at the sampler's temperature (1 when
// greedy), in float64, with the most likely tokens first (ties: lower id).
TEST(SamplerLogprobs, LogSoftmaxOfTheDistributionSampledFrom) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, -2.0f, 0.5f};
  auto log_softmax = [&](double t, size_t i) {
    double sum = 0;
    for (float l : logits) sum += std::exp(l / t);
    return logits[i] / t - std::log(sum);
  };
  TokenLogprobs lp;
  Sampler greedy{SamplerConfig{}};
  EXPECT_EQ(greedy.Sample(logits, 3, &lp), 1);
  EXPECT_EQ(lp.token, 1);
  EXPECT_NEAR(lp.logprob, log_softmax(1, 1), 1e-12);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 0);
  EXPECT_NEAR(lp.top[2].second, log_softmax(1, 0), 1e-12);
  SamplerConfig warm;
  warm.temperature = 0.5;
  warm.seed = 7;
  Sampler sampled(warm);
  const int32_t token = sampled.Sample(logits, 0, &lp);
  EXPECT_EQ(lp.token, token);
  EXPECT_NEAR(lp.logprob, log_softmax(0.5, static_cast<size_t>(token)), 1e-12);
  EXPECT_TRUE(lp.top.empty());
  // A penalized token's logprob is of its penalized logit.
  SamplerConfig rep;
  rep.repetition_penalty = 2.0;
  Sampler penalized(rep);
  EXPECT_EQ(penalized.Sample(logits), 1);
  EXPECT_EQ(penalized.Sample(logits, 5, &lp), 2);
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += std::exp(i == 1 ? logits[i] / 2.0 : logits[i]);
  EXPECT_EQ(lp.top[1].first, 1);
  EXPECT_NEAR(lp.top[1].second, 1.5 - std::log(sum), 1e-12);
  // Huge logits stay finite (the log-sum-exp).
  const std::vector<float> big = {1e30f, 0.0f};
  TokenLogprobs b = LogprobsOf(big, 0, 1, 2);
  EXPECT_EQ(b.top[0].second, 0.0);
  EXPECT_LT(b.top[1].second, -1e29);
}

// ---- the command line ----

Json RunJson(const std::vector<std::string>& args) {
  auto r = test::RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return r.exit_code == 0 ? Json::parse(r.out) : Json();
}

class CpuRunCli : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(CpuRunCli, RequestAndMessagesRunWithoutAProgram) {
  test::TempDir dir;
  std::string pkg = dir.File("pkg");
  bool legacy = GetParam().quant == "q0f16";  // one quantization per family without a manifest
  std::vector<std::string> gen = {"reference-model", pkg, "--family", GetParam().family,
                                  "--quantization", GetParam().quant, "--seed", "3"};
  if (legacy) gen.push_back("--no-manifest");
  auto w = test::RunCli(gen);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("RANDOM weights"), std::string::npos) << w.out;
  EXPECT_EQ(FileExists(JoinPath(pkg, kManifestFileName)), !legacy);
  std::string req = dir.Write("req.json", R"({"turns": [[{"tokens": [1, 40, 41, 42, 43]}]]})");
  Json j = RunJson({"run", pkg, "--request", req, "--temperature", "0", "--max-tokens", "6", "--json"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokens"].size(), 6u) << j.dump();
  EXPECT_EQ(j["legacy"], legacy);
  EXPECT_EQ(j["prompt_length"], 5);
  std::string m = dir.Write("m.json", R"({"messages": [{"role": "user", "content": "Hello there!"}]})");
  auto chat = test::RunCli({"run", pkg, "--messages", m, "--max-tokens", "5"});
  ASSERT_EQ(chat.exit_code, 0) << chat.err;
  EXPECT_NE(chat.err.find("tokens/s"), std::string::npos) << chat.err;
}

std::vector<FamilyCase> CliCases() {
  std::vector<FamilyCase> out;
  for (const std::string& f : CpuModelTypes()) {
    for (const std::string& q : CpuQuantizations()) out.push_back({f + "_" + q, f, q});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Families, CpuRunCli, ::testing::ValuesIn(CliCases()), test::CaseName());

// MLC_CPU_PHASES=1: each turn's JSON says where the CPU program's time went, decode and prefill
// apart; without it there is no breakdown.
TEST(CpuPhaseClock, RunJsonBreaksEachTurnDown) {
  test::TempDir dir;
  std::string pkg = dir.File("pkg");
  auto w = test::RunCli({"reference-model", pkg, "--family", "qwen2", "--quantization", "q4f16_1"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  std::string req = dir.Write("req.json", R"({"turns": [[{"tokens": [1, 40, 41, 42, 43]}], [{"tokens": [7, 8]}]]})");
  const std::vector<std::string> args = {"run", pkg, "--request", req, "--temperature", "0", "--max-tokens", "6",
                                         "--json"};
  Json plain = RunJson(args);
  ASSERT_TRUE(plain.is_object());
  EXPECT_FALSE(plain["turns"][0].contains("cpu_phases"));
  setenv("MLC_CPU_PHASES", "1", 1);
  Json j = RunJson(args);
  unsetenv("MLC_CPU_PHASES");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["tokens"], plain["tokens"]);  // the clock changes no result
  for (int turn : {0, 1}) {
    const Json& p = j["turns"][turn]["cpu_phases"];
    ASSERT_TRUE(p.is_object()) << j.dump();
    // Six tokens: the first from the prefill's logits, then five decode steps of one row each;
    // the second turn prefills the first turn's last token and its own two (each turn is counted alone).
    EXPECT_EQ(p["decode"]["steps"], 5) << p.dump();
    EXPECT_EQ(p["decode"]["rows"], 5) << p.dump();
    EXPECT_EQ(p["prefill"]["steps"], 1) << p.dump();
    EXPECT_EQ(p["prefill"]["rows"], turn == 0 ? 5 : 3) << p.dump();
    for (const char* kind : {"decode", "prefill"}) {
      const Json& k = p[kind];
      const double step = k["step_ms"].get<double>();
      EXPECT_GT(step, 0.0) << kind;
      EXPECT_GT(k["layer_products_ms"].get<double>(), 0.0) << kind;
      EXPECT_GT(k["lm_head_ms"].get<double>(), 0.0) << kind;
      double inside = 0;
      for (const char* phase : {"layer_products_ms", "lm_head_ms", "attention_ms", "norms_rotary_activations_ms"}) {
        EXPECT_GE(k[phase].get<double>(), 0.0) << kind << " " << phase;
        inside += k[phase].get<double>();
      }
      EXPECT_LE(inside, step + 0.01) << kind << ": the phases lie inside the step";
    }
  }
}

TEST(CpuRunCliErrors, BrokenPackagesFailBeforeAnyToken) {
  test::TempDir dir;
  std::string req = dir.Write("req.json", R"({"turns": [[{"tokens": [1, 40]}]]})");
  auto make = [&](const std::string& name) {
    std::string pkg = dir.File(name);
    // Legacy packages: the parameters are checked against the program's list at load (with a
    // manifest, binding already refuses the differing parameter_schema_id).
    auto w = test::RunCli({"reference-model", pkg, "--family", "qwen2", "--quantization", "q4f16_1",
                           "--no-manifest"});
    EXPECT_EQ(w.exit_code, 0) << w.err;
    return pkg;
  };
  std::string missing = make("missing");
  std::filesystem::remove(JoinPath(missing, "params_shard_0.bin"));
  auto r = test::RunCli({"run", missing, "--request", req, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("params_shard_0.bin"), std::string::npos) << r.out << r.err;

  std::string truncated = make("truncated");
  std::filesystem::resize_file(JoinPath(truncated, "params_shard_0.bin"), 100);
  r = test::RunCli({"run", truncated, "--request", req, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("params_shard_0.bin"), std::string::npos) << r.out << r.err;

  std::string shape = make("shape");
  std::string config_path = JoinPath(shape, kChatConfigFileName);
  Json config = Json::parse(test::ReadText(config_path));
  config["model_config"]["intermediate_size"] = 288;
  std::ofstream(config_path) << config.dump();
  r = test::RunCli({"run", shape, "--request", req, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("mlp.gate_up_proj.q_weight"), std::string::npos) << r.out << r.err;

  std::string unsupported = make("unsupported");
  config_path = JoinPath(unsupported, kChatConfigFileName);
  config = Json::parse(test::ReadText(config_path));
  config["model_type"] = "rwkv6";
  std::ofstream(config_path) << config.dump();
  r = test::RunCli({"run", unsupported, "--request", req, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("supported: llama, qwen2, gemma, gemma2, phi3"), std::string::npos) << r.out;
}

// `check` refuses the chat config values `run` refuses: each mutation of a valid package's
// mlc-chat-config.json fails `run` and fails check's "runtime_config" verdict at the same
// pointer; the valid package passes it, and one of another model_type skips it.
TEST(CpuCheckCli, CheckRefusesTheConfigValuesRunRefuses) {
  test::TempDir dir;
  std::string req = dir.Write("req.json", R"({"turns": [[{"tokens": [1, 40]}]]})");
  std::string base = dir.File("base");
  auto w = test::RunCli({"reference-model", base, "--family", "qwen2", "--quantization", "q4f16_1"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const Json valid = Json::parse(test::ReadText(JoinPath(base, kChatConfigFileName)));
  const int64_t hidden = valid["model_config"]["hidden_size"].get<int64_t>();
  auto verdict_of = [](const Json& report, const std::string& name) {
    for (const Json& c : report["checks"]) {
      if (c["check"] == name) return c;
    }
    return Json();
  };
  auto runtime_verdict = [&](const Json& report) { return verdict_of(report, "runtime_config"); };
  Json ok = Json::parse(test::RunCli({"check", base, "--json"}).out);
  EXPECT_EQ(runtime_verdict(ok)["verdict"], "pass") << ok.dump();
  struct Mutation {
    std::string name, pointer;
    std::function<void(Json&)> apply;
  };
  const std::vector<Mutation> mutations = {
      {"negative-hidden", "/model_config/hidden_size", [](Json& c) { c["model_config"]["hidden_size"] = -64; }},
      {"zero-hidden", "/model_config/hidden_size", [](Json& c) { c["model_config"]["hidden_size"] = 0; }},
      {"zero-layers", "/model_config/num_hidden_layers", [](Json& c) { c["model_config"]["num_hidden_layers"] = 0; }},
      {"zero-heads", "/model_config/num_attention_heads", [](Json& c) { c["model_config"]["num_attention_heads"] = 0; }},
      {"heads-not-dividing-hidden", "/model_config/num_attention_heads",
       [hidden](Json& c) {
         c["model_config"]["num_attention_heads"] = hidden - 1;
         c["model_config"]["num_key_value_heads"] = hidden - 1;
         c["model_config"].erase("head_dim");  // with a head_dim the heads need not divide it
       }},
      {"kv-heads-not-dividing", "/model_config/num_key_value_heads",
       [](Json& c) {
         c["model_config"]["num_key_value_heads"] = c["model_config"]["num_attention_heads"].get<int64_t>() + 1;
       }},
      {"negative-eps", "/model_config/rms_norm_eps", [](Json& c) { c["model_config"]["rms_norm_eps"] = -1e-6; }},
      {"zero-vocab", "/model_config/vocab_size", [](Json& c) { c["model_config"]["vocab_size"] = 0; }},
      {"intermediate-off-group", "/model_config/intermediate_size",
       [](Json& c) { c["model_config"]["intermediate_size"] = 100; }},
      {"zero-context", "/context_window_size",
       [](Json& c) {
         c["context_window_size"] = 0;
         c["model_config"].erase("context_window_size");
       }},
      {"negative-prefill-chunk", "/prefill_chunk_size", [](Json& c) { c["prefill_chunk_size"] = -5; }},
  };
  for (const Mutation& m : mutations) {
    std::string pkg = dir.File(m.name);
    std::filesystem::copy(base, pkg, std::filesystem::copy_options::recursive);
    Json config = valid;
    m.apply(config);
    std::ofstream(JoinPath(pkg, kChatConfigFileName)) << config.dump();
    auto run = test::RunCli({"run", pkg, "--request", req, "--json"});
    EXPECT_NE(run.exit_code, 0) << m.name << ": run accepted it";
    EXPECT_NE(run.out.find(m.pointer), std::string::npos) << m.name << ": " << run.out;
    auto check = test::RunCli({"check", pkg, "--json"});
    EXPECT_EQ(check.exit_code, 1) << m.name << ": " << check.out;
    // The runtime's verdict, or chat_config's where the config reader already refuses the value
    // (the runtime's checks then have no config to run on).
    Json verdict = runtime_verdict(Json::parse(check.out));
    if (verdict.is_null()) verdict = verdict_of(Json::parse(check.out), "chat_config");
    EXPECT_EQ(verdict["verdict"], "fail") << m.name << ": " << check.out;
    bool named = false;
    for (const Json& e : verdict["details"]["errors"]) {
      const std::string doc = e["document"].is_string() ? e["document"].get<std::string>() : "";
      named |= e["path"] == m.pointer && doc.ends_with(kChatConfigFileName);
    }
    EXPECT_TRUE(named) << m.name << ": " << verdict.dump();
  }
  // A model_type the CPU program does not run: the runtime's verdict is a skip, not a failure.
  std::string other = dir.File("other");
  std::filesystem::copy(base, other, std::filesystem::copy_options::recursive);
  Json config = valid;
  config["model_type"] = "rwkv6";
  std::ofstream(JoinPath(other, kChatConfigFileName)) << config.dump();
  Json skipped = Json::parse(test::RunCli({"check", other, "--json"}).out);
  EXPECT_EQ(runtime_verdict(skipped)["verdict"], "skip") << skipped.dump();
}

TEST(CpuEmitCli, ProgramDocumentChecksAndBindsAgainstRealTensorCaches) {
  test::TempDir dir;
  for (const char* name : {"med-chatbot-qwen2", "phi-3-mini-128k-ndarray"}) {
    std::string real = test::SharedPath(std::string("testdata/real/") + name);
    std::string prog = dir.File(std::string(name) + ".json");
    Json e = RunJson({"emit", "program", real, "--target", "cpu", "-o", prog, "--json"});
    auto cache = ReadTensorCache(real);
    ASSERT_TRUE(cache);
    EXPECT_EQ(e["parameter_schema_id"], *ComputeParameterSchemaId(ParamSpecsOf(*cache)));
    // A package of the real chat config and tensor cache with a manifest of the text task.
    std::string pkg = dir.File(std::string(name) + "-pkg");
    std::filesystem::create_directories(pkg);
    std::filesystem::copy_file(JoinPath(real, kChatConfigFileName), JoinPath(pkg, kChatConfigFileName));
    std::filesystem::copy_file(cache->file, JoinPath(pkg, kTensorCacheFileName));
    std::string tasks = dir.Write(std::string(name) + "-tasks.json",
                                  R"({"chat.completions": {"executor": "generation", "output": "text",
                                      "inputs": {"text": {"processor": "tokenizer"}}}})");
    auto p = test::RunCli({"emit", "package", pkg, "--tasks", tasks});
    ASSERT_EQ(p.exit_code, 0) << p.err << p.out;
    auto b = test::RunCli({"bind", pkg, prog});
    EXPECT_EQ(b.exit_code, 0) << b.err << b.out;
    auto c = test::RunCli({"check", pkg, "--program", prog, "--json"});
    Json cj = Json::parse(c.out);
    std::string dump = cj.dump();
    EXPECT_NE(dump.find("binds to program generation"), std::string::npos) << dump;
  }
}

}  // namespace
}  // namespace mlc
