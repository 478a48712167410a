// llama.cpp as the tests' reference runtime: a package converted to GGUF
// (tests/support/mlc_to_gguf.py) and run by npm's prebuilt node-llama-cpp
// (tests/support/llama_cpp_logits.mjs) over a prompt and a greedy continuation; the prompts, the
// logit comparisons and the tie rule the tests that hold a program to it share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "mlc_manifest/json.h"
#include "support/test_util.h"

namespace mlc::test {

// Two logits closer than this fraction of the row's standard deviation are a tie: llama.cpp's
// 8-bit activations may order them either way.
inline constexpr double kTieTolerance = 0.05;
inline constexpr const char* kNodeLlamaCpp = "node-llama-cpp@3.22.1";

// What llama.cpp computed: logits after each prompt token and after each greedy token.
struct LlamaCppRun {
  int64_t vocab = 0;
  std::vector<float> logits;  // [prompt + continuation, vocab]
  std::vector<int32_t> generated;
  const float* Row(int64_t i) const { return logits.data() + i * vocab; }
};

// `count` ids in [3, vocab) from a linear congruential stream of the seed.
inline std::vector<int32_t> PromptIds(int count, int64_t vocab, uint64_t seed) {
  std::vector<int32_t> ids;
  uint64_t x = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>(3 + (x >> 33) % static_cast<uint64_t>(vocab - 3)));
  }
  return ids;
}

inline double Cosine(const float* a, const float* b, int64_t n) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < n; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

inline int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// The gap between the two best logits of a row, as a fraction of the row's standard deviation.
inline double TopTwoGap(const float* row, int64_t n) {
  std::vector<float> v(row, row + n);
  std::partial_sort(v.begin(), v.begin() + 2, v.end(), std::greater<float>());
  double mean = std::accumulate(row, row + n, 0.0) / double(n), var = 0;
  for (int64_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
  return (v[0] - v[1]) / std::sqrt(var / double(n));
}

// Where our greedy token differs from llama.cpp's at continuation step `step` (logits row `row`),
// llama.cpp's two best logits there must be a tie; their gap.
inline double ExpectTie(const LlamaCppRun& ref, int64_t row, int step, int32_t ours) {
  const double gap = TopTwoGap(ref.Row(row), ref.vocab);
  EXPECT_LT(gap, kTieTolerance) << "step " << step << ": ours " << ours << ", llama.cpp "
                                << ref.generated[static_cast<size_t>(step)]
                                << " where llama.cpp's best two logits are not a tie";
  return gap;
}

inline std::string JoinIds(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Converts the package to GGUF and runs llama.cpp (node_llama_cpp: NpmPackage(kNodeLlamaCpp)) over
// the prompt and a greedy continuation of `continuation` tokens. Failures are test failures; the
// run is then empty.
inline LlamaCppRun RunLlamaCpp(const std::string& node_llama_cpp, const std::string& package,
                               const TempDir& tmp, const std::vector<int32_t>& prompt,
                               int continuation) {
  LlamaCppRun ref;
  const std::string gguf = tmp.File("model.gguf"), out = tmp.File("llama_cpp");
  auto conv =
      RunProgram({"/usr/bin/python3", SourcePath("tests/support/mlc_to_gguf.py"), package, gguf});
  EXPECT_EQ(conv.exit_code, 0) << conv.out << conv.err;
  if (conv.exit_code != 0) return ref;
  // One thread: llama.cpp's threads spin at barriers, which on a shared machine costs far more
  // than the second thread gains for a model this small.
  auto run =
      RunProgram({"timeout", "300", "node", SourcePath("tests/support/llama_cpp_logits.mjs"),
                  node_llama_cpp, gguf, JoinIds(prompt), std::to_string(continuation), "1", out});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  if (run.exit_code != 0) return ref;
  auto meta = ReadJsonFile(out + ".json");
  EXPECT_TRUE(meta.ok()) << (meta.ok() ? "" : meta.errors().front().message);
  if (!meta.ok()) return ref;
  ref.vocab = (*meta)["vocab"].get<int64_t>();
  for (const auto& t : (*meta)["generated"]) ref.generated.push_back(t.get<int32_t>());
  std::ifstream bin(out + ".bin", std::ios::binary);
  ref.logits.resize((prompt.size() + static_cast<size_t>(continuation)) *
                    static_cast<size_t>(ref.vocab));
  bin.read(reinterpret_cast<char*>(ref.logits.data()),
           static_cast<std::streamsize>(ref.logits.size() * sizeof(float)));
  EXPECT_TRUE(bin.good() && bin.peek() == EOF) << "llama.cpp logits file has the wrong size";
  return ref;
}

}  // namespace mlc::test
