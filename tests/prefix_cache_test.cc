// The engine's prefix cache and adapter cache on the CPU program: cached and uncached replies are
// the same tokens for every text family (sliding-window layers past their window, Gemma 4's shared
// KV), a shared system prompt among 8 concurrent requests is prefilled once, pages are evicted
// under a small KV budget and still answer right, a conversation through Session gives the same
// turns with and without the cache, a media input's adapter runs once for a repeated clip, and a
// request that differs in one clip reuses only the text before it, and a request that asks not to
// be cached leaves neither pages nor adapter rows. Also the page holds of the
// paged cache itself.
#include <gtest/gtest.h>

#include <cmath>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "support/family_checks.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Alone;
using test::Text;

std::vector<int32_t> Ids(int64_t n, int64_t salt) {
  std::vector<int32_t> out = {1};
  for (int64_t i = 1; i < n; ++i) out.push_back(static_cast<int32_t>(3 + (i * 37 + salt * 101) % 500));
  return out;
}

std::vector<int32_t> Cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct FamilyCase {
  std::string name, family, quant;
};

class PrefixCacheFamilies : public ::testing::TestWithParam<FamilyCase> {};

// ExpectEngineMatchesRunsAlone runs each prompt, the same again and a follow-up over its reply
// with the cache, and the follow-ups without it: prompts past the tiny shapes' sliding windows (8
// and 16 positions) and across several pages.
TEST_P(PrefixCacheFamilies, CachedRepliesEqualUncachedOnes) {
  FamilyModelOptions o = test::TinyOptions(GetParam().family, GetParam().quant, 7);
  o.prefill_chunk_size = 32;
  test::ExpectBatchMatchesRunsAlone(o, {Text(Ids(70, 1)), Text(Ids(17, 2)), Text(Ids(5, 3)), Text(Ids(40, 4))}, 6);
}

INSTANTIATE_TEST_SUITE_P(Families, PrefixCacheFamilies,
                         ::testing::Values(FamilyCase{"llama_q4f16_1", "llama", "q4f16_1"},
                                           FamilyCase{"qwen2_q0f32", "qwen2", "q0f32"},
                                           FamilyCase{"phi3_q4f32_1", "phi3", "q4f32_1"},
                                           FamilyCase{"gemma_q4f16_1", "gemma", "q4f16_1"},
                                           FamilyCase{"gemma2_q0f16", "gemma2", "q0f16"},
                                           FamilyCase{"gemma3_q4f16_1", "gemma3", "q4f16_1"},
                                           FamilyCase{"gemma4_q4f16_1", "gemma4", "q4f16_1"}),
                         test::CaseName());

using Reply = test::Collected;

GenerationRequest Greedy(TurnInput in, int64_t max_tokens) {
  GenerationRequest r;
  r.input = std::move(in);
  r.max_tokens = max_tokens;
  return r;
}

// Eight requests that share a 70-position system prompt, submitted at once: the first prefills it,
// the other seven wait for its pages and reuse its four whole pages (64 positions each).
TEST(PrefixCache, SharedSystemPromptAmongConcurrentRequestsIsPrefilledOnce) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("qwen2", "q4f16_1", 5));
  ASSERT_TRUE(m->library);
  EngineOptions eo;
  eo.batch.max_batch_size = 8;
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  const std::vector<int32_t> system = Ids(70, 9);
  std::vector<std::unique_ptr<Reply>> replies;
  std::vector<TurnInput> prompts;
  for (int i = 0; i < 8; ++i) {
    prompts.push_back(Text(Cat(system, {static_cast<int32_t>(100 + i), 7, static_cast<int32_t>(200 + i)})));
    replies.push_back(std::make_unique<Reply>());
    ASSERT_TRUE((*engine)->Submit(Greedy(prompts.back(), 5), replies.back()->Sink()).ok());
  }
  int64_t cached = 0, prefilled = 0;
  for (int i = 0; i < 8; ++i) {
    replies[i]->Wait();
    EXPECT_EQ(replies[i]->tokens, Alone(m->loaded, prompts[i], 5)) << i;
    cached += replies[i]->last.cached_tokens;
    prefilled += replies[i]->last.timings.prefill_positions;
  }
  EXPECT_EQ(cached, 7 * 64);
  const Engine::Stats s = (*engine)->stats();
  EXPECT_EQ(s.cached_tokens, 7 * 64);
  EXPECT_EQ(s.prompt_tokens - s.cached_tokens, 73 + 7 * 9);  // the system prompt once, then 9 each
  EXPECT_EQ(s.prefix_hits, 7);
  EXPECT_GT(prefilled, 0);
}

// A KV budget of 8 pages: each new prompt evicts the least recently used cached pages, every reply
// is still its run alone, and a repeated prompt whose pages survived is a hit.
TEST(PrefixCache, EvictsUnderASmallKvBudgetAndStaysExact) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("llama", "q4f16_1", 3));
  ASSERT_TRUE(m->library);
  EngineOptions eo;
  eo.batch.max_batch_size = 2;
  eo.batch.kv_positions = 128;
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 5; ++i) {
      Reply r;
      TurnInput in = Text(Ids(40, 20 + i));
      ASSERT_TRUE((*engine)->Submit(Greedy(in, 6), r.Sink()).ok());
      r.Wait();
      EXPECT_EQ(r.last.finish_reason, "length") << FormatErrors(r.last.errors);
      EXPECT_EQ(r.tokens, Alone(m->loaded, in, 6)) << round << " " << i;
    }
  }
  Engine::Stats s = (*engine)->stats();
  EXPECT_GT(s.evictions, 0);
  EXPECT_LE(s.cached_pages, s.total_pages);
  // The last prompt's pages are the most recently used: asked again, it is a hit.
  Reply again;
  ASSERT_TRUE((*engine)->Submit(Greedy(Text(Ids(40, 24)), 6), again.Sink()).ok());
  again.Wait();
  EXPECT_EQ(again.last.cached_tokens, 32);
  EXPECT_EQ(again.tokens, Alone(m->loaded, Text(Ids(40, 24)), 6));
}

// A conversation of three turns through Session, with and without the prefix cache: the same
// tokens, text-free; each later turn continues the sequence (kv_length) either way.
TEST(PrefixCache, SessionTurnsAreTheSameWithAndWithoutTheCache) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("gemma2", "q4f16_1", 4));
  ASSERT_TRUE(m->library);
  SessionOptions off;
  off.prefix_cache = false;
  Session cached = m->loaded.NewSession();
  Session plain = m->loaded.NewSession(off);
  GenerationOptions go;
  go.max_tokens = 7;
  for (int turn = 0; turn < 3; ++turn) {
    TurnInput in = Text(Ids(20 + turn * 9, 40 + turn));
    auto a = cached.Generate(in, go);
    auto b = plain.Generate(in, go);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a->tokens, b->tokens) << turn;
    EXPECT_EQ(a->plan.kv_length, b->plan.kv_length) << turn;
    EXPECT_EQ(cached.KvLength(), plain.KvLength());
  }
}

// A tiny Gemma 4 package with its audio tower (library empty on an error).
std::unique_ptr<test::LoadedPackage> AudioPackage() {
  FamilyModelOptions o = test::TinyOptions("gemma4", "q4f16_1", 6);
  o.audio = true;
  return test::LoadFamilyPackage(o);
}

// One second of a sine at `freq` radians a sample.
NDArray Clip(double freq) {
  NDArray a = NDArray::Empty({16000}, DlFloat32());
  for (int64_t i = 0; i < 16000; ++i) a.data<float>()[i] = static_cast<float>(0.4 * std::sin(freq * i));
  return a;
}

// 35 text positions, the clip, 3 more.
TurnInput ClipTurn(const BoundContract& c, const NDArray& pcm) {
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{Ids(35, 11)}, "/0"});
  in.pieces.push_back(PromptPiece{AudioPiece(*c.audio, std::nullopt), "/1"});
  in.pieces.push_back(PromptPiece{TextPiece{{60, 61, 62}}, "/2"});
  in.media = {NDArray(), pcm, NDArray()};
  return in;
}

// An audio prompt on Gemma 4 with its audio tower: the same clip again runs no adapter (its rows
// come from the adapter cache) and reuses the cached pages past the clip; a different clip reruns
// the adapter and reuses only the whole pages before it; every reply equals its run alone.
TEST(PrefixCache, AdapterRunsOncePerClipAndADifferentClipReusesOnlyTheTextBefore) {
  auto m = AudioPackage();
  ASSERT_TRUE(m->library);
  const BoundContract& c = m->loaded.bound.contract;
  ASSERT_TRUE(c.audio);
  auto turn = [&](const NDArray& pcm) { return ClipTurn(c, pcm); };
  auto clip = Clip;
  EngineOptions eo;
  eo.batch.max_batch_size = 2;
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  auto run = [&](const TurnInput& in) {
    Reply r;
    EXPECT_TRUE((*engine)->Submit(Greedy(in, 5), r.Sink()).ok());
    r.Wait();
    EXPECT_EQ(r.last.finish_reason, "length") << FormatErrors(r.last.errors);
    EXPECT_EQ(r.tokens, Alone(m->loaded, in, 5));
    return r.last;
  };
  const StreamEvent first = run(turn(clip(0.05)));
  EXPECT_EQ(first.cached_tokens, 0);
  EXPECT_EQ((*engine)->stats().adapter_runs, 1);
  const StreamEvent same = run(turn(clip(0.05)));
  EXPECT_EQ((*engine)->stats().adapter_runs, 1);
  EXPECT_EQ((*engine)->stats().adapter_hits, 1);
  EXPECT_EQ(same.cached_tokens, (same.prompt_tokens - 1) / 16 * 16);
  EXPECT_GT(same.cached_tokens, 48);  // past the clip's first rows
  const StreamEvent other = run(turn(clip(0.07)));
  EXPECT_EQ((*engine)->stats().adapter_runs, 2);
  EXPECT_EQ(other.cached_tokens, 32);  // 35 text positions (and the clip's prefix id) before the rows
}

// A request with cache = false (a transcript's window) leaves nothing behind: the same clip again
// runs the adapter again and reuses no page, its answer the same; a conversation's request cannot
// opt out. Cached requests after it still share.
TEST(PrefixCache, AnUncachedRequestLeavesNeitherPagesNorAdapterRows) {
  auto m = AudioPackage();
  ASSERT_TRUE(m->library);
  const BoundContract& c = m->loaded.bound.contract;
  ASSERT_TRUE(c.audio);
  const TurnInput in = ClipTurn(c, Clip(0.05));
  auto engine = Engine::Start(m->loaded, nullptr, EngineOptions{});
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  const std::vector<int32_t> alone = Alone(m->loaded, in, 5);
  auto run = [&](bool cache) {
    GenerationRequest g = Greedy(in, 5);
    g.cache = cache;
    Reply r;
    EXPECT_TRUE((*engine)->Submit(std::move(g), r.Sink()).ok());
    r.Wait();
    EXPECT_EQ(r.last.finish_reason, "length") << FormatErrors(r.last.errors);
    EXPECT_EQ(r.tokens, alone);
    return r.last;
  };
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(run(false).cached_tokens, 0);
    EXPECT_EQ((*engine)->stats().adapter_runs, i + 1);
    EXPECT_EQ((*engine)->stats().adapter_hits, 0);
    EXPECT_EQ((*engine)->stats().cached_pages, 0);
  }
  EXPECT_EQ(run(true).cached_tokens, 0);
  EXPECT_GT((*engine)->stats().cached_pages, 0);
  EXPECT_GT(run(true).cached_tokens, 48);
  EXPECT_EQ((*engine)->stats().adapter_runs, 3);
  GenerationRequest g = Greedy(in, 5);
  g.cache = false;
  g.conversation = (*engine)->OpenConversation();
  Reply r;
  auto refused = (*engine)->Submit(std::move(g), r.Sink());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.errors().front().path, "/cache");
}

// The paged cache's holds: a page shared by two sequences and the cache goes back to the pool only
// when the last holder lets go; a sequence added over shared pages reads them and writes its own.
TEST(PrefixCache, PagesGoBackWhenTheLastHolderLetsGo) {
  auto m = test::LoadFamilyPackage(test::TinyOptions("llama", "q0f32", 2));
  ASSERT_TRUE(m->library);
  BatchOptions bo;
  bo.max_batch_size = 4;
  bo.kv_positions = 256;
  auto batch = BatchModel::Create(m->loaded, bo);
  ASSERT_TRUE(batch.ok()) << FormatErrors(batch.errors());
  BatchModel& b = **batch;
  ASSERT_TRUE(b.kv().SharesPages());
  std::vector<PreparedPrompt> prepared;
  auto last = test::PrefillAll(b, {Text(Ids(40, 1))}, {5}, &prepared);
  ASSERT_EQ(last.size(), 1u);
  const int64_t free_before = b.kv().FreePages();
  auto p0 = b.kv().RetainPage(5, 0);
  auto p1 = b.kv().RetainPage(5, 1);
  ASSERT_TRUE(p0.ok() && p1.ok());
  EXPECT_FALSE(b.kv().RetainPage(5, 2).ok());  // positions 32..39: not a full page
  const std::vector<int32_t> shared = {*p0, *p1};
  ASSERT_TRUE(b.kv().AddSequenceWithPages(9, shared).ok());
  EXPECT_EQ(*b.kv().SequenceLength(9), 32);
  EXPECT_EQ(b.kv().FreePages(), free_before);  // nothing new taken
  ASSERT_TRUE(b.kv().RemoveSequence(5).ok());
  EXPECT_EQ(b.kv().FreePages(), free_before + 1);  // page 2 was its own
  ASSERT_TRUE(b.kv().RemoveSequence(9).ok());
  EXPECT_EQ(b.kv().FreePages(), free_before + 1);  // the retained holds keep pages 0 and 1
  b.kv().ReleasePage(*p0);
  b.kv().ReleasePage(*p1);
  EXPECT_EQ(b.kv().FreePages(), b.kv().TotalPages());
}

}  // namespace
}  // namespace mlc
