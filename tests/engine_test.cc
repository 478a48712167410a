// Batching on real reference packages: the paged KV cache's sequence interface (add, remove,
// fork, begin_forward errors, running out of pages), batched prefill and decode giving each
// sequence exactly the greedy tokens it gets alone (mixed lengths and modalities, both pairs),
// and the continuous-batching engine (late joiners, a queue, stop ids and strings, cancellation,
// the KV page budget, a slow adapter that does not stall running streams, cancellation that
// interrupts an adapter or a prefill call in progress).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "base/interrupt.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "runtime/function_table.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::Alone;
using test::Greedy;
using test::PrefillAll;
using test::Text;

struct Model : test::LoadedPackage {
  std::unique_ptr<Tokenizer> tokenizer;
};

std::unique_ptr<Model> MakeModel(ReferencePairs pairs, int64_t chunk = 32) {
  auto m = std::make_unique<Model>();
  ReferenceModelOptions o;
  o.seed = 11;
  o.pairs = pairs;
  o.audio = o.image = true;
  o.prefill_chunk_size = chunk;
  o.context_window_size = 512;
  auto w = WriteReferenceModel(m->dir.path(), o);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  test::LoadInto(*m, OpenReferenceLibrary(m->dir.path()));
  auto tok = Tokenizer::FromDirectory(m->dir.path());
  if (tok.ok()) m->tokenizer = std::move(*tok);
  return m;
}

NDArray Pcm(int64_t n, double freq) {
  NDArray a = NDArray::Empty({n}, DlFloat32());
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = static_cast<float>(0.5 * std::sin(freq * i));
  return a;
}

NDArray Pixels(int64_t size, int salt) {
  NDArray a = NDArray::Empty({1, size, size, 3}, DlUInt8());
  for (int64_t i = 0; i < a.Elements(); ++i) a.data<uint8_t>()[i] = static_cast<uint8_t>((i * 37 + salt) % 251);
  return a;
}


// Prompts of mixed lengths and modalities.
std::vector<TurnInput> Prompts(const BoundContract& c) {
  std::vector<TurnInput> out;
  out.push_back(Text({1, 20, 21}));
  std::vector<int32_t> long_text;
  for (int i = 0; i < 75; ++i) long_text.push_back(static_cast<int32_t>(10 + (i * 7) % 300));
  out.push_back(Text(long_text));  // three chunks of at most 32
  TurnInput mixed;
  mixed.pieces.push_back(PromptPiece{TextPiece{{1, 50, 51}}, "/0"});
  mixed.pieces.push_back(PromptPiece{AudioPiece(*c.audio, std::nullopt), "/1"});
  mixed.pieces.push_back(PromptPiece{TextPiece{{60, 61}}, "/2"});
  mixed.pieces.push_back(PromptPiece{ImagePiece(*c.image), "/3"});
  mixed.pieces.push_back(PromptPiece{TextPiece{{70}}, "/4"});
  mixed.media = {NDArray(), Pcm(5000, 0.02), NDArray(), Pixels(32, 3), NDArray()};
  out.push_back(mixed);
  TurnInput audio;
  audio.pieces.push_back(PromptPiece{AudioPiece(*c.audio, std::nullopt), "/0"});
  audio.pieces.push_back(PromptPiece{TextPiece{{80, 81, 82, 83}}, "/1"});
  audio.media = {Pcm(1900, 0.05), NDArray()};
  out.push_back(audio);
  TurnInput image;
  image.pieces.push_back(PromptPiece{ImagePiece(*c.image), "/0"});
  image.media = {Pixels(32, 9)};
  out.push_back(image);
  return out;
}



class BatchPairs : public ::testing::TestWithParam<ReferencePairs> {};

TEST_P(BatchPairs, EachSequenceMatchesItsRunAlone) {
  auto m = MakeModel(GetParam());
  ASSERT_TRUE(m->library);
  auto prompts = Prompts(m->loaded.bound.contract);
  const int64_t kTokens = 10;
  std::vector<std::vector<int32_t>> alone;
  for (const TurnInput& in : prompts) alone.push_back(Alone(m->loaded, in, kTokens));

  BatchOptions bo;
  bo.max_batch_size = 8;
  auto batch = BatchModel::Create(m->loaded, bo);
  ASSERT_TRUE(batch.ok()) << FormatErrors(batch.errors());
  BatchModel& b = **batch;
  std::vector<int64_t> seq_ids;
  for (size_t i = 0; i < prompts.size(); ++i) seq_ids.push_back(static_cast<int64_t>(i) * 10);
  std::vector<PreparedPrompt> prepared;
  auto last = PrefillAll(b, prompts, seq_ids, &prepared);
  ASSERT_EQ(last.size(), prompts.size());
  std::vector<std::vector<int32_t>> batched(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) batched[i].push_back(Greedy(last[i]));
  // Decode all together; the fork of sequence 2 joins after two steps and must continue alike.
  for (int64_t step = 1; step < kTokens; ++step) {
    std::vector<int64_t> ids;
    std::vector<int32_t> tokens;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ids.push_back(static_cast<int64_t>(i) * 10);
      tokens.push_back(batched[i].back());
    }
    auto logits = b.Decode(ids, tokens);
    ASSERT_TRUE(logits.ok()) << FormatErrors(logits.errors());
    for (size_t i = 0; i < prompts.size(); ++i) batched[i].push_back(Greedy((*logits)[i]));
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(batched[i], alone[i]) << "prompt " << i;
    auto len = b.kv().SequenceLength(static_cast<int64_t>(i) * 10);
    ASSERT_TRUE(len.ok());
    EXPECT_EQ(*len, prepared[i].plan.prompt_length + kTokens - 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Pairs, BatchPairs,
                         ::testing::Values(ReferencePairs::kTokens, ReferencePairs::kEmbeds));

TEST(PagedKv, ForkContinuesLikeTheParent) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  auto batch = BatchModel::Create(m->loaded, BatchOptions{});
  ASSERT_TRUE(batch.ok());
  BatchModel& b = **batch;
  ASSERT_TRUE(b.kv().AddSequence(1).ok());
  auto p = b.Prepare(Text({1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}), 0);
  ASSERT_TRUE(p.ok());
  std::vector<float> logits;
  for (const PrefillChunk& c : p->plan.chunks) {
    auto e = b.ChunkEmbeddings(c, *p);
    ASSERT_TRUE(e.ok());
    SequenceChunk sc{1, &c, *e};
    auto l = b.Prefill(std::span<const SequenceChunk>(&sc, 1));
    ASSERT_TRUE(l.ok()) << FormatErrors(l.errors());
    logits.assign((*l)[0].begin(), (*l)[0].end());
  }
  const int64_t used = b.kv().TotalPages() - b.kv().FreePages();
  ASSERT_TRUE(b.kv().ForkSequence(1, 2).ok());
  EXPECT_EQ(b.kv().TotalPages() - b.kv().FreePages(), 2 * used);
  EXPECT_FALSE(b.kv().ForkSequence(1, 2).ok());  // 2 exists
  EXPECT_FALSE(b.kv().ForkSequence(9, 3).ok());  // no 9
  int32_t t = Greedy(logits);
  std::vector<int32_t> one = {t}, two = {t};
  for (int step = 0; step < 5; ++step) {
    std::vector<int64_t> ids = {1, 2};
    std::vector<int32_t> tokens = {one.back(), two.back()};
    auto l = b.Decode(ids, tokens);
    ASSERT_TRUE(l.ok()) << FormatErrors(l.errors());
    one.push_back(Greedy((*l)[0]));
    two.push_back(Greedy((*l)[1]));
  }
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, Alone(m->loaded, Text({1, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36}), 6));
  // begin_forward errors change nothing.
  std::vector<int64_t> dup = {1, 1}, lens = {1, 1};
  EXPECT_FALSE(b.kv().BeginForward(dup, lens).ok());
  std::vector<int64_t> unknown = {7};
  std::vector<int64_t> one_len = {1};
  EXPECT_FALSE(b.kv().BeginForward(unknown, one_len).ok());
  ASSERT_TRUE(b.kv().RemoveSequence(1).ok());
  ASSERT_TRUE(b.kv().RemoveSequence(2).ok());
  EXPECT_EQ(b.kv().FreePages(), b.kv().TotalPages());
  EXPECT_FALSE(b.kv().RemoveSequence(2).ok());
}

TEST(PagedKv, RunningOutOfPagesIsAnError) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  BatchOptions bo;
  bo.kv_positions = 48;  // three pages of 16
  auto batch = BatchModel::Create(m->loaded, bo);
  ASSERT_TRUE(batch.ok());
  BatchModel& b = **batch;
  ASSERT_EQ(b.kv().TotalPages(), 3);
  ASSERT_TRUE(b.kv().AddSequence(0).ok());
  ASSERT_TRUE(b.kv().AddSequence(1).ok());
  std::vector<int32_t> ids(30, 40);
  auto p0 = b.Prepare(Text(ids), 0);
  ASSERT_TRUE(p0.ok());
  auto e0 = b.ChunkEmbeddings(p0->plan.chunks[0], *p0);
  ASSERT_TRUE(e0.ok());
  SequenceChunk a{0, &p0->plan.chunks[0], *e0}, c{1, &p0->plan.chunks[0], *e0};
  ASSERT_TRUE(b.Prefill(std::span<const SequenceChunk>(&a, 1)).ok());  // two pages
  auto over = b.Prefill(std::span<const SequenceChunk>(&c, 1));         // two more: one is free
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
  EXPECT_NE(over.error().message.find("pages"), std::string::npos) << over.error().message;
  auto len = b.kv().SequenceLength(1);
  ASSERT_TRUE(len.ok());
  EXPECT_EQ(*len, 0);  // nothing changed
  EXPECT_EQ(b.kv().FreePages(), 1);
}

// ---- The engine ----

struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::string text;
  bool done = false;
  StreamEvent last;
  int events = 0;

  StreamSink Sink() {
    return [this](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      logprobs.insert(logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      text += e.text;
      ++events;
      if (e.done) {
        done = true;
        last = e;
      }
      cv.notify_all();
    };
  }
  void WaitEvents(int n) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return events >= n || done; });
  }
  void WaitDone() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

GenerationRequest Greedy(const TurnInput& in, int64_t max_tokens) {
  GenerationRequest r;
  r.input = in;
  r.max_tokens = max_tokens;
  return r;
}

TEST(Engine, ContinuousBatchingMatchesRunsAlone) {
  auto m = MakeModel(ReferencePairs::kTokens, 16);
  ASSERT_TRUE(m->library);
  auto prompts = Prompts(m->loaded.bound.contract);
  EngineOptions eo;
  eo.batch.max_batch_size = 3;  // fewer than the requests: some wait in the queue
  eo.prefill_chunk_size = 24;   // chunks of new requests share steps with decodes
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  std::vector<std::unique_ptr<Collected>> got;
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < prompts.size() * 2; ++i) {
    lengths.push_back(6 + static_cast<int64_t>(i % 4) * 5);
    got.push_back(std::make_unique<Collected>());
  }
  // Half join at once, the others one by one while earlier ones are decoding.
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = (*engine)->Submit(Greedy(prompts[i], lengths[i]), got[i]->Sink());
    ASSERT_TRUE(id.ok()) << FormatErrors(id.errors());
  }
  for (size_t i = prompts.size(); i < got.size(); ++i) {
    got[i - prompts.size()]->WaitEvents(2);
    auto id = (*engine)->Submit(Greedy(prompts[i % prompts.size()], lengths[i]), got[i]->Sink());
    ASSERT_TRUE(id.ok()) << FormatErrors(id.errors());
  }
  for (size_t i = 0; i < got.size(); ++i) {
    got[i]->WaitDone();
    const TurnInput& in = prompts[i % prompts.size()];
    EXPECT_EQ(got[i]->tokens, Alone(m->loaded, in, lengths[i])) << "request " << i;
    EXPECT_EQ(got[i]->last.finish_reason, "length");
    EXPECT_EQ(got[i]->last.completion_tokens, lengths[i]);
    EXPECT_GT(got[i]->last.prompt_tokens, 0);
  }
  auto stats = (*engine)->stats();
  EXPECT_EQ(stats.max_running, 3);
  (*engine)->Shutdown(true);
  EXPECT_EQ((*engine)->stats().free_pages, stats.total_pages);
}

TEST(Engine, StopIdsAndStopStringsEndTheReply) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library && m->tokenizer);
  TurnInput in = Text({1, 33, 34, 35});
  std::vector<int32_t> alone = Alone(m->loaded, in, 12);
  ASSERT_EQ(alone.size(), 12u);
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  // A stop id: the reply ends before it.
  Collected a;
  GenerationRequest ra = Greedy(in, 12);
  ra.stop_token_ids = {alone[4]};
  ASSERT_TRUE((*engine)->Submit(ra, a.Sink()).ok());
  a.WaitDone();
  size_t first = static_cast<size_t>(std::find(alone.begin(), alone.end(), alone[4]) - alone.begin());
  EXPECT_EQ(a.tokens, std::vector<int32_t>(alone.begin(), alone.begin() + static_cast<long>(first)));
  EXPECT_EQ(a.last.finish_reason, "stop");
  // A stop string: the text of the alone run, cut before it.
  std::string full = m->tokenizer->Decode(alone);
  ASSERT_GE(full.size(), 6u);
  std::string stop = full.substr(full.size() / 2, 2);
  Collected b;
  GenerationRequest rb = Greedy(in, 12);
  rb.stop_strings = {stop};
  ASSERT_TRUE((*engine)->Submit(rb, b.Sink()).ok());
  b.WaitDone();
  EXPECT_EQ(b.text, full.substr(0, full.find(stop)));
  EXPECT_EQ(b.last.finish_reason, "stop");
}

// The log-probabilities end where the text does: the tokens a stop string cut have none, each
// kept token has its own, in order.
TEST(Engine, StopStringCutsTheLogprobsOfCutTokens) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library && m->tokenizer);
  TurnInput in = Text({1, 33, 34, 35});
  std::vector<int32_t> alone = Alone(m->loaded, in, 16);
  ASSERT_EQ(alone.size(), 16u);
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  // Where each token's text starts in the whole reply's.
  std::vector<size_t> starts;
  for (size_t i = 0; i < alone.size(); ++i) {
    starts.push_back(m->tokenizer->Decode(std::span<const int32_t>(alone.data(), i)).size());
  }
  const std::string full = m->tokenizer->Decode(alone);
  int checked = 0;
  for (size_t from : {size_t{5}, size_t{9}}) {
    // A stop string that starts inside the reply (at a token's start, or one byte after it).
    for (size_t skew : {size_t{0}, size_t{1}}) {
      if (starts[from] + skew + 3 > full.size()) continue;
      const std::string stop = full.substr(starts[from] + skew, 3);
      const size_t cut = full.find(stop);
      Collected c;
      GenerationRequest r = Greedy(in, 16);
      r.stop_strings = {stop};
      r.top_logprobs = 2;
      ASSERT_TRUE((*engine)->Submit(r, c.Sink()).ok());
      c.WaitDone();
      ASSERT_EQ(c.text, full.substr(0, cut)) << stop;
      EXPECT_EQ(c.last.finish_reason, "stop");
      size_t kept = 0;
      while (kept < starts.size() && starts[kept] < cut) ++kept;
      ASSERT_EQ(c.logprobs.size(), kept) << "stop " << stop << " at byte " << cut;
      if (cut == starts[from]) {
        EXPECT_LT(c.logprobs.size(), c.tokens.size()) << stop;  // the token is cut
      }
      for (size_t i = 0; i < kept; ++i) EXPECT_EQ(c.logprobs[i].token, alone[i]) << i;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
  // Without a stop string every token has its entry.
  Collected all;
  GenerationRequest r = Greedy(in, 16);
  r.top_logprobs = 0;
  ASSERT_TRUE((*engine)->Submit(r, all.Sink()).ok());
  all.WaitDone();
  EXPECT_EQ(all.logprobs.size(), 16u);
}

// Under a grammar, a token the mask refuses is never among the alternatives: every top entry
// continues the JSON text from the state its step was sampled in.
TEST(Engine, MaskedTokensAreNeverTopLogprobs) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library && m->tokenizer);
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  auto grammar = JsonGrammar::FromSchema(OrderedJson::parse(
      R"({"type":"object","properties":{"a":{"enum":["yes","no"]},"b":{"type":"integer"}},"required":["a","b"]})"));
  ASSERT_TRUE(grammar.ok());
  auto vocabulary = TokenVocabulary::FromTokenizer(*m->tokenizer);
  for (uint64_t seed : {1u, 2u, 3u}) {
    Collected c;
    GenerationRequest r = Greedy(Text({1, 40, 41}), 24);
    r.sampler.temperature = 1;
    r.sampler.seed = seed;
    r.top_logprobs = 20;
    r.json = JsonConstraint{*grammar, vocabulary};
    ASSERT_TRUE((*engine)->Submit(r, c.Sink()).ok());
    c.WaitDone();
    ASSERT_FALSE(c.logprobs.empty());
    JsonGrammar::State state = (*grammar)->Start();
    for (const TokenLogprobs& t : c.logprobs) {
      EXPECT_FALSE(t.top.empty());
      for (const auto& [id, lp] : t.top) {
        EXPECT_TRUE(std::isfinite(lp)) << id;
        JsonGrammar::State copy = state;
        EXPECT_TRUE(!vocabulary->bytes(id).empty() && (*grammar)->Feed(copy, vocabulary->bytes(id)))
            << "token " << id << " is masked at this step";
      }
      ASSERT_TRUE((*grammar)->Feed(state, vocabulary->bytes(t.token)));
    }
  }
}

// A turn whose fixed-size images cannot fit is refused by the context check before any image is
// decoded: undecodable bytes get the context error, not a decode error; a turn that fits gets
// to decoding (and its error).
TEST(PrepareTurn, ContextCheckComesBeforeAnyImageIsDecoded) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  const BoundContract& c = m->loaded.bound.contract;
  ASSERT_TRUE(c.image);
  auto garbage = std::make_shared<const std::string>("not an image at all");
  auto image = [&garbage](int i) {
    RequestSegment s;
    s.kind = SegmentKind::kImage;
    s.bytes = garbage;
    s.path = "/" + std::to_string(i);
    return s;
  };
  RequestTurn many;
  for (int i = 0; i < 600; ++i) many.push_back(image(i));
  auto refused = PrepareTurn(c, many, m->loaded.limits, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("positions"), std::string::npos) << FormatErrors(refused.errors());
  EXPECT_EQ(refused.error().path.find("inline"), std::string::npos) << "no image was decoded";
  // A KV cache that already holds most of the window refuses even one image.
  RequestTurn one = {image(0)};
  auto full = PrepareTurn(c, one, m->loaded.limits, m->loaded.limits.context_window_size - 1);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().message.find("context window"), std::string::npos) << FormatErrors(full.errors());
  auto decoded = PrepareTurn(c, one, m->loaded.limits, 0);
  ASSERT_FALSE(decoded.ok());
  EXPECT_NE(decoded.error().path.find("inline"), std::string::npos) << FormatErrors(decoded.errors());
}

TEST(Engine, CancelEndsARequestAndFreesItsPages) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  Collected a;
  auto id = (*engine)->Submit(Greedy(Text({1, 40, 41}), 400), a.Sink());
  ASSERT_TRUE(id.ok());
  a.WaitEvents(3);
  (*engine)->Cancel(*id);
  a.WaitDone();
  EXPECT_EQ(a.last.finish_reason, "cancelled");
  EXPECT_LT(a.tokens.size(), 400u);
  (*engine)->Cancel(*id + 100);  // unknown: ignored
  Collected b;  // the engine keeps serving
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 40, 41}), 4), b.Sink()).ok());
  b.WaitDone();
  EXPECT_EQ(b.tokens, Alone(m->loaded, Text({1, 40, 41}), 4));
  (*engine)->Shutdown(true);
  auto s = (*engine)->stats();
  EXPECT_EQ(s.free_pages, s.total_pages);
}

TEST(Engine, KvBudgetWaitsOrFailsClearly) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  EngineOptions eo;
  eo.batch.kv_positions = 64;  // four pages of 16
  eo.batch.max_batch_size = 4;
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), eo);
  ASSERT_TRUE(engine.ok());
  // Needs 3 + 100 positions: more than the cache holds.
  Collected big;
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 40, 41}), 100), big.Sink()).ok());
  big.WaitDone();
  EXPECT_EQ(big.last.finish_reason, "error");
  ASSERT_FALSE(big.last.errors.empty());
  EXPECT_EQ(big.last.errors[0].code, ErrorCode::kLimit);
  // Two that need three pages each: the second waits for the first, both are right.
  Collected a, b;
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 40, 41}), 40), a.Sink()).ok());
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 50, 51}), 40), b.Sink()).ok());
  a.WaitDone();
  b.WaitDone();
  EXPECT_EQ(a.tokens, Alone(m->loaded, Text({1, 40, 41}), 40));
  EXPECT_EQ(b.tokens, Alone(m->loaded, Text({1, 50, 51}), 40));
  EXPECT_EQ((*engine)->stats().max_running, 1);
}

TEST(Engine, BoundedQueueAndShutdown) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  EngineOptions eo;
  eo.batch.max_batch_size = 1;
  eo.max_queue = 1;
  auto engine = Engine::Start(m->loaded, m->tokenizer.get(), eo);
  ASSERT_TRUE(engine.ok());
  Collected a, b;
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 40}), 300), a.Sink()).ok());
  a.WaitEvents(2);  // running
  ASSERT_TRUE((*engine)->Submit(Greedy(Text({1, 41}), 3), b.Sink()).ok());  // queued
  Collected c;
  auto full = (*engine)->Submit(Greedy(Text({1, 42}), 3), c.Sink());
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.error().code, ErrorCode::kLimit);
  GenerationRequest bad = Greedy(Text({1, 42}), 3);
  bad.sampler.top_p = 0;
  EXPECT_FALSE((*engine)->Submit(bad, c.Sink()).ok());
  (*engine)->Shutdown(false);  // cancels both
  EXPECT_TRUE(a.done && b.done);
  EXPECT_EQ(a.last.finish_reason, "cancelled");
  EXPECT_EQ(b.last.finish_reason, "cancelled");
  EXPECT_FALSE((*engine)->Submit(Greedy(Text({1, 42}), 3), c.Sink()).ok());
}

// Another library's functions, the image adapter and each decode step slowed by a sleep first: a
// slow vision tower beside a stream that decodes for a few seconds.
class SlowLibrary : public FunctionTableLibrary {
 public:
  SlowLibrary(const ModelLibrary& inner, std::chrono::milliseconds adapter,
              std::chrono::milliseconds decode)
      : FunctionTableLibrary(inner.Metadata()) {
    for (const std::string& name : inner.FunctionNames()) {
      const PackedFunction* fn = inner.GetFunction(name);
      auto delay = name == "image_embed" ? adapter : name == "decode_tokens" ? decode
                                                                             : std::chrono::milliseconds(0);
      functions_[name] = [fn, delay](std::span<const Value> args) {
        std::this_thread::sleep_for(delay);
        return (*fn)(args);
      };
    }
  }
};

TEST(Engine, SlowAdapterDoesNotStallRunningStreams) {
  using Clock = std::chrono::steady_clock;
  const auto adapter = std::chrono::milliseconds(800);
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  SlowLibrary slow(*m->library, adapter, std::chrono::milliseconds(5));
  auto loaded = LoadModel(m->dir.path(), slow);
  ASSERT_TRUE(loaded.ok()) << FormatErrors(loaded.errors());
  auto engine = Engine::Start(*loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  // A decodes ~400 steps of at least 5 ms each: it runs through B's adapter call.
  std::mutex mu;
  std::vector<Clock::time_point> a_times;
  Collected a;
  StreamSink a_sink = a.Sink();
  auto id = (*engine)->Submit(Greedy(Text({1, 40, 41}), 400), [&](const StreamEvent& e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      a_times.push_back(Clock::now());
    }
    a_sink(e);
  });
  ASSERT_TRUE(id.ok());
  a.WaitEvents(5);
  TurnInput image;
  image.pieces.push_back(PromptPiece{TextPiece{{1, 50}}, "/0"});
  image.pieces.push_back(PromptPiece{ImagePiece(*loaded->bound.contract.image), "/1"});
  image.media = {NDArray(), Pixels(32, 3)};
  const auto submitted = Clock::now();
  Collected b;
  ASSERT_TRUE((*engine)->Submit(Greedy(image, 3), b.Sink()).ok());
  b.WaitDone();
  const auto b_done = Clock::now();
  EXPECT_EQ(b.last.finish_reason, "length");
  EXPECT_EQ(b.tokens.size(), 3u);
  EXPECT_GE(b_done - submitted, adapter);  // the adapter did run
  (*engine)->Cancel(*id);
  a.WaitDone();
  // A kept decoding while B's adapter ran: no gap between its events near the adapter's time.
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(a_times.size(), 2u);
  ASSERT_GT(a_times.back(), submitted + adapter) << "A ended before B's adapter returned";
  auto largest = Clock::duration::zero();
  for (size_t i = 1; i < a_times.size(); ++i) largest = std::max(largest, a_times[i] - a_times[i - 1]);
  EXPECT_LT(largest, adapter / 2)
      << std::chrono::duration_cast<std::chrono::milliseconds>(largest).count() << " ms";
}

// A request whose adapter is running can be cancelled, and Shutdown without draining cancels one.
TEST(Engine, CancelAndShutdownReachARequestBeingPrepared) {
  auto m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(m->library);
  SlowLibrary slow(*m->library, std::chrono::milliseconds(500), std::chrono::milliseconds(0));
  auto loaded = LoadModel(m->dir.path(), slow);
  ASSERT_TRUE(loaded.ok()) << FormatErrors(loaded.errors());
  auto engine = Engine::Start(*loaded, m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  TurnInput image;
  image.pieces.push_back(PromptPiece{ImagePiece(*loaded->bound.contract.image), "/0"});
  image.media = {Pixels(32, 5)};
  Collected a;
  auto id = (*engine)->Submit(Greedy(image, 3), a.Sink());
  ASSERT_TRUE(id.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // its adapter is running
  (*engine)->Cancel(*id);
  a.WaitDone();
  EXPECT_EQ(a.last.finish_reason, "cancelled");
  EXPECT_TRUE(a.tokens.empty());
  Collected b;
  image.media = {Pixels(32, 6)};  // another image: the adapter cache has no rows for it
  ASSERT_TRUE((*engine)->Submit(Greedy(image, 3), b.Sink()).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  (*engine)->Shutdown(false);
  EXPECT_TRUE(b.done);
  EXPECT_EQ(b.last.finish_reason, "cancelled");
  EXPECT_EQ((*engine)->stats().queued, 0u);
}

// Another library's functions, where the calls named `held` (by prefix) wait until their call is
// interrupted (base/interrupt.h), up to 20 s, or until released: a tower or a prefill that takes
// long. It counts the calls that entered and those that saw the interruption.
class HeldLibrary : public FunctionTableLibrary {
 public:
  HeldLibrary(const ModelLibrary& inner, const std::string& held) : FunctionTableLibrary(inner.Metadata()) {
    for (const std::string& name : inner.FunctionNames()) {
      const PackedFunction* fn = inner.GetFunction(name);
      if (name.rfind(held, 0) != 0) {
        functions_[name] = *fn;
        continue;
      }
      functions_[name] = [this, fn, name](std::span<const Value> args) -> Result<std::vector<Value>> {
        ++entered;
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!released && std::chrono::steady_clock::now() < until) {
          if (Interrupted()) {
            ++interrupted;
            return InterruptedError(name).errors();
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return (*fn)(args);
      };
    }
  }
  std::atomic<int> entered{0}, interrupted{0};
  std::atomic<bool> released{false};
};

// An engine over a reference package whose calls named `held` wait (HeldLibrary).
struct HeldEngine {
  std::unique_ptr<Model> m;
  std::unique_ptr<HeldLibrary> held;
  LoadedModel loaded;
  std::unique_ptr<Engine> engine;
};

void StartHeld(HeldEngine& h, const std::string& held) {
  h.m = MakeModel(ReferencePairs::kTokens);
  ASSERT_TRUE(h.m->library);
  h.held = std::make_unique<HeldLibrary>(*h.m->library, held);
  auto loaded = LoadModel(h.m->dir.path(), *h.held);
  ASSERT_TRUE(loaded.ok()) << FormatErrors(loaded.errors());
  h.loaded = std::move(*loaded);
  auto engine = Engine::Start(h.loaded, h.m->tokenizer.get(), EngineOptions{});
  ASSERT_TRUE(engine.ok());
  h.engine = std::move(*engine);
}

// Submits `input`, cancels it once the held call has begun, and checks that the request ended
// cancelled with no tokens and that the call saw the interruption.
void CancelOnceEntered(HeldEngine& h, const TurnInput& input) {
  Collected a;
  auto id = h.engine->Submit(Greedy(input, 3), a.Sink());
  ASSERT_TRUE(id.ok());
  for (int i = 0; i < 20000 && h.held->entered == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GT(h.held->entered, 0);
  h.engine->Cancel(*id);
  a.WaitDone();
  EXPECT_EQ(a.last.finish_reason, "cancelled");
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_EQ(h.held->interrupted, 1);
}

// Cancelling a request whose adapter is running stops the adapter call itself.
TEST(Engine, CancelInterruptsTheAdapterCall) {
  HeldEngine h;
  ASSERT_NO_FATAL_FAILURE(StartHeld(h, "image_embed"));
  TurnInput image;
  image.pieces.push_back(PromptPiece{ImagePiece(*h.loaded.bound.contract.image), "/0"});
  image.media = {Pixels(32, 7)};
  ASSERT_NO_FATAL_FAILURE(CancelOnceEntered(h, image));
  // The interrupted call's rows were not kept: the same image runs its adapter again, to the end.
  h.held->released = true;
  Collected b;
  ASSERT_TRUE(h.engine->Submit(Greedy(image, 3), b.Sink()).ok());
  b.WaitDone();
  EXPECT_EQ(b.last.finish_reason, "length");
  EXPECT_EQ(b.tokens.size(), 3u);
  EXPECT_EQ(h.held->entered, 2);
}

// Cancelling the only request of a prefill call stops the call between layers; nothing of it stays
// in the cache, and the engine goes on as before.
TEST(Engine, CancelInterruptsAPrefillCall) {
  HeldEngine h;
  ASSERT_NO_FATAL_FAILURE(StartHeld(h, "prefill"));
  Engine* engine = h.engine.get();
  const int64_t free_before = engine->stats().free_pages;
  ASSERT_NO_FATAL_FAILURE(CancelOnceEntered(h, Text({1, 40, 41, 42, 43})));
  h.held->released = true;
  Collected b;
  ASSERT_TRUE(engine->Submit(Greedy(Text({1, 40, 41, 42, 43}), 3), b.Sink()).ok());
  b.WaitDone();
  EXPECT_EQ(b.last.finish_reason, "length");
  EXPECT_EQ(b.last.cached_tokens, 0);  // the interrupted prompt left no pages behind
  Collected alone;
  {
    auto plain = Engine::Start(h.m->loaded, h.m->tokenizer.get(), EngineOptions{});
    ASSERT_TRUE(plain.ok());
    ASSERT_TRUE((*plain)->Submit(Greedy(Text({1, 40, 41, 42, 43}), 3), alone.Sink()).ok());
    alone.WaitDone();
  }
  EXPECT_EQ(b.tokens, alone.tokens);
  engine->Shutdown(true);
  EXPECT_GE(engine->stats().free_pages, free_before - engine->stats().cached_pages);
}

}  // namespace
}  // namespace mlc
