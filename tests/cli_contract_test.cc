// The contract subcommands as a user runs them: validate, bind, id; --json output and exit codes.
// Then the CLI contract of every subcommand: each usage error (unknown flag, missing argument,
// bad value) and I/O failure (missing file, a file that cannot be read, a folder for a file or a
// file for a folder) with --json prints exactly one JSON object {"errors": [{code, document,
// path, message}]} on stdout, nothing else, and exits 2 (usage) or 3 (I/O).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>

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
  EXPECT_EQ(j["parameter_count"], 1682);
  auto cache = RunCli({"id", "params", test::SharedPath("testdata/real/med-chatbot-qwen2/tensor-cache.json")});
  EXPECT_EQ(cache.exit_code, 0) << cache.err;
  EXPECT_EQ(cache.out.substr(0, 7), "sha256:");
  EXPECT_EQ(RunCli({"id", "colors", tasks}).exit_code, 2);
  EXPECT_EQ(RunCli({"id", "params", tasks}).exit_code, 1);
}

// ---- The CLI contract of every subcommand ----

// A reference package (manifest, program, tokenizer, chat config) and the odd files the failure
// cases point at, made once for the whole suite.
class CliContract : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    auto made = RunCli({"reference-model", Pkg(), "--audio", "--image", "--json"});
    ASSERT_EQ(made.exit_code, 0) << made.out << made.err;
    dir_->Write("a-file.json", "{}");
    ASSERT_EQ(::mkdir(Folder().c_str(), 0755), 0);
    ASSERT_EQ(::mkfifo(Fifo().c_str(), 0644), 0);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string Pkg() { return dir_->File("pkg"); }
  static std::string Program() { return dir_->File("pkg/compiled-program.json"); }
  static std::string Missing() { return dir_->File("no-such-file.json"); }
  static std::string MissingDir() { return dir_->File("no-such-folder"); }
  static std::string AFile() { return dir_->File("a-file.json"); }
  static std::string Folder() { return dir_->File("a-folder"); }
  // A FIFO: not a regular file, so it cannot be read as a document (root reads any file, so a
  // mode of 000 would prove nothing here).
  static std::string Fifo() { return dir_->File("a-fifo"); }
  static std::string Out(const std::string& name) { return dir_->File("out-" + name); }

  static TempDir* dir_;
};

TempDir* CliContract::dir_ = nullptr;

// The one JSON object of a failure: exactly one line on stdout, an object with a non-empty
// "errors" array of {code, document, path, message} strings, code as expected.
void ExpectFailureObject(const test::CliResult& r, int exit_code, const std::string& code,
                         const std::string& names = "") {
  SCOPED_TRACE("stdout: " + r.out + "\nstderr: " + r.err);
  EXPECT_EQ(r.exit_code, exit_code);
  ASSERT_FALSE(r.out.empty()) << "nothing on stdout";
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "more than one line on stdout";
  auto j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << "stdout is not one JSON object";
  ASSERT_TRUE(j->is_object());
  ASSERT_TRUE(j->contains("errors"));
  const Json& errors = (*j)["errors"];
  ASSERT_TRUE(errors.is_array());
  ASSERT_FALSE(errors.empty());
  bool named = names.empty();
  for (const Json& e : errors) {
    for (const char* key : {"code", "document", "path", "message"}) {
      ASSERT_TRUE(e.contains(key) && e[key].is_string()) << key << " missing in " << e.dump();
    }
    EXPECT_FALSE(e["message"].get<std::string>().empty());
    EXPECT_TRUE(e["path"].get<std::string>().empty() || e["path"].get<std::string>()[0] == '/' ||
                e["path"].get<std::string>().find(' ') != std::string::npos)
        << "path is neither a JSON Pointer nor a position: " << e["path"];
    named = named || e["document"].get<std::string>().find(names) != std::string::npos;
  }
  EXPECT_EQ(errors[0]["code"], code);
  EXPECT_TRUE(named) << "no error names " << names << " as its document";
}

struct FailureCase {
  std::string name;
  std::vector<std::string> args;  // without --json (added)
  int exit_code;
  std::string code;
  std::string names;  // a document some error must name ("" when none)
};

// Every subcommand, each of its usage errors and I/O failures.
std::vector<FailureCase> FailureCases() {
  using C = CliContract;
  const std::string pkg = C::Pkg(), prog = C::Program(), missing = C::Missing(), missing_dir = C::MissingDir();
  const std::string file = C::AFile(), folder = C::Folder(), fifo = C::Fifo();
  std::vector<FailureCase> cases = {
      // The command line itself.
      {"unknown_subcommand", {"valdate", "x"}, 2, "usage", ""},
      {"no_subcommand", {}, 2, "usage", ""},
      // validate
      {"validate_unknown_flag", {"validate", file, "--bogus"}, 2, "usage", ""},
      {"validate_missing_argument", {"validate"}, 2, "usage", ""},
      {"validate_missing_file", {"validate", missing}, 3, "io", missing},
      {"validate_folder", {"validate", folder}, 3, "io", folder},
      {"validate_fifo", {"validate", fifo}, 3, "io", fifo},
      // bind
      {"bind_unknown_flag", {"bind", pkg, prog, "--bogus"}, 2, "usage", ""},
      {"bind_missing_argument", {"bind", pkg}, 2, "usage", ""},
      {"bind_missing_program", {"bind", pkg, missing}, 3, "io", missing},
      {"bind_program_folder", {"bind", pkg, folder}, 3, "io", folder},
      {"bind_program_fifo", {"bind", pkg, fifo}, 3, "io", fifo},
      {"bind_missing_package", {"bind", missing_dir, prog}, 3, "io", missing_dir},
      // id
      {"id_unknown_flag", {"id", "tasks", pkg, "--bogus"}, 2, "usage", ""},
      {"id_missing_argument", {"id", "tasks"}, 2, "usage", ""},
      {"id_bad_value", {"id", "colours", pkg}, 2, "usage", ""},
      {"id_missing_file", {"id", "params", missing}, 3, "io", missing},
      {"id_fifo", {"id", "tasks", fifo}, 3, "io", fifo},
      {"id_folder_without_manifest", {"id", "tasks", folder}, 3, "io", folder},
      // emit
      {"emit_unknown_flag", {"emit", "package", pkg, "--preset", "llava-1.5", "--bogus"}, 2, "usage", ""},
      {"emit_missing_subcommand", {"emit"}, 2, "usage", ""},
      {"emit_package_missing_argument", {"emit", "package"}, 2, "usage", ""},
      {"emit_package_bad_value", {"emit", "package", pkg, "--preset", "no-such-preset"}, 2, "usage", ""},
      {"emit_package_missing_folder", {"emit", "package", missing_dir, "--preset", "llava-1.5"}, 3, "io", missing_dir},
      {"emit_package_file_for_folder", {"emit", "package", file, "--preset", "llava-1.5"}, 3, "io", file},
      {"emit_package_missing_tasks", {"emit", "package", pkg, "--tasks", missing, "-o", C::Out("m.json")}, 3, "io", missing},
      {"emit_program_bad_value", {"emit", "program", pkg, "--target", "gpu", "-o", C::Out("p.json")}, 2, "usage", ""},
      {"emit_program_missing_folder", {"emit", "program", missing_dir, "--preset", "llava-1.5", "-o", C::Out("p.json")}, 3, "io", missing_dir},
      {"emit_tensor_cache_missing_argument", {"emit", "tensor-cache", "-o", C::Out("t.json")}, 2, "usage", ""},
      {"emit_tensor_cache_missing_params", {"emit", "tensor-cache", "--params", missing, "-o", C::Out("t.json")}, 3, "io", missing},
      {"emit_tensor_cache_params_folder", {"emit", "tensor-cache", "--params", folder, "-o", C::Out("t.json")}, 3, "io", folder},
      // check
      {"check_unknown_flag", {"check", pkg, "--bogus"}, 2, "usage", ""},
      {"check_missing_argument", {"check"}, 2, "usage", ""},
      {"check_bad_value", {"check", pkg, "--memory", "8XB"}, 2, "usage", ""},
      {"check_bad_device", {"check", pkg, "--device", "no-such-gpu"}, 2, "usage", ""},
      {"check_missing_folder", {"check", missing_dir}, 3, "io", missing_dir},
      {"check_file_for_folder", {"check", file}, 3, "io", file},
      {"check_fifo_for_folder", {"check", fifo}, 3, "io", fifo},
      {"check_missing_program", {"check", pkg, "--program", missing}, 3, "io", missing},
      // inspect
      {"inspect_unknown_flag", {"inspect", pkg, "--bogus"}, 2, "usage", ""},
      {"inspect_missing_argument", {"inspect"}, 2, "usage", ""},
      {"inspect_missing_folder", {"inspect", missing_dir}, 3, "io", missing_dir},
      {"inspect_file_for_folder", {"inspect", file}, 3, "io", file},
      // audio
      {"audio_unknown_flag", {"audio", file, "-o", C::Out("a.npy"), "--rate", "16000", "--bogus"}, 2, "usage", ""},
      {"audio_missing_argument", {"audio", file, "--rate", "16000"}, 2, "usage", ""},
      {"audio_bad_value", {"audio", file, "-o", C::Out("a.npy"), "--rate", "fast"}, 2, "usage", ""},
      {"audio_missing_file", {"audio", missing, "-o", C::Out("a.npy"), "--rate", "16000"}, 3, "io", missing},
      {"audio_folder", {"audio", folder, "-o", C::Out("a.npy"), "--rate", "16000"}, 3, "io", folder},
      {"audio_fifo", {"audio", fifo, "-o", C::Out("a.npy"), "--rate", "16000"}, 3, "io", fifo},
      // image
      {"image_unknown_flag", {"image", file, "-o", C::Out("i.npy"), "--mode", "stretch", "--height", "4", "--width", "4", "--bogus"}, 2, "usage", ""},
      {"image_missing_argument", {"image", file, "--mode", "stretch", "--height", "4", "--width", "4"}, 2, "usage", ""},
      {"image_bad_value", {"image", file, "-o", C::Out("i.npy"), "--mode", "stretch", "--height", "tall", "--width", "4"}, 2, "usage", ""},
      {"image_missing_file", {"image", missing, "-o", C::Out("i.npy"), "--mode", "stretch", "--height", "4", "--width", "4"}, 3, "io", missing},
      {"image_folder", {"image", folder, "-o", C::Out("i.npy"), "--mode", "stretch", "--height", "4", "--width", "4"}, 3, "io", folder},
      {"image_fifo", {"image", fifo, "-o", C::Out("i.npy"), "--mode", "stretch", "--height", "4", "--width", "4"}, 3, "io", fifo},
      // tokenize
      {"tokenize_unknown_flag", {"tokenize", pkg, "--text", "x", "--bogus"}, 2, "usage", ""},
      {"tokenize_missing_argument", {"tokenize", "--text", "x"}, 2, "usage", ""},
      {"tokenize_missing_folder", {"tokenize", missing_dir, "--text", "x"}, 3, "io", missing_dir},
      {"tokenize_missing_file", {"tokenize", "--tokenizer", missing, "--text", "x"}, 3, "io", missing},
      {"tokenize_folder_for_file", {"tokenize", "--tokenizer", folder, "--text", "x"}, 3, "io", folder},
      // plan
      {"plan_unknown_flag", {"plan", pkg, "--program", prog, "--request", file, "--bogus"}, 2, "usage", ""},
      {"plan_missing_argument", {"plan", pkg, "--program", prog}, 2, "usage", ""},
      {"plan_bad_value", {"plan", pkg, "--program", prog, "--request", file, "--kv-length", "-3"}, 2, "usage", ""},
      {"plan_missing_request", {"plan", pkg, "--program", prog, "--request", missing}, 3, "io", missing},
      {"plan_request_folder", {"plan", pkg, "--program", prog, "--request", folder}, 3, "io", folder},
      {"plan_missing_program", {"plan", pkg, "--program", missing, "--request", file}, 3, "io", missing},
      {"plan_missing_package", {"plan", missing_dir, "--request", file}, 3, "io", missing_dir},
      // prompt
      {"prompt_unknown_flag", {"prompt", pkg, "--program", prog, "--messages", file, "--bogus"}, 2, "usage", ""},
      {"prompt_missing_argument", {"prompt", pkg, "--program", prog}, 2, "usage", ""},
      {"prompt_missing_messages", {"prompt", pkg, "--program", prog, "--messages", missing}, 3, "io", missing},
      {"prompt_messages_fifo", {"prompt", pkg, "--program", prog, "--messages", fifo}, 3, "io", fifo},
      {"prompt_missing_package", {"prompt", missing_dir, "--messages", file}, 3, "io", missing_dir},
      // run
      {"run_unknown_flag", {"run", pkg, "--request", file, "--bogus"}, 2, "usage", ""},
      {"run_missing_argument", {"run"}, 2, "usage", ""},
      {"run_bad_value", {"run", pkg, "--request", file, "--max-tokens", "many"}, 2, "usage", ""},
      {"run_neither_request_nor_messages", {"run", pkg}, 2, "usage", ""},
      {"run_missing_request", {"run", pkg, "--request", missing}, 3, "io", missing},
      {"run_request_folder", {"run", pkg, "--request", folder}, 3, "io", folder},
      {"run_missing_program", {"run", pkg, "--program", missing, "--request", file}, 3, "io", missing},
      {"run_missing_package", {"run", missing_dir, "--request", file}, 3, "io", missing_dir},
      // transcribe
      {"transcribe_unknown_flag", {"transcribe", pkg, file, "--bogus"}, 2, "usage", ""},
      {"transcribe_missing_argument", {"transcribe", pkg}, 2, "usage", ""},
      {"transcribe_bad_value", {"transcribe", pkg, file, "--format", "doc"}, 2, "usage", ""},
      {"transcribe_missing_package", {"transcribe", missing_dir, file}, 3, "io", missing_dir},
      // serve
      {"serve_unknown_flag", {"serve", pkg, "--bogus"}, 2, "usage", ""},
      {"serve_missing_argument", {"serve"}, 2, "usage", ""},
      {"serve_bad_value", {"serve", pkg, "--port", "http"}, 2, "usage", ""},
      {"serve_bad_size", {"serve", pkg, "--max-body-bytes", "lots"}, 2, "usage", ""},
      {"serve_missing_package", {"serve", missing_dir, "--port", "0"}, 3, "io", missing_dir},
      // reference-model
      {"reference_model_unknown_flag", {"reference-model", C::Out("rm"), "--bogus"}, 2, "usage", ""},
      {"reference_model_missing_argument", {"reference-model"}, 2, "usage", ""},
      {"reference_model_bad_value", {"reference-model", C::Out("rm"), "--pair", "triple"}, 2, "usage", ""},
      {"reference_model_file_for_folder", {"reference-model", file}, 3, "io", file},
      {"reference_model_under_a_file", {"reference-model", file + "/sub"}, 3, "io", file},
      // version
      {"version_unknown_flag", {"version", "--bogus"}, 2, "usage", ""},
  };
  return cases;
}

TEST_F(CliContract, EveryFailureIsOneJsonObjectWithItsExitCode) {
  std::set<std::string> covered;
  for (const FailureCase& c : FailureCases()) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> args = c.args;
    args.push_back("--json");
    ExpectFailureObject(RunCli(args), c.exit_code, c.code, c.names);
    if (!c.args.empty()) covered.insert(c.args[0]);
  }
  // Every subcommand the tool lists is covered.
  auto help = RunCli({"--help"});
  ASSERT_EQ(help.exit_code, 0);
  for (const char* sub : {"validate", "bind", "id", "emit", "check", "inspect", "audio", "image",
                          "tokenize", "plan", "prompt", "run", "serve", "reference-model", "version"}) {
    EXPECT_NE(help.out.find(std::string("  ") + sub), std::string::npos) << sub << " not in --help";
    EXPECT_TRUE(covered.count(sub)) << sub << " has no failure case";
  }
}

TEST_F(CliContract, WithoutJsonFailuresGoToStderrWithTheSameExitCode) {
  for (const FailureCase& c : FailureCases()) {
    SCOPED_TRACE(c.name);
    auto r = RunCli(c.args);
    EXPECT_EQ(r.exit_code, c.exit_code) << r.out << r.err;
    // `validate` and `check` print their report (with the errors) on stdout.
    const bool report = !c.args.empty() && (c.args[0] == "check" || c.args[0] == "validate") && r.err.empty();
    if (!report) {
      EXPECT_NE(r.err.find("error: "), std::string::npos) << r.err;
    }
    if (!c.names.empty()) {
      EXPECT_NE((r.err + r.out).find(c.names), std::string::npos) << r.out << r.err;
    }
  }
}

TEST_F(CliContract, DidYouMeanAndVersion) {
  auto typo = RunCli({"valdate", AFile(), "--json"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.out.find("did you mean \\\"validate\\\"?"), std::string::npos) << typo.out;
  auto far = RunCli({"frobnicate"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
  EXPECT_NE(far.err.find("unknown subcommand \"frobnicate\""), std::string::npos) << far.err;
  auto nested = RunCli({"emit", "pakage", "--json"});
  EXPECT_EQ(nested.exit_code, 2);
  EXPECT_NE(nested.out.find("unknown subcommand \\\"pakage\\\" of \\\"emit\\\"; did you mean \\\"package\\\"?"),
            std::string::npos)
      << nested.out;
  auto nested_far = RunCli({"emit", "frobnicate"});
  EXPECT_EQ(nested_far.exit_code, 2);
  EXPECT_NE(nested_far.err.find("(see emit --help for the subcommands)"), std::string::npos) << nested_far.err;
  auto version = RunCli({"--version"});
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out.rfind("mlc-manifest ", 0), 0u) << version.out;
  EXPECT_EQ(RunCli({"version"}).out, version.out.substr(0, version.out.find('\n')) +
                                           " (artifact schema_version 1)\n");
}

TEST_F(CliContract, DashReadsStandardInput) {
  const std::string program = test::ReadText(Program());
  auto validate = RunCli({"validate", "-", "--json"}, program);
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;
  EXPECT_EQ(JsonOut(validate)["schema"], "mlc.compiled-program");
  auto from_file = RunCli({"id", "tasks", Pkg() + "/mlc-model-manifest.json"});
  auto from_stdin = RunCli({"id", "tasks", "-"}, test::ReadText(Pkg() + "/mlc-model-manifest.json"));
  EXPECT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(from_stdin.out, from_file.out);
  auto request = R"({"turns": [[{"tokens": [1, 2, 3]}]]})";
  auto plan = RunCli({"plan", Pkg(), "--program", Program(), "--request", "-", "--json"}, request);
  EXPECT_EQ(plan.exit_code, 0) << plan.out << plan.err;
  EXPECT_EQ(JsonOut(plan)["prompt_length"], 3);
  auto bad = RunCli({"validate", "-", "--json"}, "{\"schema\": ");
  ExpectFailureObject(bad, 1, "invalid", "<stdin>");
}

TEST_F(CliContract, IdsOfAFolderAndOfAProgram) {
  auto from_folder = RunCli({"id", "tasks", Pkg(), "--json"});
  ASSERT_EQ(from_folder.exit_code, 0) << from_folder.out << from_folder.err;
  auto from_manifest = RunCli({"id", "tasks", Pkg() + "/mlc-model-manifest.json", "--json"});
  EXPECT_EQ(JsonOut(from_folder)["interface_id"], JsonOut(from_manifest)["interface_id"]);
  auto declared = RunCli({"id", "tasks", Program(), "--json"});
  ASSERT_EQ(declared.exit_code, 0) << declared.out << declared.err;
  EXPECT_EQ(JsonOut(declared)["interface_id"], JsonOut(from_folder)["interface_id"]);
  EXPECT_EQ(JsonOut(declared)["source"], "declared");
  auto params = RunCli({"id", "params", Pkg(), "--json"});
  ASSERT_EQ(params.exit_code, 0) << params.out << params.err;
  EXPECT_EQ(JsonOut(params)["source"], "computed");
  EXPECT_GT(JsonOut(params)["parameter_count"].get<int64_t>(), 0);
  auto program_params = RunCli({"id", "params", Program(), "--json"});
  ASSERT_EQ(program_params.exit_code, 0) << program_params.out << program_params.err;
  EXPECT_EQ(JsonOut(program_params)["parameter_schema_id"], JsonOut(params)["parameter_schema_id"]);
}

TEST_F(CliContract, SizesTakeUnits) {
  // 1 KiB of device memory cannot hold the package: the device verdict fails, naming it.
  auto small = RunCli({"check", Pkg(), "--program", Program(), "--memory", "1KiB", "--json"});
  ExpectFailureObject(small, 1, "invalid");  // a failed verdict lists its problem under "errors"
  EXPECT_NE(small.out.find("device: "), std::string::npos) << small.out;
  auto big = RunCli({"check", Pkg(), "--program", Program(), "--memory", "1.5GB", "--json"});
  EXPECT_EQ(big.exit_code, 0) << big.out << big.err;
  bool found = false;
  const Json report = JsonOut(big);
  for (const auto& c : report["checks"]) {
    if (c["check"] == "device") {
      found = true;
      EXPECT_EQ(c["details"]["available_device_memory_bytes"], 1500000000);
    }
  }
  EXPECT_TRUE(found) << big.out;
}

}  // namespace
}  // namespace mlc
