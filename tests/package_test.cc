// Converted-model directories: chat config and tensor cache readers against real converter
// output, SPEC 3 resources against the converter's own figures and the Gemma 4 reference.
#include <gtest/gtest.h>

#include "mlc_manifest/package.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::SharedPath;

struct RealPackage {
  const char* dir;
  int64_t param_size;
  int64_t param_bytes;
  bool legacy;
};

class RealPackages : public ::testing::TestWithParam<RealPackage> {};

TEST_P(RealPackages, EstimateEqualsConverterParamBytes) {
  const RealPackage& p = GetParam();
  std::string dir = SharedPath(std::string("testdata/real/") + p.dir);
  auto cache = ReadTensorCache(dir);
  ASSERT_TRUE(cache.ok()) << FormatErrors(cache.errors());
  EXPECT_EQ(cache->legacy_name, p.legacy);
  EXPECT_EQ(cache->param_size, p.param_size);
  EXPECT_EQ(cache->param_bytes, p.param_bytes);
  auto config = ReadChatConfig(dir + "/mlc-chat-config.json");
  ASSERT_TRUE(config.ok()) << FormatErrors(config.errors());
  auto est = EstimateResources(ParamSpecsOf(*cache), &*config);
  ASSERT_TRUE(est.ok()) << FormatErrors(est.errors());
  EXPECT_EQ(est->parameter_count, p.param_size);
  EXPECT_EQ(est->total_bytes, p.param_bytes);
  auto id = ComputeParameterSchemaId(ParamSpecsOf(*cache));
  ASSERT_TRUE(id.ok());
  EXPECT_TRUE(IsSha256Id(*id));
}

INSTANTIATE_TEST_SUITE_P(
    Real, RealPackages,
    ::testing::Values(RealPackage{"readerlm-v2-q4f16_1", 311, 868547584, false},
                      RealPackage{"med-chatbot-qwen2", 267, 277996288, false},
                      RealPackage{"phi-3-mini-128k-ndarray", 325, 2149644288, true}));

TEST(ChatConfig, RealConfigFields) {
  auto cfg = ReadChatConfig(SharedPath("testdata/real/readerlm-v2-q4f16_1/mlc-chat-config.json"));
  ASSERT_TRUE(cfg.ok()) << FormatErrors(cfg.errors());
  EXPECT_EQ(cfg->model_type, "qwen2");
  EXPECT_EQ(cfg->quantization, "q4f16_1");
  EXPECT_EQ(cfg->context_window_size, 8192);
  EXPECT_EQ(cfg->prefill_chunk_size, 4096);
  EXPECT_EQ(cfg->sliding_window_size, -1);
  EXPECT_FALSE(cfg->HasSlidingWindow());
  EXPECT_EQ(cfg->Dimension("vocab_size"), 151936);
  EXPECT_EQ(cfg->Dimension("num_hidden_layers"), 28);  // from model_config
  EXPECT_EQ(cfg->Dimension("nope"), std::nullopt);
  EXPECT_TRUE(cfg->raw.contains("conv_template"));  // unknown fields kept
}

TEST(ChatConfig, TypeErrorsCarryPointers) {
  auto doc = ParseJson(R"({"context_window_size": "big", "prefill_chunk_size": 0, "model_config": [], "extra": {"kept": true}})");
  ASSERT_TRUE(doc.ok());
  auto cfg = ParseChatConfig(*doc);
  ASSERT_FALSE(cfg.ok());
  std::string all = FormatErrors(cfg.errors());
  EXPECT_NE(all.find("/context_window_size: expected an integer"), std::string::npos) << all;
  EXPECT_NE(all.find("/prefill_chunk_size: expected an integer >= 1"), std::string::npos) << all;
  EXPECT_NE(all.find("/model_config: expected an object"), std::string::npos) << all;
}

TEST(Resources, GemmaReferenceFigures) {
  auto doc = ReadJsonFile(SharedPath("reference/gemma-4-E2B-it/params-q4f16_1.json"));
  ASSERT_TRUE(doc.ok());
  auto specs = ParseParamSpecs(*doc);
  ASSERT_TRUE(specs.ok()) << FormatErrors(specs.errors());
  EXPECT_EQ(specs->size(), 1682u);
  auto est = EstimateResources(*specs, nullptr);
  ASSERT_TRUE(est.ok()) << FormatErrors(est.errors());
  EXPECT_EQ(est->max_parameter_bytes, 201326592);
  EXPECT_EQ(est->largest_parameter, "language_model.embed_tokens.q_weight");
  EXPECT_EQ(est->total_bytes, 2797972550);
}

TEST(Resources, NamedDimensionsAndErrors) {
  auto cfg_doc = ParseJson(R"({"vocab_size": 1000, "model_config": {"hidden_size": 64, "vocab_size": 5}})");
  auto cfg = ParseChatConfig(*cfg_doc);
  ASSERT_TRUE(cfg.ok());
  std::vector<ParamSpec> params = {
      {"embed", {std::string("vocab_size"), std::string("hidden_size")}, "float16"},
      {"norm", {int64_t{64}}, "float32"}};
  auto est = EstimateResources(params, &*cfg);
  ASSERT_TRUE(est.ok()) << FormatErrors(est.errors());
  EXPECT_EQ(est->max_parameter_bytes, 1000 * 64 * 2);  // top level wins over model_config
  EXPECT_EQ(est->total_bytes, 1000 * 64 * 2 + 64 * 4);
  params.push_back({"bad", {std::string("layers")}, "float32"});
  params.push_back({"odd", {int64_t{3}}, "complex64"});
  params.push_back({"huge", {int64_t{1} << 40, int64_t{1} << 40}, "float32"});
  auto bad = EstimateResources(params, &*cfg);
  ASSERT_FALSE(bad.ok());
  std::string all = FormatErrors(bad.errors());
  EXPECT_NE(all.find("bad: dimension \"layers\""), std::string::npos) << all;
  EXPECT_NE(all.find("odd: unknown dtype \"complex64\""), std::string::npos) << all;
  EXPECT_NE(all.find("huge: byte size overflows"), std::string::npos) << all;
  EXPECT_EQ(DtypeItemSize("e4m3_float8"), 1);
  EXPECT_EQ(DtypeItemSize("bfloat16"), 2);
}

// A minimal tensor cache to break in the tests below.
Json SmallCache() {
  return Json::parse(R"({
    "metadata": {"ParamSize": 3, "ParamBytes": 56.0, "BitsPerParam": 16.0},
    "records": [
      {"dataPath": "params_shard_0.bin", "format": "raw-shard", "nbytes": 24,
       "md5sum": "0123456789abcdef0123456789abcdef",
       "records": [
         {"name": "w", "shape": [2, 2], "dtype": "float32", "format": "f32-to-bf16", "nbytes": 8, "byteOffset": 0},
         {"name": "q", "shape": [4], "dtype": "uint32", "format": "f32-to-bf16", "nbytes": 16, "byteOffset": 8}]},
      {"dataPath": "params_shard_1.bin", "format": "raw-shard", "nbytes": 8,
       "records": [
         {"name": "s", "shape": [4], "dtype": "float16", "format": "raw", "nbytes": 8, "byteOffset": 0}]}]})");
}

TEST(TensorCache, ValidSmallCache) {
  auto cache = ParseTensorCache(SmallCache());
  ASSERT_TRUE(cache.ok()) << FormatErrors(cache.errors());
  EXPECT_EQ(cache->shards.size(), 2u);
  EXPECT_EQ(cache->shards[0].records[0].StoredItemSize(), 2u);  // float32 stored as bf16
  EXPECT_EQ(cache->shards[0].records[1].StoredItemSize(), 4u);
  auto est = EstimateResources(ParamSpecsOf(*cache), nullptr);
  ASSERT_TRUE(est.ok());
  EXPECT_EQ(est->total_bytes, 16 + 16 + 8);  // declared dtype: float32 is 4 bytes on device
}

struct CacheCase {
  const char* name;
  std::function<void(Json&)> mutate;
  const char* path;
  const char* fragment;
};

class BrokenCache : public ::testing::TestWithParam<CacheCase> {};

TEST_P(BrokenCache, Rejected) {
  Json doc = SmallCache();
  GetParam().mutate(doc);
  auto r = ParseTensorCache(doc);
  ASSERT_FALSE(r.ok()) << GetParam().name;
  bool found = false;
  for (const Error& e : r.errors()) {
    found = found || (e.path == GetParam().path && e.message.find(GetParam().fragment) != std::string::npos);
  }
  EXPECT_TRUE(found) << "expected " << GetParam().path << " ~ " << GetParam().fragment << ", got\n"
                     << FormatErrors(r.errors());
}

INSTANTIATE_TEST_SUITE_P(
    Rules, BrokenCache,
    ::testing::Values(
        CacheCase{"record past shard end",
                  [](Json& d) { d["records"][1]["records"][0]["byteOffset"] = 4; },
                  "/records/1/records/0", "run past the end of shard \"params_shard_1.bin\""},
        CacheCase{"dot-dot path", [](Json& d) { d["records"][0]["dataPath"] = "../x.bin"; },
                  "/records/0/dataPath", "\"..\""},
        CacheCase{"absolute path", [](Json& d) { d["records"][0]["dataPath"] = "/etc/passwd"; },
                  "/records/0/dataPath", "absolute"},
        CacheCase{"duplicate name", [](Json& d) { d["records"][1]["records"][0]["name"] = "w"; },
                  "/records/1/records/0/name", "duplicate parameter name \"w\""},
        CacheCase{"overlap",
                  [](Json& d) { d["records"][0]["records"][1]["byteOffset"] = 4; d["records"][0]["nbytes"] = 24; },
                  "/records/0/records/1", "overlaps"},
        CacheCase{"nbytes vs shape",
                  [](Json& d) { d["records"][0]["records"][0]["nbytes"] = 16; },
                  "/records/0/records/0/nbytes", "expected 8 (4 elements x 2 stored bytes of float32 as bfloat16)"},
        CacheCase{"unknown dtype", [](Json& d) { d["records"][1]["records"][0]["dtype"] = "f16"; },
                  "/records/1/records/0/dtype", "unknown dtype"},
        CacheCase{"bad md5", [](Json& d) { d["records"][0]["md5sum"] = "XYZ"; },
                  "/records/0/md5sum", "32 lowercase hex"},
        CacheCase{"shard format", [](Json& d) { d["records"][0]["format"] = "zip"; },
                  "/records/0/format", "raw-shard"},
        CacheCase{"record format", [](Json& d) { d["records"][1]["records"][0]["format"] = "q4"; },
                  "/records/1/records/0/format", "\"raw\" or \"f32-to-bf16\""},
        CacheCase{"shard listed twice", [](Json& d) { d["records"][1]["dataPath"] = "params_shard_0.bin"; },
                  "/records/1/dataPath", "listed twice"},
        CacheCase{"records not array", [](Json& d) { d["records"] = Json::object(); },
                  "/records", "expected an array of shards"}),
    test::CaseName());

}  // namespace
}  // namespace mlc
