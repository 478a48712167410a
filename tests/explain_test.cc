// Issue 27, the gate explains every mismatch: parameter lists compared (renamed tensors, another
// quantization, another size), task diffs behind an interface_id, earlier drafts recognised and
// upgraded, legacy packages advised, partial downloads listed; through the library and the CLI.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "mlc_manifest/explain.h"
#include "mlc_manifest/presets.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::RunCli;
using test::TempDir;

constexpr const char* kExample = "examples/gemma-4-E2B-it-q4f16_1";
constexpr const char* kGemmaParams = "reference/gemma-4-E2B-it/params-q4f16_1.json";

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

// A copy of one verdict of a check report (null when absent).
Json CheckOf(const test::CliResult& r, const std::string& name) {
  Json report = Out(r);
  const Json* c = Check(report, name);
  return c ? *c : Json();
}

ParamSpec P(std::string name, std::vector<std::variant<int64_t, std::string>> shape, std::string dtype) {
  return ParamSpec{std::move(name), std::move(shape), std::move(dtype)};
}

// A copy of the shipped Gemma 4 example (documents only, no shards).
std::string CopyExample(const TempDir& d) {
  std::string dir = d.File("gemma");
  std::filesystem::copy(test::SourcePath(kExample), dir, std::filesystem::copy_options::recursive);
  return dir;
}

void WriteJson(const std::string& path, const Json& j) { std::ofstream(path) << j.dump(2); }

// ---- the library ----

TEST(DiffParams, NamesRenamesDtypesShapesAndOneSided) {
  std::vector<ParamSpec> a = {P("w.q_weight", {64, 4}, "uint32"), P("w.q_scale", {64, 1}, "float16"),
                              P("norm.weight", {32}, "float32"), P("old.name", {8, 8}, "float16"),
                              P("extra", {3}, "float32")};
  std::vector<ParamSpec> b = {P("w.q_weight", {64, 4}, "uint32"), P("w.q_scale", {64, 1}, "float32"),
                              P("norm.weight", {"hidden_size"}, "float32"), P("new.name", {8, 8}, "float16")};
  ParamDiff d = DiffParams(a, b, nullptr, "A", "B");
  EXPECT_FALSE(d.empty());
  ASSERT_EQ(d.renamed.size(), 1u);
  EXPECT_EQ(d.renamed[0].a.name, "old.name");
  EXPECT_EQ(d.renamed[0].b.name, "new.name");
  ASSERT_EQ(d.only_a.size(), 1u);
  EXPECT_EQ(d.only_a[0].name, "extra");
  EXPECT_TRUE(d.only_b.empty());
  // An unresolved symbolic dimension matches any integer; the dtype change is named.
  ASSERT_EQ(d.changed.size(), 1u);
  EXPECT_EQ(d.changed[0].a.name, "w.q_scale");
  EXPECT_TRUE(d.changed[0].dtype_differs);
  EXPECT_FALSE(d.changed[0].shape_differs);
  std::string causes;
  for (const std::string& c : d.causes) causes += c + "\n";
  EXPECT_NE(causes.find("another quantization"), std::string::npos) << causes;
  EXPECT_NE(causes.find("q4f16_1 and q4f32_1"), std::string::npos) << causes;
  EXPECT_NE(causes.find("renamed tensors"), std::string::npos) << causes;
  OrderedJson j = d.ToJson();
  EXPECT_EQ(j["renamed"][0]["a"], "old.name");
  EXPECT_EQ(j["only_in_a"][0]["name"], "extra");
  EXPECT_EQ(j["changed_count"], 1);

  // Resolved from the config, the symbolic dimension differs: another model size.
  Json cfg = {{"model_type", "llama"}, {"quantization", "q4f16_1"}, {"model_config", {{"hidden_size", 64}}}};
  Result<ChatConfig> config = ParseChatConfig(cfg);
  ASSERT_TRUE(config.ok());
  ParamDiff sized = DiffParams(a, b, &*config, "A", "B");
  ASSERT_EQ(sized.changed.size(), 2u);
  bool size_cause = false;
  for (const std::string& c : sized.causes) size_cause |= c.find("another model size") != std::string::npos;
  EXPECT_TRUE(size_cause) << sized.Summary();
  EXPECT_TRUE(DiffParams(a, a, nullptr, "A", "A").empty());
}

TEST(DiffParams, FirstTwentyThenACount) {
  std::vector<ParamSpec> a, b;
  for (int i = 0; i < 25; ++i) a.push_back(P("p" + std::to_string(i), {i + 1}, "float16"));
  ParamDiff d = DiffParams(a, b, nullptr, "A", "B");
  EXPECT_EQ(d.only_a.size(), 25u);
  OrderedJson j = d.ToJson();
  EXPECT_EQ(j["only_in_a"].size(), 20u);
  EXPECT_EQ(j["only_in_a_count"], 25);
  std::vector<std::string> lines = d.Lines();
  bool more = false;
  for (const std::string& l : lines) more |= l == "... and 5 more only in A";
  EXPECT_TRUE(more);
}

// The pairing by scanning, as DiffParams first did it (O(n*m)): each parameter of a (sorted by
// name) takes the first untaken one of b (sorted by name) of its dtype and shape, an unresolved
// dimension matching any resolved one.
std::vector<std::pair<std::string, std::string>> ScannedRenames(std::vector<ParamSpec> a, std::vector<ParamSpec> b,
                                                                const ChatConfig* config) {
  auto by_name = [](const ParamSpec& x, const ParamSpec& y) { return x.name < y.name; };
  std::sort(a.begin(), a.end(), by_name);
  std::sort(b.begin(), b.end(), by_name);
  auto resolve = [config](const std::variant<int64_t, std::string>& d) -> std::optional<int64_t> {
    if (std::holds_alternative<int64_t>(d)) return std::get<int64_t>(d);
    return config ? config->Dimension(std::get<std::string>(d)) : std::nullopt;
  };
  auto same = [&](const ParamSpec& x, const ParamSpec& y) {
    if (x.dtype != y.dtype || x.shape.size() != y.shape.size()) return false;
    for (size_t i = 0; i < x.shape.size(); ++i) {
      auto u = resolve(x.shape[i]), v = resolve(y.shape[i]);
      if (u && v && *u != *v) return false;
      if (!u && !v && std::get<std::string>(x.shape[i]) != std::get<std::string>(y.shape[i])) return false;
    }
    return true;
  };
  std::vector<bool> taken(b.size(), false);
  std::vector<std::pair<std::string, std::string>> out;
  for (const ParamSpec& p : a) {
    for (size_t j = 0; j < b.size(); ++j) {
      if (!taken[j] && same(p, b[j])) {
        taken[j] = true;
        out.emplace_back(p.name, b[j].name);
        break;
      }
    }
  }
  return out;
}

// The pairing by groups gives the scan's pairs on random lists with resolved, resolvable and
// unresolved dimensions (names on one side only, so every parameter is a rename candidate).
TEST(DiffParams, RenamePairingEqualsTheScan) {
  Json cfg = {{"model_type", "llama"}, {"quantization", "q4f16_1"}, {"model_config", {{"hidden", 4}, {"vocab", 6}}}};
  Result<ChatConfig> config = ParseChatConfig(cfg);
  ASSERT_TRUE(config.ok());
  std::mt19937 rng(7);
  const std::vector<std::variant<int64_t, std::string>> dims = {int64_t{4}, int64_t{6}, int64_t{8}, "hidden",
                                                                "vocab", "other", "more"};
  auto random_list = [&](const std::string& prefix, size_t n) {
    std::vector<ParamSpec> out;
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::variant<int64_t, std::string>> shape;
      for (size_t r = 0, rank = 1 + rng() % 3; r < rank; ++r) shape.push_back(dims[rng() % dims.size()]);
      out.push_back(P(prefix + std::to_string(rng() % 1000) + "." + std::to_string(i), shape,
                      rng() % 4 ? "float16" : "float32"));
    }
    return out;
  };
  for (int round = 0; round < 200; ++round) {
    std::vector<ParamSpec> a = random_list("a", 1 + rng() % 30), b = random_list("b", 1 + rng() % 30);
    for (const ChatConfig* c : std::vector<const ChatConfig*>{nullptr, &*config}) {
      ParamDiff d = DiffParams(a, b, c, "A", "B");
      std::vector<std::pair<std::string, std::string>> got;
      for (const ParamRename& r : d.renamed) got.emplace_back(r.a.name, r.b.name);
      ASSERT_EQ(got, ScannedRenames(a, b, c)) << "round " << round;
      EXPECT_EQ(d.only_a.size() + d.renamed.size(), a.size());
      EXPECT_EQ(d.only_b.size() + d.renamed.size(), b.size());
    }
  }
}

// 40k renamed parameters (every name changed, a few shapes per dtype) are paired without a scan
// per parameter: the scan took 20 s here.
TEST(DiffParams, FortyThousandRenames) {
  std::vector<ParamSpec> a, b;
  for (int i = 0; i < 40000; ++i) {
    const int64_t rows = 64 + (i % 7) * 32;
    a.push_back(P("model.layers." + std::to_string(i) + ".weight", {rows, 128}, i % 3 ? "float16" : "uint32"));
    b.push_back(P("transformer.h." + std::to_string(i) + ".w", {rows, 128}, i % 3 ? "float16" : "uint32"));
  }
  ParamDiff d = DiffParams(a, b, nullptr, "A", "B");
  EXPECT_EQ(d.renamed.size(), 40000u);
  EXPECT_TRUE(d.only_a.empty());
  EXPECT_TRUE(d.only_b.empty());
  for (const ParamRename& r : d.renamed) {
    ASSERT_EQ(r.a.dtype, r.b.dtype);
    ASSERT_EQ(r.a.shape, r.b.shape);
  }
}

TEST(JsonDiff, PathsOfTheFieldsThatDiffer) {
  OrderedJson a = {{"x", {{"y", 1}, {"z", {1, 2}}}}, {"only_a", true}};
  OrderedJson b = {{"x", {{"y", 2}, {"z", {1, 2}}}}, {"only/b", false}};
  OrderedJson d = JsonDiff(a, b);
  ASSERT_EQ(d.size(), 3u) << d.dump();
  EXPECT_EQ(d[0]["path"], "/only~1b");
  EXPECT_FALSE(d[0].contains("a"));
  EXPECT_EQ(d[1]["path"], "/only_a");
  EXPECT_FALSE(d[1].contains("b"));
  EXPECT_EQ(d[2]["path"], "/x/y");
  EXPECT_EQ(d[2]["a"], 1);
  EXPECT_EQ(d[2]["b"], 2);
}

TEST(KnownTasks, PresetsAreFoundByTheirId) {
  for (const std::string& name : PresetNames()) {
    Result<Tasks> t = PresetTasks(name);
    ASSERT_TRUE(t.ok());
    std::optional<KnownTasks> k = FindKnownTasks(*ComputeInterfaceId(*t));
    ASSERT_TRUE(k.has_value()) << name;
    EXPECT_EQ(k->name, "preset " + name);
  }
  EXPECT_FALSE(FindKnownTasks("sha256:" + std::string(64, '0')).has_value());
}

TEST(EarlierDraft, RecognisedAndUpgraded) {
  Json pkg = *ReadJsonFile(test::SourcePath(kExample) + "/mlc-model-manifest.json");
  EXPECT_FALSE(DetectEarlierDraft(pkg).has_value());
  Json draft = pkg;
  draft["weights"]["manifest"] = "ndarray-cache.json";
  std::optional<EarlierDraft> d = DetectEarlierDraft(draft);
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->rewritable);
  EXPECT_EQ(d->changes[0].path, "/weights/manifest");
  Result<Json> up = UpgradeEarlierDraft(draft);
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(*up, pkg);
  EXPECT_FALSE(UpgradeEarlierDraft(pkg).ok());
  // A program declaring the single prefill_prompt role (also inside a _metadata object).
  Json prog = *ReadJsonFile(test::SourcePath(kExample) + "/compiled-program.json");
  Json& ex = prog["programs"]["generation"]["exports"];
  ex.erase("prefill_tokens");
  ex.erase("decode_tokens");
  ex["prefill_prompt"] = "prefill";
  Json meta = {{"artifact", prog}};
  std::optional<EarlierDraft> pd = DetectEarlierDraft(meta);
  ASSERT_TRUE(pd.has_value());
  EXPECT_EQ(pd->document, "mlc.compiled-program");
  EXPECT_FALSE(pd->rewritable);
  EXPECT_EQ(pd->changes[0].path, "/artifact/programs/generation/exports/prefill_prompt");
  EXPECT_FALSE(DetectEarlierDraft(Json::array()).has_value());
}

// ---- check and bind ----

// The issue's own case: one tensor renamed in the example's tensor-cache.json no longer passes
// with --params, and the failure names the tensor (both names) and the cause.
TEST(CheckExplains, RenamedTensorIsNamedAndNeverPasses) {
  TempDir d;
  std::string dir = CopyExample(d);
  std::string params = test::SharedPath(kGemmaParams);
  auto before = RunCli({"check", dir, "--params", params, "--json"});
  EXPECT_EQ(before.exit_code, 0) << before.out;
  EXPECT_EQ(CheckOf(before, "parameter_schema_id")["verdict"], "pass");
  Json cache = *ReadJsonFile(dir + "/tensor-cache.json");
  std::string old_name = cache["records"][0]["records"][0]["name"];
  cache["records"][0]["records"][0]["name"] = old_name + "_renamed";
  WriteJson(dir + "/tensor-cache.json", cache);
  auto r = RunCli({"check", dir, "--params", params, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  Json j = Out(r);
  const Json* id = Check(j, "parameter_schema_id");
  ASSERT_NE(id, nullptr) << r.out;
  EXPECT_EQ((*id)["verdict"], "fail");
  const Json& ex = (*id)["details"]["explain"];
  EXPECT_EQ(ex["against"], "the given parameter list");
  EXPECT_EQ(ex["against_has_the_id"], true);
  ASSERT_EQ(ex["diff"]["renamed_count"], 1) << ex.dump();
  EXPECT_EQ(ex["diff"]["renamed"][0]["a"], old_name + "_renamed");
  EXPECT_EQ(ex["diff"]["renamed"][0]["b"], old_name);
  EXPECT_NE(ex["diff"]["causes"].dump().find("another converter version"), std::string::npos);
  auto human = RunCli({"check", dir, "--params", params});
  EXPECT_NE(human.out.find("renamed: " + old_name + "_renamed (tensor-cache.json) is " + old_name),
            std::string::npos) << human.out;
  // Without a parameter list the built-in CPU program for gemma4 q4f16_1 is the evidence: it names
  // the same tensor.
  auto alone = RunCli({"check", dir, "--json"});
  EXPECT_EQ(alone.exit_code, 1);
  const Json id2_verdict = CheckOf(alone, "parameter_schema_id");
  ASSERT_FALSE(id2_verdict.is_null());
  const Json& ex2 = id2_verdict["details"]["explain"];
  ASSERT_EQ(ex2["diff"]["renamed_count"], 1) << ex2.dump();
  EXPECT_EQ(ex2["diff"]["renamed"][0]["b"], old_name);
  auto human_alone = RunCli({"check", dir});
  EXPECT_NE(human_alone.out.find("(the built-in CPU program for gemma4 q4f16_1)"), std::string::npos) << human_alone.out;
}

// A package converted with another quantization: its weights against the list the manifest was
// written for name the dtypes and say q4f16_1 vs q4f32_1.
TEST(CheckExplains, AnotherQuantization) {
  TempDir d;
  std::string p16 = d.File("q16"), p32 = d.File("q32");
  ASSERT_EQ(RunCli({"reference-model", p16, "--family", "llama", "--quantization", "q4f16_1"}).exit_code, 0);
  ASSERT_EQ(RunCli({"reference-model", p32, "--family", "llama", "--quantization", "q4f32_1"}).exit_code, 0);
  // The q4f32_1 weights with the manifest written for q4f16_1.
  std::filesystem::copy_file(p16 + "/mlc-model-manifest.json", p32 + "/mlc-model-manifest.json",
                             std::filesystem::copy_options::overwrite_existing);
  auto r = RunCli({"check", p32, "--params", p16 + "/tensor-cache.json", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const Json id_verdict = CheckOf(r, "parameter_schema_id");
  const Json* id = id_verdict.is_null() ? nullptr : &id_verdict;
  ASSERT_NE(id, nullptr) << r.out;
  const Json& diff = (*id)["details"]["explain"]["diff"];
  EXPECT_GT(diff["changed_count"].get<int>(), 0) << diff.dump();
  EXPECT_EQ(diff["changed"][0]["dtype_differs"], true);
  EXPECT_EQ(diff["changed"][0]["a"]["dtype"], "float32");
  EXPECT_EQ(diff["changed"][0]["b"]["dtype"], "float16");
  EXPECT_NE(diff["causes"][0].get<std::string>().find("q4f16_1 and q4f32_1"), std::string::npos) << diff.dump();

  // Binding the q4f32_1 package to the q4f16_1 CPU program: the program's _metadata params are
  // the list compared with (check and bind --explain / --json).
  ASSERT_EQ(RunCli({"reference-model", d.File("q32b"), "--family", "llama", "--quantization", "q4f32_1"}).exit_code, 0);
  std::string prog = d.File("p16.json");
  ASSERT_EQ(RunCli({"emit", "program", p16, "--target", "cpu", "--metadata", "-o", prog}).exit_code, 0);
  Json meta = *ReadJsonFile(prog);
  meta["params"] = *ReadJsonFile(p16 + "/tensor-cache.json");
  Json list = Json::array();
  for (const auto& shard : meta["params"]["records"]) {
    for (const auto& rec : shard["records"]) list.push_back({{"name", rec["name"]}, {"shape", rec["shape"]}, {"dtype", rec["dtype"]}});
  }
  meta["params"] = list;
  WriteJson(prog, meta);
  auto c = RunCli({"check", d.File("q32b"), "--program", prog, "--json"});
  EXPECT_EQ(c.exit_code, 1) << c.out;
  const Json binding_verdict = CheckOf(c, "binding");
  const Json* binding = binding_verdict.is_null() ? nullptr : &binding_verdict;
  ASSERT_NE(binding, nullptr) << c.out;
  const Json& bex = (*binding)["details"]["explain"]["parameter_schema_id"];
  EXPECT_EQ(bex["against"], "the program's params") << bex.dump();
  EXPECT_NE(bex["diff"]["causes"][0].get<std::string>().find("q4f16_1 and q4f32_1"), std::string::npos);
  auto b = RunCli({"bind", d.File("q32b"), prog, "--json"});
  EXPECT_EQ(b.exit_code, 1) << b.out;
  Json bj = Out(b);
  EXPECT_EQ(bj["explain"]["parameter_schema_id"]["against"], "the program's params") << b.out;
  auto bh = RunCli({"bind", d.File("q32b"), prog, "--explain"});
  EXPECT_NE(bh.err.find("parameter_schema_id: parameters differ"), std::string::npos) << bh.err;
  EXPECT_NE(bh.err.find("another quantization"), std::string::npos) << bh.err;
  auto quiet = RunCli({"bind", d.File("q32b"), prog});
  EXPECT_EQ(quiet.err.find("another quantization"), std::string::npos) << quiet.err;
}

// interface_id: the task fields that differ, against the preset with the program's id.
TEST(CheckExplains, InterfaceIdNamesTheTaskFields) {
  TempDir d;
  std::string dir = CopyExample(d);
  ASSERT_EQ(RunCli({"emit", "package", dir, "--preset", "llava-1.5", "--force"}).exit_code, 0);
  std::string prog = d.File("gemma3.json");
  ASSERT_EQ(RunCli({"emit", "program", dir, "--preset", "gemma-3", "-o", prog}).exit_code, 0);
  auto r = RunCli({"check", dir, "--program", prog, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const Json binding_verdict = CheckOf(r, "binding");
  const Json* binding = binding_verdict.is_null() ? nullptr : &binding_verdict;
  ASSERT_NE(binding, nullptr) << r.out;
  const Json& ex = (*binding)["details"]["explain"]["interface_id"];
  EXPECT_EQ(ex["against"], "preset gemma-3") << ex.dump();
  bool mode = false;
  for (const auto& f : ex["diff"]) {
    if (f["path"] == "/chat.completions/inputs/image/processor/resize/mode") {
      mode = true;
      EXPECT_EQ(f["a"], "center_crop");
      EXPECT_EQ(f["b"], "stretch");
    }
  }
  EXPECT_TRUE(mode) << ex.dump();
  // A manifest whose tasks were edited after its id was computed: the edited field is named.
  Json m = *ReadJsonFile(dir + "/mlc-model-manifest.json");
  m["tasks"]["chat.completions"]["inputs"]["image"]["processor"]["num_embeddings"] = 577;
  WriteJson(dir + "/mlc-model-manifest.json", m);
  auto e = RunCli({"check", dir, "--json"});
  EXPECT_EQ(e.exit_code, 1);
  const Json iid_verdict = CheckOf(e, "interface_id");
  const Json* iid = iid_verdict.is_null() ? nullptr : &iid_verdict;
  ASSERT_NE(iid, nullptr) << e.out;
  const Json& iex = (*iid)["details"]["explain"];
  EXPECT_EQ(iex["against"], "preset llava-1.5");
  ASSERT_EQ(iex["diff"].size(), 1u) << iex.dump();
  EXPECT_EQ(iex["diff"][0]["path"], "/chat.completions/inputs/image/processor/num_embeddings");
  auto human = RunCli({"check", dir});
  EXPECT_NE(human.out.find("/chat.completions/inputs/image/processor/num_embeddings: 577 here, 576 in preset llava-1.5"),
            std::string::npos) << human.out;
}

// Earlier drafts: named, with the command that rewrites the manifest; the rewrite gives back the
// current text; a draft program is never bound.
TEST(CheckExplains, EarlierDraftsAndUpgrade) {
  TempDir d;
  std::string dir = CopyExample(d);
  std::string current = test::ReadText(dir + "/mlc-model-manifest.json");
  Json m = *ParseJson(current);
  m["weights"]["manifest"] = "ndarray-cache.json";
  WriteJson(dir + "/mlc-model-manifest.json", m);
  auto r = RunCli({"check", dir, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  const Json man_verdict = CheckOf(r, "manifest");
  const Json* man = man_verdict.is_null() ? nullptr : &man_verdict;
  ASSERT_NE(man, nullptr) << r.out;
  EXPECT_EQ((*man)["verdict"], "fail");
  EXPECT_NE((*man)["message"].get<std::string>().find("an earlier draft"), std::string::npos);
  EXPECT_EQ((*man)["details"]["draft"]["command"], "mlc-manifest emit package " + dir + " --upgrade");
  EXPECT_EQ((*man)["details"]["draft"]["changes"][0]["path"], "/weights/manifest");
  auto bind = RunCli({"bind", dir, dir + "/compiled-program.json", "--json"});
  EXPECT_EQ(bind.exit_code, 1);
  EXPECT_EQ(Out(bind)["explain"]["draft"]["rewritable"], true) << bind.out;
  // A package whose tensor cache has only the legacy name: the upgraded manifest would point at
  // nothing, so --upgrade refuses, naming the missing file, and leaves the manifest alone.
  const std::string draft_text = test::ReadText(dir + "/mlc-model-manifest.json");
  std::filesystem::rename(dir + "/tensor-cache.json", dir + "/ndarray-cache.json");
  auto missing = RunCli({"emit", "package", dir, "--upgrade", "--json"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  EXPECT_EQ(Out(missing)["errors"][0]["document"], dir + "/tensor-cache.json") << missing.out;
  EXPECT_EQ(test::ReadText(dir + "/mlc-model-manifest.json"), draft_text);
  std::filesystem::rename(dir + "/ndarray-cache.json", dir + "/tensor-cache.json");
  // The rewrite in place keeps the manifest's permissions.
  ASSERT_EQ(::chmod((dir + "/mlc-model-manifest.json").c_str(), 0600), 0);
  auto up = RunCli({"emit", "package", dir, "--upgrade", "--json"});
  EXPECT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_EQ(Out(up)["upgraded"], true);
  EXPECT_EQ(test::ReadText(dir + "/mlc-model-manifest.json"), current);
  struct stat st {};
  ASSERT_EQ(::stat((dir + "/mlc-model-manifest.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  auto again = RunCli({"emit", "package", dir, "--upgrade", "--json"});
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_EQ(Out(again)["upgraded"], false);
  EXPECT_EQ(RunCli({"check", dir, "--program", dir + "/compiled-program.json"}).exit_code, 0);

  Json prog = *ReadJsonFile(dir + "/compiled-program.json");
  Json& ex = prog["programs"]["generation"]["exports"];
  ex.erase("prefill_tokens");
  ex["prefill_prompt"] = "prefill";
  WriteJson(d.File("draft-program.json"), prog);
  auto pc = RunCli({"check", dir, "--program", d.File("draft-program.json"), "--json"});
  EXPECT_EQ(pc.exit_code, 1);
  const Json p_verdict = CheckOf(pc, "program");
  const Json* p = p_verdict.is_null() ? nullptr : &p_verdict;
  ASSERT_NE(p, nullptr) << pc.out;
  EXPECT_EQ((*p)["verdict"], "fail");
  EXPECT_NE((*p)["message"].get<std::string>().find("prefill_prompt"), std::string::npos);
  EXPECT_TRUE(CheckOf(pc, "binding").is_null());
  auto pb = RunCli({"bind", dir, d.File("draft-program.json")});
  EXPECT_EQ(pb.exit_code, 1);
  EXPECT_NE(pb.err.find("an earlier draft of mlc.compiled-program"), std::string::npos) << pb.err;
}

// Legacy packages: the preset emit would use and whether a built-in CPU program serves them.
TEST(CheckExplains, LegacyPackageAdvice) {
  TempDir d;
  std::string dir = d.File("llama");
  ASSERT_EQ(RunCli({"reference-model", dir, "--family", "llama", "--no-manifest"}).exit_code, 0);
  auto r = RunCli({"check", dir, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const Json man_verdict = CheckOf(r, "manifest");
  const Json* man = man_verdict.is_null() ? nullptr : &man_verdict;
  ASSERT_NE(man, nullptr);
  EXPECT_EQ((*man)["verdict"], "skip");
  const Json& legacy = (*man)["details"]["explain"]["legacy"];
  EXPECT_EQ(legacy["model_type"], "llama");
  EXPECT_TRUE(legacy["preset"].is_null());
  EXPECT_EQ(legacy["builtin_program"]["exists"], true);
  EXPECT_EQ(legacy["builtin_program"]["matches_weights"], true);
  auto in = RunCli({"inspect", dir, "--json"});
  EXPECT_EQ(Out(in)["legacy"]["builtin_program"]["exists"], true) << in.out;
  auto human = RunCli({"inspect", dir});
  EXPECT_NE(human.out.find("the built-in CPU program for llama q4f16_1 exists"), std::string::npos) << human.out;

  // A Gemma 4 package without its manifest: the preset, and the built-in CPU program (whose
  // parameters are the example's).
  std::string g = CopyExample(d);
  std::filesystem::remove(g + "/mlc-model-manifest.json");
  auto gr = RunCli({"check", g, "--json"});
  const Json gl = CheckOf(gr, "manifest")["details"]["explain"]["legacy"];
  EXPECT_EQ(gl["preset"], "gemma-4-e2b-audio");
  EXPECT_EQ(gl["command"], "mlc-manifest emit package " + g + " --preset gemma-4-e2b-audio");
  EXPECT_EQ(gl["builtin_program"]["exists"], true);
  EXPECT_EQ(gl["builtin_program"]["matches_weights"], true);
  auto gh = RunCli({"check", g});
  EXPECT_NE(gh.out.find("--preset gemma-4-e2b-audio` would write"), std::string::npos) << gh.out;
}

// A partial download: exactly the files to fetch again, with their expected sizes.
TEST(CheckExplains, PartialDownloadListsFilesToFetch) {
  TempDir d;
  std::string dir = d.File("pkg");
  ASSERT_EQ(RunCli({"reference-model", dir, "--family", "llama"}).exit_code, 0);
  Json cache = *ReadJsonFile(dir + "/tensor-cache.json");
  ASSERT_GE(cache["records"].size(), 1u);
  std::string shard0 = cache["records"][0]["dataPath"];
  uint64_t size0 = cache["records"][0]["nbytes"];
  auto ok = RunCli({"check", dir, "--json"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_FALSE(CheckOf(ok, "shards")["details"].contains("explain"));

  // Short: to fetch again, with the expected size.
  std::string bytes = test::ReadText(dir + "/" + shard0);
  std::ofstream(dir + "/" + shard0, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  auto shorter = RunCli({"check", dir, "--json"});
  EXPECT_EQ(shorter.exit_code, 1);
  const Json refetch = CheckOf(shorter, "shards")["details"]["explain"]["refetch"];
  ASSERT_EQ(refetch.size(), 1u) << refetch.dump();
  EXPECT_EQ(refetch[0]["file"], shard0);
  EXPECT_EQ(refetch[0]["expected_size"], size0);
  EXPECT_NE(refetch[0]["reason"].get<std::string>().find("(short)"), std::string::npos);

  // Absent with a .part file beside it: a download in progress, a failure.
  std::filesystem::remove(dir + "/" + shard0);
  std::ofstream(dir + "/" + shard0 + ".part", std::ios::binary) << bytes.substr(0, 10);
  auto part = RunCli({"check", dir, "--json"});
  EXPECT_EQ(part.exit_code, 1) << part.out;
  const Json pr = CheckOf(part, "shards")["details"]["explain"]["refetch"];
  ASSERT_EQ(pr.size(), 1u) << pr.dump();
  EXPECT_EQ(pr[0]["beside"], shard0 + ".part");
  auto human = RunCli({"check", dir});
  EXPECT_NE(human.out.find("fetch again: " + shard0 + " (" + std::to_string(size0) + " bytes)"), std::string::npos)
      << human.out;
  std::filesystem::remove(dir + "/" + shard0 + ".part");
  std::ofstream(dir + "/" + shard0, std::ios::binary) << bytes;
  // A Git LFS pointer: named as such in the list.
  std::ofstream(dir + "/" + shard0, std::ios::binary)
      << "version https://git-lfs.github.com/spec/v1\noid sha256:" << std::string(64, 'a') << "\nsize "
      << size0 << "\n";
  auto lfs = RunCli({"check", dir, "--json"});
  const Json lr = CheckOf(lfs, "shards")["details"]["explain"]["refetch"];
  ASSERT_EQ(lr.size(), 1u);
  EXPECT_EQ(lr[0]["reason"], "a Git LFS pointer, not the data");
}

}  // namespace
}  // namespace mlc
