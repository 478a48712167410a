// The two documents (SPEC 1), identifiers (SPEC 2) and the producer's file format (SPEC 4):
// the seed's documents are accepted, and for every rule a broken document fails at the right
// JSON Pointer with a message that says what was expected.
#include <gtest/gtest.h>

#include <functional>

#include "mlc_manifest/contract.h"
#include "support/seed_docs.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::LoadSeedDocs;

constexpr const char* kSeedAudioInterfaceId =
    "sha256:6453d39d6c1a05b41e3d10ac1547892e2fde2ae228c6705b122ffde5e4c9c490";

bool HasError(const Errors& errors, const std::string& path, const std::string& fragment) {
  for (const Error& e : errors) {
    if (e.path == path && e.message.find(fragment) != std::string::npos) return true;
  }
  return false;
}

TEST(Contract, SeedAudioTaskHashesToPublishedId) {
  test::SeedDocs docs = LoadSeedDocs();
  auto tasks = ParseTasks(docs.gemma_package["tasks"], "/tasks");
  ASSERT_TRUE(tasks.ok()) << FormatErrors(tasks.errors());
  EXPECT_EQ(*ComputeInterfaceId(*tasks), kSeedAudioInterfaceId);
}

TEST(Contract, SeedPackageAndProgramParse) {
  test::SeedDocs docs = LoadSeedDocs();
  auto pkg = ParseModelPackage(docs.gemma_package);
  ASSERT_TRUE(pkg.ok()) << FormatErrors(pkg.errors());
  EXPECT_EQ(pkg->interface_id, kSeedAudioInterfaceId);
  const Task& t = pkg->tasks.at("chat.completions");
  const auto& audio = std::get<AudioDecode>(t.inputs.at("audio").processor);
  EXPECT_EQ(audio.sample_rate_hz, 16000);
  EXPECT_EQ(audio.min_samples, 161);
  EXPECT_EQ(audio.max_samples, 480000);
  EXPECT_EQ(t.inputs.at("audio").prompt->placeholder_token_id, 258881);
  auto prog = ParseCompiledProgram(docs.gemma_program);
  ASSERT_TRUE(prog.ok()) << FormatErrors(prog.errors());
  EXPECT_EQ(prog->programs.at("generation").exports.at("create_kv_cache"),
            "create_tir_paged_kv_cache");
  EXPECT_EQ(prog->resources.max_storage_buffer_binding_size, 201326592);
  EXPECT_EQ(prog->resources.estimated_device_memory_bytes, 2797972550);
}

TEST(Contract, LlavaImageInputParsesAndNormalizes) {
  test::SeedDocs docs = LoadSeedDocs();
  Json tasks = {{"chat.completions",
                 {{"executor", "generation"},
                  {"inputs", {{"text", {{"processor", "tokenizer"}}}, {"image", docs.llava_input}}},
                  {"output", "text"}}}};
  auto parsed = ParseTasks(tasks);
  ASSERT_TRUE(parsed.ok()) << FormatErrors(parsed.errors());
  const TaskInput& img = parsed->at("chat.completions").inputs.at("image");
  const auto& proc = std::get<ImageDecode>(img.processor);
  EXPECT_EQ(proc.mode, ResizeMode::kCenterCrop);
  EXPECT_EQ(proc.height, 336);
  EXPECT_EQ(proc.num_embeddings, 576);
  EXPECT_EQ(img.prompt->placeholder_token_id, 32000);
  EXPECT_TRUE(img.prompt->prefix_token_ids.empty());
  // Defaults are filled in the normalized form the identifier hashes.
  OrderedJson norm = TasksJson(*parsed);
  EXPECT_EQ(norm["chat.completions"]["inputs"]["image"]["prompt"].dump(),
            R"({"prefix_token_ids":[],"placeholder_token_id":32000,"suffix_token_ids":[]})");
}

TEST(Contract, NormalizationMakesEquivalentSpellingsHashAlike) {
  test::SeedDocs docs = LoadSeedDocs();
  Json a = docs.gemma_package["tasks"];
  Json b = a;
  auto& proc = b["chat.completions"]["inputs"]["audio"]["processor"];
  proc["sample_rate_hz"] = 16000.0;  // 16000.0 is the integer 16000
  proc["max_samples"] = 4.8e5;
  Json c = a;
  c["chat.completions"]["inputs"]["audio"]["processor"].erase("min_samples");
  auto ta = ParseTasks(a), tb = ParseTasks(b), tc = ParseTasks(c);
  ASSERT_TRUE(ta.ok() && tb.ok() && tc.ok());
  EXPECT_EQ(*ComputeInterfaceId(*ta), *ComputeInterfaceId(*tb));
  // min_samples absent means 1, which differs from the seed's 161.
  EXPECT_NE(*ComputeInterfaceId(*ta), *ComputeInterfaceId(*tc));
  Json d = c;
  d["chat.completions"]["inputs"]["audio"]["processor"]["min_samples"] = 1;
  auto td = ParseTasks(d);
  ASSERT_TRUE(td.ok());
  EXPECT_EQ(*ComputeInterfaceId(*tc), *ComputeInterfaceId(*td));
}

struct BadCase {
  const char* name;
  std::function<void(Json&)> mutate;
  const char* path;
  const char* fragment;
};

class BrokenPackage : public ::testing::TestWithParam<BadCase> {};

TEST_P(BrokenPackage, FailsAtPathWithMessage) {
  test::SeedDocs docs = LoadSeedDocs();
  Json pkg = docs.gemma_package;
  GetParam().mutate(pkg);
  auto r = ParseModelPackage(pkg);
  ASSERT_FALSE(r.ok()) << "accepted a broken package: " << GetParam().name;
  EXPECT_TRUE(HasError(r.errors(), GetParam().path, GetParam().fragment))
      << "expected an error at " << GetParam().path << " containing '" << GetParam().fragment
      << "', got:\n"
      << FormatErrors(r.errors());
}

#define AUDIO(pkg) (pkg)["tasks"]["chat.completions"]["inputs"]["audio"]
#define TASK(pkg) (pkg)["tasks"]["chat.completions"]
const char* kAudioPath = "/tasks/chat.completions/inputs/audio";

INSTANTIATE_TEST_SUITE_P(
    Rules, BrokenPackage,
    ::testing::Values(
        BadCase{"not an object", [](Json& p) { p = Json::array(); }, "", "expected an object"},
        BadCase{"unknown top-level field", [](Json& p) { p["extra"] = 1; }, "/extra", "unknown field"},
        BadCase{"missing schema", [](Json& p) { p.erase("schema"); }, "/schema", "missing required"},
        BadCase{"wrong schema", [](Json& p) { p["schema"] = "mlc.compiled-program"; }, "/schema",
                "expected \"mlc.model-package\""},
        BadCase{"schema_version 2", [](Json& p) { p["schema_version"] = 2; }, "/schema_version",
                "unsupported schema_version 2"},
        BadCase{"schema_version string", [](Json& p) { p["schema_version"] = "1"; },
                "/schema_version", "expected an integer"},
        BadCase{"schema_version 1.5", [](Json& p) { p["schema_version"] = 1.5; },
                "/schema_version", "expected an integer"},
        BadCase{"chat_config other file", [](Json& p) { p["chat_config"] = "x.json"; },
                "/chat_config", "expected \"mlc-chat-config.json\""},
        BadCase{"interface_id uppercase",
                [](Json& p) {
                  std::string id = p["interface_id"];
                  for (char& ch : id) ch = static_cast<char>(std::toupper(ch));
                  p["interface_id"] = "sha256:" + id.substr(7);
                },
                "/interface_id", "64 lowercase hex"},
        BadCase{"interface_id short", [](Json& p) { p["interface_id"] = "sha256:abc"; },
                "/interface_id", "64 lowercase hex"},
        BadCase{"interface_id mismatch",
                [](Json& p) { p["interface_id"] = test::FakeId("other"); }, "/interface_id",
                "does not match the tasks"},
        BadCase{"weights unknown field", [](Json& p) { p["weights"]["md5"] = "x"; },
                "/weights/md5", "unknown field"},
        BadCase{"weights manifest name", [](Json& p) { p["weights"]["manifest"] = "ndarray-cache.json"; },
                "/weights/manifest", "expected \"tensor-cache.json\""},
        BadCase{"weights missing id", [](Json& p) { p["weights"].erase("parameter_schema_id"); },
                "/weights/parameter_schema_id", "missing required"},
        BadCase{"no tasks", [](Json& p) { p["tasks"] = Json::object(); }, "/tasks",
                "at least one task"},
        BadCase{"empty task name",
                [](Json& p) { p["tasks"][""] = TASK(p); }, "/tasks/", "non-empty"},
        BadCase{"task unknown field", [](Json& p) { TASK(p)["stream"] = true; },
                "/tasks/chat.completions/stream", "unknown field"},
        BadCase{"task executor empty", [](Json& p) { TASK(p)["executor"] = ""; },
                "/tasks/chat.completions/executor", "non-empty string"},
        BadCase{"task output missing", [](Json& p) { TASK(p).erase("output"); },
                "/tasks/chat.completions/output", "missing required"},
        BadCase{"no inputs", [](Json& p) { TASK(p)["inputs"] = Json::object(); },
                "/tasks/chat.completions/inputs", "at least one input"},
        BadCase{"input unknown field", [](Json& p) { AUDIO(p)["dtype"] = "f32"; },
                "/tasks/chat.completions/inputs/audio/dtype", "unknown field"},
        BadCase{"processor missing", [](Json& p) { AUDIO(p).erase("processor"); },
                "/tasks/chat.completions/inputs/audio/processor", "missing required"},
        BadCase{"processor empty string",
                [](Json& p) { TASK(p)["inputs"]["text"]["processor"] = ""; },
                "/tasks/chat.completions/inputs/text/processor", "non-empty string"},
        BadCase{"processor number", [](Json& p) { AUDIO(p)["processor"] = 3; },
                "/tasks/chat.completions/inputs/audio/processor", "expected a processor name"},
        BadCase{"processor kind video", [](Json& p) { AUDIO(p)["processor"]["kind"] = "video_decode"; },
                "/tasks/chat.completions/inputs/audio/processor/kind",
                "expected \"audio_decode\" or \"image_decode\""},
        BadCase{"adapter without prompt", [](Json& p) { AUDIO(p).erase("prompt"); },
                kAudioPath, "declared together"},
        BadCase{"prompt without adapter", [](Json& p) { AUDIO(p).erase("adapter"); },
                kAudioPath, "declared together"},
        BadCase{"adapter empty", [](Json& p) { AUDIO(p)["adapter"] = ""; },
                "/tasks/chat.completions/inputs/audio/adapter", "non-empty string"},
        BadCase{"audio format", [](Json& p) { AUDIO(p)["processor"]["format"] = "pcm_s16"; },
                "/tasks/chat.completions/inputs/audio/processor/format", "expected \"pcm_f32\""},
        BadCase{"audio stereo", [](Json& p) { AUDIO(p)["processor"]["channels"] = 2; },
                "/tasks/chat.completions/inputs/audio/processor/channels", "expected 1"},
        BadCase{"audio rate zero", [](Json& p) { AUDIO(p)["processor"]["sample_rate_hz"] = 0; },
                "/tasks/chat.completions/inputs/audio/processor/sample_rate_hz", "integer >= 1"},
        BadCase{"audio rate fraction",
                [](Json& p) { AUDIO(p)["processor"]["sample_rate_hz"] = 16000.5; },
                "/tasks/chat.completions/inputs/audio/processor/sample_rate_hz", "integer >= 1"},
        BadCase{"audio rate 2^53",
                [](Json& p) { AUDIO(p)["processor"]["sample_rate_hz"] = 9007199254740992ull; },
                "/tasks/chat.completions/inputs/audio/processor/sample_rate_hz", "2^53"},
        BadCase{"audio min > max", [](Json& p) { AUDIO(p)["processor"]["min_samples"] = 480001; },
                "/tasks/chat.completions/inputs/audio/processor/min_samples", "must not exceed"},
        BadCase{"audio min zero", [](Json& p) { AUDIO(p)["processor"]["min_samples"] = 0; },
                "/tasks/chat.completions/inputs/audio/processor/min_samples", "integer >= 1"},
        BadCase{"audio max missing", [](Json& p) { AUDIO(p)["processor"].erase("max_samples"); },
                "/tasks/chat.completions/inputs/audio/processor/max_samples", "missing required"},
        BadCase{"audio unknown field", [](Json& p) { AUDIO(p)["processor"]["bits"] = 16; },
                "/tasks/chat.completions/inputs/audio/processor/bits", "unknown field"},
        BadCase{"prompt placeholder missing",
                [](Json& p) { AUDIO(p)["prompt"].erase("placeholder_token_id"); },
                "/tasks/chat.completions/inputs/audio/prompt/placeholder_token_id",
                "missing required"},
        BadCase{"prompt negative id",
                [](Json& p) { AUDIO(p)["prompt"]["prefix_token_ids"] = {5, -1}; },
                "/tasks/chat.completions/inputs/audio/prompt/prefix_token_ids/1", "integer >= 0"},
        BadCase{"prompt ids not array",
                [](Json& p) { AUDIO(p)["prompt"]["suffix_token_ids"] = 7; },
                "/tasks/chat.completions/inputs/audio/prompt/suffix_token_ids", "expected an array"},
        BadCase{"prompt unknown field", [](Json& p) { AUDIO(p)["prompt"]["count"] = 1; },
                "/tasks/chat.completions/inputs/audio/prompt/count", "unknown field"}),
    test::CaseName());

Json ImageInput(Json processor_patch) {
  Json in = {{"processor",
              {{"kind", "image_decode"},
               {"format", "rgb_u8"},
               {"layout", "nhwc"},
               {"resize", {{"mode", "center_crop"}, {"height", 336}, {"width", 336}}},
               {"num_embeddings", 576}}},
             {"adapter", "image"},
             {"prompt", {{"placeholder_token_id", 32000}}}};
  in["processor"].merge_patch(processor_patch);
  return in;
}

TEST(Contract, ImageProcessorRules) {
  struct Case {
    Json patch;
    std::string path;
    std::string fragment;
  } cases[] = {
      {{{"format", "rgb_f32"}}, "/processor/format", "expected \"rgb_u8\""},
      {{{"layout", "nchw"}}, "/processor/layout", "expected \"nhwc\""},
      {{{"resize", {{"mode", "pad"}}}}, "/processor/resize/mode", "\"stretch\" or \"center_crop\""},
      {{{"resize", {{"height", 0}}}}, "/processor/resize/height", "integer >= 1"},
      {{{"resize", {{"width", nullptr}}}}, "/processor/resize/width", "missing required"},
      {{{"resize", {{"depth", 3}}}}, "/processor/resize/depth", "unknown field"},
      {{{"num_embeddings", 0}}, "/processor/num_embeddings", "integer >= 1"},
      {{{"num_embeddings", nullptr}}, "/processor/num_embeddings", "missing required"},
      {{{"mean", {0.5}}}, "/processor/mean", "unknown field"},
  };
  for (const Case& c : cases) {
    Json tasks = {{"t", {{"executor", "g"}, {"inputs", {{"image", ImageInput(c.patch)}}}, {"output", "text"}}}};
    auto r = ParseTasks(tasks);
    ASSERT_FALSE(r.ok()) << c.patch.dump();
    EXPECT_TRUE(HasError(r.errors(), "/t/inputs/image" + c.path, c.fragment))
        << c.patch.dump() << " gave:\n" << FormatErrors(r.errors());
  }
  Json ok = {{"t", {{"executor", "g"}, {"inputs", {{"image", ImageInput(Json::object())}}}, {"output", "text"}}}};
  EXPECT_TRUE(ParseTasks(ok).ok());
}

TEST(Contract, ReportsEveryErrorNotJustTheFirst) {
  test::SeedDocs docs = LoadSeedDocs();
  Json pkg = docs.gemma_package;
  pkg["schema"] = "nope";
  AUDIO(pkg)["processor"]["channels"] = 2;
  pkg["bogus"] = true;
  auto r = ParseModelPackage(pkg);
  ASSERT_FALSE(r.ok());
  EXPECT_GE(r.errors().size(), 3u);
}

class BrokenProgram : public ::testing::TestWithParam<BadCase> {};

TEST_P(BrokenProgram, FailsAtPathWithMessage) {
  test::SeedDocs docs = LoadSeedDocs();
  Json doc = docs.gemma_program;
  GetParam().mutate(doc);
  auto r = ParseCompiledProgram(doc);
  ASSERT_FALSE(r.ok()) << "accepted a broken program: " << GetParam().name;
  EXPECT_TRUE(HasError(r.errors(), GetParam().path, GetParam().fragment))
      << "expected an error at " << GetParam().path << " containing '" << GetParam().fragment
      << "', got:\n"
      << FormatErrors(r.errors());
}

#define GEN(doc) (doc)["programs"]["generation"]

INSTANTIATE_TEST_SUITE_P(
    Rules, BrokenProgram,
    ::testing::Values(
        BadCase{"unknown field", [](Json& d) { d["notes"] = "x"; }, "/notes", "unknown field"},
        BadCase{"missing resources", [](Json& d) { d.erase("resources"); }, "/resources",
                "missing required"},
        BadCase{"wrong schema", [](Json& d) { d["schema"] = "mlc.model-package"; }, "/schema",
                "expected \"mlc.compiled-program\""},
        BadCase{"schema_version 0", [](Json& d) { d["schema_version"] = 0; }, "/schema_version",
                "integer >= 1"},
        BadCase{"bad parameter id", [](Json& d) { d["parameter_schema_id"] = "md5:00"; },
                "/parameter_schema_id", "sha256"},
        BadCase{"no programs", [](Json& d) { d["programs"] = Json::object(); }, "/programs",
                "at least one program"},
        BadCase{"program kind empty", [](Json& d) { GEN(d)["kind"] = ""; },
                "/programs/generation/kind", "non-empty"},
        BadCase{"program unknown field", [](Json& d) { GEN(d)["entry"] = "main"; },
                "/programs/generation/entry", "unknown field"},
        BadCase{"no exports", [](Json& d) { GEN(d)["exports"] = Json::object(); },
                "/programs/generation/exports", "at least one"},
        BadCase{"export empty function", [](Json& d) { GEN(d)["exports"]["embed_tokens"] = ""; },
                "/programs/generation/exports/embed_tokens", "non-empty"},
        BadCase{"export empty role", [](Json& d) { GEN(d)["exports"][""] = "f"; },
                "/programs/generation/exports/", "non-empty"},
        BadCase{"adapter function number", [](Json& d) { GEN(d)["adapters"]["audio"] = 1; },
                "/programs/generation/adapters/audio", "non-empty string"},
        BadCase{"dtype for unknown adapter",
                [](Json& d) { GEN(d)["adapter_dtypes"] = {{"image", "uint32"}}; },
                "/programs/generation/adapter_dtypes/image", "not a key of adapters"},
        BadCase{"features not strings",
                [](Json& d) { d["resources"]["required_features"] = {"shader-f16", 3}; },
                "/resources/required_features/1", "non-empty string"},
        BadCase{"negative binding",
                [](Json& d) { d["resources"]["max_storage_buffer_binding_size"] = -1; },
                "/resources/max_storage_buffer_binding_size", "integer >= 0"},
        BadCase{"memory float",
                [](Json& d) { d["resources"]["estimated_device_memory_bytes"] = 1.25; },
                "/resources/estimated_device_memory_bytes", "integer >= 0"},
        BadCase{"resources unknown field", [](Json& d) { d["resources"]["kv_bytes"] = 1; },
                "/resources/kv_bytes", "unknown field"},
        BadCase{"metadata artifact broken",
                [](Json& d) { d = Json{{"artifact", d}, {"model_type", "gemma4"}}; d["artifact"].erase("programs"); },
                "/artifact/programs", "missing required"}),
    test::CaseName());

TEST(Contract, MetadataObjectHoldsTheProgram) {
  test::SeedDocs docs = LoadSeedDocs();
  Json meta = {{"artifact", docs.gemma_program}, {"model_type", "gemma4"}, {"kv_state_kind", "kv_cache"}};
  EXPECT_EQ(DetectDocument(meta), DocumentKind::kMetadata);
  auto r = ParseCompiledProgram(meta);
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->kv_state_kind, "kv_cache");
}

TEST(Writer, MatchesPythonJsonDumpIndent2) {
  test::SeedDocs docs = LoadSeedDocs();
  auto pkg = ParseModelPackage(docs.gemma_package);
  ASSERT_TRUE(pkg.ok());
  std::string text = WriteModelPackage(*pkg);
  // The bytes of json.dump(doc, indent=2) + "\n" for the seed's package (ids as filled).
  std::string expected = std::string("{\n  \"schema\": \"mlc.model-package\",\n  \"schema_version\": 1,\n") +
      "  \"chat_config\": \"mlc-chat-config.json\",\n  \"interface_id\": \"" + pkg->interface_id + "\",\n" +
      "  \"weights\": {\n    \"manifest\": \"tensor-cache.json\",\n    \"parameter_schema_id\": \"" +
      pkg->parameter_schema_id + "\"\n  },\n  \"tasks\": {\n    \"chat.completions\": {\n" +
      "      \"executor\": \"generation\",\n      \"inputs\": {\n        \"audio\": {\n" +
      "          \"processor\": {\n            \"kind\": \"audio_decode\",\n" +
      "            \"format\": \"pcm_f32\",\n            \"sample_rate_hz\": 16000,\n" +
      "            \"channels\": 1,\n            \"min_samples\": 161,\n" +
      "            \"max_samples\": 480000\n          },\n          \"adapter\": \"audio\",\n" +
      "          \"prompt\": {\n            \"prefix_token_ids\": [\n              256000\n" +
      "            ],\n            \"placeholder_token_id\": 258881,\n" +
      "            \"suffix_token_ids\": [\n              258883\n            ]\n          }\n" +
      "        },\n        \"text\": {\n          \"processor\": \"tokenizer\"\n        }\n" +
      "      },\n      \"output\": \"text\"\n    }\n  }\n}\n";
  EXPECT_EQ(text, expected);
}

TEST(Writer, RoundTripIsByteIdentical) {
  test::SeedDocs docs = LoadSeedDocs();
  auto pkg = ParseModelPackage(docs.gemma_package);
  ASSERT_TRUE(pkg.ok());
  std::string once = WriteModelPackage(*pkg);
  auto reparsed = ParseJson(once);
  ASSERT_TRUE(reparsed.ok());
  auto pkg2 = ParseModelPackage(*reparsed);
  ASSERT_TRUE(pkg2.ok()) << FormatErrors(pkg2.errors());
  EXPECT_EQ(WriteModelPackage(*pkg2), once);

  auto prog = ParseCompiledProgram(docs.gemma_program);
  ASSERT_TRUE(prog.ok());
  for (bool meta : {false, true}) {
    std::string p1 = WriteCompiledProgram(*prog, meta);
    auto j = ParseJson(p1);
    ASSERT_TRUE(j.ok());
    auto prog2 = ParseCompiledProgram(*j);
    ASSERT_TRUE(prog2.ok()) << FormatErrors(prog2.errors());
    EXPECT_EQ(WriteCompiledProgram(*prog2, meta), p1);
  }
}

TEST(Writer, EscapesNonAsciiAsPythonDoes) {
  Tasks tasks;
  tasks["caf\xC3\xA9 \xF0\x9F\x98\x80"] = Task{"g", {{"text", TaskInput{std::string("tokenizer"), {}, {}}}}, "text"};
  ModelPackage pkg{*ComputeInterfaceId(tasks), test::FakeId("p"), tasks};
  std::string text = WriteModelPackage(pkg);
  EXPECT_NE(text.find("\"caf\\u00e9 \\ud83d\\ude00\": {"), std::string::npos) << text;
  auto back = ParseJson(text);
  ASSERT_TRUE(back.ok());
  auto pkg2 = ParseModelPackage(*back);
  ASSERT_TRUE(pkg2.ok()) << FormatErrors(pkg2.errors());
  EXPECT_EQ(pkg2->tasks.begin()->first, "caf\xC3\xA9 \xF0\x9F\x98\x80");
}

TEST(Writer, PackageWithoutImageKeepsItsBytes) {
  // Adding image support must not change a text+audio package: same bytes, same id.
  test::SeedDocs docs = LoadSeedDocs();
  auto pkg = ParseModelPackage(docs.gemma_package);
  ASSERT_TRUE(pkg.ok());
  EXPECT_EQ(WriteModelPackage(*pkg).find("image"), std::string::npos);
  EXPECT_EQ(pkg->interface_id, kSeedAudioInterfaceId);
}

TEST(ParameterSchemaId, SortedByNameAndUniqueNames) {
  std::vector<ParamSpec> a = {{"b", {int64_t{4}, std::string("vocab_size")}, "float16"},
                              {"a", {int64_t{2}}, "uint32"}};
  std::vector<ParamSpec> b = {a[1], a[0]};
  auto ia = ComputeParameterSchemaId(a), ib = ComputeParameterSchemaId(b);
  ASSERT_TRUE(ia.ok() && ib.ok());
  EXPECT_EQ(*ia, *ib);
  EXPECT_EQ(*ia, *Sha256Id(R"([{"dtype":"uint32","name":"a","shape":[2]},{"dtype":"float16","name":"b","shape":[4,"vocab_size"]}])"));
  a.push_back(a[0]);
  auto dup = ComputeParameterSchemaId(a);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().message.find("duplicate parameter name \"b\""), std::string::npos);
}

TEST(ParameterSchemaId, ParsesSpecLists) {
  auto j = ParseJson(R"([{"name": "w", "shape": [2, "n"], "dtype": "float32"}, {"name": "v", "shape": [-1], "dtype": "int8"}])");
  ASSERT_TRUE(j.ok());
  auto r = ParseParamSpecs(*j);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r.errors(), "/1/shape/0", "integer >= 0")) << FormatErrors(r.errors());
}

}  // namespace
}  // namespace mlc
