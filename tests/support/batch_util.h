// Helpers for the batching tests (engine_test, cpu_batch_test, the families' batch cases): a package
// loaded with its library, a text-only turn, a greedy run alone, requests submitted to a running engine
// at once, and the prefill of several prompts through BatchModel, one chunk of every unfinished
// sequence per call, laid end to end.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mlc_manifest/engine.h"
#include "mlc_manifest/runtime.h"
#include "support/test_util.h"

namespace mlc::test {

// A package written into a temporary folder, the library opened for it and the model loaded.
struct LoadedPackage {
  TempDir dir;
  std::unique_ptr<ModelLibrary> library;
  LoadedModel loaded;
};

// Takes the opened library and loads the model from m.dir; a failure of either is a test failure
// and leaves m.library empty.
inline void LoadInto(LoadedPackage& m, Result<std::unique_ptr<ModelLibrary>> lib) {
  EXPECT_TRUE(lib.ok()) << (lib.ok() ? "" : FormatErrors(lib.errors()));
  if (!lib.ok()) return;
  m.library = std::move(*lib);
  auto loaded = LoadModel(m.dir.path(), *m.library);
  EXPECT_TRUE(loaded.ok()) << (loaded.ok() ? "" : FormatErrors(loaded.errors()));
  if (!loaded.ok()) {
    m.library.reset();
    return;
  }
  m.loaded = std::move(*loaded);
}

inline TurnInput Text(std::vector<int32_t> ids) {
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{std::move(ids)}, "/0"});
  in.media.emplace_back();
  return in;
}

inline std::vector<int32_t> Alone(const LoadedModel& m, const TurnInput& in, int64_t max_tokens) {
  Session s = m.NewSession();
  GenerationOptions o;
  o.max_tokens = max_tokens;
  auto r = s.Generate(in, o);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : FormatErrors(r.errors()));
  return r.ok() ? r->tokens : std::vector<int32_t>{};
}

inline int32_t Greedy(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// Prefills each prompt into sequence ids[i], one chunk of every unfinished sequence per call.
inline std::vector<std::vector<float>> PrefillAll(BatchModel& b, const std::vector<TurnInput>& prompts,
                                                  const std::vector<int64_t>& ids,
                                                  std::vector<PreparedPrompt>* prepared) {
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(b.kv().AddSequence(ids[i]).ok());
    auto p = b.Prepare(prompts[i], 0);
    EXPECT_TRUE(p.ok()) << (p.ok() ? "" : FormatErrors(p.errors()));
    if (!p.ok()) return {};
    prepared->push_back(std::move(*p));
  }
  std::vector<size_t> next(prompts.size(), 0);
  std::vector<std::vector<float>> last(prompts.size());
  for (;;) {
    std::vector<SequenceChunk> chunks;
    std::vector<size_t> who;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (next[i] == (*prepared)[i].plan.chunks.size()) continue;
      const PrefillChunk& c = (*prepared)[i].plan.chunks[next[i]++];
      auto e = b.ChunkEmbeddings(c, (*prepared)[i]);
      EXPECT_TRUE(e.ok());
      if (!e.ok()) return {};
      chunks.push_back(SequenceChunk{ids[i], &c, *e});
      who.push_back(i);
    }
    if (chunks.empty()) break;
    auto logits = b.Prefill(chunks);
    EXPECT_TRUE(logits.ok()) << (logits.ok() ? "" : FormatErrors(logits.errors()));
    if (!logits.ok()) return {};
    EXPECT_EQ(logits->size(), chunks.size());
    for (size_t k = 0; k < who.size(); ++k) last[who[k]].assign((*logits)[k].begin(), (*logits)[k].end());
  }
  return last;
}

// A prompt followed by more text (a chat's next turn over the same start).
inline TurnInput Extend(TurnInput in, std::vector<int32_t> more) {
  in.pieces.push_back(PromptPiece{TextPiece{std::move(more)}, "/more"});
  in.media.emplace_back();
  return in;
}

// Positions a prompt takes (every media piece's rows known, or images).
inline int64_t PromptPositions(const LoadedModel& m, const TurnInput& in) {
  Session s = m.NewSession();
  auto r = s.Prefill(in);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : FormatErrors(r.errors()));
  return r.ok() ? r->plan.prompt_length : 0;
}

// What one submitted request streamed, its tokens and its last event; Wait blocks until it ends.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> tokens;
  bool done = false;
  StreamEvent last;

  StreamSink Sink() {
    return [this](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.done) {
        done = true;
        last = e;
      }
      cv.notify_all();
    };
  }
  const StreamEvent& Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    return last;
  }
};

// What a running engine streamed for one request.
struct EngineReply {
  std::vector<int32_t> tokens;
  std::string finish_reason;
  int64_t cached_tokens = 0;
};

// Submits every prompt to the engine at once (max_tokens each, the request's default sampling) and
// waits for all the replies, in the prompts' order.
inline std::vector<EngineReply> SubmitAll(Engine& engine, const std::vector<TurnInput>& prompts, int64_t max_tokens) {
  struct Pending {
    std::mutex mu;
    std::condition_variable cv;
    EngineReply reply;
    bool done = false;
  };
  std::vector<std::unique_ptr<Pending>> pending;
  for (const TurnInput& in : prompts) {
    pending.push_back(std::make_unique<Pending>());
    Pending* p = pending.back().get();
    GenerationRequest req;
    req.input = in;
    req.max_tokens = max_tokens;
    auto submitted = engine.Submit(req, [p](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(p->mu);
      p->reply.tokens.insert(p->reply.tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.done) {
        p->done = true;
        p->reply.finish_reason = e.finish_reason;
        p->reply.cached_tokens = e.cached_tokens;
      }
      p->cv.notify_all();
    });
    EXPECT_TRUE(submitted.ok());
    if (!submitted.ok()) {
      std::lock_guard<std::mutex> lock(p->mu);
      p->done = true;
    }
  }
  std::vector<EngineReply> out;
  for (auto& p : pending) {
    std::unique_lock<std::mutex> lock(p->mu);
    p->cv.wait(lock, [&] { return p->done; });
    out.push_back(p->reply);
  }
  return out;
}

}  // namespace mlc::test
