// Helpers shared by the tests: paths to the checkout and ../shared, temporary folders, and
// running the mlc-manifest binary as a user would.
#pragma once

#include <string>
#include <vector>

namespace mlc::test {

// ../shared beside the checkout (reference data, seed, real test data).
std::string SharedPath(const std::string& relative);
// A file in this checkout.
std::string SourcePath(const std::string& relative);

// A fresh empty folder, removed with its contents when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Writes text to name (creating parent folders) and returns its full path.
  std::string Write(const std::string& name, const std::string& text) const;

 private:
  std::string path_;
};

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs the built mlc-manifest with these arguments (no shell), optional stdin text.
CliResult RunCli(const std::vector<std::string>& args, const std::string& stdin_text = "");

// Runs the built mlc-manifest (stdout to /dev/null): its exit code and peak RSS in KiB.
std::pair<int, long> RunCliMeasured(const std::vector<std::string>& args);

// Runs any program (argv[0] looked up on PATH), capturing stdout and stderr.
CliResult RunProgram(const std::vector<std::string>& argv, const std::string& stdin_text = "");

std::string ReadText(const std::string& path);

// The bytes of a 24-bit BMP of width x height with a deterministic pattern (an image every
// decoder takes, written without a library).
std::string BmpImage(int width, int height);

// Installs an npm package ("name@version") once, under the build folder in a prefix of its own
// (a file lock keeps parallel test processes apart), and returns the package's folder; "" after
// a test failure saying why (the registry is needed once).
std::string NpmPackage(const std::string& spec);

// bytes in standard base64 with padding (as OpenAI's clients send input_audio data).
std::string Base64(const std::string& bytes);

}  // namespace mlc::test

namespace mlc::test {

// Test names from a parameter's `name` field, with non-alphanumerics replaced by '_'
// (for INSTANTIATE_TEST_SUITE_P).
struct CaseName {
  template <class Info>
  std::string operator()(const Info& i) const {
    std::string n = i.param.name;
    for (char& ch : n) {
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))) ch = '_';
    }
    return n;
  }
};

}  // namespace mlc::test
