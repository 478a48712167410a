// The contract subcommands as a user runs them: validate, bind, id; --json output and exit codes.
#include <gtest/gtest.h>

#include "mlc_manifest/contract.h"
#include "support/seed_docs.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::RunCli;
using test::TempDir;

struct Files {
  TempDir dir;
  std::string pkg, prog, meta;
};

void WriteSeed(Files& f) {
  test::SeedDocs s = test::LoadSeedDocs();
  f.pkg = f.dir.Write("pkg/mlc-model-manifest.json", s.gemma_package.dump(2));
  f.prog = f.dir.Write("program.json", s.gemma_program.dump(2));
  f.meta = f.dir.Write("metadata.json", Json{{"artifact", s.gemma_program}, {"model_type", "gemma4"}}.dump());
}

Json JsonOut(const test::CliResult& r) {
  auto j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << "stdout is not one JSON object: " << r.out << r.err;
  return j.ok() ? *j : Json();
}

TEST(CliValidate, ValidDocumentsAndIds) {
  Files f;
  WriteSeed(f);
  auto r = RunCli({"validate", f.pkg, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  Json j = JsonOut(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["schema"], "mlc.model-package");
  EXPECT_EQ(j["interface_id"], "sha256:6453d39d6c1a05b41e3d10ac1547892e2fde2ae228c6705b122ffde5e4c9c490");
  EXPECT_TRUE(IsSha256Id(j["parameter_schema_id"].get<std::string>()));
  auto r2 = RunCli({"validate", f.prog, f.meta, "--json"});
  EXPECT_EQ(r2.exit_code, 0) << r2.out;
  Json j2 = JsonOut(r2);
  EXPECT_EQ(j2["files"].size(), 2u);
  EXPECT_EQ(j2["files"][1]["schema"], "mlc.compiled-program");
  auto human = RunCli({"validate", f.pkg});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("valid mlc.model-package"), std::string::npos) << human.out;
}

TEST(CliValidate, InvalidDocumentExitsOneWithPointer) {
  Files f;
  WriteSeed(f);
  std::string text = test::ReadText(f.pkg);
  std::string bad = f.dir.Write("bad.json", text.replace(text.find("\"channels\": 1"), 13, "\"channels\": 2"));
  auto r = RunCli({"validate", bad, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  Json j = JsonOut(r);
  EXPECT_EQ(j["ok"], false);
  ASSERT_FALSE(j["errors"].empty());
  EXPECT_EQ(j["errors"][0]["path"], "/tasks/chat.completions/inputs/audio/processor/channels");
  auto human = RunCli({"validate", bad});
  EXPECT_EQ(human.exit_code, 1);
  EXPECT_NE(human.out.find("/tasks/chat.completions/inputs/audio/processor/channels: expected 1"),
            std::string::npos) << human.out;
}

TEST(CliValidate, ExitCodesForJunkMissingAndUsage) {
  TempDir d;
  EXPECT_EQ(RunCli({"validate", d.File("missing.json")}).exit_code, 3);
  EXPECT_EQ(RunCli({"validate", d.Write("junk.json", std::string("\x89PNG\r\n\x1a\n\0\0", 10))}).exit_code, 1);
  EXPECT_EQ(RunCli({"validate", d.Write("trunc.json", "{\"schema\": \"mlc.model-pa")}).exit_code, 1);
  EXPECT_EQ(RunCli({"validate", d.Write("deep.json", std::string(100000, '['))}).exit_code, 1);
  EXPECT_EQ(RunCli({"validate", d.Write("other.json", "{\"schema\": \"x\"}")}).exit_code, 1);
  EXPECT_EQ(RunCli({"validate"}).exit_code, 2);
  EXPECT_EQ(RunCli({"frobnicate"}).exit_code, 2);
  EXPECT_EQ(RunCli({"validate", "--bogus", "x"}).exit_code, 2);
  auto dup = RunCli({"validate", d.Write("dup.json", R"({"schema": "mlc.model-package", "schema": "mlc.model-package"})"), "--json"});
  EXPECT_EQ(dup.exit_code, 1);
  EXPECT_EQ(JsonOut(dup)["errors"][0]["path"], "/schema");
  auto missing = RunCli({"validate", d.File("missing.json"), "--json"});
  EXPECT_EQ(JsonOut(missing)["ok"], false);
}

TEST(CliBind, PrintsTheResolvedContract) {
  Files f;
  WriteSeed(f);
  auto r = RunCli({"bind", f.dir.File("pkg"), f.meta, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  Json j = JsonOut(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["contract"]["pair"], "tokens");
  EXPECT_EQ(j["contract"]["functions"]["prefill_tokens"], "prefill_tokens");
  EXPECT_EQ(j["contract"]["audio"]["function"], "audio_embed");
  auto human = RunCli({"bind", f.pkg, f.prog});
  EXPECT_EQ(human.exit_code, 0);
  EXPECT_NE(human.out.find("audio_embed"), std::string::npos);
  auto missing_task = RunCli({"bind", f.pkg, f.prog, "--task", "embeddings", "--json"});
  EXPECT_EQ(missing_task.exit_code, 1);
  EXPECT_EQ(JsonOut(missing_task)["errors"][0]["path"], "/tasks/embeddings");
}

TEST(CliBind, MismatchedIdsFail) {
  Files f;
  WriteSeed(f);
  test::SeedDocs s = test::LoadSeedDocs();
  s.gemma_program["parameter_schema_id"] = test::FakeId("different weights");
  std::string other = f.dir.Write("other.json", s.gemma_program.dump());
  auto r = RunCli({"bind", f.pkg, other, "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(JsonOut(r)["errors"][0]["path"], "/parameter_schema_id");
}

TEST(CliId, TasksAndParams) {
  Files f;
  WriteSeed(f);
  auto r = RunCli({"id", "tasks", f.pkg});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "sha256:6453d39d6c1a05b41e3d10ac1547892e2fde2ae228c6705b122ffde5e4c9c490\n");
  test::SeedDocs s = test::LoadSeedDocs();
  std::string tasks = f.dir.Write("tasks.json", s.gemma_package["tasks"].dump());
  EXPECT_EQ(RunCli({"id", "tasks", tasks}).out, r.out);
  auto params = RunCli({"id", "params", test::SharedPath("reference/gemma-4-E2B-it/params-q4f16_1.json"), "--json"});
  EXPECT_EQ(params.exit_code, 0) << params.err;
  Json j = JsonOut(params);
  EXPECT_EQ(j["parameters"], 1682);
  auto cache = RunCli({"id", "params", test::SharedPath("testdata/real/med-chatbot-qwen2/tensor-cache.json")});
  EXPECT_EQ(cache.exit_code, 0) << cache.err;
  EXPECT_EQ(cache.out.substr(0, 7), "sha256:");
  EXPECT_EQ(RunCli({"id", "colors", tasks}).exit_code, 2);
  EXPECT_EQ(RunCli({"id", "params", tasks}).exit_code, 1);
}

}  // namespace
}  // namespace mlc
