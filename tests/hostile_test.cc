// The hostile-input test: every command run over a generated corpus of attacker-made inputs
// (error floods, raw base64 audio, huge declared image sizes, FIFOs, NULs in paths, symlinks out
// of the package, non-file outputs, broken JSON) in a child process limited to 2 GB of address
// space (not under sanitizers, which reserve more) and 10 s. Each run must end with exit code 1, 2
// or 3 (no signal, no hang, no last-resort handler), print exactly one JSON object with --json,
// and leave every file outside the work folder unchanged.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/sanitizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test::kSanitized;

struct Outcome {
  int exit_code = -1;
  int signal = 0;
  bool timed_out = false;
  std::string out;
  std::string err;
};

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void Spit(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// Runs the CLI in a child under RLIMIT_AS = 2 GB, TMPDIR naming no folder, and a 10 s deadline.
Outcome RunLimited(const std::vector<std::string>& args, const std::string& work) {
  std::string out_file = work + "/.stdout", err_file = work + "/.stderr";
  std::vector<std::string> argv_s = {MLC_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::string tmpdir = "TMPDIR=" + work + "/no-such-tmp";
  pid_t pid = ::fork();
  if (pid == 0) {
    if (!kSanitized) {
      rlimit lim{rlim_t{2} << 30, rlim_t{2} << 30};
      ::setrlimit(RLIMIT_AS, &lim);
    }
    ::putenv(tmpdir.data());
    int in = ::open("/dev/null", O_RDONLY);
    int o = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int e = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Outcome r;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kSanitized ? 60 : 10);
  int status = 0;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      r.timed_out = true;
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.out = Slurp(out_file);
  r.err = Slurp(err_file);
  return r;
}

// Every regular file under dir with its bytes (the "outside" world the runs must not touch).
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && !e.is_symlink()) files[e.path().string()] = Slurp(e.path().string());
  }
  return files;
}

std::vector<std::string> TmpRunFolders() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/tmp")) {
    if (e.path().filename().string().rfind("mlc-run-", 0) == 0) out.push_back(e.path().string());
  }
  return out;
}

struct Case {
  std::string name;
  std::vector<std::string> args;
  size_t max_errors = 101;  // entries of "errors" in the --json output
  bool may_pass = false;     // the command need not open the hostile file (exit 0 allowed)
};

class HostileCorpus : public ::testing::Test {
 protected:
  void SetUp() override {
    work_ = work_dir_.path();
    outside_ = outside_dir_.path();
    secret_ = outside_dir_.Write("secret.json", "{\"SECRET-MARKER\": [1, 2, 3]}\n");
    outside_dir_.Write("target.npy", "OUTSIDE-TARGET");
    auto made = test::RunCli({"reference-model", work_ + "/pkg", "--audio", "--image"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
  }

  // A copy of the reference package, changed by edit.
  std::string Package(const std::string& name, const std::function<void(const std::string&)>& edit = {}) {
    std::string dir = work_ + "/" + name;
    fs::copy(work_ + "/pkg", dir, fs::copy_options::recursive);
    if (edit) edit(dir);
    return dir;
  }

  std::string Doc(const std::string& name, const std::string& text) {
    std::string path = work_ + "/" + name;
    Spit(path, text);
    return path;
  }

  void Fifo(const std::string& path) {
    fs::remove(path);
    ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
  }

  void Check(const Case& c) {
    SCOPED_TRACE(c.name);
    Outcome r = RunLimited(c.args, work_);
    EXPECT_FALSE(r.timed_out) << "hung";
    EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal << "\n" << r.err;
    EXPECT_TRUE((r.exit_code >= 1 && r.exit_code <= 3) || (c.may_pass && r.exit_code == 0))
        << "exit " << r.exit_code << "\n" << r.err;
    EXPECT_EQ(r.out.find("uncaught exception"), std::string::npos) << r.out;
    EXPECT_EQ(r.err.find("uncaught exception"), std::string::npos) << r.err;
    EXPECT_EQ((r.out + r.err).find("SECRET-MARKER"), std::string::npos) << "echoed an outside file";
    bool json_mode = std::find(c.args.begin(), c.args.end(), "--json") != c.args.end();
    if (json_mode) {
      json doc = json::parse(r.out, nullptr, /*allow_exceptions=*/false);
      ASSERT_TRUE(doc.is_object()) << "not exactly one JSON object:\n" << r.out.substr(0, 400);
      if (doc.contains("errors")) {
        EXPECT_LE(doc["errors"].size(), c.max_errors);
      }
    }
  }

  test::TempDir work_dir_;
  test::TempDir outside_dir_;
  std::string work_, outside_, secret_;
};

TEST_F(HostileCorpus, EveryCommandFailsCleanly) {
  const auto outside_before = Snapshot(outside_);
  const auto tmp_before = TmpRunFolders();
  std::vector<Case> cases;
  auto both = [&cases](const std::string& name, std::vector<std::string> args, bool may_pass = false) {
    cases.push_back({name, args, 101, may_pass});
    args.push_back("--json");
    cases.push_back({name + " --json", args, 101, may_pass});
  };
  const std::string pkg = work_ + "/pkg";
  const std::string program = pkg + "/compiled-program.json";
  const std::string request = Doc("request.json", R"([{"tokens": [1, 2, 3]}])");

  // 1. Error floods: one bad element each, far more than the kept 100.
  {
    json prog = json::parse(Slurp(program));
    prog["resources"]["required_features"] = json::array();
    for (int i = 0; i < 300000; ++i) prog["resources"]["required_features"].push_back(0);
    std::string p = Doc("flood-program.json", prog.dump());
    both("validate flood", {"validate", p});
    both("bind flood", {"bind", pkg, p});
    both("check flood program", {"check", pkg, "--program", p});
    std::string tc = Package("flood-tc", [](const std::string& d) {
      json doc = json::parse(Slurp(d + "/tensor-cache.json"));
      json rec = doc["records"][0]["records"][0];
      for (int i = 0; i < 50000; ++i) {
        rec["shape"] = json::array({-1, "x"});
        doc["records"][0]["records"].push_back(rec);
      }
      Spit(d + "/tensor-cache.json", doc.dump());
    });
    both("check flood tensor-cache", {"check", tc});
    both("inspect flood tensor-cache", {"inspect", tc});
    std::string zeros = "[";
    for (int i = 0; i < 2000000; ++i) zeros += i ? ",0" : "0";
    zeros += "]";
    std::string z = Doc("zeros.json", zeros);
    both("id params zeros", {"id", "params", z});
    both("id tasks zeros", {"id", "tasks", z});
  }
  // 2. Raw base64 audio longer than a file name (and a data: URL), decoded in memory.
  {
    std::string b64(8192, 'A');
    std::string msgs = Doc("b64-messages.json",
                           R"([{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": ")" +
                               b64 + R"(", "format": "wav"}}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])");
    // prompt shows the segments (inline byte counts) without decoding them: it may succeed.
    both("prompt raw base64", {"prompt", pkg, "--messages", msgs, "--program", program}, true);
    both("run raw base64", {"run", pkg, "--messages", msgs, "--max-tokens", "2"});
  }
  // 3. A package whose manifest declares an image size far over the limits.
  for (auto [h, w] : {std::pair<int64_t, int64_t>{1000000, 1000000}, {65535, 65535}, {3000000000, 1}}) {
    std::string name = "huge-image-" + std::to_string(h) + "x" + std::to_string(w);
    std::string d = Package(name, [h = h, w = w](const std::string& dir) {
      std::string text = Slurp(dir + "/mlc-model-manifest.json");
      json m = json::parse(text);
      std::function<void(json&)> walk = [&](json& v) {
        if (v.is_object()) {
          if (v.contains("resize") && v["resize"].is_object()) {
            v["resize"]["height"] = h;
            v["resize"]["width"] = w;
          }
          for (auto& [k, x] : v.items()) walk(x);
        } else if (v.is_array()) {
          for (auto& x : v) walk(x);
        }
      };
      walk(m);
      Spit(dir + "/mlc-model-manifest.json", m.dump());
    });
    std::string png = Doc("tiny.png", test::ReadText(test::SourcePath("tests/data/damaged_frame.webp")));
    both("image " + name, {"image", png, "-o", work_ + "/" + name + ".npy", "--model", d});
  }
  // 4. FIFOs named like every package file and like --program: refused, never waited on.
  for (const char* file : {"mlc-chat-config.json", "mlc-model-manifest.json", "tensor-cache.json",
                           "tokenizer.json", "params_shard_0.bin", "reference-lib.json"}) {
    std::string d = Package(std::string("fifo-") + file);
    Fifo(d + "/" + file);
    // Not every command opens every file (check never reads the tokenizer): exit 0 is allowed,
    // a hang, a signal or an echo is not.
    both(std::string("check fifo ") + file, {"check", d, "--verify-shards", "--program", program}, true);
    both(std::string("inspect fifo ") + file, {"inspect", d}, true);
    both(std::string("run fifo ") + file, {"run", d, "--request", request, "--max-tokens", "1"}, true);
    both(std::string("plan fifo ") + file, {"plan", d, "--program", program, "--request", request}, true);
  }
  {
    std::string f = work_ + "/fifo-program.json";
    Fifo(f);
    both("check fifo --program", {"check", pkg, "--program", f});
    both("run fifo --program", {"run", pkg, "--program", f, "--request", request});
    both("bind fifo program", {"bind", pkg, f});
    both("validate fifo", {"validate", f});
  }
  // 5. A NUL in dataPath aliasing shard 0, with shard 1 gone.
  {
    std::string d = Package("nul-datapath", [](const std::string& dir) {
      json doc = json::parse(Slurp(dir + "/tensor-cache.json"));
      doc["records"][1]["dataPath"] = std::string("params_shard_0.bin\0x", 20);
      Spit(dir + "/tensor-cache.json", doc.dump());
      fs::remove(dir + "/params_shard_1.bin");
    });
    both("check nul dataPath", {"check", d, "--verify-shards"});
    both("run nul dataPath", {"run", d, "--request", request, "--max-tokens", "1"});
    std::string r = Doc("nul-request.json", R"([{"image": "cat.png\u0000x"}])");
    both("plan nul image path", {"plan", pkg, "--program", program, "--request", r});
  }
  // 6. Output targets that are not regular files: refused with --force, never replaced.
  {
    std::string link = work_ + "/out-link.npy";
    fs::create_symlink(outside_ + "/target.npy", link);
    std::string wav = Doc("silence.wav", std::string("RIFF"));  // not audio either way
    both("emit program symlink", {"emit", "program", pkg, "--preset", "llava-1.5", "-o", link, "--force"});
    both("image to symlink", {"image", test::SourcePath("tests/data/damaged_frame.webp"), "-o", link,
                              "--force", "--height", "4", "--width", "4"});
    both("emit program to a device", {"emit", "program", pkg, "--preset", "llava-1.5", "-o", "/dev/null", "--force"});
  }
  // 7. Top-level JSON files and shards through symlinks that leave the package.
  for (const char* file : {"mlc-chat-config.json", "mlc-model-manifest.json", "tensor-cache.json",
                           "tokenizer.json", "params_shard_0.bin"}) {
    std::string d = Package(std::string("escape-") + file);
    fs::remove(d + "/" + file);
    fs::create_symlink(secret_, d + "/" + file);
    both(std::string("check escape ") + file, {"check", d, "--verify-shards"}, true);
    both(std::string("inspect escape ") + file, {"inspect", d}, true);
    both(std::string("run escape ") + file, {"run", d, "--request", request, "--max-tokens", "1"}, true);
    std::string m = Doc("hello.json", R"([{"role": "user", "content": "hi"}])");
    both(std::string("prompt escape ") + file, {"prompt", d, "--messages", m, "--program", program}, true);
  }
  // 9. Edges: truncated and control-character JSON, a BOM, an overflowing --rate.
  {
    both("validate truncated", {"validate", Doc("truncated.json", "{")});
    both("validate control key", {"validate", Doc("ctl.json", "{\"\\u001b[2J\\u0007\": 1}")});
    both("validate bom", {"validate", Doc("bom.json", "\xEF\xBB\xBF{}")});
    // A flag value out of range is a CLI11 usage error (JSON for argument errors is issue 12).
    cases.push_back({"audio rate overflow", {"audio", Doc("a.wav", "RIFF"), "-o", work_ + "/a.npy",
                                             "--rate", "99999999999999999999"}});
  }
  // 10. Requests that disagree with the package: empty token lists, ids over the vocabulary.
  {
    both("plan empty tokens", {"plan", pkg, "--program", program, "--request", Doc("empty.json", R"([{"tokens": []}])")});
    both("run empty tokens", {"run", pkg, "--request", work_ + "/empty.json"});
  }

  for (const Case& c : cases) Check(c);

  EXPECT_EQ(Snapshot(outside_), outside_before) << "a file outside the work folder changed";
  EXPECT_EQ(TmpRunFolders(), tmp_before) << "a run left a /tmp/mlc-run-* folder";
  EXPECT_TRUE(fs::is_symlink(work_ + "/out-link.npy"));
}

}  // namespace
}  // namespace mlc
