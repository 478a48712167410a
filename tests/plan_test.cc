// Prefill planning: chunk boundaries for text, audio, image, mixed and multi-turn prompts at
// chunk sizes 1, 7 and 512; context checks and their overflow counts; the request parser's
// errors at JSON Pointers; and the `plan` command.
#include <gtest/gtest.h>

#include "mlc_manifest/plan.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/request.h"
#include "support/test_util.h"

namespace mlc {
namespace {

constexpr int32_t kAudioPh = 4, kImagePh = 7;

BoundContract TestContract() {
  BoundContract c;
  c.task_name = "chat.completions";
  BoundAudio a;
  a.input = "audio";
  a.adapter = "audio";
  a.prompt = PromptInsertion{{3}, kAudioPh, {5}};
  c.audio = a;
  BoundImage i;
  i.input = "image";
  i.adapter = "image";
  i.prompt = PromptInsertion{{6, 60}, kImagePh, {8}};
  i.processor.num_embeddings = 16;
  c.image = i;
  return c;
}

PromptPiece Text(std::vector<int32_t> ids) { return PromptPiece{TextPiece{std::move(ids)}, "/t"}; }
PromptPiece Audio(int64_t rows) { return PromptPiece{AudioPiece(*TestContract().audio, rows), "/a"}; }
PromptPiece Image() { return PromptPiece{ImagePiece(*TestContract().image), "/i"}; }

std::vector<int32_t> Range(int32_t from, int32_t n) {
  std::vector<int32_t> v;
  for (int32_t i = 0; i < n; ++i) v.push_back(from + i);
  return v;
}

PlanLimits Limits(int64_t chunk, int64_t window = 4096) {
  PlanLimits l;
  l.prefill_chunk_size = chunk;
  l.context_window_size = window;
  return l;
}

// The positions a prompt expands to, in order (what the chunks must concatenate to).
std::vector<int32_t> Expand(const std::vector<PromptPiece>& pieces) {
  std::vector<int32_t> out;
  for (const PromptPiece& p : pieces) {
    if (const auto* t = std::get_if<TextPiece>(&p.value)) {
      out.insert(out.end(), t->token_ids.begin(), t->token_ids.end());
      continue;
    }
    const auto& m = std::get<MediaPiece>(p.value);
    for (int64_t id : m.prompt.prefix_token_ids) out.push_back(static_cast<int32_t>(id));
    for (int64_t r = 0; r < *m.rows; ++r) out.push_back(static_cast<int32_t>(m.prompt.placeholder_token_id));
    for (int64_t id : m.prompt.suffix_token_ids) out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// Checks every rule of the cut: sizes, packing, media spans starting their own chunks, rows
// contiguous from 0, prefix flushed before the span, suffix starting the next chunk.
void ExpectRules(const std::vector<PromptPiece>& pieces, const PrefillPlan& plan, int64_t cs) {
  std::vector<int32_t> all;
  for (const PrefillChunk& c : plan.chunks) {
    ASSERT_GE(c.size(), 1);
    ASSERT_LE(c.size(), cs);
    ASSERT_EQ(c.token_ids.size(), c.modality_ids.size());
    all.insert(all.end(), c.token_ids.begin(), c.token_ids.end());
  }
  EXPECT_EQ(all, Expand(pieces));
  EXPECT_EQ(plan.prompt_length, static_cast<int64_t>(all.size()));
  std::map<size_t, int64_t> next_row;
  for (size_t k = 0; k < plan.chunks.size(); ++k) {
    const PrefillChunk& c = plan.chunks[k];
    bool last = k + 1 == plan.chunks.size();
    if (c.rows) {
      for (size_t i = 0; i < c.token_ids.size(); ++i) EXPECT_EQ(c.modality_ids[i], kModalityAdapter);
      const auto& m = std::get<MediaPiece>(pieces[c.rows->piece].value);
      EXPECT_EQ(c.rows->input, m.input);
      EXPECT_EQ(c.token_ids.front(), m.prompt.placeholder_token_id);
      EXPECT_EQ(c.rows->start, next_row[c.rows->piece]) << "rows of one span are contiguous";
      EXPECT_EQ(c.rows->count, c.size());
      next_row[c.rows->piece] += c.rows->count;
      // Row chunks are full except the last of a span.
      bool span_ends = last || !plan.chunks[k + 1].rows || plan.chunks[k + 1].rows->piece != c.rows->piece;
      if (!span_ends) {
        EXPECT_EQ(c.size(), cs);
      }
      // The suffix starts the next chunk.
      if (span_ends && !m.prompt.suffix_token_ids.empty()) {
        ASSERT_FALSE(last);
        EXPECT_EQ(plan.chunks[k + 1].token_ids.front(), m.prompt.suffix_token_ids.front());
      }
      // The chunk before a span ends with the prefix (pending text flushed with it).
      if (c.rows->start == 0 && !m.prompt.prefix_token_ids.empty()) {
        ASSERT_GT(k, 0u);
        EXPECT_EQ(plan.chunks[k - 1].token_ids.back(), m.prompt.prefix_token_ids.back());
      }
    } else {
      for (int32_t mod : c.modality_ids) EXPECT_EQ(mod, kModalityText);
      // Text is packed: a text chunk is full unless a media span or the end follows it.
      if (!last && !plan.chunks[k + 1].rows) {
        EXPECT_EQ(c.size(), cs);
      }
    }
  }
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (const auto* m = std::get_if<MediaPiece>(&pieces[i].value)) {
      EXPECT_EQ(next_row[i], *m->rows);
    }
  }
}

std::vector<size_t> Sizes(const PrefillPlan& plan) {
  std::vector<size_t> s;
  for (const auto& c : plan.chunks) s.push_back(c.token_ids.size());
  return s;
}

PrefillPlan MustPlan(const PlanLimits& l, int64_t kv, const std::vector<PromptPiece>& pieces) {
  auto plan = PlanPrefill(l, kv, pieces);
  EXPECT_TRUE(plan.ok()) << (plan.ok() ? "" : FormatErrors(plan.errors()));
  return plan.ok() ? *plan : PrefillPlan{};
}

class ChunkSizes : public ::testing::TestWithParam<int64_t> {};

TEST_P(ChunkSizes, TextOnly) {
  int64_t cs = GetParam();
  std::vector<PromptPiece> pieces = {Text(Range(10, 20)), Text(Range(100, 5))};
  PrefillPlan plan = MustPlan(Limits(cs), 0, pieces);
  ExpectRules(pieces, plan, cs);
  EXPECT_EQ(plan.chunks.size(), static_cast<size_t>((25 + cs - 1) / cs));
}

TEST_P(ChunkSizes, AudioOnly) {
  int64_t cs = GetParam();
  std::vector<PromptPiece> pieces = {Audio(10)};
  PrefillPlan plan = MustPlan(Limits(cs), 0, pieces);
  ExpectRules(pieces, plan, cs);
  size_t row_chunks = static_cast<size_t>((10 + cs - 1) / cs);
  EXPECT_EQ(plan.chunks.size(), row_chunks + 2);  // [prefix] rows... [suffix]
  EXPECT_EQ(plan.chunks.front().token_ids, std::vector<int32_t>({3}));
  EXPECT_EQ(plan.chunks.back().token_ids, std::vector<int32_t>({5}));
}

TEST_P(ChunkSizes, ImageOnly) {
  int64_t cs = GetParam();
  std::vector<PromptPiece> pieces = {Image()};
  PrefillPlan plan = MustPlan(Limits(cs), 0, pieces);
  ExpectRules(pieces, plan, cs);
  EXPECT_EQ(plan.prompt_length, 2 + 16 + 1);
}

TEST_P(ChunkSizes, Mixed) {
  int64_t cs = GetParam();
  std::vector<PromptPiece> pieces = {Text(Range(10, 9)), Audio(23), Text(Range(40, 3)), Image(),
                                     Audio(1), Image(), Text(Range(90, 2))};
  PrefillPlan plan = MustPlan(Limits(cs), 0, pieces);
  ExpectRules(pieces, plan, cs);
}

TEST_P(ChunkSizes, MultiTurnContinuesTheCache) {
  int64_t cs = GetParam();
  std::vector<PromptPiece> first = {Text(Range(10, 12)), Image(), Text({20})};
  std::vector<PromptPiece> second = {Text(Range(30, 4)), Audio(9), Text(Range(50, 3))};
  PrefillPlan p1 = MustPlan(Limits(cs, 64), 0, first);
  int64_t kv = p1.prompt_length + 5;  // five tokens generated and fed back
  PrefillPlan p2 = MustPlan(Limits(cs, 64), kv, second);
  ExpectRules(first, p1, cs);
  ExpectRules(second, p2, cs);
  EXPECT_EQ(p2.kv_length, kv);
  // The second turn no longer fits once the cache holds more.
  auto over = PlanPrefill(Limits(cs, 64), kv + 20, second);
  ASSERT_FALSE(over.ok());
  // (one position is kept for the first generated token)
  EXPECT_NE(over.error().message.find("overflows by " + std::to_string(kv + 20 + p2.prompt_length + 1 - 64)),
            std::string::npos) << over.error().message;
}

INSTANTIATE_TEST_SUITE_P(Plan, ChunkSizes, ::testing::Values(1, 7, 512));

TEST(Plan, ExactChunksForSizeSeven) {
  std::vector<PromptPiece> pieces = {Text(Range(10, 9)), Audio(10), Text({40})};
  PrefillPlan plan = MustPlan(Limits(7), 0, pieces);
  // 9 text + prefix = 10 -> [7], [3]; rows 10 -> [7], [3]; suffix + 1 text -> [2].
  EXPECT_EQ(Sizes(plan), (std::vector<size_t>{7, 3, 7, 3, 2}));
  EXPECT_EQ(plan.chunks[1].token_ids, (std::vector<int32_t>{17, 18, 3}));
  ASSERT_TRUE(plan.chunks[3].rows);
  EXPECT_EQ(plan.chunks[3].rows->start, 7);
  EXPECT_EQ(plan.chunks[3].rows->count, 3);
  EXPECT_EQ(plan.chunks[4].token_ids, (std::vector<int32_t>{5, 40}));
}

TEST(Plan, ImageThatCannotFitIsRejectedWithTheOverflow) {
  std::vector<PromptPiece> pieces = {Text(Range(10, 10)), Image(), Text({1})};
  // 10 + 19 + 1 = 30 positions and one for the reply; the cache holds 5 of a 32-position window.
  Status s = CheckContext(Limits(8, 32), 5, pieces);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().path, "/i");
  EXPECT_NE(s.error().message.find("overflows by 4 positions"), std::string::npos) << s.error().message;
  EXPECT_TRUE(CheckContext(Limits(8, 36), 5, pieces).ok());
  EXPECT_FALSE(CheckContext(Limits(8, 35), 5, pieces).ok()) << "no room for the reply";
  // A sliding window lifts the check.
  PlanLimits sliding = Limits(8, 32);
  sliding.sliding_window_size = 16;
  EXPECT_TRUE(PlanPrefill(sliding, 5, pieces).ok());
}

TEST(Plan, AudioWithoutRowsCountsItsLeastSizeAndCannotBeCut) {
  std::vector<PromptPiece> pieces = {Text(Range(10, 4)), Audio(0)};
  std::get<MediaPiece>(pieces[1].value).rows.reset();
  EXPECT_EQ(pieces[1].MinPositions(), 3);
  EXPECT_TRUE(CheckContext(Limits(8, 8), 0, pieces).ok());
  Status s = CheckContext(Limits(8, 7), 0, pieces);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("at least 7"), std::string::npos) << s.error().message;
  auto plan = PlanPrefill(Limits(8, 100), 0, pieces);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.error().message.find("adapter"), std::string::npos);
}

// Issue 11.10: the prompt leaves one position for the first generated token, so a prompt of
// exactly the context length is refused (run would have no position to feed its reply at).
TEST(Plan, PromptLeavesRoomForOneGeneratedToken) {
  EXPECT_TRUE(CheckContext(Limits(8, 10), 0, std::vector<PromptPiece>{Text(Range(1, 9))}).ok());
  Status s = CheckContext(Limits(8, 10), 0, std::vector<PromptPiece>{Text(Range(1, 10))});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().path, "/t");
  EXPECT_NE(s.error().message.find("needs 10 positions and one for the reply"), std::string::npos)
      << s.error().message;
  EXPECT_NE(s.error().message.find("overflows by 1 positions"), std::string::npos) << s.error().message;
  EXPECT_FALSE(CheckContext(Limits(8, 10), 1, std::vector<PromptPiece>{Text(Range(1, 9))}).ok());
}

// Issue 11.10: nothing to prefill is an error, not generation from nothing.
TEST(Plan, EmptyPromptIsRefused) {
  Status none = CheckContext(Limits(8), 0, std::vector<PromptPiece>{});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kUsage);
  Status empty = CheckContext(Limits(8), 0, std::vector<PromptPiece>{Text({}), Text({})});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("empty"), std::string::npos) << empty.error().message;
  EXPECT_FALSE(PlanPrefill(Limits(8), 0, std::vector<PromptPiece>{Text({})}).ok());
}

// Issue 11.10: with vocab_size known, every id fed as text must be below it.
TEST(Plan, TokenIdsBelowVocabSize) {
  PlanLimits l = Limits(8);
  l.vocab_size = 100;
  EXPECT_TRUE(CheckContext(l, 0, std::vector<PromptPiece>{Text({0, 99})}).ok());
  Status s = CheckContext(l, 0, std::vector<PromptPiece>{Text({5}), Text({1, 100})});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().path, "/t");
  EXPECT_NE(s.error().message.find("token id 100 (this text, index 1) is not below vocab_size 100"),
            std::string::npos) << s.error().message;
  l.vocab_size = 50;  // the image's prefix ids are {6, 60}
  Status image = CheckContext(l, 0, std::vector<PromptPiece>{Image()});
  ASSERT_FALSE(image.ok());
  EXPECT_EQ(image.error().path, "/i");
  EXPECT_NE(image.error().message.find("prefix_token_ids, index 1"), std::string::npos)
      << image.error().message;
  l.vocab_size.reset();  // unknown: not checked
  EXPECT_TRUE(CheckContext(l, 0, std::vector<PromptPiece>{Text({1000000})}).ok());
}

TEST(Plan, HugeRowCountsHitTheLimitNotMemory) {
  PlanLimits l = Limits(1);
  l.sliding_window_size = 4;
  auto plan = PlanPrefill(l, 0, std::vector<PromptPiece>{Audio(int64_t{1} << 40)});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.error().code, ErrorCode::kLimit);
}

TEST(Plan, JsonShape) {
  PrefillPlan plan = MustPlan(Limits(4), 0, {Text({1, 2}), Audio(2)});
  OrderedJson j = PrefillPlanJson(plan);
  EXPECT_EQ(j["prompt_length"], 6);
  ASSERT_EQ(j["chunks"].size(), 3u);
  EXPECT_TRUE(j["chunks"][0]["rows"].is_null());
  EXPECT_EQ(j["chunks"][1]["rows"], OrderedJson({{"input", "audio"}, {"start", 0}, {"count", 2}}));
  EXPECT_EQ(j["chunks"][1]["modality_ids"], OrderedJson({1, 1}));
}

// ---- Requests ----

Errors RequestErrors(const std::string& text) {
  auto doc = ParseJson(text);
  if (!doc) return doc.errors();
  auto r = ParseRequest(*doc, "/base");
  return r.ok() ? Errors{} : r.errors();
}

TEST(Request, ParsesSegmentsAndTurns) {
  auto doc = ParseJson(R"([{"tokens": [1, 2]}, {"audio": "a.wav"}, {"image": "/abs.png"}, {"audio_rows": 3}])");
  ASSERT_TRUE(doc.ok());
  auto r = ParseRequest(*doc, "/base");
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  ASSERT_EQ(r->turns.size(), 1u);
  const RequestTurn& t = r->turns[0];
  EXPECT_EQ(t[0].token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(t[1].file, "/base/a.wav");
  EXPECT_EQ(t[2].file, "/abs.png");
  EXPECT_EQ(t[3].rows, 3);
  EXPECT_EQ(t[3].path, "/3");
  auto turns = ParseJson(R"({"turns": [[{"tokens": [1]}], [{"tokens": [2]}]]})");
  auto r2 = ParseRequest(*turns, "");
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->turns.size(), 2u);
  EXPECT_EQ(r2->turns[1][0].path, "/turns/1/0");
}

TEST(Request, ErrorsAtJsonPointers) {
  auto first_path = [](const std::string& text) {
    Errors e = RequestErrors(text);
    return e.empty() ? std::string("<none>") : e.front().path;
  };
  EXPECT_EQ(first_path(R"([{"tokens": [1, -1]}])"), "/0/tokens/1");
  EXPECT_EQ(first_path(R"([{"tokens": [1, 2147483648]}])"), "/0/tokens/1");
  EXPECT_EQ(first_path(R"([{"tokens": [1]}, {"video": "v.mp4"}])"), "/1/video");
  EXPECT_EQ(first_path(R"([{"tokens": [1], "audio": "a.wav"}])"), "/0");
  EXPECT_EQ(first_path(R"({"turns": [[{"audio_rows": 0}]]})"), "/turns/0/0/audio_rows");
  EXPECT_EQ(first_path(R"({"turns": [[]]})"), "/turns/0");
  EXPECT_EQ(first_path(R"({"turns": [], "x": 1})"), "/x");
  EXPECT_EQ(first_path(R"([])"), "");
  EXPECT_EQ(first_path(R"("tokens")"), "");
  EXPECT_EQ(first_path(R"([{"image": ""}])"), "/0/image");
  EXPECT_EQ(first_path(R"([{"tokens": [1], "tokens": [2]}])"), "/0/tokens");  // duplicate key
}

TEST(Request, MediaNeedsTheInput) {
  BoundContract text_only;
  text_only.task_name = "chat.completions";
  auto doc = ParseJson(R"([{"tokens": [1]}, {"image": "x.png"}])");
  auto r = ParseRequest(*doc, "");
  ASSERT_TRUE(r.ok());
  auto pieces = PiecesForTurn(text_only, r->turns[0]);
  ASSERT_FALSE(pieces.ok());
  EXPECT_EQ(pieces.error().path, "/1");
  EXPECT_NE(pieces.error().message.find("no image input"), std::string::npos);
  auto ok = PiecesForTurn(TestContract(), r->turns[0]);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(std::get<MediaPiece>((*ok)[1].value).rows, 16);
}

// ---- The command ----

TEST(PlanCli, PrintsChunksAndRejectsOverflow) {
  test::TempDir dir;
  ReferenceModelOptions o;
  o.audio = o.image = true;
  o.prefill_chunk_size = 8;
  o.context_window_size = 40;
  ASSERT_TRUE(WriteReferenceModel(dir.File("pkg"), o).ok());
  std::string program = dir.File("pkg/") + kReferenceProgramFile;
  std::string req = dir.Write("req.json", R"([{"tokens": [1, 2, 3]}, {"audio_rows": 10}, {"image": "none.png"}])");
  auto r = test::RunCli({"plan", dir.File("pkg"), "--program", program, "--request", req, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  EXPECT_EQ((*j)["prompt_length"], 3 + 12 + 18);
  EXPECT_EQ((*j)["chunks"].size(), 1u + 2 + 1 + 2 + 1);  // [1 2 3 s] [8 rows] [2 rows] [e s] [8] [8] [e]
  auto over = test::RunCli({"plan", dir.File("pkg"), "--program", program, "--request", req,
                            "--kv-length", "10"});
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.err.find("overflows by 4 positions"), std::string::npos) << over.err;
  std::string bad = dir.Write("bad.json", R"([{"tokens": [1, "x"]}])");
  auto b = test::RunCli({"plan", dir.File("pkg"), "--program", program, "--request", bad});
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find("/0/tokens/1"), std::string::npos) << b.err;
  std::string clip = dir.Write("clip.json", R"([{"audio": "clip.wav"}])");
  auto c = test::RunCli({"plan", dir.File("pkg"), "--program", program, "--request", clip});
  // A recording is decoded for its windows (long_audio_test): a missing one is an I/O error.
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_NE(c.err.find("clip.wav): cannot open"), std::string::npos) << c.err;
}

// Issue 11.10: plan and run give the same verdict, with the same message, on edge prompts: a
// prompt one short of the window, exactly the window, over it, the last id of the vocabulary,
// the first id past it, and an empty token list.
TEST(PlanCli, AgreesWithRunOnEdgePrompts) {
  test::TempDir dir;
  ReferenceModelOptions o;
  o.prefill_chunk_size = 8;
  o.context_window_size = 24;
  o.vocab_size = 64;
  ASSERT_TRUE(WriteReferenceModel(dir.File("pkg"), o).ok());
  std::string program = dir.File("pkg/") + kReferenceProgramFile;
  auto tokens = [](int n, int id) {
    std::string out = "[{\"tokens\": [";
    for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(id);
    return out + "]}]";
  };
  struct Case {
    std::string name, request;
    bool ok;
  };
  const std::vector<Case> cases = {
      {"one short of the window", tokens(23, 7), true},
      {"exactly the window", tokens(24, 7), false},
      {"over the window", tokens(25, 7), false},
      {"the last id", tokens(3, 63), true},
      {"past the vocabulary", tokens(3, 64), false},
      {"an empty token list", "[{\"tokens\": []}]", false},
      {"no segments", "[]", false},
  };
  for (const Case& c : cases) {
    std::string req = dir.Write("req.json", c.request);
    auto plan = test::RunCli({"plan", dir.File("pkg"), "--program", program, "--request", req, "--json"});
    auto run = test::RunCli({"run", dir.File("pkg"), "--request", req, "--max-tokens", "4",
                             "--temperature", "0", "--json"});
    EXPECT_EQ(plan.exit_code == 0, c.ok) << c.name << ": " << plan.out << plan.err;
    EXPECT_EQ(run.exit_code, plan.exit_code) << c.name << ": " << run.out << run.err;
    auto pj = ParseJson(plan.out);
    auto rj = ParseJson(run.out);
    ASSERT_TRUE(pj.ok() && rj.ok()) << c.name << ": " << plan.out << " / " << run.out;
    if (!c.ok) {
      EXPECT_EQ((*pj)["errors"], (*rj)["errors"]) << c.name;
    }
  }
  // A prompt one short of the window leaves one position: run generates into it and then stops
  // with "length" (the full context ends the turn; no error).
  std::string req = dir.Write("req.json", tokens(23, 7));
  auto run = test::RunCli({"run", dir.File("pkg"), "--request", req, "--max-tokens", "16",
                           "--temperature", "0", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  auto j = ParseJson(run.out);
  ASSERT_TRUE(j.ok()) << run.out;
  const Json& turn = (*j)["turns"][0];
  if (turn["stop_reason"] == "length") {
    EXPECT_EQ(turn["tokens"].size(), 2u) << "one fed at the last position, one sampled after it";
    EXPECT_EQ((*j)["kv_length"], 24);
  } else {
    EXPECT_EQ(turn["stop_reason"], "stop_token");  // the model chose to end first
  }
}

}  // namespace
}  // namespace mlc
