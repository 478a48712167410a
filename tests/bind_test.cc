// Binding a package to a compiled program (SPEC 5): the seed's pair binds; each rule that can
// fail does, naming where.
#include <gtest/gtest.h>

#include <functional>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/package.h"
#include "support/seed_docs.h"
#include "support/test_util.h"

namespace mlc {
namespace {

struct Docs {
  Json pkg;
  Json prog;
};

Docs Seed() {
  test::SeedDocs s = test::LoadSeedDocs();
  return {s.gemma_package, s.gemma_program};
}

void RefreshIds(Docs& d) {
  auto tasks = ParseTasks(d.pkg["tasks"], "/tasks");
  ASSERT_TRUE(tasks.ok()) << FormatErrors(tasks.errors());
  std::string id = *ComputeInterfaceId(*tasks);
  d.pkg["interface_id"] = id;
  d.prog["interface_id"] = id;
}

Result<BoundContract> BindDocs(const Docs& d, BindOptions options = {}) {
  auto pkg = ParseModelPackage(d.pkg);
  EXPECT_TRUE(pkg.ok()) << FormatErrors(pkg.errors());
  auto prog = ParseCompiledProgram(d.prog);
  EXPECT_TRUE(prog.ok()) << FormatErrors(prog.errors());
  if (!pkg.ok() || !prog.ok()) return Invalid("", "documents do not parse");
  return Bind(*pkg, *prog, options);
}

void ExpectFailure(const Result<BoundContract>& r, const std::string& path,
                   const std::string& fragment) {
  ASSERT_FALSE(r.ok()) << "bound, expected failure at " << path;
  for (const Error& e : r.errors()) {
    if (e.path == path && e.message.find(fragment) != std::string::npos) return;
  }
  ADD_FAILURE() << "expected " << path << " ~ '" << fragment << "', got:\n"
                << FormatErrors(r.errors());
}

Json LlavaTask(const Json& image_input) {
  return {{"executor", "generation"},
          {"inputs", {{"text", {{"processor", "tokenizer"}}}, {"image", image_input}}},
          {"output", "text"}};
}

TEST(Bind, SeedGemmaBindsTheTokenPair) {
  auto r = BindDocs(Seed());
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->pair, GenerationPair::kTokens);
  EXPECT_EQ(r->prefill_function, "prefill_tokens");
  EXPECT_EQ(r->decode_function, "decode_tokens");
  EXPECT_EQ(r->embed_function, "embed");
  EXPECT_EQ(r->create_kv_cache_function, "create_tir_paged_kv_cache");
  EXPECT_EQ(r->kv_state_kind, "kv_cache");
  ASSERT_TRUE(r->audio);
  EXPECT_EQ(r->audio->function, "audio_embed");
  EXPECT_EQ(r->audio->dtype, "float32");
  EXPECT_EQ(r->audio->processor.max_samples, 480000);
  EXPECT_EQ(r->audio->prompt.suffix_token_ids, std::vector<int64_t>{258883});
  EXPECT_FALSE(r->image);
  EXPECT_EQ(RequiredFunctions(*r),
            (std::vector<std::string>{"audio_embed", "create_tir_paged_kv_cache", "decode_tokens",
                                      "embed", "prefill_tokens"}));
}

// One kv_state_kind rule: what Bind reports, what an assembled program records.
TEST(KvStateKind, ImpliedByTheRolesForBindAndAssembly) {
  Docs d = Seed();
  auto prog = ParseCompiledProgram(d.prog);
  ASSERT_TRUE(prog.ok()) << FormatErrors(prog.errors());
  auto pkg = ParseModelPackage(d.pkg);
  ASSERT_TRUE(pkg.ok()) << FormatErrors(pkg.errors());
  EXPECT_EQ(KvStateKind(prog->programs), "kv_cache");
  std::map<std::string, Program> programs = prog->programs;
  programs.begin()->second.exports["create_rnn_state"] = "create_rnn_state";
  EXPECT_EQ(KvStateKind(programs.begin()->second), "hybrid");
  EXPECT_EQ(KvStateKind(programs), "hybrid");

  std::vector<ParamSpec> params = {{"w", {int64_t{4}, int64_t{8}}, "float16"},
                                   {"v", {int64_t{16}}, "float32"}};
  ProgramParts parts{pkg->tasks, programs, params, {"shader-f16", "shader-f16"}, true};
  auto assembled = AssembleCompiledProgram(parts, nullptr);
  ASSERT_TRUE(assembled.ok()) << FormatErrors(assembled.errors());
  EXPECT_EQ(assembled->interface_id, pkg->interface_id);
  EXPECT_EQ(assembled->parameter_schema_id, *ComputeParameterSchemaId(params));
  EXPECT_EQ(assembled->kv_state_kind, std::optional<std::string>("hybrid"));
  EXPECT_EQ(assembled->resources.required_features, std::vector<std::string>{"shader-f16"});
  EXPECT_EQ(assembled->resources.max_storage_buffer_binding_size, 64);
  EXPECT_EQ(assembled->resources.estimated_device_memory_bytes, 128);
  parts.record_kv_state_kind = false;
  EXPECT_FALSE(AssembleCompiledProgram(parts, nullptr)->kv_state_kind);
  // A named dimension with no config to resolve it is an error.
  parts.params.push_back({"x", {std::string("hidden_size")}, "float32"});
  EXPECT_FALSE(AssembleCompiledProgram(parts, nullptr).ok());
}

TEST(Bind, SeedLlavaBindsTheEmbedPairWithImageDtype) {
  test::SeedDocs s = test::LoadSeedDocs();
  Docs d{s.gemma_package, s.gemma_program};
  d.pkg["tasks"]["chat.completions"] = LlavaTask(s.llava_input);
  d.prog["programs"]["generation"] = {
      {"kind", "token_generation"},
      {"exports", {{"embed_tokens", "embed"}, {"prefill_embeds", "prefill"},
                   {"decode_embeds", "decode"}, {"create_kv_cache", "create_tir_paged_kv_cache"}}},
      {"adapters", {{"image", "image_embed"}}},
      {"adapter_dtypes", {{"image", "uint32"}}}};
  RefreshIds(d);
  auto r = BindDocs(d);
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->pair, GenerationPair::kEmbeds);
  EXPECT_EQ(r->prefill_function, "prefill");
  ASSERT_TRUE(r->image);
  EXPECT_EQ(r->image->dtype, "uint32");
  EXPECT_EQ(r->image->processor.num_embeddings, 576);
  d.prog["programs"]["generation"].erase("adapter_dtypes");
  auto r8 = BindDocs(d);
  ASSERT_TRUE(r8.ok());
  EXPECT_EQ(r8->image->dtype, "uint8");
}

TEST(Bind, BothPairsPreferTokens) {
  Docs d = Seed();
  d.prog["programs"]["generation"]["exports"]["prefill_embeds"] = "prefill";
  d.prog["programs"]["generation"]["exports"]["decode_embeds"] = "decode";
  auto r = BindDocs(d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pair, GenerationPair::kTokens);
}

struct Case {
  const char* name;
  std::function<void(Docs&)> mutate;
  const char* path;
  const char* fragment;
};

class BindRules : public ::testing::TestWithParam<Case> {};

TEST_P(BindRules, Fail) {
  Docs d = Seed();
  GetParam().mutate(d);
  ExpectFailure(BindDocs(d), GetParam().path, GetParam().fragment);
}

#define EXPORTS(d) (d).prog["programs"]["generation"]["exports"]
#define INPUTS(d) (d).pkg["tasks"]["chat.completions"]["inputs"]

INSTANTIATE_TEST_SUITE_P(
    Spec5, BindRules,
    ::testing::Values(
        Case{"interface ids differ", [](Docs& d) { d.prog["interface_id"] = test::FakeId("x"); },
             "/interface_id", "differs"},
        Case{"parameter ids differ",
             [](Docs& d) { d.prog["parameter_schema_id"] = test::FakeId("y"); },
             "/parameter_schema_id", "differs"},
        Case{"task missing",
             [](Docs& d) {
               d.pkg["tasks"]["other"] = d.pkg["tasks"]["chat.completions"];
               d.pkg["tasks"].erase("chat.completions");
               RefreshIds(d);
             },
             "/tasks/chat.completions", "not declared"},
        Case{"output not text",
             [](Docs& d) { d.pkg["tasks"]["chat.completions"]["output"] = "audio"; RefreshIds(d); },
             "/tasks/chat.completions/output", "expected \"text\""},
        Case{"executor missing",
             [](Docs& d) { d.pkg["tasks"]["chat.completions"]["executor"] = "gen"; RefreshIds(d); },
             "/tasks/chat.completions/executor", "not a program"},
        Case{"wrong program kind",
             [](Docs& d) { d.prog["programs"]["generation"]["kind"] = "embedding"; },
             "/programs/generation/kind", "token_generation"},
        Case{"no embed_tokens", [](Docs& d) { EXPORTS(d).erase("embed_tokens"); },
             "/programs/generation/exports", "\"embed_tokens\""},
        Case{"no create_kv_cache", [](Docs& d) { EXPORTS(d).erase("create_kv_cache"); },
             "/programs/generation/exports", "\"create_kv_cache\""},
        Case{"half token pair", [](Docs& d) { EXPORTS(d).erase("decode_tokens"); },
             "/programs/generation/exports", "half a pair"},
        Case{"half embed pair", [](Docs& d) { EXPORTS(d)["prefill_embeds"] = "prefill"; },
             "/programs/generation/exports", "only prefill_embeds"},
        Case{"no pair",
             [](Docs& d) {
               EXPORTS(d).erase("decode_tokens");
               EXPORTS(d).erase("prefill_tokens");
             },
             "/programs/generation/exports", "complete pair"},
        Case{"no text input",
             [](Docs& d) { INPUTS(d).erase("text"); RefreshIds(d); },
             "/tasks/chat.completions/inputs", "\"text\""},
        Case{"text not tokenizer",
             [](Docs& d) { INPUTS(d)["text"]["processor"] = "bytes"; RefreshIds(d); },
             "/tasks/chat.completions/inputs/text/processor", "\"tokenizer\""},
        Case{"text with adapter",
             [](Docs& d) {
               INPUTS(d)["text"]["adapter"] = "t";
               INPUTS(d)["text"]["prompt"] = {{"placeholder_token_id", 1}};
               RefreshIds(d);
             },
             "/tasks/chat.completions/inputs/text", "cannot declare an adapter"},
        Case{"two audio inputs",
             [](Docs& d) { INPUTS(d)["audio2"] = INPUTS(d)["audio"]; RefreshIds(d); },
             "/tasks/chat.completions/inputs/audio2", "at most one audio"},
        Case{"audio without adapter",
             [](Docs& d) { INPUTS(d)["audio"].erase("adapter"); INPUTS(d)["audio"].erase("prompt"); RefreshIds(d); },
             "/tasks/chat.completions/inputs/audio", "must declare an adapter"},
        Case{"adapter not in program",
             [](Docs& d) { d.prog["programs"]["generation"]["adapters"] = {{"speech", "audio_embed"}}; },
             "/tasks/chat.completions/inputs/audio/adapter", "not among the compiled program's adapters"},
        Case{"audio dtype uint32",
             [](Docs& d) { d.prog["programs"]["generation"]["adapter_dtypes"] = {{"audio", "uint32"}}; },
             "/programs/generation/adapter_dtypes/audio", "must take float32"},
        Case{"rnn state vs kv_cache",
             [](Docs& d) {
               EXPORTS(d)["create_rnn_state"] = "create_rnn_state";
               d.prog = Json{{"artifact", d.prog}, {"kv_state_kind", "kv_cache"}};
             },
             "/kv_state_kind", "imply kv_state_kind \"hybrid\""},
        Case{"library says hybrid",
             [](Docs& d) { d.prog = Json{{"artifact", d.prog}, {"kv_state_kind", "hybrid"}}; },
             "/kv_state_kind", "library reports \"hybrid\""}),
    test::CaseName());

TEST(Bind, ImageDtypeRule) {
  test::SeedDocs s = test::LoadSeedDocs();
  Docs d{s.gemma_package, s.gemma_program};
  d.pkg["tasks"]["chat.completions"] = LlavaTask(s.llava_input);
  d.prog["programs"]["generation"]["adapters"] = {{"image", "image_embed"}};
  d.prog["programs"]["generation"]["adapter_dtypes"] = {{"image", "float16"}};
  RefreshIds(d);
  ExpectFailure(BindDocs(d), "/programs/generation/adapter_dtypes/image",
                "must take uint8 or uint32");
}

TEST(Bind, DeviceFeaturesAndBindingSize) {
  Docs d = Seed();
  BindOptions o;
  o.device = DeviceLimits{"small", {}, 128 << 20};
  auto r = BindDocs(d, o);
  ExpectFailure(r, "/resources/required_features", "\"shader-f16\"");
  ExpectFailure(r, "/resources/max_storage_buffer_binding_size", "201326592");
  o.device = DeviceLimits{"big", {"shader-f16"}, 1 << 30};
  EXPECT_TRUE(BindDocs(d, o).ok());
}

TEST(Bind, WeightsParameterSchemaMustMatch) {
  BindOptions o;
  o.weights_parameter_schema_id = test::FakeId("other weights");
  ExpectFailure(BindDocs(Seed(), o), "/weights/parameter_schema_id", "the weights hash to");
}

TEST(Bind, OtherTaskByName) {
  Docs d = Seed();
  d.pkg["tasks"]["transcribe"] = d.pkg["tasks"]["chat.completions"];
  RefreshIds(d);
  BindOptions o;
  o.task = "transcribe";
  auto r = BindDocs(d, o);
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->task_name, "transcribe");
}

}  // namespace
}  // namespace mlc
