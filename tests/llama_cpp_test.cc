// Proof against llama.cpp: random-weight packages of every CPU family, written as MLC's converter
// writes them, are converted to GGUF with the same weights (tests/support/mlc_to_gguf.py) and run
// by llama.cpp (npm's prebuilt node-llama-cpp, tests/support/llama_cpp_logits.mjs). The built-in
// CPU program (OpenCpuLibrary) must give logits with cosine >= 0.999 (4-bit; 0.99999 with float
// weights and float activations) at every position of a 64-token prompt, through decode steps and through chunked prefill, and the same greedy
// 32-token continuation, a token differing only where llama.cpp's two best logits are within
// kTieTolerance of each other (it rounds activations to 8 bits against 4-bit weights).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/runtime.h"
#include "support/llama_cpp_util.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Argmax;
using test::Cosine;

constexpr int kPromptLength = 64;
constexpr int kContinuation = 32;
// 4-bit weights: llama.cpp rounds activations to 8 bits for Q4_0 products. Float weights: it
// does not, and the results agree to rounding, so the bound is far tighter (it catches e.g. a
// 15% error in one layer's attention scale that 0.999 would let through).
constexpr double kMinCosine4Bit = 0.999;
constexpr double kMinCosineFloat = 0.99999;
// Gemma 4 against Q4_0: llama.cpp's 8-bit activations alone take its logits on the tiny gemma4
// q4f16_1 package to cosine 0.9937 (min over a 64-token prompt) against its own run of the same
// weights written as F32 (whose dequantised values equal the Q4_0 blocks'); ours against llama.cpp
// on F32 weights (the q4f32_1 case) stays above 0.9999. The looser bound is llama.cpp's rounding.
constexpr double kMinCosineGemma4Q4_0 = 0.99;

struct Case {
  std::string name;
  std::string family;
  std::string quantization;
  double min_cosine = 0;  // 0: the bound of the format (kMinCosine4Bit / kMinCosineFloat)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Our CPU program over the same package: embed, create_tir_paged_kv_cache, prefill, decode.
class Ours {
 public:
  explicit Ours(const std::string& package) {
    auto lib = OpenCpuLibrary(package);
    if (!lib.ok()) {
      ADD_FAILURE() << "OpenCpuLibrary: " << lib.errors().front().path << ": "
                    << lib.errors().front().message;
      return;
    }
    lib_ = std::move(*lib);
    auto params = LoadParameters(package, lib_->Metadata().params);
    if (!params.ok()) {
      ADD_FAILURE() << "LoadParameters: " << params.errors().front().message;
      return;
    }
    params_ = *params;
    auto config = ReadJsonFile(package + "/mlc-chat-config.json");
    if (!config.ok()) {
      ADD_FAILURE() << "mlc-chat-config.json unreadable";
      return;
    }
    context_ = (*config)["context_window_size"].get<int64_t>();
    prefill_chunk_ = (*config)["prefill_chunk_size"].get<int64_t>();
    embed_ = lib_->GetFunction("embed");
    // The token pair (gemma4) takes the ids beside the embeddings; the others the embeddings.
    token_pair_ = lib_->GetFunction("prefill_tokens") != nullptr;
    prefill_ = lib_->GetFunction(token_pair_ ? "prefill_tokens" : "prefill");
    decode_ = lib_->GetFunction(token_pair_ ? "decode_tokens" : "decode");
    create_kv_ = lib_->GetFunction("create_tir_paged_kv_cache");
    EXPECT_TRUE(embed_ && prefill_ && decode_ && create_kv_) << "missing an exported function";
  }
  bool ok() const { return params_ && embed_ && prefill_ && decode_ && create_kv_; }

  Status NewSequence() {
    std::vector<Value> args = {int64_t{1}, context_, prefill_chunk_, int64_t{16}, int64_t{0}};
    auto out = (*create_kv_)(args);
    if (!out.ok()) return out.take_errors();
    kv_ = std::get<ObjectRef>(out->front());
    return Status::Ok();
  }

  // Logits after feeding ids: one decode call for one id (decode) or one prefill call for all.
  Result<std::vector<float>> Feed(const std::vector<int32_t>& ids, bool prefill) {
    const int64_t n = static_cast<int64_t>(ids.size());
    NDArray input = NDArray::Empty({n}, DlInt32());
    std::memcpy(input.data<int32_t>(), ids.data(), ids.size() * sizeof(int32_t));
    std::vector<Value> args;
    if (token_pair_ && !prefill) {
      args = {input.Reshape({n, 1})};
    } else {
      std::vector<Value> embed_args = {input, ObjectRef(params_)};
      auto e = (*embed_)(embed_args);
      if (!e.ok()) return e.take_errors();
      const NDArray& embeds = std::get<NDArray>(e->front());
      args = {embeds.Reshape({1, n, embeds.shape()[1]})};
      if (token_pair_) {
        NDArray text = NDArray::Empty({1, n}, DlInt32());  // modality 0: every row a token's
        std::memset(text.data<int32_t>(), 0, ids.size() * sizeof(int32_t));
        args.push_back(input.Reshape({1, n}));
        args.push_back(text);
      }
    }
    args.push_back(kv_);
    args.push_back(ObjectRef(params_));
    auto out = (prefill ? *prefill_ : *decode_)(args);
    if (!out.ok()) return out.take_errors();
    if (out->size() > 1) kv_ = std::get<ObjectRef>((*out)[1]);
    const NDArray& logits = std::get<NDArray>(out->front());
    int64_t vocab = logits.shape().back();
    const float* last = logits.data<float>() + (logits.Elements() - vocab);
    return std::vector<float>(last, last + vocab);
  }

 private:
  std::unique_ptr<ModelLibrary> lib_;
  std::shared_ptr<ParameterSet> params_;
  const PackedFunction *embed_ = nullptr, *prefill_ = nullptr, *decode_ = nullptr,
                       *create_kv_ = nullptr;
  ObjectRef kv_;
  bool token_pair_ = false;
  int64_t context_ = 0, prefill_chunk_ = 0;
};

class LlamaCppTest : public ::testing::TestWithParam<Case> {};

TEST_P(LlamaCppTest, LogitsAndGreedyContinuationAgree) {
  const Case& c = GetParam();
  // Ours rounds activations to 8 bits for every 4-bit format; the GGUF of q4f32_1 holds its
  // dequantised weights as F32 (Q4_0 has no float32 scale), so llama.cpp does not: 4-bit bound.
  const bool four_bit = c.quantization.rfind("q4", 0) == 0;
  const double kMinCosine = c.min_cosine > 0 ? c.min_cosine : four_bit ? kMinCosine4Bit : kMinCosineFloat;
  const std::string node_llama_cpp = test::NpmPackage(test::kNodeLlamaCpp);
  ASSERT_FALSE(node_llama_cpp.empty());
  test::TempDir tmp;
  const std::string package = tmp.File("package");
  FamilyModelOptions options;
  options.family = c.family;
  options.quantization = c.quantization;
  options.shape = "tiny";
  options.seed = 11;
  options.manifest = false;
  auto written = WriteFamilyModel(package, options);
  ASSERT_TRUE(written.ok()) << written.errors().front().message;

  Ours ours(package);
  ASSERT_TRUE(ours.ok());
  // The prompt needs the vocabulary size: take it from one decode step.
  ASSERT_TRUE(ours.NewSequence().ok());
  auto probe = ours.Feed({3}, false);
  ASSERT_TRUE(probe.ok()) << probe.errors().front().message;
  const int64_t vocab = static_cast<int64_t>(probe->size());
  const std::vector<int32_t> prompt = test::PromptIds(kPromptLength, vocab, 5);

  test::LlamaCppRun ref = test::RunLlamaCpp(node_llama_cpp, package, tmp, prompt, kContinuation);
  ASSERT_EQ(ref.vocab, vocab);
  ASSERT_EQ(ref.generated.size(), size_t{kContinuation});

  // 1. Decode steps: logits at every prompt position.
  ASSERT_TRUE(ours.NewSequence().ok());
  double min_cos = 1;
  int worst = -1;
  for (int i = 0; i < kPromptLength; ++i) {
    auto logits = ours.Feed({prompt[i]}, false);
    ASSERT_TRUE(logits.ok()) << logits.errors().front().message;
    double cos = Cosine(logits->data(), ref.Row(i), vocab);
    if (cos < min_cos) min_cos = cos, worst = i;
    EXPECT_GE(cos, kMinCosine) << "decode, position " << i;
  }

  // 2. Greedy continuation after a one-call prefill of the prompt: our own tokens agree with
  // llama.cpp's until the first difference, which must be a tie in llama.cpp's logits; the
  // logits agree at every step up to it.
  std::vector<float> row;
  int agreed = 0;
  bool diverged = false;
  double divergence_gap = 0;
  {
    ASSERT_TRUE(ours.NewSequence().ok());
    auto logits = ours.Feed(prompt, true);
    ASSERT_TRUE(logits.ok()) << logits.errors().front().message;
    row = *logits;
  }
  for (int t = 0; t < kContinuation; ++t) {
    const float* theirs = ref.Row(kPromptLength - 1 + t);
    double cos = Cosine(row.data(), theirs, vocab);
    min_cos = std::min(min_cos, cos);
    EXPECT_GE(cos, kMinCosine) << "continuation step " << t;
    int32_t token = Argmax(row.data(), vocab);
    if (token != ref.generated[static_cast<size_t>(t)]) {
      diverged = true;
      divergence_gap = test::ExpectTie(ref, kPromptLength - 1 + t, t, token);
      break;
    }
    ++agreed;
    auto next = ours.Feed({token}, false);
    ASSERT_TRUE(next.ok()) << next.errors().front().message;
    row = *next;
  }

  // 3. Chunked prefill: logits at the end of each chunk.
  ASSERT_TRUE(ours.NewSequence().ok());
  int start = 0;
  for (int end : {1, 16, 40, kPromptLength}) {
    std::vector<int32_t> chunk(prompt.begin() + start, prompt.begin() + end);
    auto logits = ours.Feed(chunk, true);
    ASSERT_TRUE(logits.ok()) << logits.errors().front().message;
    double cos = Cosine(logits->data(), ref.Row(end - 1), vocab);
    min_cos = std::min(min_cos, cos);
    EXPECT_GE(cos, kMinCosine) << "prefill chunk ending at " << end;
    start = end;
  }

  std::string tail = diverged ? " then a difference (llama.cpp's top-two gap " +
                                    std::to_string(divergence_gap) + " sd)"
                              : std::string(" agree");
  std::printf("[ llama.cpp ] %s %s: min cosine %.6f (worst decode position %d), greedy %d/%d%s\n",
              c.family.c_str(), c.quantization.c_str(), min_cos, worst, agreed, kContinuation,
              tail.c_str());
}

INSTANTIATE_TEST_SUITE_P(
    Families, LlamaCppTest,
    ::testing::Values(Case{"llama_q4f16_1", "llama", "q4f16_1"}, Case{"llama_q0f32", "llama", "q0f32"},
                      Case{"llama_q0f16", "llama", "q0f16"}, Case{"llama_q4f32_1", "llama", "q4f32_1"},
                      Case{"qwen2_q4f16_1", "qwen2", "q4f16_1"}, Case{"qwen2_q0f32", "qwen2", "q0f32"},
                      Case{"gemma_q4f16_1", "gemma", "q4f16_1"}, Case{"gemma_q0f32", "gemma", "q0f32"},
                      Case{"gemma2_q4f16_1", "gemma2", "q4f16_1"}, Case{"gemma2_q0f32", "gemma2", "q0f32"},
                      Case{"phi3_q4f16_1", "phi3", "q4f16_1"}, Case{"phi3_q0f32", "phi3", "q0f32"},
                      Case{"gemma4_q4f16_1", "gemma4", "q4f16_1", kMinCosineGemma4Q4_0},
                      Case{"gemma4_q4f32_1", "gemma4", "q4f32_1"}, Case{"gemma4_q0f32", "gemma4", "q0f32"},
                      Case{"gemma4_q0f16", "gemma4", "q0f16"}, Case{"gemma3_q4f16_1", "gemma3", "q4f16_1"},
                      Case{"gemma3_q4f32_1", "gemma3", "q4f32_1"}, Case{"gemma3_q0f32", "gemma3", "q0f32"},
                      Case{"gemma3_text_q0f16", "gemma3_text", "q0f16"}),
    test::CaseName());

}  // namespace
}  // namespace mlc
