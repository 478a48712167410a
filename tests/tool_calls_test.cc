// Tool calling's library parts: the request's tool set and its refusals, the call grammar (names
// and arguments only as the tools allow, free text before a call under auto), the reply split
// into text and calls in pieces of any size, and the Hermes prompt equal token for token to
// Qwen2.5's published template rendered by Jinja2.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "mlc_manifest/chat.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/tokenizer.h"
#include "mlc_manifest/tools.h"
#include "runtime/reference_tokenizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

OrderedJson O(const std::string& text) { return OrderedJson::parse(text); }

const char* kWeatherTools = R"({"tools": [
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
   "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                  "unit": {"enum": ["c", "f"]}}, "required": ["city"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
   "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["zone"],
   "additionalProperties": false}}}]})";

ToolSet Tools(const std::string& extra = "") {
  OrderedJson body = O(kWeatherTools);
  if (!extra.empty()) body.update(O(extra));
  auto set = ParseToolSet(body);
  EXPECT_TRUE(set.ok()) << (set.ok() ? "" : FormatErrors(set.errors()));
  return set.ok() ? *set : ToolSet{};
}

ToolFormat Hermes() {
  ConvTemplate t;
  t.roles = {{"user", "<|im_start|>user"}, {"assistant", "<|im_start|>assistant"}};
  return ToolFormatFor(t);
}

std::shared_ptr<const JsonGrammar> Grammar(const ToolSet& set) {
  auto g = ToolCallGrammar(Hermes(), set);
  EXPECT_TRUE(g.ok()) << (g.ok() ? "" : FormatErrors(g.errors()));
  return g.ok() ? *g : nullptr;
}

const char* kCall = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
const char* kCall2 = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": -3}}\n</tool_call>";

TEST(ToolGrammar, RequiredTakesOnlyCallsOfTheTools) {
  auto g = Grammar(Tools(R"({"tool_choice": "required"})"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->Matches(kCall));
  EXPECT_TRUE(g->Matches(kCall2));
  EXPECT_TRUE(g->Matches(std::string(kCall) + "\n" + kCall2));  // parallel calls
  EXPECT_FALSE(g->Matches("Hi " + std::string(kCall)));          // no text first
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"get_date\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"zone\": 15}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Amsterdam!\"}}\n</tool_call>"));
  EXPECT_FALSE(g->Matches(""));
  EXPECT_FALSE(g->Matches(std::string(kCall).substr(0, 30)));
}

TEST(ToolGrammar, AutoIsFreeTextUntilACallOpens) {
  auto g = Grammar(Tools());
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->Matches(""));
  EXPECT_TRUE(g->Matches("The weather is < 20 degrees <tool"));  // text, even a call's beginning
  EXPECT_TRUE(g->Matches(std::string("Let me look.\n") + kCall));
  EXPECT_TRUE(g->Matches(std::string("<<tool_call") + kCall));  // the trigger found past a false start
  EXPECT_FALSE(g->Matches(std::string("x") + kCall + " and more text"));
  EXPECT_FALSE(g->Matches("<tool_call>\n{\"name\": \"nope\""));
  JsonGrammar::State s = g->Start();
  EXPECT_TRUE(g->InFreeText(s));
  ASSERT_TRUE(g->Feed(s, "Sure. <tool_call>"));
  EXPECT_FALSE(g->InFreeText(s));
  EXPECT_FALSE(g->Accepting(s));
}

TEST(ToolGrammar, NamedAndSingleCalls) {
  auto named = Grammar(Tools(R"({"tool_choice": {"type": "function", "function": {"name": "get_time"}}})"));
  ASSERT_TRUE(named);
  EXPECT_TRUE(named->Matches(kCall2));
  EXPECT_FALSE(named->Matches(kCall));
  auto single = Grammar(Tools(R"({"tool_choice": "required", "parallel_tool_calls": false})"));
  ASSERT_TRUE(single);
  EXPECT_TRUE(single->Matches(kCall));
  EXPECT_FALSE(single->Matches(std::string(kCall) + "\n" + kCall2));
}

// Bytes sampled uniformly among those the grammar takes give calls that parse: the name is a
// tool's and the arguments an object its schema allows (checked here by hand for the two tools).
TEST(ToolGrammar, RandomWalksGiveValidCalls) {
  auto g = Grammar(Tools(R"({"tool_choice": "required"})"));
  ASSERT_TRUE(g);
  std::mt19937 rng(7);
  int complete = 0;
  for (int walk = 0; walk < 300; ++walk) {
    JsonGrammar::State s = g->Start();
    std::string text;
    while (text.size() < 400) {
      if (g->Accepting(s) && rng() % 4 == 0) break;
      std::vector<uint8_t> options;
      for (int c = 0; c < 256; ++c) {
        JsonGrammar::State copy = s;
        if (g->Step(copy, static_cast<uint8_t>(c))) options.push_back(static_cast<uint8_t>(c));
      }
      if (options.empty()) break;
      const uint8_t c = options[rng() % options.size()];
      ASSERT_TRUE(g->Step(s, c));
      text.push_back(static_cast<char>(c));
    }
    if (!g->Accepting(s)) continue;
    ++complete;
    ToolCallStream split(Hermes(), "call_");
    split.Push(text);
    split.Finish();
    ASSERT_FALSE(split.calls().empty()) << text;
    for (const ToolCall& call : split.calls()) {
      auto args = ParseJson(call.arguments);
      ASSERT_TRUE(args.ok()) << text;
      ASSERT_TRUE(args->is_object());
      if (call.name == "get_weather") {
        ASSERT_TRUE((*args)["city"].is_string()) << text;
        EXPECT_LE((*args)["city"].get<std::string>().size(), 8u * 4) << text;
        if (args->contains("unit")) {
          EXPECT_TRUE((*args)["unit"] == "c" || (*args)["unit"] == "f") << text;
        }
      } else {
        ASSERT_EQ(call.name, "get_time") << text;
        ASSERT_TRUE((*args)["zone"].is_number_integer()) << text;
        EXPECT_GE((*args)["zone"].get<int64_t>(), -12);
        EXPECT_LE((*args)["zone"].get<int64_t>(), 14);
      }
    }
  }
  EXPECT_GT(complete, 100);
}

TEST(ToolCallStream, PiecesOfAnySizeSplitAsTheWhole) {
  const std::string reply = std::string("Let me check.\n") + kCall + "\n" + kCall2;
  ToolCallStream whole(Hermes(), "call_");
  auto all = whole.Push(reply);
  auto rest = whole.Finish();
  EXPECT_EQ(all.content + rest.content, "Let me check.");
  ASSERT_EQ(whole.calls().size(), 2u);
  EXPECT_EQ(whole.calls()[0].name, "get_weather");
  EXPECT_EQ(whole.calls()[0].arguments, "{\"city\": \"Paris\"}");
  EXPECT_EQ(whole.calls()[0].id, "call_0");
  EXPECT_EQ(whole.calls()[1].name, "get_time");
  EXPECT_EQ(whole.calls()[1].arguments, "{\"zone\": -3}");
  for (size_t piece = 1; piece <= 7; ++piece) {
    ToolCallStream s(Hermes(), "call_");
    std::string content;
    std::vector<std::string> names(2), args(2);
    auto take = [&](const ToolCallStream::Delta& d) {
      content += d.content;
      for (const auto& c : d.calls) {
        ASSERT_LT(c.index, 2u);
        if (!c.name.empty()) names[c.index] = c.name;
        args[c.index] += c.arguments;
      }
    };
    for (size_t i = 0; i < reply.size(); i += piece) take(s.Push(reply.substr(i, piece)));
    take(s.Finish());
    EXPECT_EQ(content, "Let me check.") << piece;
    EXPECT_EQ(names, (std::vector<std::string>{"get_weather", "get_time"})) << piece;
    EXPECT_EQ(args, (std::vector<std::string>{"{\"city\": \"Paris\"}", "{\"zone\": -3}"})) << piece;
  }
  ToolCallStream text(Hermes(), "call_");
  std::string plain = text.Push("a <tool").content;
  plain += text.Finish().content;
  EXPECT_EQ(plain, "a <tool");  // no call: all text
}

TEST(ToolSet, RefusalsNameTheField) {
  auto error_at = [](const std::string& body) {
    auto set = ParseToolSet(O(body));
    return set.ok() ? std::string("ok") : set.errors().front().path;
  };
  EXPECT_EQ(error_at(R"({"tools": [{"type": "function", "function": {"name": "f"}}],
                        "tool_choice": {"type": "function", "function": {"name": "g"}}})"),
            "/tool_choice/function/name");
  EXPECT_EQ(error_at(R"({"tool_choice": "required"})"), "/tool_choice");
  EXPECT_EQ(error_at(R"({"tools": [{"type": "function", "function": {"name": "a b"}}]})"), "/tools/0/function/name");
  EXPECT_EQ(error_at(R"({"tools": [{"type": "retrieval"}]})"), "/tools/0/type");
  EXPECT_EQ(error_at(R"({"tools": [{"type": "function", "function": {"name": "f"}},
                                   {"type": "function", "function": {"name": "f"}}]})"),
            "/tools/1/function/name");
  EXPECT_EQ(error_at(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters":
                          {"type": "object", "properties": {"x": {"type": "string", "if": {}}}}}}]})"),
            "/tools/0/function/parameters/properties/x/if");
  EXPECT_EQ(error_at(R"({"tools": [], "parallel_tool_calls": "yes"})"), "/parallel_tool_calls");
  EXPECT_EQ(error_at(R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "none"})"), "ok");
  EXPECT_FALSE(Tools(R"({"tool_choice": "none"})").Active());
}

TEST(ToolMessages, ToolsShownUnderNoneToo) {
  ConvTemplate t;
  t.system_message = "Be brief.";
  auto messages = ParseMessages(Json::parse(R"([{"role": "user", "content": "hi"}])"));
  ASSERT_TRUE(messages.ok());
  for (const char* choice : {"auto", "none"}) {
    auto out = WriteToolMessages(Hermes(), t, Tools(std::string(R"({"tool_choice": ")") + choice + "\"}"), *messages);
    ASSERT_TRUE(out.ok());
    ASSERT_EQ(out->size(), 2u) << choice;
    EXPECT_EQ((*out)[0].role, "system");
    EXPECT_NE((*out)[0].Text().find("\"name\": \"get_time\""), std::string::npos) << choice;
  }
}

TEST(ToolMessages, ToolResultsMustAnswerACall) {
  ConvTemplate t;
  auto messages = ParseMessages(Json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_time", "arguments": "{\"zone\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c2", "content": "12:00"}])"));
  ASSERT_TRUE(messages.ok()) << FormatErrors(messages.errors());
  auto out = WriteToolMessages(Hermes(), t, Tools(), *messages);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.errors().front().path, "/2/tool_call_id");
  auto no_id = ParseMessages(Json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_time", "arguments": "{}"}}]}, {"role": "tool", "content": "x"}])"));
  ASSERT_TRUE(no_id.ok());
  auto unanswered = WriteToolMessages(Hermes(), t, Tools(), *no_id);
  ASSERT_FALSE(unanswered.ok());
  EXPECT_EQ(unanswered.errors().front().path, "/2/tool_call_id");
  auto bad_args = ParseMessages(Json::parse(R"([{"role": "user", "content": "hi"},
      {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
        "function": {"name": "get_time", "arguments": "{zone"}}]},
      {"role": "tool", "tool_call_id": "c1", "content": "12:00"}])"));
  ASSERT_TRUE(bad_args.ok());
  auto written = WriteToolMessages(Hermes(), t, Tools(), *bad_args);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.errors().front().path, "/1/tool_calls/0/function/arguments");
}

TEST(PythonJson, WritesAsJsonDumps) {
  EXPECT_EQ(PythonJson(O(R"({"b": [1, 2.5, true, null], "a": "é\n\"x\""})")),
            "{\"b\": [1, 2.5, true, null], \"a\": \"é\\n\\\"x\\\"\"}");
  EXPECT_EQ(PythonJson(O(R"({"a": [1, {}], "b": {"c": []}})"), 2), "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": {\n    \"c\": []\n  }\n}");
}

// The prompt of a conversation with tools, calls and results (two in a row) equals Qwen2.5's
// published template rendered by Jinja2, token for token, with a real Qwen2 tokenizer.
TEST(ToolPrompt, HermesEqualsQwen25PublishedTemplate) {
  const std::string dir = test::SharedPath("testdata/tokenizers/qwen2-readerlm");
  auto config = ReadJsonFile(dir + "/mlc-chat-config.json");
  ASSERT_TRUE(config.ok());
  auto tmpl = ConvTemplateFromChatConfig(*config);
  ASSERT_TRUE(tmpl.ok());
  auto loaded = Tokenizer::FromJsonFile(dir + "/tokenizer.reconstructed.json");
  ASSERT_TRUE(loaded.ok());
  const Tokenizer* tokenizer = loaded->get();
  const std::string llama = test::NpmPackage("node-llama-cpp@3.22.1");
  ASSERT_FALSE(llama.empty());
  const std::string request = std::string(R"({"messages": [
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "Weather in Paris, and the time in UTC-3? Answer in °C."},
      {"role": "assistant", "content": "", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}},
        {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\":-3}"}}]},
      {"role": "tool", "tool_call_id": "a", "content": "{\"temp\": 21}"},
      {"role": "tool", "tool_call_id": "b", "content": "09:30"},
      {"role": "assistant", "content": "It is 21 °C.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": "13:30"}],)") + std::string(kWeatherTools).substr(1);
  test::TempDir tmp;
  const std::string file = tmp.Write("request.json", request);
  auto rendered = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/chat_template.py"),
                                    llama + "/llama/gitRelease.bundle", MLC_BINARY_DIR, "Qwen-Qwen2.5-7B-Instruct.jinja",
                                    file});
  ASSERT_EQ(rendered.exit_code, 0) << rendered.err;

  OrderedJson body = O(request);
  auto tools = ParseToolSet(body);
  ASSERT_TRUE(tools.ok()) << FormatErrors(tools.errors());
  auto messages = ParseMessages(Json::parse(request)["messages"], "/messages");
  ASSERT_TRUE(messages.ok()) << FormatErrors(messages.errors());
  const ToolFormat format = ToolFormatFor(*tmpl);
  EXPECT_EQ(format.name, "hermes");
  auto written = WriteToolMessages(format, *tmpl, *tools, *messages);
  ASSERT_TRUE(written.ok()) << FormatErrors(written.errors());
  ChatTurns turns(*tmpl, *tokenizer);
  auto turn = turns.Next(*written, "", "");
  ASSERT_TRUE(turn.ok()) << FormatErrors(turn.errors());
  std::vector<int32_t> ours;
  for (const RequestSegment& s : *turn) ours.insert(ours.end(), s.token_ids.begin(), s.token_ids.end());
  EXPECT_EQ(ours, tokenizer->Encode(rendered.out)) << tokenizer->Decode(ours) << "\n---\n" << rendered.out;
}

}  // namespace
}  // namespace mlc

namespace mlc {
namespace {

// The published template (llama.cpp's models/templates/NAME) rendered by Jinja2 over a request.
std::string PublishedRendering(const std::string& name, const std::string& request) {
  const std::string llama = test::NpmPackage("node-llama-cpp@3.22.1");
  EXPECT_FALSE(llama.empty());
  test::TempDir tmp;
  const std::string file = tmp.Write("request.json", request);
  auto rendered = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/chat_template.py"),
                                    llama + "/llama/gitRelease.bundle", MLC_BINARY_DIR, name, file});
  EXPECT_EQ(rendered.exit_code, 0) << rendered.err;
  return rendered.out;
}

// Our prompt's text for the request's messages and tools under the template.
std::string OurPrompt(const ConvTemplate& tmpl, const std::string& request) {
  auto tools = ParseToolSet(O(request));
  EXPECT_TRUE(tools.ok()) << FormatErrors(tools.errors());
  const Json doc = Json::parse(request);
  auto messages = ParseMessages(doc["messages"], "/messages");
  EXPECT_TRUE(messages.ok()) << FormatErrors(messages.errors());
  if (!tools.ok() || !messages.ok()) return "";
  auto written = WriteToolMessages(ToolFormatFor(tmpl), tmpl, *tools, *messages);
  EXPECT_TRUE(written.ok()) << FormatErrors(written.errors());
  if (!written.ok()) return "";
  auto prompt = BuildChatPrompt(tmpl, *written);
  EXPECT_TRUE(prompt.ok()) << FormatErrors(prompt.errors());
  return prompt.ok() ? PromptText(*prompt) : "";
}

// MLC's llama-3_1 conversation template.
ConvTemplate Llama31() {
  auto t = ParseConvTemplate(Json::parse(R"({"name": "llama-3_1",
    "system_template": "<|start_header_id|>system<|end_header_id|>\n\n{system_message}<|eot_id|>",
    "system_message": "You are a helpful, respectful and honest assistant.",
    "roles": {"user": "<|start_header_id|>user", "assistant": "<|start_header_id|>assistant",
              "tool": "<|start_header_id|>ipython"},
    "seps": ["<|eot_id|>"], "role_content_sep": "<|end_header_id|>\n\n", "role_empty_sep": "<|end_header_id|>\n\n",
    "stop_str": [], "stop_token_ids": [128001, 128008, 128009], "system_prefix_token_ids": [128000],
    "add_role_after_system_message": true})"));
  EXPECT_TRUE(t.ok());
  return t.ok() ? *t : ConvTemplate{};
}

TEST(ToolPrompt, Llama31EqualsItsPublishedTemplates) {
  const ConvTemplate tmpl = Llama31();
  const ToolFormat format = ToolFormatFor(tmpl);
  EXPECT_EQ(format.name, "llama3.1");
  const std::string tools = std::string(kWeatherTools).substr(1);
  for (const bool system : {true, false}) {
    const std::string request = std::string(R"({"messages": [)") +
        (system ? R"({"role": "system", "content": "You are a helpful assistant."},)" : "") + R"(
        {"role": "user", "content": "Weather in Paris? Answer in °C."},
        {"role": "assistant", "content": null, "tool_calls": [
          {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "{\"temp\": 21}"},
        {"role": "assistant", "content": "It is 21 °C."},
        {"role": "user", "content": "And the time in UTC-3?"},
        {"role": "assistant", "content": "", "tool_calls": [
          {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\":-3}"}}]},
        {"role": "tool", "tool_call_id": "b", "content": "09:30"}],)" + tools;
    const std::string ours = OurPrompt(tmpl, request);
    for (const char* name : {"meta-llama-Llama-3.1-8B-Instruct.jinja", "meta-llama-Llama-3.3-70B-Instruct.jinja",
                             "meta-llama-Llama-3.2-3B-Instruct.jinja"}) {
      EXPECT_EQ(ours, PublishedRendering(name, request)) << name << (system ? " with" : " without") << " a system message";
    }
  }
}

TEST(ToolPrompt, Llama31CallsAndTheirReplies) {
  const ToolFormat format = ToolFormatFor(Llama31());
  // One call a reply whatever parallel_tool_calls says; the reply split back into it.
  auto grammar = ToolCallGrammar(format, Tools(R"({"tool_choice": "required"})"));
  ASSERT_TRUE(grammar.ok());
  const std::string call = R"({"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}})";
  EXPECT_TRUE((*grammar)->Matches(call));
  EXPECT_FALSE((*grammar)->Matches(call + call));
  const ToolReply reply = SplitToolReply(format, call, "call_");
  ASSERT_EQ(reply.calls.size(), 1u);
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  EXPECT_EQ(reply.calls[0].arguments, R"({"city": "Paris", "unit": "c"})");
  EXPECT_EQ(reply.content, "");
  // Streamed in pieces of any size: the arguments end where their object does (braces and quotes
  // inside strings are text).
  const std::string tricky = R"({"name": "get_weather", "parameters": {"city": "P}a\"{r", "n": [{"u": 1}]}})";
  for (size_t piece = 1; piece <= 9; ++piece) {
    ToolCallStream s(format, "call_");
    std::string args, content;
    for (size_t i = 0; i < tricky.size(); i += piece) {
      auto d = s.Push(tricky.substr(i, piece));
      content += d.content;
      for (const auto& c : d.calls) args += c.arguments;
    }
    content += s.Finish().content;
    EXPECT_EQ(args, R"({"city": "P}a\"{r", "n": [{"u": 1}]})") << piece;
    EXPECT_EQ(content, "") << piece;
    EXPECT_EQ(s.calls().size(), 1u) << piece;
  }
  // Two calls in one message of the history: refused at the message's tool_calls.
  auto messages = ParseMessages(Json::parse(R"([{"role": "user", "content": "x"}, {"role": "assistant", "content": null,
      "tool_calls": [{"id": "a", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
                     {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
      {"role": "tool", "tool_call_id": "a", "content": "1"}])"), "/messages");
  ASSERT_TRUE(messages.ok());
  auto written = WriteToolMessages(format, Llama31(), Tools(), *messages);
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.errors()[0].path, "/messages/1/tool_calls");
}

}  // namespace
}  // namespace mlc

namespace mlc {
namespace {

// The gemma4 conversation template (the CPU family's) with its thinking mode off, as serve
// renders a request without reasoning.
ConvTemplate Gemma4() {
  auto t = ParseConvTemplate(Json::parse(R"({"name": "gemma4",
    "system_template": "<|turn>system\n{system_message}<turn|>\n", "system_message": "",
    "render_empty_system_message": false, "system_prefix_token_ids": [2],
    "add_role_after_system_message": true, "roles": {"user": "<|turn>user", "assistant": "<|turn>model"},
    "seps": ["<turn|>\n"], "role_content_sep": "\n", "role_empty_sep": "\n", "stop_str": ["<turn|>"],
    "stop_token_ids": [106]})"));
  EXPECT_TRUE(t.ok());
  return t.ok() ? WithThinking(*t, false) : ConvTemplate{};
}

// Tools as clients write them: descriptions, a typed enum, a nested object, an array of objects,
// nullable and optional fields, a tool without parameters.
const char* kGemmaTools = R"({"tools": [
  {"type": "function", "function": {"name": "book", "description": "Books a trip",
   "parameters": {"type": "object", "additionalProperties": false, "required": ["to", "people"],
     "properties": {
       "to": {"type": "object", "description": "Where", "additionalProperties": false, "required": ["city"],
              "properties": {"city": {"type": "string", "maxLength": 10}, "Country": {"type": "string", "maxLength": 3}}},
       "people": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "object", "additionalProperties": false,
              "required": ["name"], "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}}},
       "class": {"type": "string", "enum": ["economy", "business"], "description": "Cabin"},
       "note": {"type": "string", "nullable": true, "maxLength": 5},
       "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "maxItems": 2}}}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
   "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}}, "required": ["zone"],
   "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get", "description": "A name that begins another"}}]})";

TEST(ToolPrompt, Gemma4EqualsItsPublishedTemplate) {
  const ConvTemplate tmpl = Gemma4();
  EXPECT_EQ(ToolFormatFor(tmpl).name, "gemma4");
  const std::string tools = std::string(kGemmaTools).substr(1);
  const std::string calls = R"(
      {"role": "user", "content": "Book Paris for Ann (30), and the time in UTC-3?  "},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "book", "arguments": "{\"to\": {\"city\": \"Paris\", \"Country\": \"FR\"}, \"people\": [{\"name\": \"Ann\", \"age\": 30}], \"note\": null, \"tags\": [\"a\"]}"}},
        {"id": "b", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\":-3}"}}]},
      {"role": "tool", "tool_call_id": "a", "content": "{\"booked\": true}"},
      {"role": "tool", "tool_call_id": "b", "content": "09:30"})";
  const std::string answer = R"(,
      {"role": "assistant", "content": "Booked; it is 09:30."},
      {"role": "user", "content": "Thanks. And UTC+1?"},
      {"role": "assistant", "content": "Let me see.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": 1}"}}]},
      {"role": "tool", "tool_call_id": "c", "content": "13:30"},
      {"role": "assistant", "content": "13:30 it is."},
      {"role": "user", "content": "Bye"})";
  const std::string system = R"({"role": "system", "content": " Be brief. "},)";
  for (const std::string& messages : {system + calls, calls, system + calls + answer, calls + answer}) {
    const std::string request = R"({"messages": [)" + messages + "]," + tools;
    EXPECT_EQ(OurPrompt(tmpl, request), PublishedRendering("google-gemma-4-31B-it.jinja", request)) << messages;
  }
}

ToolFormat Gemma4Format() { return ToolFormatFor(Gemma4()); }

TEST(ToolGrammar, Gemma4CallsInItsOwnSyntax) {
  OrderedJson body = O(kGemmaTools);
  body["tool_choice"] = "required";
  auto set = ParseToolSet(body);
  ASSERT_TRUE(set.ok()) << FormatErrors(set.errors());
  auto g = ToolCallGrammar(Gemma4Format(), *set);
  ASSERT_TRUE(g.ok()) << FormatErrors(g.errors());
  const std::string call = "<|tool_call>call:get_time{zone:-3}<tool_call|>";
  const std::string book =
      R"(<|tool_call>call:book{people:[{age:30,name:<|"|>A<b "c<|"|>}],to:{city:<|"|>Paris<|"|>,Country:<|"|>FR<|"|>}}<tool_call|>)";
  EXPECT_TRUE((*g)->Matches(call + "<|tool_response>"));
  EXPECT_TRUE((*g)->Matches(book + call + "<|tool_response>"));
  EXPECT_TRUE((*g)->Matches("<|tool_call>call:get{}<tool_call|><|tool_response>"));
  EXPECT_FALSE((*g)->Matches(call));  // the calls end with <|tool_response>
  EXPECT_FALSE((*g)->Matches("<|tool_call>call:get_time{zone:15}<tool_call|><|tool_response>"));
  EXPECT_FALSE((*g)->Matches(R"(<|tool_call>call:get_time{"zone":1}<tool_call|><|tool_response>)"));  // keys bare
  // Keys in the template's order (sorted, ignoring case): "to" after "people".
  EXPECT_FALSE((*g)->Matches(
      R"(<|tool_call>call:book{to:{city:<|"|>P<|"|>},people:[{name:<|"|>A<|"|>}]}<tool_call|><|tool_response>)"));
  const ToolReply reply = SplitToolReply(Gemma4Format(), "Sure." + book + call + "<|tool_response>", "call_");
  EXPECT_EQ(reply.content, "Sure.");
  ASSERT_EQ(reply.calls.size(), 2u);
  EXPECT_EQ(reply.calls[0].name, "book");
  EXPECT_EQ(O(reply.calls[0].arguments),
            O(R"({"people": [{"age": 30, "name": "A<b \"c"}], "to": {"city": "Paris", "Country": "FR"}})"));
  EXPECT_EQ(reply.calls[1].arguments, R"({"zone":-3})");
  // In pieces of any size, the same calls.
  const std::string text = "Sure." + book + call + "<|tool_response>";
  for (size_t piece = 1; piece <= 7; ++piece) {
    ToolCallStream s(Gemma4Format(), "call_");
    std::string content;
    std::vector<std::string> args(2);
    for (size_t i = 0; i < text.size(); i += piece) {
      auto d = s.Push(text.substr(i, piece));
      content += d.content;
      for (const auto& c : d.calls) args[c.index] += c.arguments;
    }
    content += s.Finish().content;
    EXPECT_EQ(content, "Sure.") << piece;
    EXPECT_EQ(args[0], reply.calls[0].arguments) << piece;
    EXPECT_EQ(args[1], reply.calls[1].arguments) << piece;
  }
  // A property name the syntax cannot write bare: refused at its pointer.
  auto bad = ParseToolSet(O(R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"a b": {"type": "string"}}}}}]})"));
  ASSERT_TRUE(bad.ok());
  auto refused = ToolCallGrammar(Gemma4Format(), *bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.errors()[0].path, "/tools/0/function/parameters/properties/a b");
}

// Bytes sampled uniformly among those the Gemma 4 grammar takes: every call reads back into JSON
// that python3-jsonschema validates against its tool's parameters.
TEST(ToolGrammar, Gemma4RandomWalksValidate) {
  OrderedJson body = O(kGemmaTools);
  body["tool_choice"] = "required";
  auto set = ParseToolSet(body);
  ASSERT_TRUE(set.ok());
  JsonGrammarOptions options;
  options.max_string_length = 6;
  auto g = ToolCallGrammar(Gemma4Format(), *set, options);
  ASSERT_TRUE(g.ok()) << FormatErrors(g.errors());
  std::mt19937 rng(11);
  Json pairs = Json::array();
  for (int walk = 0; walk < 200; ++walk) {
    JsonGrammar::State s = (*g)->Start();
    std::string text;
    while (text.size() < 600 && !(*g)->Accepting(s)) {
      std::vector<uint8_t> options_here;
      for (int c = 0; c < 256; ++c) {
        JsonGrammar::State copy = s;
        if ((*g)->Step(copy, static_cast<uint8_t>(c))) options_here.push_back(static_cast<uint8_t>(c));
      }
      ASSERT_FALSE(options_here.empty()) << text;
      const uint8_t c = options_here[rng() % options_here.size()];
      ASSERT_TRUE((*g)->Step(s, c));
      text.push_back(static_cast<char>(c));
    }
    if (!(*g)->Accepting(s)) continue;
    const ToolReply reply = SplitToolReply(Gemma4Format(), text, "c");
    ASSERT_FALSE(reply.calls.empty()) << text;
    EXPECT_EQ(reply.content, "") << text;
    for (const ToolCall& call : reply.calls) {
      auto args = ParseJson(call.arguments);
      ASSERT_TRUE(args.ok()) << text;
      for (const ToolFunction& t : set->tools) {
        if (t.name == call.name) {
          pairs.push_back(Json::array({*args, t.parameters.is_null() ? Json::object() : Json::parse(t.parameters.dump())}));
        }
      }
    }
  }
  EXPECT_GT(pairs.size(), 100u);
  test::TempDir dir;
  const std::string file = dir.Write("pairs.json", pairs.dump());
  auto r = test::RunProgram({"/usr/bin/python3", "-c",
                             "import json, sys, jsonschema\n"
                             "def openapi(s):  # nullable: OpenAPI's null, as JSON Schema writes it\n"
                             "    if isinstance(s, dict):\n"
                             "        if s.get('nullable') is True and isinstance(s.get('type'), str): s['type'] = [s['type'], 'null']\n"
                             "        for v in s.values(): openapi(v)\n"
                             "    return s\n"
                             "for v, s in json.load(open(sys.argv[1])): jsonschema.Draft202012Validator(openapi(s)).validate(v)\n",
                             file});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace mlc

namespace mlc {
namespace {

// Gemma 4's marks are special tokens of its vocabulary: the call grammar's vocabulary gives them
// their text, so a call can open with the one token the model writes; other special tokens stay
// without bytes, and a structured-output vocabulary gives none.
TEST(ToolGrammar, Gemma4MarksAsSpecialTokens) {
  Json doc = Json::parse(*reference::TokenizerJson(512));
  int32_t id = 512;
  for (const char* mark : {"<|tool_call>", "<tool_call|>", "<|tool_response>", "<|\"|>", "<|turn>"}) {
    doc["added_tokens"].push_back({{"id", id++}, {"content", mark}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  auto tokenizer = Tokenizer::FromJsonText(doc.dump());
  ASSERT_TRUE(tokenizer.ok()) << FormatErrors(tokenizer.errors());
  const ToolFormat format = Gemma4Format();
  auto with = TokenVocabulary::FromTokenizer(**tokenizer, ToolMarkers(format));
  auto without = TokenVocabulary::FromTokenizer(**tokenizer);
  EXPECT_EQ(with->bytes(512), "<|tool_call>");
  EXPECT_EQ(with->bytes(515), "<|\"|>");
  EXPECT_EQ(with->bytes(516), "");  // <|turn> is no mark of the format
  EXPECT_EQ(without->bytes(512), "");
  OrderedJson body = O(kGemmaTools);
  body["tool_choice"] = "required";
  auto set = ParseToolSet(body);
  ASSERT_TRUE(set.ok());
  auto grammar = ToolCallGrammar(format, *set);
  ASSERT_TRUE(grammar.ok());
  GrammarMatcher matcher(JsonConstraint{*grammar, with});
  std::vector<float> logits(with->size(), 0.0f);
  matcher.Constrain(logits, std::vector<int32_t>{2});
  EXPECT_EQ(logits[512], 0.0f);  // the mark's token opens the call
  EXPECT_TRUE(std::isinf(logits[516]));
  EXPECT_TRUE(std::isinf(logits[2]));  // no stop before a call
  EXPECT_TRUE(matcher.Advance(512));
}

}  // namespace
}  // namespace mlc

namespace mlc {
namespace {

std::string TurnText(const Tokenizer& tokenizer, const RequestTurn& turn) {
  std::vector<int32_t> ids;
  for (const RequestSegment& s : turn) ids.insert(ids.end(), s.token_ids.begin(), s.token_ids.end());
  return tokenizer.Decode(ids);
}

// A conversation turn by turn (run --messages, the C API): the calls' results go on with the
// reply in its model turn and the answer then continues it; the whole equals the published
// template's rendering of the same conversation at each step, but for the empty thought that the
// reply header prefilled (kept in the cache; the template leaves it out of past turns).
std::string WithPrefilledThought(std::string rendered) {
  const std::string header = "<|turn>model\n<|tool_call>";
  const size_t at = rendered.find(header);
  if (at != std::string::npos) rendered.insert(at + header.size() - std::string("<|tool_call>").size(), "<|channel>thought\n<channel|>");
  return rendered;
}

TEST(ToolPrompt, Gemma4FollowUpsContinueTheTurn) {
  const ConvTemplate tmpl = Gemma4();
  const ToolFormat format = ToolFormatFor(tmpl);
  auto tokenizer = Tokenizer::FromJsonText(*reference::TokenizerJson(512));
  ASSERT_TRUE(tokenizer.ok());
  const Tokenizer& tok = **tokenizer;
  OrderedJson body = O(kGemmaTools);
  auto tools = ParseToolSet(body);
  ASSERT_TRUE(tools.ok());
  ChatTurns turns(tmpl, tok);
  auto first = ParseMessages(Json::parse(R"([{"role": "user", "content": "Time in UTC+1?"}])"));
  ASSERT_TRUE(first.ok());
  auto written = WriteToolMessages(format, tmpl, *tools, *first);
  ASSERT_TRUE(written.ok());
  auto turn1 = turns.Next(*written, "", "");
  ASSERT_TRUE(turn1.ok()) << FormatErrors(turn1.errors());
  const std::string prefix = tok.Decode(std::vector<int32_t>{2});
  std::string ours = TurnText(tok, *turn1).substr(prefix.size());
  const std::string reply = "<|tool_call>call:get_time{zone:1}<tool_call|><|tool_response>";
  const ToolReply split = SplitToolReply(format, reply, "call_");
  ASSERT_EQ(split.calls.size(), 1u);
  auto results = ParseMessages(Json::parse(R"([{"role": "tool", "tool_call_id": "call_0", "content": "13:30"}])"));
  ASSERT_TRUE(results.ok());
  auto follow = WriteToolFollowUp(format, tmpl, split.calls, *results);
  ASSERT_TRUE(follow.ok()) << FormatErrors(follow.errors());
  auto turn2 = turns.Next(*follow, reply, "");
  ASSERT_TRUE(turn2.ok()) << FormatErrors(turn2.errors());
  ours += reply + TurnText(tok, *turn2);
  const std::string tools_json = std::string(kGemmaTools).substr(1);
  std::string conversation = R"({"role": "user", "content": "Time in UTC+1?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_0", "type": "function", "function": {"name": "get_time", "arguments": "{\"zone\": 1}"}}]},
      {"role": "tool", "tool_call_id": "call_0", "content": "13:30"})";
  EXPECT_EQ(ours, WithPrefilledThought(PublishedRendering("google-gemma-4-31B-it.jinja",
                                                          R"({"messages": [)" + conversation + "]," + tools_json)));
  // The answer continues the turn; the next user turn follows it.
  const std::string answer = "It is 13:30.";
  auto thanks = ParseMessages(Json::parse(R"([{"role": "user", "content": "Thanks"}])"));
  ASSERT_TRUE(thanks.ok());
  auto follow2 = WriteToolFollowUp(format, tmpl, {}, *thanks);
  ASSERT_TRUE(follow2.ok());
  auto turn3 = turns.Next(*follow2, answer, "");
  ASSERT_TRUE(turn3.ok()) << FormatErrors(turn3.errors());
  ours += answer + TurnText(tok, *turn3);
  conversation += R"(, {"role": "assistant", "content": "It is 13:30."}, {"role": "user", "content": "Thanks"})";
  EXPECT_EQ(ours, WithPrefilledThought(PublishedRendering("google-gemma-4-31B-it.jinja",
                                                          R"({"messages": [)" + conversation + "]," + tools_json)));
}

}  // namespace
}  // namespace mlc
