// Test helpers: shared paths, temporary folders, subprocesses with captured output.
#include "support/test_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

extern char** environ;

namespace mlc::test {

std::string SharedPath(const std::string& relative) {
  const char* env = std::getenv("MLC_SHARED_DIR");
  return (std::filesystem::path(env ? env : MLC_SHARED_DIR) / relative).string();
}

std::string SourcePath(const std::string& relative) {
  return (std::filesystem::path(MLC_SOURCE_DIR) / relative).string();
}

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "mlc-test-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::Write(const std::string& name, const std::string& text) const {
  std::string full = File(name);
  std::filesystem::create_directories(std::filesystem::path(full).parent_path());
  std::ofstream(full, std::ios::binary) << text;
  return full;
}

namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CliResult RunProgram(const std::vector<std::string>& argv, const std::string& stdin_text) {
  TempDir io;
  std::string in_path = io.Write("stdin", stdin_text);
  std::string out_path = io.File("stdout"), err_path = io.File("stderr");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, in_path.c_str(), O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  CliResult r;
  if (posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    r.err = "cannot start " + argv[0];
    return r;
  }
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out_path);
  r.err = Slurp(err_path);
  return r;
}

std::pair<int, long> RunCliMeasured(const std::vector<std::string>& args) {
  std::vector<std::string> argv{MLC_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& s : argv) cargv.push_back(s.data());
  cargv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, cargv[0], &fa, nullptr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return {-1, 0};
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, usage.ru_maxrss};
}

CliResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text) {
  std::vector<std::string> argv{MLC_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunProgram(argv, stdin_text);
}

std::string ReadText(const std::string& path) { return Slurp(path); }

std::string BmpImage(int width, int height) {
  const int stride = (width * 3 + 3) / 4 * 4;
  std::string b = "BM";
  auto put = [&b](uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  const uint32_t pixels = static_cast<uint32_t>(stride * height);
  put(54 + pixels, 4), put(0, 4), put(54, 4);  // file header
  put(40, 4), put(static_cast<uint32_t>(width), 4), put(static_cast<uint32_t>(height), 4);
  put(1, 2), put(24, 2), put(0, 4), put(pixels, 4), put(2835, 4), put(2835, 4), put(0, 4), put(0, 4);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) b.push_back(static_cast<char>((x * 37 + y * 11 + c * 70) % 256));
    }
    b.append(static_cast<size_t>(stride - width * 3), '\0');
  }
  return b;
}

std::string NpmPackage(const std::string& spec) {
  const size_t at = spec.rfind('@');
  if (at == 0 || at == std::string::npos) {
    ADD_FAILURE() << "expected name@version, got " << spec;
    return "";
  }
  const std::string name = spec.substr(0, at);
  std::string slug = spec;
  for (char& c : slug) {
    if (c == '/' || c == '@') c = '_';
  }
  const std::filesystem::path prefix = std::filesystem::path(MLC_BINARY_DIR) / "npm" / slug;
  const std::filesystem::path package = prefix / "node_modules" / name;
  const std::filesystem::path done = prefix / "installed";
  std::filesystem::create_directories(prefix);
  const int lock = ::open((prefix.string() + ".lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock >= 0) ::flock(lock, LOCK_EX);
  std::string out;
  if (std::filesystem::exists(done)) {
    out = package.string();
  } else {
    auto r = RunProgram({"timeout", "900", "npm", "install", "--no-audit", "--no-fund", "--prefix",
                         prefix.string(), spec});
    if (r.exit_code == 0 && std::filesystem::exists(package / "package.json")) {
      std::ofstream(done) << spec << "\n";
      out = package.string();
    } else {
      ADD_FAILURE() << "npm install " << spec << " failed (exit " << r.exit_code
                    << "); the reference comparison needs the npm registry once:\n" << r.out << r.err;
    }
  }
  if (lock >= 0) ::close(lock);
  return out;
}

std::string Base64(const std::string& bytes) {
  static const char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t v = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    if (i + 2 < bytes.size()) v |= static_cast<unsigned char>(bytes[i + 2]);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[v & 63] : '=';
  }
  return out;
}

}  // namespace mlc::test
