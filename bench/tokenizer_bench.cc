// Tokenizer throughput: encodes 1 MB of mixed text (paragraphs built from
// tests/data/tokenizer_corpus.jsonl) with each real tokenizer, and with @mlc-ai/web-tokenizers
// 0.1.6 in Node in the same run (bench/.. tests/support/web_tokenizers.cjs --bench), printing
// MB/s and the ratio. Needs the npm package the tokenizer test installs into <build>/npm (run
// tokenizer_test once) or installs it here.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>

#include "bench_main.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/tokenizer.h"

namespace {

namespace fs = std::filesystem;

std::string Shared(const std::string& rel) {
  const char* env = std::getenv("MLC_SHARED_DIR");
  return (env ? std::string(env) : std::string(MLC_SOURCE_DIR) + "/../shared") + "/" + rel;
}

// About 1 MB of paragraphs: corpus texts in a fixed pseudo-random order with varying numbers.
std::string MixedText() {
  std::vector<std::string> texts;
  std::ifstream in(std::string(MLC_SOURCE_DIR) + "/tests/data/tokenizer_corpus.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = mlc::ParseJson(line);
    if (j.ok() && !(*j)["text"].get<std::string>().empty()) texts.push_back((*j)["text"].get<std::string>());
  }
  std::mt19937 rng(7);
  std::string out;
  while (out.size() < (1u << 20)) {
    std::string para;
    for (int k = 0; k < 6; ++k) {
      para += texts[rng() % texts.size()];
      para += " " + std::to_string(rng() % 100000) + " ";
    }
    // Paragraph texts must not hold a blank line: that is the separator.
    for (size_t p; (p = para.find("\n\n")) != std::string::npos;) para.replace(p, 2, "\n");
    out += para + "\n\n";
  }
  return out;
}

std::vector<std::string> Paragraphs(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t p; (p = text.find("\n\n", start)) != std::string::npos; start = p + 2) {
    out.push_back(text.substr(start, p - start));
  }
  out.push_back(text.substr(start));
  return out;
}

std::string Run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

std::string WebTokenizersLib() {
  fs::path build = fs::path(MLC_CLI_PATH).parent_path();
  fs::path lib = build / "npm" / "web-tokenizers-0.1.6.cjs";
  if (fs::exists(lib)) return lib.string();
  std::string root = (build / "npm").string();
  Run("timeout 900 npm install --no-audit --no-fund --prefix '" + root +
      "' @mlc-ai/web-tokenizers@0.1.6 >/dev/null 2>&1");
  fs::path bundle = build / "npm/node_modules/@mlc-ai/web-tokenizers/lib/index.js";
  if (!fs::exists(bundle)) return "";
  fs::copy_file(bundle, lib, fs::copy_options::overwrite_existing);
  return lib.string();
}

int Main() {
  std::string text = MixedText();
  std::vector<std::string> paragraphs = Paragraphs(text);
  fs::path text_file = fs::temp_directory_path() / "mlc-tokenizer-bench.txt";
  std::ofstream(text_file, std::ios::binary) << text;
  std::string lib = WebTokenizersLib();
  if (lib.empty()) std::cerr << "web-tokenizers unavailable (npm install failed): no ratio\n";
  const int rounds = 3;
  double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("tokenizer_bench: %.2f MB of mixed text, %zu paragraphs, best of %d rounds\n", mb,
              paragraphs.size(), rounds);
  for (const char* rel : {"testdata/tokenizers/phi-3-mini/tokenizer.json",
                          "testdata/tokenizers/qwen2-readerlm/tokenizer.reconstructed.json"}) {
    std::string file = Shared(rel);
    auto tok = mlc::Tokenizer::FromJsonFile(file);
    if (!tok.ok()) {
      std::cerr << mlc::FormatErrors(tok.errors()) << "\n";
      return 1;
    }
    double best = 1e30;
    size_t tokens = 0;
    for (int r = 0; r < rounds; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      size_t n = 0;
      for (const std::string& p : paragraphs) n += (*tok)->Encode(p).size();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      tokens = n;
    }
    std::printf("  %-60s ours: %7.2f MB/s (%zu tokens)", rel, mb / best, tokens);
    if (!lib.empty()) {
      std::string out = Run("timeout 600 node '" + std::string(MLC_SOURCE_DIR) +
                            "/tests/support/web_tokenizers.cjs' '" + lib + "' --bench --json '" + file +
                            "' '" + text_file.string() + "' " + std::to_string(rounds));
      auto ref = mlc::ParseJson(out.substr(0, out.find('\n')));
      if (ref.ok() && (*ref).contains("seconds")) {
        double secs = (*ref)["seconds"].get<double>();
        std::printf("  web-tokenizers: %7.2f MB/s (%zu tokens)  ratio: %.2fx", mb / secs,
                    (*ref)["tokens"].get<size_t>(), secs / best);
      } else {
        std::printf("  web-tokenizers: failed");
      }
    }
    std::printf("\n");
  }
  fs::remove(text_file);
  return 0;
}

}  // namespace

int main() {
  return bench::Guarded("tokenizer_bench", [&] { return Main(); });
}
