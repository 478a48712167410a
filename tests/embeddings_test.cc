// Embeddings through the engine: each family's pooled final hidden state (mean over the prompt,
// or its last position, L2-normalised) against the float64 reference decoder's, with the prompt
// prefilled in several chunks, batched with generation requests and with each other; a mean that
// never takes a cached prefix; the session's Embed leaving its conversation alone; the token pair
// (Gemma 4) against its own logits; a library without the hidden-states function refused.
#include <gtest/gtest.h>

#include <cmath>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/reference_model.h"
#include "runtime/cpu/family.h"
#include "support/batch_util.h"
#include "support/family_checks.h"
#include "support/reference64.h"

namespace mlc {
namespace {

using test::Params64;
using test::Reference64;
using test::Vec;

using test::Collected;

std::vector<int32_t> Tokens(int64_t n, int64_t vocab, int64_t salt) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i) t.push_back(static_cast<int32_t>((i * 37 + 11 + salt) % vocab));
  return t;
}

// The float64 pooling: the mean (or the last) of the rows, over its Euclidean length.
Vec Pooled(const std::vector<Vec>& rows, EmbeddingPooling pooling) {
  Vec v(rows.front().size(), 0.0);
  if (pooling == EmbeddingPooling::kLast) {
    v = rows.back();
  } else {
    for (const Vec& r : rows) {
      for (size_t j = 0; j < v.size(); ++j) v[j] += r[j] / static_cast<double>(rows.size());
    }
  }
  double norm = 0;
  for (double x : v) norm += x * x;
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

GenerationRequest EmbedRequest(const std::vector<int32_t>& ids, EmbeddingPooling pooling) {
  GenerationRequest r;
  r.input = test::Text(ids);
  r.embedding = pooling;
  return r;
}

struct CpuPackage : test::LoadedPackage {
  std::string family;
};

std::unique_ptr<CpuPackage> WriteCpu(const std::string& family, const std::string& quant = "q0f32") {
  auto m = std::make_unique<CpuPackage>();
  m->family = family;
  auto w = WriteFamilyModel(m->dir.path(), test::TinyOptions(family, quant, 5));
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  test::LoadInto(*m, OpenCpuLibrary(m->dir.path()));
  return m;
}

cpu::ModelConfig ConfigOf(const std::string& dir) {
  auto chat = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  EXPECT_TRUE(chat.ok());
  auto c = cpu::ParseModelConfig(*chat);
  EXPECT_TRUE(c.ok()) << (c.ok() ? "" : FormatErrors(c.errors()));
  return *c;
}

// The families Reference64 follows (fused q/k/v, the embeddings pair).
std::vector<std::string> Reference64Families() {
  std::vector<std::string> out;
  for (const std::string& f : CpuModelTypes()) {
    const cpu::FamilySpec* spec = cpu::FindFamily(f);
    if (spec->pair == GenerationPair::kEmbeds && !spec->names.qkv.empty()) out.push_back(f);
  }
  return out;
}

class FamilyEmbeddings : public ::testing::TestWithParam<std::string> {};

// Two embeddings (mean, last) and a generation run in one engine, prefilled 8 positions a step:
// the embeddings equal the float64 decoder's pooled hidden states, the reply its greedy run alone;
// the same mean again, with the prompt's pages in the prefix cache, is computed whole and equal.
TEST_P(FamilyEmbeddings, EqualFloat64PooledHiddenStates) {
  auto m = WriteCpu(GetParam());
  ASSERT_TRUE(m->library);
  const cpu::ModelConfig c = ConfigOf(m->dir.path());
  const std::vector<int32_t> a = Tokens(21, c.vocab_size, 0), b = Tokens(13, c.vocab_size, 5);
  Params64 p64(*m->loaded.params);
  const Reference64 ref{c, p64};
  const Vec want_mean = Pooled(ref.Hidden(a), EmbeddingPooling::kMean);
  const Vec want_last = Pooled(ref.Hidden(b), EmbeddingPooling::kLast);
  const std::vector<int32_t> alone = test::Alone(m->loaded, test::Text(a), 4);

  m->loaded.limits.prefill_chunk_size = 8;  // prompts planned in chunks of 8
  EngineOptions eo;
  eo.batch.max_batch_size = 4;
  eo.prefill_chunk_size = 8;
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  Collected mean, last, reply, again;
  ASSERT_TRUE((*engine)->Submit(EmbedRequest(a, EmbeddingPooling::kMean), mean.Sink()).ok());
  GenerationRequest g;
  g.input = test::Text(a);
  g.max_tokens = 4;
  ASSERT_TRUE((*engine)->Submit(g, reply.Sink()).ok());
  ASSERT_TRUE((*engine)->Submit(EmbedRequest(b, EmbeddingPooling::kLast), last.Sink()).ok());
  const StreamEvent& e_mean = mean.Wait();
  const StreamEvent& e_last = last.Wait();
  reply.Wait();
  ASSERT_EQ(e_mean.finish_reason, "length") << FormatErrors(e_mean.errors);
  ASSERT_EQ(e_last.finish_reason, "length") << FormatErrors(e_last.errors);
  ASSERT_EQ(e_mean.embedding.size(), static_cast<size_t>(c.hidden_size));
  EXPECT_LT(test::RelError(e_mean.embedding, want_mean), 1e-4);
  EXPECT_LT(test::RelError(e_last.embedding, want_last), 1e-4);
  EXPECT_EQ(e_mean.prompt_tokens, static_cast<int64_t>(a.size()));
  EXPECT_EQ(e_mean.completion_tokens, 0);
  EXPECT_TRUE(e_mean.tokens.empty() && e_mean.text.empty());
  EXPECT_GE(e_mean.plan.chunks.size(), 3u);  // 21 positions, 8 a step
  EXPECT_EQ(reply.tokens, alone);

  ASSERT_TRUE((*engine)->Submit(EmbedRequest(a, EmbeddingPooling::kMean), again.Sink()).ok());
  const StreamEvent& e_again = again.Wait();
  EXPECT_EQ(e_again.cached_tokens, 0);
  EXPECT_LT(test::RelError(e_again.embedding, want_mean), 1e-4);
  (*engine)->Shutdown(true);
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyEmbeddings, ::testing::ValuesIn(Reference64Families()),
                         [](const ::testing::TestParamInfo<std::string>& family) { return family.param; });

// The session's Embed runs in a sequence of its own: the conversation's length and its next turn
// are as if it never ran.
TEST(SessionEmbeddings, LeaveTheConversationAlone) {
  auto m = WriteCpu("llama");
  ASSERT_TRUE(m->library);
  const cpu::ModelConfig c = ConfigOf(m->dir.path());
  const std::vector<int32_t> a = Tokens(9, c.vocab_size, 1), b = Tokens(6, c.vocab_size, 2);
  GenerationOptions o;
  o.max_tokens = 3;
  Session plain = m->loaded.NewSession();
  ASSERT_TRUE(plain.Generate(test::Text(a), o).ok());
  auto want = plain.Generate(test::Text(b), o);
  ASSERT_TRUE(want.ok());

  Session s = m->loaded.NewSession();
  ASSERT_TRUE(s.Generate(test::Text(a), o).ok());
  const int64_t held = s.KvLength();
  auto e = s.Embed(test::Text(b), EmbeddingPooling::kLast);
  ASSERT_TRUE(e.ok()) << FormatErrors(e.errors());
  EXPECT_EQ(e->prompt_tokens, static_cast<int64_t>(b.size()));
  Params64 p64(*m->loaded.params);
  EXPECT_LT(test::RelError(e->embedding, Pooled(Reference64{c, p64}.Hidden(b), EmbeddingPooling::kLast)), 1e-4);
  EXPECT_EQ(s.KvLength(), held);
  auto got = s.Generate(test::Text(b), o);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tokens, want->tokens);
}

// The token pair (Gemma 4's prefill_tokens, per-layer inputs looked up by id): the last position's
// hidden state, through the tied embedding matrix in float64, picks the token the prefill's own
// logits pick (the final soft-cap is monotonic, the normalisation positive).
TEST(TokenPairEmbeddings, LastHiddenStatePicksThePrefillsGreedyToken) {
  auto m = WriteCpu("gemma4");
  ASSERT_TRUE(m->library);
  const cpu::ModelConfig c = ConfigOf(m->dir.path());
  ASSERT_EQ(m->loaded.bound.contract.pair, GenerationPair::kTokens);
  Session s = m->loaded.NewSession();
  for (int64_t salt : {0, 3, 8}) {
    const std::vector<int32_t> ids = Tokens(11, c.vocab_size, salt);
    auto e = s.Embed(test::Text(ids), EmbeddingPooling::kLast);
    ASSERT_TRUE(e.ok()) << FormatErrors(e.errors());
    ASSERT_EQ(e->embedding.size(), static_cast<size_t>(c.hidden_size));
    double norm = 0;
    for (float v : e->embedding) norm += static_cast<double>(v) * v;
    EXPECT_NEAR(norm, 1.0, 1e-5);
    Session fresh = m->loaded.NewSession();
    auto prefill = fresh.Prefill(test::Text(ids));
    ASSERT_TRUE(prefill.ok()) << FormatErrors(prefill.errors());
    Params64 p64(*m->loaded.params);
    const Vec head = p64.Matrix(c.family->names.embed, c.vocab_size, c.hidden_size);
    const Vec h(e->embedding.begin(), e->embedding.end());
    const Vec scores = test::MatVec(head, h, c.vocab_size, c.hidden_size);
    const auto best = std::max_element(scores.begin(), scores.end()) - scores.begin();
    EXPECT_EQ(best, test::Greedy(prefill->logits)) << "salt " << salt;
  }
}

// A library without prefill_to_last_hidden_states (the reference runtime): refused when queued.
TEST(Embeddings, RefusedWithoutTheHiddenStatesFunction) {
  test::LoadedPackage m;
  ReferenceModelOptions o;
  o.seed = 3;
  ASSERT_TRUE(WriteReferenceModel(m.dir.path(), o).ok());
  test::LoadInto(m, OpenReferenceLibrary(m.dir.path()));
  ASSERT_TRUE(m.library);
  auto engine = Engine::Start(m.loaded, nullptr, EngineOptions{});
  ASSERT_TRUE(engine.ok());
  Collected sink;
  auto id = (*engine)->Submit(EmbedRequest({1, 2, 3}, EmbeddingPooling::kMean), sink.Sink());
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(id.error().message.find("prefill_to_last_hidden_states"), std::string::npos);
  auto session = m.loaded.NewSession().Embed(test::Text({1, 2, 3}));
  EXPECT_FALSE(session.ok());
}

}  // namespace
}  // namespace mlc
