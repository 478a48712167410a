// Thinking modes: Gemma 4's switched on and off in the prompt (the strings its published chat
// template renders), a template's own "thinking" object and its errors, and the reply split into
// thought and answer however the text is cut into pieces.
#include <gtest/gtest.h>

#include "mlc_manifest/conversation.h"

namespace mlc {
namespace {

Json J(const std::string& text) {
  auto doc = ParseJson(text);
  EXPECT_TRUE(doc.ok()) << text;
  return doc.ok() ? *doc : Json();
}

// Gemma 4's turns as a converted package's conv_template carries them (no "thinking" object).
const char* kGemma4 = R"({"name": "gemma4", "system_template": "<|turn>system\n{system_message}<turn|>\n",
  "system_message": "", "render_empty_system_message": false, "system_prefix_token_ids": [2],
  "roles": {"user": "<|turn>user", "assistant": "<|turn>model"}, "seps": ["<turn|>\n"],
  "role_content_sep": "\n", "role_empty_sep": "\n", "stop_str": ["<turn|>"], "stop_token_ids": [1, 106]})";

std::string Prompt(const ConvTemplate& t, const std::string& messages) {
  auto m = ParseMessages(J(messages));
  EXPECT_TRUE(m.ok());
  auto p = BuildChatPrompt(t, m.ok() ? *m : std::vector<ChatMessage>{});
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : FormatErrors(p.errors()));
  return p.ok() ? PromptText(*p) : "";
}

// The expected strings are what google/gemma-4's published chat template renders (after the BOS)
// for enable_thinking true and false: "<|think|>" opens the system turn, which is written even
// without a system message; off, the reply header is followed by an empty thought channel.
TEST(Thinking, Gemma4PromptsAsItsPublishedTemplate) {
  auto t = ParseConvTemplate(J(kGemma4));
  ASSERT_TRUE(t.ok()) << FormatErrors(t.errors());
  ASSERT_TRUE(t->thinking.has_value());
  EXPECT_FALSE(t->thinking->default_on);
  const std::string user = R"([{"role": "user", "content": "Hi"}])";
  const std::string with_system = R"([{"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
      {"role": "user", "content": "Bye"}])";
  EXPECT_EQ(Prompt(WithThinking(*t, false), user),
            "<|turn>user\nHi<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  EXPECT_EQ(Prompt(WithThinking(*t, true), user),
            "<|turn>system\n<|think|>\n<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\n");
  EXPECT_EQ(Prompt(WithThinking(*t, true), with_system),
            "<|turn>system\n<|think|>\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n"
            "<|turn>model\nHello!<turn|>\n<|turn>user\nBye<turn|>\n<|turn>model\n");
  EXPECT_EQ(Prompt(WithThinking(*t, false), with_system),
            "<|turn>system\nBe brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
            "<|turn>user\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
  // A template without a thinking mode is left as it is.
  auto plain = ParseConvTemplate(J(R"({"roles": {"user": "U", "assistant": "A"}, "seps": ["\n"]})"));
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->thinking.has_value());
  EXPECT_EQ(Prompt(WithThinking(*plain, true), user), Prompt(*plain, user));
  EXPECT_EQ(Prompt(WithThinking(*plain, false), user), Prompt(*plain, user));
}

TEST(Thinking, TemplateThinkingObjectAndItsErrors) {
  auto t = ParseConvTemplate(J(R"({"roles": {"user": "U", "assistant": "A"}, "seps": ["\n"],
      "system_template": "[{system_message}]", "render_empty_system_message": false,
      "thinking": {"system_marker": "/think ", "skip": "<t></t>", "open": "<t>", "close": "</t>", "default": true}})"));
  ASSERT_TRUE(t.ok()) << FormatErrors(t.errors());
  ASSERT_TRUE(t->thinking.has_value());
  EXPECT_TRUE(t->thinking->default_on);
  EXPECT_EQ(Prompt(WithThinking(*t, true), R"([{"role": "user", "content": "x"}])"), "[/think ]U: x\nA: ");
  EXPECT_EQ(Prompt(WithThinking(*t, false), R"([{"role": "user", "content": "x"}])"), "U: x\nA: <t></t>");

  auto bad = ParseConvTemplate(J(R"({"seps": ["\n"], "thinking": {"open": "", "close": 3}})"));
  ASSERT_FALSE(bad.ok());
  std::string errors = FormatErrors(bad.errors());
  EXPECT_NE(errors.find("/thinking/open"), std::string::npos) << errors;
  EXPECT_NE(errors.find("/thinking/close"), std::string::npos) << errors;
  auto not_object = ParseConvTemplate(J(R"({"seps": ["\n"], "thinking": true})"));
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(FormatErrors(not_object.errors()).find("/thinking"), std::string::npos);
}

ReasoningSplitter::Parts SplitWhole(const ThinkingMode& mode, const std::string& text) {
  ReasoningSplitter s(mode);
  auto a = s.Push(text);
  auto b = s.Finish();
  return {a.reasoning + b.reasoning, a.content + b.content};
}

// Every way of cutting a reply into three pieces gives the same thought and answer as the whole.
TEST(Thinking, SplitterGivesTheSamePartsHoweverTheReplyIsCut) {
  ThinkingMode gemma{"<|think|>\n", "<|channel>thought\n<channel|>", "<|channel>thought", "<channel|>", false};
  struct Case {
    std::string reply, reasoning, content;
  };
  const std::vector<Case> cases = {
      {"<|channel>thought\nLet me see.\n<channel|>The answer is 4.", "Let me see.\n", "The answer is 4."},
      {"No thought here <|chan but a near miss.", "", "No thought here <|chan but a near miss."},
      {"<|channel>thought\nnever closed <channel", "never closed <channel", ""},
      {"Before <|channel>thought\nmid<channel|> after", "mid", "Before  after"},
      {"<|channel>thought\n<channel|>only the answer", "", "only the answer"},
      {"<<|channel>thought\n\n<x<channel|><", "<x", "<<"},
  };
  for (const Case& c : cases) {
    auto whole = SplitWhole(gemma, c.reply);
    EXPECT_EQ(whole.reasoning, c.reasoning) << c.reply;
    EXPECT_EQ(whole.content, c.content) << c.reply;
    for (size_t i = 0; i <= c.reply.size(); ++i) {
      for (size_t j = i; j <= c.reply.size(); ++j) {
        ReasoningSplitter s(gemma);
        std::string reasoning, content;
        for (auto piece : {c.reply.substr(0, i), c.reply.substr(i, j - i), c.reply.substr(j)}) {
          auto p = s.Push(piece);
          reasoning += p.reasoning;
          content += p.content;
        }
        auto rest = s.Finish();
        ASSERT_EQ(reasoning + rest.reasoning, c.reasoning) << c.reply << " cut at " << i << ", " << j;
        ASSERT_EQ(content + rest.content, c.content) << c.reply << " cut at " << i << ", " << j;
      }
    }
  }
}

// Text is released as soon as it cannot begin the marker awaited.
TEST(Thinking, SplitterHoldsBackOnlyWhatCouldBeAMarker) {
  ThinkingMode gemma{"<|think|>\n", "", "<|channel>thought", "<channel|>", false};
  ReasoningSplitter s(gemma);
  EXPECT_EQ(s.Push("Hello <|cha").content, "Hello ");
  auto p = s.Push("nnel>thought\nhm <chan");
  EXPECT_EQ(p.content, "");
  EXPECT_EQ(p.reasoning, "hm ");
  p = s.Push("nel|>ok");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "ok");
}

}  // namespace
}  // namespace mlc
