// Conversation templates (SPEC 7): prompt strings of MLC's gemma_instruction, gemma3_instruction,
// llava, chatml and phi-3 templates, segments with media in content order, follow-up turns,
// token ids with the real Phi-3 and Qwen2 tokenizers, stop strings, and errors with pointers.
#include "mlc_manifest/conversation.h"

#include <gtest/gtest.h>

#include <sstream>

#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/tokenizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

Json J(const std::string& text) {
  auto doc = ParseJson(text);
  EXPECT_TRUE(doc.ok()) << text;
  return doc.ok() ? *doc : Json();
}

ConvTemplate Template(const std::string& json) {
  auto t = ParseConvTemplate(J(json));
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : FormatErrors(t.errors()));
  return t.ok() ? *t : ConvTemplate();
}

std::vector<ChatMessage> Messages(const std::string& json) {
  auto m = ParseMessages(J(json));
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : FormatErrors(m.errors()));
  return m.ok() ? *m : std::vector<ChatMessage>{};
}

// Segments shown as strings, media as <image> / <audio>.
std::vector<std::string> Segments(const ChatPrompt& p) {
  std::vector<std::string> out;
  for (const PromptSegment& s : p.segments) {
    out.push_back(s.kind == PartKind::kText ? s.text
                  : s.kind == PartKind::kImage ? "<image>" : "<audio>");
  }
  return out;
}

std::vector<std::string> Build(const ConvTemplate& t, const std::string& messages) {
  auto p = BuildChatPrompt(t, Messages(messages));
  EXPECT_TRUE(p.ok()) << (p.ok() ? "" : FormatErrors(p.errors()));
  return p.ok() ? Segments(*p) : std::vector<std::string>{};
}

// Public values of MLC LLM's templates (python/mlc_llm/conversation_template).
const char* kGemma = R"({"name": "gemma_instruction", "system_template": "{system_message}",
  "system_message": "", "roles": {"user": "<start_of_turn>user", "assistant": "<start_of_turn>model"},
  "seps": ["<end_of_turn>\n"], "role_content_sep": "\n", "role_empty_sep": "\n",
  "stop_str": ["<end_of_turn>"], "stop_token_ids": [1, 107], "system_prefix_token_ids": [2]})";
const char* kGemma3 = R"({"name": "gemma3_instruction", "system_template": "{system_message}",
  "system_message": "", "roles": {"user": "<start_of_turn>user", "assistant": "<start_of_turn>model"},
  "seps": ["<end_of_turn>\n"], "role_content_sep": "\n", "role_empty_sep": "\n",
  "stop_str": ["<end_of_turn>"], "stop_token_ids": [1, 106], "system_prefix_token_ids": [2],
  "future_field": {"ignored": true}})";
const char* kLlava = R"({"name": "llava", "system_template": "{system_message}",
  "system_message": "\n", "roles": {"user": "USER", "assistant": "ASSISTANT"}, "seps": [" "],
  "role_content_sep": ": ", "role_empty_sep": ":", "stop_str": ["</s>"], "stop_token_ids": [2],
  "system_prefix_token_ids": [1], "add_role_after_system_message": false})";

const char* kRoleTemplates = R"({"system_template": "[{system_message}]", "system_message": "S",
      "roles": {"user": "U", "assistant": "A", "tool": "T"},
      "role_templates": {"user": "<{function_string}|{user_message}|{function_string}>",
                         "tool": "no placeholder"},
      "seps": ["1", "2"], "role_content_sep": ":", "role_empty_sep": "=",
      "function_string": "F", "use_function_calling": true})";

TEST(ConvTemplate, GemmaInstruction) {
  ConvTemplate t = Template(kGemma);
  EXPECT_EQ(t.stop_token_ids, (std::vector<int32_t>{1, 107}));
  EXPECT_EQ(t.system_prefix_token_ids, (std::vector<int32_t>{2}));
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": "Hi"}])"),
            (std::vector<std::string>{"<start_of_turn>user\nHi<end_of_turn>\n",
                                      "<start_of_turn>model\n"}));
  // An empty system message leaves the system prompt out; a given one replaces it.
  EXPECT_EQ(Build(t, R"([{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": "Hi"},
                         {"role": "assistant", "content": "Hello!"},
                         {"role": "user", "content": "Bye"}])"),
            (std::vector<std::string>{"Be brief.", "<start_of_turn>user\nHi<end_of_turn>\n",
                                      "<start_of_turn>model\nHello!<end_of_turn>\n",
                                      "<start_of_turn>user\nBye<end_of_turn>\n",
                                      "<start_of_turn>model\n"}));
}

TEST(ConvTemplate, Gemma3ImageInContentOrder) {
  ConvTemplate t = Template(kGemma3);
  EXPECT_EQ(t.stop_token_ids, (std::vector<int32_t>{1, 106}));
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "a.jpg"}},
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "b.jpg"}}]}])"),
            (std::vector<std::string>{"<start_of_turn>user\n", "<image>", "What is this?",
                                      "<image>", "<end_of_turn>\n", "<start_of_turn>model\n"}));
}

TEST(ConvTemplate, LlavaOmitsRoleAfterSystemPrompt) {
  ConvTemplate t = Template(kLlava);
  // The first message follows the system prompt without its role.
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": [
                {"type": "text", "text": "Describe it."},
                {"type": "image_url", "image_url": {"url": "x.png"}}]}])"),
            (std::vector<std::string>{"\n", "Describe it.", "<image>", " ", "ASSISTANT:"}));
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"},
                         {"role": "user", "content": "C"}])"),
            (std::vector<std::string>{"\n", "A ", "ASSISTANT: B ", "USER: C ", "ASSISTANT:"}));
  // An empty system prompt keeps the role on the first message.
  EXPECT_EQ(Build(t, R"([{"role": "system", "content": ""}, {"role": "user", "content": "A"}])"),
            (std::vector<std::string>{"USER: A ", "ASSISTANT:"}));
}

TEST(ConvTemplate, RoleTemplatesAndFunctionString) {
  ConvTemplate t = Template(kRoleTemplates);
  // First {function_string} -> function_string, the second -> "", seps alternate by index;
  // a template without the placeholder drops the text.
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": [{"type": "input_audio",
                            "input_audio": {"data": "a.wav", "format": "wav"}}, {"type": "text", "text": "x"}]},
                         {"role": "assistant", "content": "y"},
                         {"role": "tool", "content": "z"}])"),
            (std::vector<std::string>{"[S]", "U:<F|", "<audio>", "x|>1", "A:y2", "T:no placeholder1",
                                      "A="}));
  // Off: only the first occurrence is filled (with ""), as WebLLM does.
  t.use_function_calling = false;
  EXPECT_EQ(Build(t, R"([{"role": "user", "content": "x"}])"),
            (std::vector<std::string>{"[S]", "U:<|x|{function_string}>1", "A="}));
}

TEST(ConvTemplate, FollowUpPrefillsTheSeparatorAfterTheReply) {
  ConvTemplate t = Template(kLlava);
  auto first = Messages(R"([{"role": "user", "content": "A"}])");
  auto next = Messages(R"([{"role": "user", "content": "A"}, {"role": "assistant", "content": "B"},
                           {"role": "user", "content": [{"type": "text", "text": "C"},
                             {"type": "image_url", "image_url": {"url": "x.png"}}]}])");
  auto p = BuildFollowUpPrompt(t, first, "B", next);
  ASSERT_TRUE(p.ok()) << FormatErrors(p.errors());
  EXPECT_FALSE(p->first_round);
  EXPECT_EQ(Segments(*p), (std::vector<std::string>{" ", "USER: C", "<image>", " ", "ASSISTANT:"}));
  // Fresh prompt text = cached prompt + reply + follow-up (apart from the header/content sep).
  ConvTemplate g = Template(kGemma);
  auto sys_first = Messages(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "A"}])");
  auto sys_next = Messages(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "A"},
                               {"role": "assistant", "content": "B"}, {"role": "user", "content": "C"}])");
  auto p1 = BuildChatPrompt(g, sys_first);
  auto p2 = BuildFollowUpPrompt(g, sys_first, "B", sys_next);
  auto whole = BuildChatPrompt(g, sys_next);
  ASSERT_TRUE(p1.ok() && p2.ok() && whole.ok());
  EXPECT_EQ(PromptText(*p1) + "B" + PromptText(*p2), PromptText(*whole));
  // A different history or reply is not the cached conversation.
  auto bad = BuildFollowUpPrompt(g, sys_first, "other", sys_next);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().path, "/2");
  auto changed = Messages(R"([{"role": "system", "content": "X"}, {"role": "user", "content": "A"},
                              {"role": "assistant", "content": "B"}, {"role": "user", "content": "C"}])");
  auto bad2 = BuildFollowUpPrompt(g, sys_first, "B", changed);
  ASSERT_FALSE(bad2.ok());
  EXPECT_EQ(bad2.error().path, "/0");
}

// ---- Real tokenizers and chat configs ----

struct RealModel {
  ConvTemplate tmpl;
  std::unique_ptr<Tokenizer> tokenizer;
};

RealModel LoadReal(const std::string& name, const std::string& tokenizer_file) {
  RealModel m;
  std::string dir = test::SharedPath("testdata/tokenizers/" + name);
  auto config = ReadJsonFile(dir + "/mlc-chat-config.json");
  EXPECT_TRUE(config.ok());
  if (!config) return m;
  auto t = ConvTemplateFromChatConfig(*config);
  EXPECT_TRUE(t.ok());
  if (t) m.tmpl = *t;
  auto tok = Tokenizer::FromJsonFile(dir + "/" + tokenizer_file);
  EXPECT_TRUE(tok.ok());
  if (tok) m.tokenizer = std::move(*tok);
  return m;
}

std::vector<int32_t> TurnIds(const RequestTurn& turn) {
  std::vector<int32_t> ids;
  for (const RequestSegment& s : turn) {
    EXPECT_EQ(s.kind, SegmentKind::kTokens);
    ids.insert(ids.end(), s.token_ids.begin(), s.token_ids.end());
  }
  return ids;
}

TEST(ConvTemplateReal, Phi3SystemPrefixAndSpecialTokens) {
  RealModel m = LoadReal("phi-3-mini", "tokenizer.json");
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(m.tmpl.name, "phi-3");
  auto msgs = Messages(R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])");
  auto p = BuildChatPrompt(m.tmpl, msgs);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(Segments(*p), (std::vector<std::string>{"<|system|>\nBe brief.", "<|user|>\nHi<|end|>\n",
                                                    "<|assistant|>\n"}));
  auto turn = PromptTurn(*p, m.tmpl, *m.tokenizer, "");
  ASSERT_TRUE(turn.ok());
  std::vector<int32_t> ids = TurnIds(*turn);
  // <s>, <|system|> ... <|user|>, ..., <|end|>, ..., <|assistant|>: each segment encoded alone.
  std::vector<int32_t> expect = {1};
  for (const std::string& s : Segments(*p)) {
    auto e = m.tokenizer->Encode(s);
    expect.insert(expect.end(), e.begin(), e.end());
  }
  EXPECT_EQ(ids, expect);
  EXPECT_EQ(ids[1], 32006);  // <|system|>
  EXPECT_NE(std::find(ids.begin(), ids.end(), 32010), ids.end());  // <|user|>
  EXPECT_NE(std::find(ids.begin(), ids.end(), 32007), ids.end());  // <|end|>
  EXPECT_EQ(m.tokenizer->Encode("<|assistant|>\n").front(), 32001);
  std::string text = m.tokenizer->Decode(ids);
  EXPECT_NE(text.find("Be brief."), std::string::npos) << text;
  EXPECT_NE(text.find("Hi<|end|>"), std::string::npos) << text;
}

TEST(ConvTemplateReal, Qwen2ChatmlFollowUpIds) {
  RealModel m = LoadReal("qwen2-readerlm", "tokenizer.reconstructed.json");
  ASSERT_TRUE(m.tokenizer);
  EXPECT_EQ(m.tmpl.name, "chatml");
  EXPECT_FALSE(m.tmpl.system_prefix_token_ids.has_value());  // null in the config
  auto first = Messages(R"([{"role": "user", "content": "Hello"}])");
  auto p1 = BuildChatPrompt(m.tmpl, first);
  ASSERT_TRUE(p1.ok());
  EXPECT_EQ(Segments(*p1),
            (std::vector<std::string>{
                "<|im_start|>system\nYou are an AI assistant developed by Jina AI.<|im_end|>\n",
                "<|im_start|>user\nHello<|im_end|>\n", "<|im_start|>assistant\n"}));
  auto t1 = PromptTurn(*p1, m.tmpl, *m.tokenizer, "");
  ASSERT_TRUE(t1.ok());
  std::vector<int32_t> ids1 = TurnIds(*t1);
  ASSERT_FALSE(ids1.empty());
  EXPECT_EQ(ids1.front(), 151644);  // <|im_start|>, no prefix ids
  EXPECT_EQ(ids1.back(), 198);      // "\n" after "assistant"

  auto next = Messages(R"([{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi!"},
                           {"role": "user", "content": "Bye"}])");
  auto p2 = BuildFollowUpPrompt(m.tmpl, first, "Hi!", next);
  ASSERT_TRUE(p2.ok());
  auto t2 = PromptTurn(*p2, m.tmpl, *m.tokenizer, "");
  ASSERT_TRUE(t2.ok());
  std::vector<int32_t> ids2 = TurnIds(*t2);
  // The separator after the reply comes first: <|im_end|> "\n".
  ASSERT_GE(ids2.size(), 2u);
  EXPECT_EQ(ids2[0], 151645);
  EXPECT_EQ(ids2[1], 198);
  EXPECT_EQ(m.tokenizer->Decode(ids2), "<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  // The cache (first prompt + reply + follow-up) equals the fresh prompt of the whole history.
  auto whole = BuildChatPrompt(m.tmpl, next);
  ASSERT_TRUE(whole.ok());
  std::vector<int32_t> cache = ids1, reply = m.tokenizer->Encode("Hi!");
  cache.insert(cache.end(), reply.begin(), reply.end());
  cache.insert(cache.end(), ids2.begin(), ids2.end());
  auto fresh = PromptTurn(*whole, m.tmpl, *m.tokenizer, "");
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(cache, TurnIds(*fresh));
}

TEST(ConvTemplateReal, MediaSegmentsResolveFilesAndDataUrls) {
  test::TempDir dir;
  RealModel m = LoadReal("qwen2-readerlm", "tokenizer.reconstructed.json");
  ASSERT_TRUE(m.tokenizer);
  // "RIFF" in base64 is "UklGRg==".
  auto msgs = Messages(R"([{"role": "user", "content": [
      {"type": "input_audio", "input_audio": {"data": "data:audio/wav;base64,UklGRg==", "format": "wav"}},
      {"type": "text", "text": "Transcribe"},
      {"type": "image_url", "image_url": {"url": "pics/cat.png"}}]}])");
  auto p = BuildChatPrompt(m.tmpl, msgs);
  ASSERT_TRUE(p.ok());
  auto turn = PromptTurn(*p, m.tmpl, *m.tokenizer, "/base");
  ASSERT_TRUE(turn.ok()) << FormatErrors(turn.errors());
  // Token runs stay apart per pointer: the system prompt, the message's text, the reply header.
  ASSERT_EQ(turn->size(), 7u);
  EXPECT_EQ((*turn)[0].path, "/conv_template/system_message");
  EXPECT_EQ((*turn)[1].path, "/0/content/1");
  EXPECT_EQ((*turn)[2].kind, SegmentKind::kAudio);
  // Inline media is carried in memory: nothing is written to a file.
  ASSERT_TRUE((*turn)[2].bytes);
  EXPECT_EQ(*(*turn)[2].bytes, "RIFF");
  EXPECT_EQ((*turn)[2].file, "");
  EXPECT_EQ((*turn)[2].path, "/0/content/0");
  EXPECT_EQ((*turn)[3].kind, SegmentKind::kTokens);
  EXPECT_EQ(m.tokenizer->Decode((*turn)[3].token_ids), "Transcribe");
  EXPECT_EQ((*turn)[3].path, "/0/content/1");
  EXPECT_EQ((*turn)[4].kind, SegmentKind::kImage);
  EXPECT_EQ((*turn)[4].file, "/base/pics/cat.png");
  EXPECT_EQ((*turn)[6].path, "/conv_template/roles/assistant");
}

TEST(InlineMedia, RawBase64AudioDataUrlsAndFiles) {
  test::TempDir dir;
  auto part = [](PartKind kind, const std::string& url) {
    return ContentPart{kind, "", url, kind == PartKind::kAudio ? "wav" : "", "/0/content/0"};
  };
  // OpenAI's input_audio.data is raw base64.
  auto raw = InlineMedia(part(PartKind::kAudio, "UklGRg=="), dir.path());
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE(raw->has_value());
  EXPECT_EQ(**raw, "RIFF");
  auto url = InlineMedia(part(PartKind::kImage, "data:image/png;base64,UklGRg"), dir.path());
  ASSERT_TRUE(url.ok() && url->has_value());
  EXPECT_EQ(**url, "RIFF");
  // A path is a file (a native extension), also one spelt in base64 characters that exists.
  auto path = InlineMedia(part(PartKind::kAudio, "clip.wav"), dir.path());
  ASSERT_TRUE(path.ok());
  EXPECT_FALSE(path->has_value());
  dir.Write("abcd", "x");
  auto named = InlineMedia(part(PartKind::kAudio, "abcd"), dir.path());
  ASSERT_TRUE(named.ok());
  EXPECT_FALSE(named->has_value());
  auto file = MediaFile(part(PartKind::kAudio, "abcd"), dir.path());
  ASSERT_TRUE(file.ok());
  EXPECT_EQ(*file, dir.File("abcd"));
  // Without files no name is looked at: raw base64 is data whether or not such a file exists.
  for (const char* name : {"abcd", "abce"}) {
    auto data = InlineMedia(part(PartKind::kAudio, name), dir.path(), /*allow_files=*/false);
    ASSERT_TRUE(data.ok()) << name;
    ASSERT_TRUE(data->has_value()) << name;
    EXPECT_EQ((*data)->size(), 3u);
  }
  // Images are never raw base64; errors point at the field.
  auto image = InlineMedia(part(PartKind::kImage, "UklGRg=="), dir.path());
  ASSERT_TRUE(image.ok());
  EXPECT_FALSE(image->has_value());
  auto bad = InlineMedia(part(PartKind::kAudio, "data:audio/wav;base64,Ukl*"), dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.errors()[0].path, "/0/content/0/input_audio/data");
  // Raw base64 longer than a file name is data, never a crash (it once threw "File name too long").
  std::string long_b64(4096, 'A');
  auto longer = InlineMedia(part(PartKind::kAudio, long_b64), dir.path());
  ASSERT_TRUE(longer.ok()) << FormatErrors(longer.errors());
  ASSERT_TRUE(longer->has_value());
  EXPECT_EQ((*longer)->size(), 3072u);
  // A path with a NUL or other control character is refused at its pointer.
  auto nul = MediaFile(part(PartKind::kImage, std::string("cat.png\0x", 9)), dir.path());
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.errors()[0].path, "/0/content/0/image_url/url");
  auto empty = InlineMedia(part(PartKind::kImage, ""), dir.path());
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.errors()[0].path, "/0/content/0/image_url/url");
}

// ---- Stop strings ----

TEST(StopMatcher, HoldsBackPartialStopAndCutsAtTheStop) {
  StopMatcher s({"<end_of_turn>", "</s>"});
  std::string out = s.Push("Hello <end");
  EXPECT_EQ(out, "Hello ");
  out += s.Push("_of");
  out += s.Push("_turn> more");
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(out, "Hello ");
  EXPECT_EQ(s.Push("x"), "");

  StopMatcher t({"</s>"});
  std::string text = t.Push("a</");
  EXPECT_EQ(text, "a");
  text += t.Push("b");
  EXPECT_FALSE(t.stopped());
  EXPECT_EQ(text + t.Finish(), "a</b");
  StopMatcher none({});
  EXPECT_EQ(none.Push("abc"), "abc");
}

// Which tokens a stop string leaves shown (their log-probabilities are sent), on a byte-level
// tokenizer whose tokens are single bytes: a lone continuation byte is held back with the token
// after it, and a character split over two tokens starts where its first byte does.
TEST(ReplyStream, TokensShownEndWhereTheShownTextDoes) {
  test::TempDir dir;
  ASSERT_TRUE(WriteReferenceModel(dir.path(), ReferenceModelOptions{}).ok());
  auto tok = Tokenizer::FromDirectory(dir.path());
  ASSERT_TRUE(tok.ok());
  // ByteLevel: each byte is the token of its mapped character (these bytes map to themselves).
  auto id = [&](const char* piece) {
    auto i = (*tok)->TokenToId(piece);
    EXPECT_TRUE(i.has_value()) << piece;
    return i.value_or(0);
  };
  const std::vector<int32_t> reply = {id("a"), id("\u00bf"), id("J"), id("\u00c4"), id("\u00b2"), id("b")};
  ASSERT_EQ((*tok)->Decode(reply), "a\xEF\xBF\xBDJ\xC4\xB2" "b");  // a, U+FFFD, J, U+0132, b
  struct Case {
    std::string stop, shown;
    size_t tokens;
  };
  for (const Case& c : std::vector<Case>{{"J", "a\xEF\xBF\xBD", 2},
                                         {"\xC4\xB2", "a\xEF\xBF\xBDJ", 3},
                                         {"b", "a\xEF\xBF\xBDJ\xC4\xB2", 5},
                                         {"zz", "a\xEF\xBF\xBDJ\xC4\xB2" "b", 6}}) {
    ReplyStream r(**tok, {c.stop});
    std::string text;
    for (int32_t t : reply) text += r.Push(t);
    text += r.Finish();
    EXPECT_EQ(text, c.shown) << c.stop;
    EXPECT_EQ(r.TokensShown(), c.tokens) << c.stop;
  }
}

// ---- Errors ----

void ExpectMessagesError(const std::string& json, const std::string& path) {
  auto m = ParseMessages(J(json));
  ASSERT_FALSE(m.ok()) << json;
  EXPECT_EQ(m.error().path, path) << m.error().message;
}

TEST(ConvErrors, MessagesWithPointers) {
  ExpectMessagesError(R"([{"role": "user", "content": "a"}, {"role": "system", "content": "s"},
                          {"role": "user", "content": "b"}])", "/1/role");
  ExpectMessagesError(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])",
                      "/1/role");
  ExpectMessagesError(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
                          {"type": "text", "text": "b"}]}])", "/0/content/1");
  ExpectMessagesError(R"([{"role": "user", "content": [{"type": "video_url"}]}])", "/0/content/0/type");
  ExpectMessagesError(R"([{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}])",
                      "/0/content/0/image_url/url");
  ExpectMessagesError(R"([{"role": "bot", "content": "a"}])", "/0/role");
  ExpectMessagesError(R"([{"role": "user"}])", "/0/content");
  ExpectMessagesError(R"([{"role": "assistant", "content": [{"type": "text", "text": "a"}]},
                          {"role": "user", "content": "b"}])", "/0/content");
  ExpectMessagesError(R"([])", "");
}

TEST(ConvErrors, TemplateTypesWithPointers) {
  auto t = ConvTemplateFromChatConfig(J(R"({"conv_template": {"seps": ["a", 3], "roles": {"user": 1},
      "system_prefix_token_ids": [-1], "add_role_after_system_message": "no"}})"));
  ASSERT_FALSE(t.ok());
  std::vector<std::string> paths;
  for (const Error& e : t.errors()) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"/conv_template/system_prefix_token_ids/0",
                                             "/conv_template/add_role_after_system_message",
                                             "/conv_template/roles/user", "/conv_template/seps/1"}));
  auto no_seps = ParseConvTemplate(J(R"({"seps": []})"));
  ASSERT_FALSE(no_seps.ok());
  EXPECT_EQ(no_seps.error().path, "/seps");
  // A role the template does not name.
  ConvTemplate phi = Template(R"({"roles": {"user": "U", "assistant": "A"}, "seps": ["\n"]})");
  auto p = BuildChatPrompt(phi, Messages(R"([{"role": "tool", "content": "x"}])"));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().path, "/0/role");
  EXPECT_FALSE(DecodeDataUrl("data:image/png;base64,@@", "/x").ok());
  EXPECT_FALSE(DecodeDataUrl("data:image/png,abc", "/x").ok());
}

// ---- The reference: WebLLM 0.2.86's own conversation code ----

// Every template x every message list, first round: our segments equal what WebLLM's manifest
// path builds (getConversationFromChatCompletionRequest, appendReplyHeader,
// getArtifactPromptSegments, run in Node from the npm package), and we refuse what it refuses.
TEST(WebLlmReference, FirstRoundSegmentsEqualWebLlm) {
  const std::string package = test::NpmPackage("@mlc-ai/web-llm@0.2.86");
  ASSERT_FALSE(package.empty());
  test::TempDir dir;
  std::string lib = test::ReadText(package + "/lib/index.js") +
                    "\nexport { getConversationFromChatCompletionRequest as __fromRequest, Role as __Role };\n";
  std::string lib_path = dir.Write("web-llm.mjs", lib);

  // WebLLM 0.2.86 never reads a template's function-calling fields (its Conversation keeps its
  // own, always off), so {function_string} is compared with function calling off; SPEC 7
  // decides the "on" case (ConvTemplate.RoleTemplatesAndFunctionString).
  Json roles = J(kRoleTemplates);
  roles["use_function_calling"] = false;
  std::vector<std::pair<std::string, Json>> templates = {
      {"gemma", J(kGemma)}, {"gemma3", J(kGemma3)}, {"llava", J(kLlava)}, {"roles", roles},
      {"chatml_empty_system", J(R"({"system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
          "system_message": "", "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
          "seps": ["<|im_end|>\n"], "role_content_sep": "\n", "role_empty_sep": "\n"})")},
      {"no_empty_system", J(R"({"system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
          "system_message": "", "render_empty_system_message": false,
          "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
          "seps": ["<|im_end|>\n"], "role_content_sep": "\n", "role_empty_sep": "\n"})")}};
  for (const char* real : {"phi-3-mini", "qwen2-readerlm"}) {
    auto config = ReadJsonFile(test::SharedPath(std::string("testdata/tokenizers/") + real + "/mlc-chat-config.json"));
    ASSERT_TRUE(config.ok());
    templates.emplace_back(real, (*config)["conv_template"]);
  }
  const std::vector<std::string> message_lists = {
      R"([{"role": "user", "content": "Hello"}])",
      R"([{"role": "user", "content": ""}])",
      R"([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])",
      R"([{"role": "system", "content": ""}, {"role": "user", "content": "Hi"}])",
      R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "a.png"}},
                                       {"type": "text", "text": "What is this?"}]}])",
      R"([{"role": "user", "content": [{"type": "text", "text": "Listen"},
          {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
          {"type": "image_url", "image_url": {"url": "b.png"}}]}])",
      R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "c.png"}}]}])",
      R"([{"role": "system", "content": "S2"}, {"role": "user", "content": "Hi"},
          {"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "Bye"}])",
      R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
          {"role": "user", "content": [{"type": "text", "text": "c"}, {"type": "image_url", "image_url": {"url": "d.png"}}]}])",
      R"([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}, {"role": "user", "content": "c"}])",
      R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])",
  };
  const std::string tool_list = R"([{"role": "user", "content": "call"}, {"role": "assistant", "content": "ok"},
                                    {"role": "tool", "content": "42"}])";
  struct Case {
    std::string name;
    Json tmpl;
    Json messages;
  };
  std::vector<Case> cases;
  std::string input;
  for (const auto& [name, tmpl] : templates) {
    std::vector<std::string> lists = message_lists;
    if (tmpl["roles"].contains("tool")) lists.push_back(tool_list);
    for (size_t i = 0; i < lists.size(); ++i) {
      cases.push_back({name + " #" + std::to_string(i), tmpl, J(lists[i])});
      input += Json{{"conv_template", tmpl}, {"messages", cases.back().messages}}.dump() + "\n";
    }
  }
  auto r = test::RunProgram({"timeout", "300", "node", test::SourcePath("tests/support/web_llm_prompt.mjs"), lib_path},
                            input);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream out(r.out);
  int compared = 0, refused = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + ": " + c.messages.dump());
    std::string line;
    ASSERT_TRUE(std::getline(out, line)) << "WebLLM's answers ended early";
    Json ref = Json::parse(line);
    auto tmpl = ParseConvTemplate(c.tmpl);
    ASSERT_TRUE(tmpl.ok()) << FormatErrors(tmpl.errors());
    auto messages = ParseMessages(c.messages);
    Result<ChatPrompt> prompt = messages.ok() ? BuildChatPrompt(*tmpl, *messages) : Result<ChatPrompt>(messages.errors());
    if (ref.contains("error")) {
      EXPECT_FALSE(prompt.ok()) << "WebLLM refuses: " << ref["error"];
      ++refused;
      continue;
    }
    ASSERT_TRUE(prompt.ok()) << FormatErrors(prompt.errors());
    EXPECT_EQ(Segments(*prompt), ref["segments"].get<std::vector<std::string>>());
    ++compared;
  }
  EXPECT_GE(compared, 60);
  EXPECT_GE(refused, 10);
}

}  // namespace
}  // namespace mlc
