// Batching on the built-in CPU program, driven by BatchModel and the Engine exactly as the
// reference program is: several sequences in its paged KV cache, prefill of several sequences
// laid end to end and batched decode giving each sequence the greedy tokens it gets alone (mixed
// lengths; llama, qwen2, phi3 and gemma2; 4-bit and float weights), fork, remove, the page
// budget and the context window as errors that change nothing, and the one-sequence use.
#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Alone;
using test::Collected;
using test::Greedy;
using test::PrefillAll;
using test::Text;

using Model = test::LoadedPackage;

std::unique_ptr<Model> MakeModel(const std::string& family, const std::string& quant) {
  auto m = std::make_unique<Model>();
  FamilyModelOptions o;
  o.family = family;
  o.quantization = quant;
  o.seed = 5;
  o.prefill_chunk_size = 32;
  auto w = WriteFamilyModel(m->dir.path(), o);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  test::LoadInto(*m, OpenPackageLibrary(m->dir.path()));
  return m;
}


std::vector<int32_t> Ids(int64_t n, int64_t salt) {
  std::vector<int32_t> out = {1};
  for (int64_t i = 1; i < n; ++i) out.push_back(static_cast<int32_t>(3 + (i * 37 + salt * 101) % 500));
  return out;
}

// Mixed lengths: one position, a few, one chunk of 32 exactly, three chunks.
std::vector<TurnInput> Prompts() {
  return {Text(Ids(1, 0)), Text(Ids(5, 1)), Text(Ids(32, 2)), Text(Ids(75, 3)), Text(Ids(12, 4))};
}




struct FamilyCase {
  std::string name, family, quant;
};

class CpuBatch : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(CpuBatch, EachSequenceMatchesItsRunAlone) {
  auto m = MakeModel(GetParam().family, GetParam().quant);
  ASSERT_TRUE(m->library);
  ASSERT_EQ(m->loaded.bound.contract.pair, GenerationPair::kEmbeds);
  auto prompts = Prompts();
  const int64_t kTokens = 10;
  std::vector<std::vector<int32_t>> alone;
  for (const TurnInput& in : prompts) alone.push_back(Alone(m->loaded, in, kTokens));

  BatchOptions bo;
  bo.max_batch_size = 8;
  auto batch = BatchModel::Create(m->loaded, bo);
  ASSERT_TRUE(batch.ok()) << FormatErrors(batch.errors());
  BatchModel& b = **batch;
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(static_cast<int64_t>(i) * 7 + 3);
  std::vector<PreparedPrompt> prepared;
  auto last = PrefillAll(b, prompts, ids, &prepared);
  ASSERT_EQ(last.size(), prompts.size());
  std::vector<std::vector<int32_t>> batched(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) batched[i].push_back(Greedy(last[i]));
  // All decode together; the sequences hold different lengths throughout.
  for (int64_t step = 1; step < kTokens; ++step) {
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < prompts.size(); ++i) tokens.push_back(batched[i].back());
    auto logits = b.Decode(ids, tokens);
    ASSERT_TRUE(logits.ok()) << FormatErrors(logits.errors());
    ASSERT_EQ(logits->size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) batched[i].push_back(Greedy((*logits)[i]));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i], alone[i]) << "prompt " << i;
    auto len = b.kv().SequenceLength(ids[i]);
    ASSERT_TRUE(len.ok());
    EXPECT_EQ(*len, prepared[i].plan.prompt_length + kTokens - 1);
  }
  // Removing every sequence gives every page back.
  for (int64_t id : ids) ASSERT_TRUE(b.kv().RemoveSequence(id).ok());
  EXPECT_EQ(b.kv().FreePages(), b.kv().TotalPages());
}

INSTANTIATE_TEST_SUITE_P(Families, CpuBatch,
                         ::testing::Values(FamilyCase{"llama_q4f16_1", "llama", "q4f16_1"},
                                           FamilyCase{"llama_q0f32", "llama", "q0f32"},
                                           FamilyCase{"qwen2_q4f16_1", "qwen2", "q4f16_1"},
                                           FamilyCase{"qwen2_q0f32", "qwen2", "q0f32"},
                                           FamilyCase{"phi3_q4f32_1", "phi3", "q4f32_1"},
                                           FamilyCase{"gemma2_q0f16", "gemma2", "q0f16"}),
                         test::CaseName());

TEST(CpuBatchKv, ForkContinuesLikeTheParentAndRemoveFreesPages) {
  auto m = MakeModel("qwen2", "q4f16_1");
  ASSERT_TRUE(m->library);
  auto batch = BatchModel::Create(m->loaded, BatchOptions{});
  ASSERT_TRUE(batch.ok()) << FormatErrors(batch.errors());
  BatchModel& b = **batch;
  TurnInput prompt = Text(Ids(40, 9));
  std::vector<PreparedPrompt> prepared;
  auto last = PrefillAll(b, {prompt}, {1}, &prepared);
  ASSERT_EQ(last.size(), 1u);
  const int64_t used = b.kv().TotalPages() - b.kv().FreePages();
  EXPECT_EQ(used, 3);  // 40 positions in pages of 16
  ASSERT_TRUE(b.kv().ForkSequence(1, 2).ok());
  EXPECT_EQ(b.kv().TotalPages() - b.kv().FreePages(), 2 * used);
  EXPECT_FALSE(b.kv().ForkSequence(1, 2).ok());  // 2 exists
  EXPECT_FALSE(b.kv().ForkSequence(9, 3).ok());  // no 9
  auto len = b.kv().SequenceLength(2);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 40);
  std::vector<int32_t> one = {Greedy(last[0])}, two = one;
  for (int step = 0; step < 6; ++step) {
    std::vector<int64_t> ids = {1, 2};
    std::vector<int32_t> tokens = {one.back(), two.back()};
    auto l = b.Decode(ids, tokens);
    ASSERT_TRUE(l.ok()) << FormatErrors(l.errors());
    one.push_back(Greedy((*l)[0]));
    two.push_back(Greedy((*l)[1]));
  }
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, Alone(m->loaded, prompt, 7));
  // begin_forward errors change nothing.
  std::vector<int64_t> dup = {1, 1}, lens = {1, 1};
  EXPECT_FALSE(b.kv().BeginForward(dup, lens).ok());
  std::vector<int64_t> unknown = {7}, one_len = {1};
  EXPECT_FALSE(b.kv().BeginForward(unknown, one_len).ok());
  std::vector<int64_t> first = {1}, zero = {0};
  EXPECT_FALSE(b.kv().BeginForward(first, zero).ok());
  // Removing the parent keeps the child going; removing both frees every page.
  ASSERT_TRUE(b.kv().RemoveSequence(1).ok());
  EXPECT_EQ(b.kv().TotalPages() - b.kv().FreePages(), used);
  std::vector<int64_t> child = {2};
  std::vector<int32_t> token = {two.back()};
  ASSERT_TRUE(b.Decode(child, token).ok());
  ASSERT_TRUE(b.kv().RemoveSequence(2).ok());
  EXPECT_EQ(b.kv().FreePages(), b.kv().TotalPages());
  EXPECT_FALSE(b.kv().RemoveSequence(2).ok());
  EXPECT_EQ(b.kv().TotalLength(), 0);
}

TEST(CpuBatchKv, PageBudgetAndContextWindowAreErrorsThatChangeNothing) {
  auto m = MakeModel("llama", "q4f16_1");
  ASSERT_TRUE(m->library);
  BatchOptions bo;
  bo.kv_positions = 48;  // three pages of 16
  auto batch = BatchModel::Create(m->loaded, bo);
  ASSERT_TRUE(batch.ok());
  BatchModel& b = **batch;
  ASSERT_EQ(b.kv().TotalPages(), 3);
  ASSERT_EQ(b.kv().PageSize(), 16);
  ASSERT_TRUE(b.kv().AddSequence(0).ok());
  ASSERT_TRUE(b.kv().AddSequence(1).ok());
  auto p = b.Prepare(Text(Ids(30, 1)), 0);
  ASSERT_TRUE(p.ok());
  auto e = b.ChunkEmbeddings(p->plan.chunks[0], *p);
  ASSERT_TRUE(e.ok());
  SequenceChunk a{0, &p->plan.chunks[0], *e}, c{1, &p->plan.chunks[0], *e};
  ASSERT_TRUE(b.Prefill(std::span<const SequenceChunk>(&a, 1)).ok());  // two pages
  auto over = b.Prefill(std::span<const SequenceChunk>(&c, 1));         // two more: one is free
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
  EXPECT_NE(over.error().message.find("pages"), std::string::npos) << over.error().message;
  auto len = b.kv().SequenceLength(1);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 0);
  EXPECT_EQ(b.kv().FreePages(), 1);
  // Both in one call fails as a whole: sequence 0 does not move either.
  SequenceChunk both[] = {SequenceChunk{0, &p->plan.chunks[0], *e}, c};
  EXPECT_FALSE(b.Prefill(both).ok());
  EXPECT_EQ(*b.kv().SequenceLength(0), 30);
  // A sequence cannot hold more positions than the cache has (its context window).
  ASSERT_TRUE(b.kv().RemoveSequence(1).ok());
  auto fill = b.Prepare(Text(Ids(18, 2)), 30);
  ASSERT_TRUE(fill.ok()) << FormatErrors(fill.errors());
  auto fe = b.ChunkEmbeddings(fill->plan.chunks[0], *fill);
  ASSERT_TRUE(fe.ok());
  SequenceChunk f{0, &fill->plan.chunks[0], *fe};
  ASSERT_TRUE(b.Prefill(std::span<const SequenceChunk>(&f, 1)).ok());  // 48: full
  std::vector<int64_t> ids = {0};
  std::vector<int32_t> token = {5};
  auto past = b.Decode(ids, token);
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.error().code, ErrorCode::kLimit);
  EXPECT_EQ(*b.kv().SequenceLength(0), 48);
  // At most max_batch_size sequences.
  BatchOptions two;
  two.max_batch_size = 2;
  auto small = BatchModel::Create(m->loaded, two);
  ASSERT_TRUE(small.ok());
  ASSERT_TRUE((*small)->kv().AddSequence(4).ok());
  ASSERT_TRUE((*small)->kv().AddSequence(5).ok());
  auto third = (*small)->kv().AddSequence(6);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kLimit);
}

// Without begin_forward the library's functions run the only sequence, as Session uses them; a
// cache holding two sequences asks for their names.
TEST(CpuBatchKv, UnnamedCallsRunTheOnlySequence) {
  auto m = MakeModel("llama", "q0f32");
  ASSERT_TRUE(m->library);
  const PackedFunction* create = m->library->GetFunction("create_tir_paged_kv_cache");
  const PackedFunction* embed = m->library->GetFunction("embed");
  const PackedFunction* prefill = m->library->GetFunction("prefill");
  ASSERT_TRUE(create && embed && prefill);
  std::vector<Value> args = {int64_t{2}, int64_t{128}, int64_t{32}, int64_t{16}, int64_t{0}};
  auto kv = (*create)(args);
  ASSERT_TRUE(kv.ok());
  ObjectRef cache = std::get<ObjectRef>(kv->front());
  std::vector<int32_t> ids = Ids(6, 1);
  std::vector<Value> eargs = {Int32Tensor(ids, {6}), ObjectRef(m->loaded.params)};
  auto e = (*embed)(eargs);
  ASSERT_TRUE(e.ok());
  const NDArray& embeds = std::get<NDArray>(e->front());
  NDArray rows = embeds.Reshape({1, 6, embeds.shape()[1]});
  std::vector<Value> pargs = {rows, cache, ObjectRef(m->loaded.params)};
  auto out = (*prefill)(pargs);
  ASSERT_TRUE(out.ok()) << FormatErrors(out.errors());
  EXPECT_EQ(std::get<NDArray>(out->front()).shape(), (std::vector<int64_t>{1, 1, 512}));
  auto* paged = dynamic_cast<PagedKvState*>(cache.get());
  ASSERT_NE(paged, nullptr);
  EXPECT_EQ(*paged->SequenceLength(0), 6);
  ASSERT_TRUE(paged->AddSequence(1).ok());
  auto unnamed = (*prefill)(pargs);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("begin_forward"), std::string::npos) << unnamed.error().message;
  // Named: lengths that do not add up to the call's positions are refused.
  std::vector<int64_t> seqs = {0, 1}, lens = {2, 2};
  ASSERT_TRUE(paged->BeginForward(seqs, lens).ok());
  auto wrong = (*prefill)(pargs);
  paged->EndForward();
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(*paged->SequenceLength(0), 6);
}

// ---- the engine over the CPU program ----

TEST(CpuBatchEngine, ContinuousBatchingMatchesRunsAlone) {
  auto m = MakeModel("qwen2", "q4f16_1");
  ASSERT_TRUE(m->library);
  auto prompts = Prompts();
  EngineOptions eo;
  eo.batch.max_batch_size = 3;  // fewer than the requests: some wait
  auto engine = Engine::Start(m->loaded, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  std::vector<std::unique_ptr<Collected>> got;
  for (size_t i = 0; i < prompts.size(); ++i) {
    got.push_back(std::make_unique<Collected>());
    GenerationRequest r;
    r.input = prompts[i];
    r.max_tokens = 4 + static_cast<int64_t>(i) * 3;
    ASSERT_TRUE((*engine)->Submit(r, got[i]->Sink()).ok());
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    got[i]->Wait();
    EXPECT_EQ(got[i]->last.finish_reason, "length");
    EXPECT_EQ(got[i]->tokens, Alone(m->loaded, prompts[i], 4 + static_cast<int64_t>(i) * 3)) << i;
  }
  EXPECT_EQ((*engine)->stats().max_running, 3);
  (*engine)->Shutdown(true);
  // Every page is free or held by the prefix cache.
  EXPECT_EQ((*engine)->stats().free_pages + (*engine)->stats().cached_pages, (*engine)->stats().total_pages);
}

}  // namespace
}  // namespace mlc
