// Chat over one KV cache (mlc_manifest/chat.h): the turns of a conversation with the real Qwen2
// tokenizer (the cache after a follow-up equals a fresh prompt of the whole history), a failed
// turn leaving the conversation unchanged, media carried in memory, and the chat config's
// sampling fields under the ones a caller gives.
#include "mlc_manifest/chat.h"

#include <gtest/gtest.h>

#include "support/test_util.h"

namespace mlc {
namespace {

struct Qwen {
  ConvTemplate tmpl;
  std::unique_ptr<Tokenizer> tokenizer;
};

Qwen LoadQwen() {
  Qwen q;
  std::string dir = test::SharedPath("testdata/tokenizers/qwen2-readerlm");
  auto config = ReadJsonFile(dir + "/mlc-chat-config.json");
  EXPECT_TRUE(config.ok());
  if (!config) return q;
  auto t = ConvTemplateFromChatConfig(*config);
  EXPECT_TRUE(t.ok());
  if (t) q.tmpl = *t;
  auto tok = Tokenizer::FromJsonFile(dir + "/tokenizer.reconstructed.json");
  EXPECT_TRUE(tok.ok());
  if (tok) q.tokenizer = std::move(*tok);
  return q;
}

std::vector<ChatMessage> Messages(const std::string& json) {
  auto doc = ParseJson(json);
  EXPECT_TRUE(doc.ok()) << json;
  if (!doc) return {};
  auto m = ParseMessages(*doc);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : FormatErrors(m.errors()));
  return m.ok() ? *m : std::vector<ChatMessage>{};
}

std::vector<int32_t> Ids(const RequestTurn& turn) {
  std::vector<int32_t> ids;
  for (const RequestSegment& s : turn) ids.insert(ids.end(), s.token_ids.begin(), s.token_ids.end());
  return ids;
}

TEST(ChatTurns, FollowUpContinuesTheCache) {
  Qwen q = LoadQwen();
  ASSERT_TRUE(q.tokenizer);
  ChatTurns chat(q.tmpl, *q.tokenizer);
  auto t1 = chat.Next(Messages(R"([{"role": "user", "content": "Hello"}])"), "", "");
  ASSERT_TRUE(t1.ok()) << FormatErrors(t1.errors());
  EXPECT_EQ(chat.history().size(), 1u);
  auto t2 = chat.Next(Messages(R"([{"role": "user", "content": "Bye"}])"), "Hi!", "");
  ASSERT_TRUE(t2.ok()) << FormatErrors(t2.errors());
  ASSERT_EQ(chat.history().size(), 3u);
  EXPECT_EQ(chat.history()[1].role, "assistant");
  EXPECT_EQ(chat.history()[1].Text(), "Hi!");
  EXPECT_EQ(q.tokenizer->Decode(Ids(*t2)),
            "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  // First prompt + reply + follow-up = a fresh prompt of the whole history.
  std::vector<int32_t> cache = Ids(*t1), reply = q.tokenizer->Encode("Hi!"), next = Ids(*t2);
  cache.insert(cache.end(), reply.begin(), reply.end());
  cache.insert(cache.end(), next.begin(), next.end());
  ChatTurns fresh(q.tmpl, *q.tokenizer);
  auto whole = fresh.Next(chat.history(), "", "");
  // The history ends with a user message, so it is a conversation of its own.
  ASSERT_TRUE(whole.ok()) << FormatErrors(whole.errors());
  EXPECT_EQ(cache, Ids(*whole));
}

TEST(ChatTurns, AFailedTurnLeavesTheConversation) {
  Qwen q = LoadQwen();
  ASSERT_TRUE(q.tokenizer);
  ChatTurns chat(q.tmpl, *q.tokenizer);
  // A data: URL that is not base64 fails when the turn is encoded.
  auto bad_media = Messages(R"([{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}]}])");
  EXPECT_FALSE(chat.Next(bad_media, "", "").ok());
  EXPECT_TRUE(chat.history().empty());
  ASSERT_TRUE(chat.Next(Messages(R"([{"role": "user", "content": "Hello"}])"), "", "").ok());
  EXPECT_FALSE(chat.Next(bad_media, "Hi!", "").ok());
  EXPECT_EQ(chat.history().size(), 1u);
  // The reply goes where it was left off.
  EXPECT_TRUE(chat.Next(Messages(R"([{"role": "user", "content": "Bye"}])"), "Hi!", "").ok());
  EXPECT_EQ(chat.history().size(), 3u);
}

TEST(ChatTurns, MediaBytesStayInMemoryAndFilesResolveFromTheMessagesFile) {
  Qwen q = LoadQwen();
  ASSERT_TRUE(q.tokenizer);
  test::TempDir dir;
  std::string file = dir.Write("messages.json", R"([{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": "data:audio/wav;base64,UklGRg==", "format": "wav"}},
      {"type": "image_url", "image_url": {"url": "cat.png"}}, {"type": "text", "text": "Say"}]}])");
  ChatTurns chat(q.tmpl, *q.tokenizer);
  auto turn = chat.NextFromFile(file, "");
  ASSERT_TRUE(turn.ok()) << FormatErrors(turn.errors());
  size_t audio = 0, image = 0;
  for (const RequestSegment& s : *turn) {
    if (s.kind == SegmentKind::kAudio) {
      ++audio;
      ASSERT_TRUE(s.bytes);
      EXPECT_EQ(*s.bytes, "RIFF");
      EXPECT_EQ(s.file, "");
    }
    if (s.kind == SegmentKind::kImage) {
      ++image;
      EXPECT_FALSE(s.bytes);
      EXPECT_EQ(s.file, dir.path() + "/cat.png");
    }
  }
  EXPECT_EQ(audio, 1u);
  EXPECT_EQ(image, 1u);
  EXPECT_FALSE(chat.NextFromFile(dir.path() + "/missing.json", "x").ok());
}

TEST(ChatSamplerConfig, ConfigFieldsUnderTheGivenOnes) {
  ChatConfig::Sampling config;
  config.temperature = 0.7;
  config.top_p = 0.9;
  config.presence_penalty = 0.5;
  SamplerConfig given;
  given.top_k = 5;
  given.top_p = 0.5;
  ChatSamplingOptions options;
  options.keep = {"top_p"};
  SamplerConfig s = ChatSamplerConfig(given, config, options);
  EXPECT_DOUBLE_EQ(s.temperature, 0.7);
  EXPECT_DOUBLE_EQ(s.top_p, 0.5);               // given explicitly
  EXPECT_DOUBLE_EQ(s.repetition_penalty, 1.0);  // absent
  EXPECT_DOUBLE_EQ(s.presence_penalty, 0.5);
  EXPECT_DOUBLE_EQ(s.frequency_penalty, 0.0);   // absent
  EXPECT_EQ(s.top_k, 5);
}

TEST(ChatSamplerConfig, RefusedValuesTakenOrSkipped) {
  ChatConfig::Sampling config;
  config.temperature = 0.3;
  config.top_p = 1.5;               // outside (0, 1]
  config.presence_penalty = -7.0;   // outside [-2, 2]
  SamplerConfig given;
  given.temperature = 1.0;
  SamplerConfig all = ChatSamplerConfig(given, config);
  EXPECT_DOUBLE_EQ(all.top_p, 1.5);
  EXPECT_FALSE(CheckSamplerConfig(all).ok());
  ChatSamplingOptions skip;
  skip.skip_refused = true;
  SamplerConfig checked = ChatSamplerConfig(given, config, skip);
  EXPECT_DOUBLE_EQ(checked.temperature, 0.3);
  EXPECT_DOUBLE_EQ(checked.top_p, 1.0);
  EXPECT_DOUBLE_EQ(checked.presence_penalty, 0.0);
  EXPECT_TRUE(CheckSamplerConfig(checked).ok());
}

}  // namespace
}  // namespace mlc
