// Checks every CPU family's tests make on a package the project's writer writes: requests in a
// running engine's batch equal their runs alone, and `run --messages` gives the same greedy tokens
// whatever the prefill chunk.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "runtime/cpu/decoder.h"
#include "support/batch_util.h"
#include "support/reference64.h"
#include "support/test_util.h"

namespace mlc::test {

// Splits n rows into chunks of each given size (the last one shorter), runs each split with
// `run(chunks)` (the logits after each chunk) and expects every chunk's logits within `tolerance`
// (RelError) of the reference's at the chunk's last position.
template <class Run>
void ExpectEveryChunkSplitMatches(size_t n, const std::vector<size_t>& sizes, Run run, const std::vector<Vec>& want,
                                  double tolerance) {
  for (size_t k : sizes) {
    std::vector<size_t> chunks;
    for (size_t at = 0; at < n; at += k) chunks.push_back(std::min(k, n - at));
    std::vector<std::vector<float>> got = run(chunks);
    ASSERT_EQ(got.size(), chunks.size());
    size_t end = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      end += chunks[i];
      EXPECT_LT(RelError(got[i], want[end - 1]), tolerance) << "chunk " << k << ", position " << end - 1;
    }
  }
}

// The rows run through the decoder's `function` in chunks of the given lengths (with their token ids
// and modalities, for a family fed the token pair), the logits after each chunk.
inline std::vector<std::vector<float>> RunDecoderChunks(const cpu::ModelConfig& c, const cpu::ModelWeights& w,
                                                        const std::vector<float>& embeds,
                                                        const std::vector<size_t>& chunks,
                                                        const std::string& function = "prefill",
                                                        const std::vector<int32_t>& ids = {},
                                                        const std::vector<int32_t>& modality = {}) {
  cpu::KvCacheShape shape;
  shape.layers = cpu::KvPlan(c);
  shape.max_total_seq_len = 128;
  shape.prefill_chunk_size = 64;
  cpu::PagedKvCache kv(shape);
  std::vector<std::vector<float>> out;
  size_t at = 0;
  const size_t width = static_cast<size_t>(c.embed_width());
  for (size_t len : chunks) {
    cpu::RowTokens rows;
    if (!ids.empty()) rows.ids = std::span<const int32_t>(ids.data() + at, len);
    if (!modality.empty()) rows.modality = std::span<const int32_t>(modality.data() + at, len);
    auto logits = cpu::Forward(c, w, kv, embeds.data() + at * width, static_cast<int64_t>(len), function, rows);
    EXPECT_TRUE(logits) << logits.error().ToString();
    if (!logits) return out;
    out.push_back(*logits);
    at += len;
  }
  return out;
}

// The writer's options for a family's tiny package.
inline FamilyModelOptions TinyOptions(const std::string& family, const std::string& quantization, uint64_t seed) {
  FamilyModelOptions o;
  o.family = family;
  o.quantization = quantization;
  o.seed = seed;
  return o;
}

// Submits every prompt to an engine over the loaded model at once (a batch as wide as the prompts)
// and expects each request's greedy tokens to equal its run alone. Then the prefix cache: the same
// prompts again, and each followed by its reply and more text (a chat's next turn), reuse their
// cached whole pages (every position but the last is cached) and still give the tokens of a run
// alone, which an engine without the cache gives too.
inline void ExpectEngineMatchesRunsAlone(const LoadedModel& model, const std::vector<TurnInput>& prompts,
                                         int64_t max_tokens) {
  EngineOptions eo;
  eo.batch.max_batch_size = static_cast<int64_t>(prompts.size());
  auto engine = Engine::Start(model, nullptr, eo);
  ASSERT_TRUE(engine.ok()) << FormatErrors(engine.errors());
  std::vector<EngineReply> got = SubmitAll(**engine, prompts, max_tokens);
  std::vector<TurnInput> next;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(got[i].tokens, Alone(model, prompts[i], max_tokens)) << i;
    std::vector<int32_t> more = got[i].tokens;
    more.insert(more.end(), {7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
    next.push_back(Extend(prompts[i], more));
  }
  const int64_t page = (*engine)->stats().page_size;
  std::vector<EngineReply> again = SubmitAll(**engine, prompts, max_tokens);
  std::vector<EngineReply> follow = SubmitAll(**engine, next, max_tokens);
  eo.prefix_cache = false;
  auto plain = Engine::Start(model, nullptr, eo);
  ASSERT_TRUE(plain.ok()) << FormatErrors(plain.errors());
  std::vector<EngineReply> uncached = SubmitAll(**plain, next, max_tokens);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int64_t n = PromptPositions(model, prompts[i]);
    EXPECT_EQ(again[i].tokens, got[i].tokens) << i;
    EXPECT_EQ(again[i].cached_tokens, (n - 1) / page * page) << "prompt " << i << " of " << n << " positions";
    EXPECT_EQ(follow[i].tokens, Alone(model, next[i], max_tokens)) << i;
    EXPECT_EQ(follow[i].tokens, uncached[i].tokens) << i;
    EXPECT_EQ(uncached[i].cached_tokens, 0);
    EXPECT_GE(follow[i].cached_tokens, (n - 1) / page * page) << i;
  }
  const Engine::Stats stats = (*engine)->stats();
  EXPECT_TRUE(stats.prefix_cache);
  EXPECT_GT(stats.prefix_hits, 0);
  (*engine)->Shutdown(true);
  EXPECT_EQ((*engine)->stats().free_pages + (*engine)->stats().cached_pages, (*engine)->stats().total_pages);
}

// The package `o` describes (force set), written and loaded with its CPU library (library empty,
// an expectation failed, on an error).
inline std::unique_ptr<LoadedPackage> LoadFamilyPackage(FamilyModelOptions o) {
  auto m = std::make_unique<LoadedPackage>();
  o.force = true;
  auto w = WriteFamilyModel(m->dir.path(), o);
  EXPECT_TRUE(w) << (w ? "" : FormatErrors(w.errors()));
  if (w) LoadInto(*m, OpenCpuLibrary(m->dir.path()));
  return m;
}

// The parameter of that name in a list (nullptr: none).
inline const ParamSpec* FindParam(const std::vector<ParamSpec>& params, const std::string& name) {
  for (const ParamSpec& p : params) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

// The model_config of a package's mlc-chat-config.json.
inline Json ModelConfigOf(const std::string& pkg) {
  return Json::parse(ReadText(JoinPath(pkg, kChatConfigFileName)))["model_config"];
}

// Writes the package of `o`, submits every prompt to an engine at once (a batch as wide as the
// prompts) and expects each request's greedy tokens to equal its run alone.
inline void ExpectBatchMatchesRunsAlone(FamilyModelOptions o, const std::vector<TurnInput>& prompts, int64_t max_tokens) {
  LoadedPackage m;
  o.force = true;
  auto written = WriteFamilyModel(m.dir.path(), o);
  ASSERT_TRUE(written) << written.error().ToString();
  LoadInto(m, OpenCpuLibrary(m.dir.path()));
  ASSERT_TRUE(m.library);
  ExpectEngineMatchesRunsAlone(m.loaded, prompts, max_tokens);
}

// `run --messages MESSAGES_FILE` (greedy, max_tokens) on the package of `o` written once per
// prefill chunk size into dir: the same non-empty tokens each time; returns them.
inline std::vector<int32_t> ExpectSameTokensAcrossPrefillChunks(const TempDir& dir, FamilyModelOptions o,
                                                                const std::string& messages_file,
                                                                const std::vector<int64_t>& chunks,
                                                                int64_t max_tokens = 8) {
  std::vector<int32_t> first;
  for (int64_t chunk : chunks) {
    o.prefill_chunk_size = chunk;
    const std::string pkg = dir.File(o.family + "-" + o.quantization + "-chunk" + std::to_string(chunk));
    auto written = WriteFamilyModel(pkg, o);
    EXPECT_TRUE(written) << written.error().ToString();
    if (!written) return {};
    auto r = RunCli({"run", pkg, "--messages", messages_file, "--max-tokens", std::to_string(max_tokens),
                     "--temperature", "0", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    if (r.exit_code != 0) return {};
    std::vector<int32_t> tokens = Json::parse(r.out)["tokens"].get<std::vector<int32_t>>();
    EXPECT_FALSE(tokens.empty()) << "prefill_chunk_size " << chunk;
    if (first.empty()) first = tokens;
    EXPECT_EQ(tokens, first) << "prefill_chunk_size " << chunk;
  }
  return first;
}

}  // namespace mlc::test
