// Whole packages through the CLI: emit (presets, determinism, no-clobber), check (verdicts,
// real shard files, corruption named by shard), inspect, and the shipped Gemma 4 example.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "mlc_manifest/package.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::RunCli;
using test::TempDir;

constexpr const char* kExample = "examples/gemma-4-E2B-it-q4f16_1";

Json Out(const test::CliResult& r) {
  auto j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << "not one JSON object: " << r.out << r.err;
  return j.ok() ? *j : Json();
}

const Json* Check(const Json& report, const std::string& name) {
  for (const auto& c : report["checks"]) {
    if (c["check"] == name) return &c;
  }
  return nullptr;
}

std::string Md5Of(const std::string& path) {
  auto r = test::RunProgram({"md5sum", path});
  return r.out.substr(0, 32);
}

// A small package with real shards: three shards of random bytes, one float32 record stored as
// bf16, md5sums from coreutils' md5sum (not our code).
std::string MakeSmallPackage(const TempDir& d) {
  std::mt19937 rng(7);
  std::string dir = d.File("pkg");
  std::filesystem::create_directories(dir);
  struct Rec {
    const char* name;
    std::vector<int64_t> shape;
    const char* dtype;
    int shard;
  } recs[] = {{"embed.q_weight", {64, 16}, "uint32", 0}, {"embed.q_scale", {64, 4}, "float16", 0},
              {"norm.weight", {16}, "float32", 1},       {"head.q_weight", {32, 16}, "uint32", 2}};
  Json shards = Json::array();
  for (int s = 0; s < 3; ++s) {
    Json records = Json::array();
    std::string bytes;
    for (const Rec& r : recs) {
      if (r.shard != s) continue;
      uint64_t elems = 1;
      for (int64_t x : r.shape) elems *= static_cast<uint64_t>(x);
      uint64_t item = std::string(r.dtype) == "float32" ? 2 : *DtypeItemSize(r.dtype);
      records.push_back({{"name", r.name}, {"shape", r.shape}, {"dtype", r.dtype},
                         {"format", "f32-to-bf16"}, {"nbytes", elems * item}, {"byteOffset", bytes.size()}});
      for (uint64_t i = 0; i < elems * item; ++i) bytes += static_cast<char>(rng() & 0xFF);
    }
    std::string name = "params_shard_" + std::to_string(s) + ".bin";
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    shards.push_back({{"dataPath", name}, {"format", "raw-shard"}, {"nbytes", bytes.size()},
                      {"records", records}, {"md5sum", Md5Of(dir + "/" + name)}});
  }
  Json cache = {{"metadata", {{"ParamSize", 4}, {"ParamBytes", 4096 + 512 + 64 + 2048}}}, {"records", shards}};
  std::ofstream(dir + "/tensor-cache.json") << cache.dump(4);
  Json cfg = {{"model_type", "llava"}, {"quantization", "q4f16_1"}, {"context_window_size", 2048},
              {"prefill_chunk_size", 512}, {"vocab_size", 64},
              {"model_config", {{"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                                {"hidden_size", 16}}}};
  std::ofstream(dir + "/mlc-chat-config.json") << cfg.dump(2);
  return dir;
}

TEST(Emit, ExampleReproducesTheGemmaFigures) {
  TempDir d;
  std::string src = test::SourcePath(kExample);
  std::string dir = d.File("gemma");
  std::filesystem::create_directories(dir);
  for (const char* f : {"mlc-chat-config.json", "tensor-cache.json"}) {
    std::filesystem::copy_file(src + "/" + f, dir + "/" + f);
  }
  auto pkg = RunCli({"emit", "package", dir, "--preset", "gemma-4-e2b-audio", "--json"});
  ASSERT_EQ(pkg.exit_code, 0) << pkg.out << pkg.err;
  EXPECT_EQ(Out(pkg)["interface_id"], "sha256:6453d39d6c1a05b41e3d10ac1547892e2fde2ae228c6705b122ffde5e4c9c490");
  auto prog = RunCli({"emit", "program", dir, "--preset", "gemma-4-e2b-audio", "-o", dir + "/program.json", "--json"});
  ASSERT_EQ(prog.exit_code, 0) << prog.out << prog.err;
  Json j = Out(prog);
  EXPECT_EQ(j["max_storage_buffer_binding_size"], 201326592);
  EXPECT_EQ(j["estimated_device_memory_bytes"], 2797972550);
  // The shipped example holds exactly what emit writes.
  EXPECT_EQ(test::ReadText(dir + "/mlc-model-manifest.json"), test::ReadText(src + "/mlc-model-manifest.json"));
  EXPECT_EQ(test::ReadText(dir + "/program.json"), test::ReadText(src + "/compiled-program.json"));
  auto program = ParseJson(test::ReadText(dir + "/program.json"));
  ASSERT_TRUE(program.ok());
  EXPECT_EQ((*program)["resources"]["required_features"], Json::array({"shader-f16"}));
}

TEST(Emit, ExampleTensorCacheIsTheConverterLayoutOfTheReference) {
  TempDir d;
  auto r = RunCli({"emit", "tensor-cache", "--params", test::SharedPath("reference/gemma-4-E2B-it/params-q4f16_1.json"),
                   "-o", d.File("tc.json")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::ReadText(d.File("tc.json")), test::ReadText(test::SourcePath(kExample) + "/tensor-cache.json"));
  auto cache = ReadTensorCache(test::SourcePath(kExample));
  ASSERT_TRUE(cache.ok());
  uint64_t stored = 0;
  for (const auto& s : cache->shards) stored += s.nbytes;
  EXPECT_EQ(stored, 2797577798u);  // float32 stored as bfloat16 on disk
  for (const auto& s : cache->shards) {
    EXPECT_TRUE(s.nbytes <= (32u << 20) || s.records.size() == 1) << s.data_path;
  }
}

TEST(Emit, DeterministicAndNoClobber) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  ASSERT_EQ(RunCli({"emit", "package", dir, "--preset", "llava-1.5"}).exit_code, 0);
  std::string first = test::ReadText(dir + "/mlc-model-manifest.json");
  auto again = RunCli({"emit", "package", dir, "--preset", "llava-1.5"});
  EXPECT_EQ(again.exit_code, 1) << "overwrote without --force";
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  ASSERT_EQ(RunCli({"emit", "package", dir, "--preset", "llava-1.5", "--force"}).exit_code, 0);
  EXPECT_EQ(test::ReadText(dir + "/mlc-model-manifest.json"), first);
  // A tasks file gives the same bytes as the preset it spells out.
  auto doc = ParseJson(first);
  std::string tasks = d.Write("tasks.json", (*doc)["tasks"].dump());
  ASSERT_EQ(RunCli({"emit", "package", dir, "--tasks", tasks, "-o", d.File("m2.json")}).exit_code, 0);
  EXPECT_EQ(test::ReadText(d.File("m2.json")), first);
  EXPECT_EQ(RunCli({"emit", "package", dir}).exit_code, 2);
  EXPECT_EQ(RunCli({"emit", "package", dir, "--preset", "gpt-5"}).exit_code, 2);
}

TEST(Emit, ProgramTargetsAndMetadata) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  auto web = RunCli({"emit", "program", dir, "--preset", "llava-1.5", "--target", "webgpu", "-o", d.File("w.json")});
  ASSERT_EQ(web.exit_code, 0) << web.err;
  auto w = ParseJson(test::ReadText(d.File("w.json")));
  EXPECT_EQ((*w)["programs"]["generation"]["adapter_dtypes"]["image"], "uint32");
  EXPECT_EQ((*w)["programs"]["generation"]["exports"]["prefill_embeds"], "prefill");
  EXPECT_EQ((*w)["resources"]["required_features"], Json::array({"shader-f16"}));
  EXPECT_EQ((*w)["resources"]["max_storage_buffer_binding_size"], 4096);
  EXPECT_EQ((*w)["resources"]["estimated_device_memory_bytes"], 4096 + 512 + 64 + 2048);
  auto nat = RunCli({"emit", "program", dir, "--preset", "gemma-3", "--target", "native", "--metadata",
                     "--feature", "subgroups", "-o", d.File("n.json")});
  ASSERT_EQ(nat.exit_code, 0) << nat.err;
  auto n = ParseJson(test::ReadText(d.File("n.json")));
  EXPECT_FALSE((*n)["artifact"]["programs"]["generation"].contains("adapter_dtypes"));
  EXPECT_EQ((*n)["artifact"]["resources"]["required_features"], Json::array({"subgroups"}));
  EXPECT_EQ((*n)["kv_state_kind"], "kv_cache");
}

TEST(Check, SmallPackageWithRealShards) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  ASSERT_EQ(RunCli({"emit", "package", dir, "--preset", "llava-1.5"}).exit_code, 0);
  ASSERT_EQ(RunCli({"emit", "program", dir, "--preset", "llava-1.5", "-o", d.File("p.json")}).exit_code, 0);
  auto ok = RunCli({"check", dir, "--program", d.File("p.json"), "--verify-shards", "--json"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  Json j = Out(ok);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ((*Check(j, "shards"))["verdict"], "pass");
  EXPECT_EQ((*Check(j, "binding"))["verdict"], "pass");
  EXPECT_EQ((*Check(j, "parameter_schema_id"))["details"]["matched"], "tensor_cache");

  // A flipped byte: named by shard.
  std::string shard1 = dir + "/params_shard_1.bin";
  std::string bytes = test::ReadText(shard1);
  std::string flipped = bytes;
  flipped[3] = static_cast<char>(flipped[3] ^ 0x40);
  std::ofstream(shard1, std::ios::binary) << flipped;
  auto bad = RunCli({"check", dir, "--verify-shards"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("params_shard_1.bin: md5"), std::string::npos) << bad.out;
  // stderr is not a terminal here: one progress line per hashed shard, with its verdict.
  EXPECT_NE(bad.err.find("params_shard_1.bin: md5 mismatch ("), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("MB/s"), std::string::npos) << bad.err;
  const size_t shard_lines = static_cast<size_t>(std::count(bad.err.begin(), bad.err.end(), '\n'));
  EXPECT_EQ(bad.err.find("verified "), 0u) << bad.err;
  EXPECT_GE(shard_lines, 2u) << bad.err;
  // Without --verify-shards the sizes still agree: not a failure.
  EXPECT_EQ(RunCli({"check", dir}).exit_code, 0);
  // Truncation is caught without hashing.
  std::ofstream(shard1, std::ios::binary) << bytes.substr(0, bytes.size() - 1);
  auto trunc = RunCli({"check", dir, "--json"});
  EXPECT_EQ(trunc.exit_code, 1);
  EXPECT_NE(Out(trunc)["checks"].dump().find("params_shard_1.bin: 31 bytes, expected 32 (truncated)"), std::string::npos)
      << trunc.out;
  // A missing shard fails with --verify-shards, is "not verified" without it.
  std::filesystem::remove(dir + "/params_shard_2.bin");
  std::ofstream(shard1, std::ios::binary) << bytes;
  auto missing = RunCli({"check", dir, "--verify-shards"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.out.find("params_shard_2.bin: missing"), std::string::npos) << missing.out;
  auto lenient = RunCli({"check", dir, "--json"});
  EXPECT_EQ(lenient.exit_code, 0) << lenient.out;
  Json lenient_report = Out(lenient);
  EXPECT_EQ((*Check(lenient_report, "shards"))["verdict"], "skip");
}

// Issue 12.5: a Git LFS pointer in place of a shard (a clone without Git LFS) is named as such,
// with the command that fetches the real file.
TEST(Check, GitLfsPointerInPlaceOfAShard) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  std::ofstream(dir + "/params_shard_1.bin", std::ios::binary)
      << "version https://git-lfs.github.com/spec/v1\n"
         "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\n"
         "size 32\n";
  for (bool verify : {false, true}) {
    std::vector<std::string> args = {"check", dir, "--json"};
    if (verify) args.push_back("--verify-shards");
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    Json j = Out(r);
    const Json* shards = Check(j, "shards");
    ASSERT_NE(shards, nullptr) << r.out;
    EXPECT_EQ((*shards)["verdict"], "fail");
    const Json& s1 = (*shards)["details"]["shards"][1];
    EXPECT_EQ(s1["status"], "Git LFS pointer") << s1.dump();
    EXPECT_NE(s1["message"].get<std::string>().find("a Git LFS pointer, not the data"),
              std::string::npos) << s1.dump();
    EXPECT_NE(s1["message"].get<std::string>().find("`git lfs pull` inside " + dir),
              std::string::npos) << s1.dump();
  }
  auto human = RunCli({"check", dir});
  EXPECT_NE(human.out.find("git lfs pull"), std::string::npos) << human.out;
}

// Issue 12.5: a shard with no md5sum recorded is verified by size only, and check says so.
TEST(Check, ShardsWithoutMd5AreCheckedBySizeOnly) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  Json cache = *ReadJsonFile(dir + "/tensor-cache.json");
  cache["records"][0].erase("md5sum");
  std::ofstream(dir + "/tensor-cache.json") << cache.dump(2);
  auto some = RunCli({"check", dir, "--verify-shards", "--json"});
  EXPECT_EQ(some.exit_code, 0) << some.out;
  Json j = Out(some);
  const Json* shards = Check(j, "shards");
  ASSERT_NE(shards, nullptr) << some.out;
  EXPECT_EQ((*shards)["verdict"], "pass");
  EXPECT_NE((*shards)["message"].get<std::string>().find("1 by size only (no md5sum recorded)"),
            std::string::npos) << shards->dump();
  EXPECT_EQ((*shards)["details"]["shards"][0]["status"], "size only");
  EXPECT_NE((*shards)["details"]["shards"][0]["message"].get<std::string>().find(
                "size only (no md5sum recorded)"),
            std::string::npos);
  for (auto& r : cache["records"]) r.erase("md5sum");
  std::ofstream(dir + "/tensor-cache.json") << cache.dump(2);
  auto none = RunCli({"check", dir, "--verify-shards"});
  EXPECT_EQ(none.exit_code, 0) << none.out;
  EXPECT_NE(none.out.find("size only (no md5sum recorded)"), std::string::npos) << none.out;
  EXPECT_EQ(none.out.find("with their recorded size and md5"), std::string::npos) << none.out;
}

TEST(Check, ShardOutsideThePackageViaSymlink) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  std::filesystem::rename(dir + "/params_shard_0.bin", d.File("elsewhere.bin"));
  std::filesystem::create_symlink(d.File("elsewhere.bin"), dir + "/params_shard_0.bin");
  auto r = RunCli({"check", dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("outside the package folder"), std::string::npos) << r.out;
}

TEST(Check, BrokenTensorCachesAreRejected) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  Json cache = *ParseJson(test::ReadText(dir + "/tensor-cache.json"));
  struct Case {
    std::function<void(Json&)> mutate;
    std::string fragment;
  } cases[] = {
      {[](Json& c) { c["records"][0]["records"][1]["byteOffset"] = 4500; }, "run past the end of shard \"params_shard_0.bin\""},
      {[](Json& c) { c["records"][0]["dataPath"] = "../params_shard_0.bin"; }, "\"..\""},
      {[](Json& c) { c["records"][2]["records"][0]["name"] = "norm.weight"; }, "duplicate parameter name \"norm.weight\""},
  };
  for (const Case& c : cases) {
    Json broken = cache;
    c.mutate(broken);
    std::ofstream(dir + "/tensor-cache.json") << broken.dump();
    auto r = RunCli({"check", dir});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.out.find(c.fragment), std::string::npos) << r.out;
  }
}

TEST(Check, ExampleShipsOkWithAbsentShards) {
  std::string dir = test::SourcePath(kExample);
  auto r = RunCli({"check", dir, "--program", dir + "/compiled-program.json", "--device", "webgpu-256mib-f16", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  Json j = Out(r);
  EXPECT_EQ((*Check(j, "shards"))["verdict"], "skip");
  EXPECT_EQ((*Check(j, "resources"))["verdict"], "pass");
  EXPECT_EQ((*Check(j, "device"))["verdict"], "pass");
  // 128 MiB binding limit and no shader-f16: both named.
  auto small = RunCli({"check", dir, "--program", dir + "/compiled-program.json", "--device", "webgpu-128mib"});
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_NE(small.out.find("feature \"shader-f16\" unsupported"), std::string::npos) << small.out;
  EXPECT_NE(small.out.find("largest binding 201326592 bytes"), std::string::npos) << small.out;
  // Memory: parameters plus the KV-cache estimate.
  auto mem = RunCli({"check", dir, "--max-binding", "1073741824", "--features", "shader-f16", "--memory", "2000000000", "--json"});
  EXPECT_EQ(mem.exit_code, 1);
  Json mem_report = Out(mem);
  const Json* dev = Check(mem_report, "device");
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ((*dev)["details"]["parameter_bytes"], 2797972550);
  EXPECT_GT((*dev)["details"]["kv_cache_bytes"].get<int64_t>(), 0);
  // With --verify-shards the absent shards are a failure.
  EXPECT_EQ(RunCli({"check", dir, "--verify-shards"}).exit_code, 1);
}

TEST(Check, SymbolicParamsMatchIsNamed) {
  TempDir d;
  std::string dir = MakeSmallPackage(d);
  // A symbolic parameter list whose dims resolve to the tensor cache's.
  Json params = Json::array({{{"name", "embed.q_weight"}, {"shape", {"vocab_size", 16}}, {"dtype", "uint32"}},
                             {{"name", "embed.q_scale"}, {"shape", {"vocab_size", 4}}, {"dtype", "float16"}},
                             {{"name", "norm.weight"}, {"shape", {16}}, {"dtype", "float32"}},
                             {{"name", "head.q_weight"}, {"shape", {32, 16}}, {"dtype", "uint32"}}});
  std::string pf = d.Write("params.json", params.dump());
  auto prog = RunCli({"emit", "program", dir, "--preset", "llava-1.5", "--params", pf, "-o", d.File("p.json")});
  ASSERT_EQ(prog.exit_code, 0) << prog.err;
  auto pid = RunCli({"id", "params", pf});
  // A package that declares the symbolic form.
  ASSERT_EQ(RunCli({"emit", "package", dir, "--preset", "llava-1.5"}).exit_code, 0);
  Json m = *ParseJson(test::ReadText(dir + "/mlc-model-manifest.json"));
  m["weights"]["parameter_schema_id"] = pid.out.substr(0, 71);
  std::ofstream(dir + "/mlc-model-manifest.json") << m.dump(2);
  auto r = RunCli({"check", dir, "--program", d.File("p.json"), "--params", pf, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  Json report = Out(r);
  EXPECT_EQ((*Check(report, "parameter_schema_id"))["details"]["matched"], "params");
  // Without --params nothing matches.
  EXPECT_EQ(RunCli({"check", dir}).exit_code, 1);
}

TEST(Check, LegacyPackageAndInspect) {
  std::string dir = test::SharedPath("testdata/real/phi-3-mini-128k-ndarray");
  auto r = RunCli({"check", dir, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  Json j = Out(r);
  EXPECT_EQ((*Check(j, "manifest"))["verdict"], "skip");
  EXPECT_NE((*Check(j, "manifest"))["message"].get<std::string>().find("legacy"), std::string::npos);
  EXPECT_EQ((*Check(j, "tensor_cache"))["verdict"], "warn");
  auto in = RunCli({"inspect", test::SharedPath("testdata/real/readerlm-v2-q4f16_1"), "--json"});
  ASSERT_EQ(in.exit_code, 0) << in.out;
  Json i = Out(in);
  EXPECT_EQ(i["parameters"]["count"], 311);
  EXPECT_EQ(i["resources"]["estimated_device_memory_bytes"], 868547584);
  EXPECT_EQ(i["config"]["context_window_size"], 8192);
  auto human = RunCli({"inspect", test::SourcePath(kExample)});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("language_model.embed_tokens.q_weight  192 MiB"), std::string::npos) << human.out;
}

}  // namespace
}  // namespace mlc
