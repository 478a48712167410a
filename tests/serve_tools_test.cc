// Tool calling through `mlc-manifest serve`: 300 calls sampled at temperature 1 from random
// weights all parse, name a given tool and validate against its schema (python3-jsonschema); on
// each family's format (generic, Hermes, Llama 3.1, Gemma 4) the official openai client runs a whole agent
// loop (call, result, answer), whole and streamed, and the Vercel AI SDK's generateObject and
// generateText with tools and the openai client's zod helpers work with zod's schemas; and the
// refusals name their field.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"
#include "support/sanitizer.h"
#include "support/serve_process.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::BodyJson;
using test::Http;
using test::HttpReply;
using test::ServerProcess;

// The reference model's package; with a conversation template, that one in its chat config (its
// text encodes with the reference vocabulary's bytes; the stop id is the vocabulary's end).
struct Package {
  test::TempDir dir;
  explicit Package(const char* conv_template = nullptr) {
    ReferenceModelOptions o;
    o.seed = 11;
    auto w = WriteReferenceModel(dir.path(), o);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
    if (!conv_template) return;
    auto config = ReadJsonFile(dir.path() + "/mlc-chat-config.json");
    EXPECT_TRUE(config.ok());
    if (!config.ok()) return;
    (*config)["conv_template"] = Json::parse(conv_template);
    EXPECT_TRUE(WriteFileAtomic(dir.path() + "/mlc-chat-config.json", config->dump(2), true).ok());
  }
};

// The families' formats the clients are run against: the reference template's (generic), ChatML's
// (Hermes, as Qwen2.5), Llama 3.1's and Gemma 4's.
struct Family {
  const char* name;
  const char* conv_template;
};
const Family kFamilies[] = {
    {"generic", nullptr},
    {"hermes", R"({"name": "chatml", "system_template": "<|im_start|>system\n{system_message}<|im_end|>\n",
      "system_message": "You are a helpful assistant.", "roles": {"user": "<|im_start|>user", "assistant": "<|im_start|>assistant"},
      "seps": ["<|im_end|>\n"], "role_content_sep": "\n", "role_empty_sep": "\n", "stop_str": ["<|im_end|>"],
      "stop_token_ids": [2]})"},
    {"llama3.1", R"({"name": "llama-3_1",
      "system_template": "<|start_header_id|>system<|end_header_id|>\n\n{system_message}<|eot_id|>",
      "system_message": "You are a helpful, respectful and honest assistant.",
      "roles": {"user": "<|start_header_id|>user", "assistant": "<|start_header_id|>assistant", "tool": "<|start_header_id|>ipython"},
      "seps": ["<|eot_id|>"], "role_content_sep": "<|end_header_id|>\n\n", "role_empty_sep": "<|end_header_id|>\n\n",
      "stop_str": [], "stop_token_ids": [2], "system_prefix_token_ids": [1], "add_role_after_system_message": true})"},
    {"gemma4", R"({"name": "gemma4", "system_template": "<|turn>system\n{system_message}<turn|>\n", "system_message": "",
      "render_empty_system_message": false, "system_prefix_token_ids": [1], "add_role_after_system_message": true,
      "roles": {"user": "<|turn>user", "assistant": "<|turn>model"}, "seps": ["<turn|>\n"], "role_content_sep": "\n",
      "role_empty_sep": "\n", "stop_str": ["<turn|>"], "stop_token_ids": [2]})"},
};

// Each client test, run once a family.
void OpenAiAgentLoop(const Family& family);
void VercelAiSdk(const Family& family);
void OpenAiZodHelpers(const Family& family);

// Tools with nested objects, enums, arrays, optional fields, bounded integers.
const char* kTools = R"([
  {"type": "function", "function": {"name": "book_trip", "description": "Books a trip",
   "parameters": {"type": "object", "additionalProperties": false, "required": ["to", "travellers", "class"],
     "properties": {
       "to": {"type": "object", "additionalProperties": false, "required": ["city"],
              "properties": {"city": {"type": "string", "maxLength": 10}, "country": {"type": "string", "maxLength": 3}}},
       "travellers": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "object",
              "additionalProperties": false, "required": ["name", "age"],
              "properties": {"name": {"type": "string", "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120}}}},
       "class": {"enum": ["economy", "business"]},
       "flexible": {"type": "boolean"}}}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "additionalProperties": false,
     "required": ["query"], "properties": {"query": {"type": "string", "maxLength": 12},
     "limit": {"type": "integer", "minimum": 1, "maximum": 50}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 4}}}}},
  {"type": "function", "function": {"name": "now", "description": "The time"}}
])";

// Each call's arguments validated against its tool's parameters by python3-jsonschema; "" when
// all do, else the problems.
std::string ValidateCalls(const Json& calls, const std::string& tools) {
  test::TempDir dir;
  const std::string file = dir.Write("calls.json", Json{{"calls", calls}, {"tools", Json::parse(tools)}}.dump());
  const char* script = R"(
import json, sys, jsonschema
doc = json.load(open(sys.argv[1]))
schemas = {t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in doc["tools"]}
for c in doc["calls"]:
    jsonschema.Draft202012Validator(schemas[c["name"]]).validate(json.loads(c["arguments"]))
)";
  auto r = test::RunProgram({"/usr/bin/python3", "-c", script, file});
  return r.exit_code == 0 ? "" : r.out + r.err;
}

TEST(ServeTools, SampledCallsAllValidate) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-batch-size", "4", "--json-max-string-length", "12"});
  ASSERT_GT(server.port(), 0) << server.log();
  test::TempDir dir;
  const std::string file = dir.Write("tools.json", kTools);
  // 130 requests give over 300 calls (the parallel ones several each); fewer under the sanitizers.
  const int count = test::kSanitized ? 40 : 130;
  auto r = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/tool_replies.py"), server.url(),
                             file, std::to_string(count), "4", "400"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  std::cout << "tool replies: " << r.out;
  EXPECT_TRUE((*doc)["failures"].empty()) << r.out;
  EXPECT_EQ((*doc)["replies_ok"].get<int>() + (*doc)["cut"].get<int>(), count) << r.out;
  EXPECT_GE((*doc)["replies_ok"].get<int>(), count / 2) << r.out;  // the rest cut by max_tokens
  // Parallel calls (even seeds) go on until max_tokens with random weights: their whole calls count.
  EXPECT_GT((*doc)["calls_ok"].get<int>(), (*doc)["replies_ok"].get<int>() + count) << r.out;
  if (!test::kSanitized) {
    EXPECT_GE((*doc)["calls_ok"].get<int>(), 300) << r.out;
  }
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeTools, OpenAiClientRunsAnAgentLoop) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    OpenAiAgentLoop(family);
  }
}

void OpenAiAgentLoop(const Family& family) {
  Package p(family.conv_template);
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/tool_agent.mjs"), openai, server.url()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const std::string tools = R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city", "unit"], "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {
      "a": {"type": "integer", "minimum": -100, "maximum": 100}, "b": {"type": "integer", "minimum": -100, "maximum": 100}},
      "required": ["a", "b"], "additionalProperties": false}}}])";
  for (const char* how : {"plain", "streamed"}) {
    const Json& run = (*doc)[how];
    EXPECT_EQ(run["finish"], "tool_calls") << r.out;
    ASSERT_FALSE(run["calls"].empty()) << r.out;
    std::set<std::string> ids;
    for (const Json& c : run["calls"]) {
      EXPECT_EQ(c["type"], "function") << r.out;
      ids.insert(c["id"].get<std::string>());
    }
    EXPECT_EQ(ids.size(), run["calls"].size()) << r.out;
    EXPECT_EQ(ValidateCalls(run["calls"], tools), "") << r.out;
    EXPECT_TRUE(run["answer"].is_string()) << r.out;
    EXPECT_TRUE(run["answer_finish"] == "stop" || run["answer_finish"] == "length") << r.out;
    EXPECT_TRUE(run["answer_calls"].empty()) << r.out;
  }
  // The same seed gives the same calls whole and streamed (the stream's deltas assembled by the client).
  ASSERT_EQ((*doc)["plain"]["calls"].size(), (*doc)["streamed"]["calls"].size()) << r.out;
  for (size_t i = 0; i < (*doc)["plain"]["calls"].size(); ++i) {
    EXPECT_EQ((*doc)["plain"]["calls"][i]["name"], (*doc)["streamed"]["calls"][i]["name"]);
    EXPECT_EQ((*doc)["plain"]["calls"][i]["arguments"], (*doc)["streamed"]["calls"][i]["arguments"]);
  }
  EXPECT_EQ((*doc)["plain"]["answer"], (*doc)["streamed"]["answer"]);
  EXPECT_EQ(server.Stop(), 0);
}

// Validates each (value, schema) pair with python3-jsonschema: "" when all do.
std::string ValidateValues(const Json& pairs) {
  test::TempDir dir;
  const std::string file = dir.Write("pairs.json", pairs.dump());
  const char* script = R"(
import json, sys, jsonschema
for value, schema in json.load(open(sys.argv[1])):
    jsonschema.validators.validator_for(schema)(schema, format_checker=jsonschema.FormatChecker()).validate(value)
)";
  auto r = test::RunProgram({"/usr/bin/python3", "-c", script, file});
  return r.exit_code == 0 ? "" : r.out + r.err;
}

// The Vercel AI SDK with zod schemas: generateObject (zod's integer range, a string format beside
// its pattern, an optional field) and generateText with a tool required on the first step and the
// answer on the second; the object and the call's input validate against the schemas zod wrote.
TEST(ServeTools, VercelAiSdkObjectsAndTools) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    VercelAiSdk(family);
  }
}

void VercelAiSdk(const Family& family) {
  Package p(family.conv_template);
  ServerProcess server(p.dir.path(), {"--json-max-string-length", "12"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string ai = test::NpmPackage("ai@5.0.285");
  const std::string provider = test::NpmPackage("@ai-sdk/openai-compatible@1.0.61");
  ASSERT_FALSE(ai.empty() || provider.empty());
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/ai_sdk_client.mjs"), ai, provider, server.url()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const Json& object = (*doc)["object"];
  EXPECT_EQ(object["finish"], "stop") << r.out;
  EXPECT_TRUE(object["value"]["pop"].is_number_integer()) << r.out;
  Json pairs = Json::array({Json::array({object["value"], object["schema"]})});
  const Json& text = (*doc)["text"];
  ASSERT_EQ(text["calls"].size(), 1u) << r.out;
  EXPECT_EQ(text["calls"][0]["name"], "weather") << r.out;
  pairs.push_back(Json::array({text["calls"][0]["input"], text["calls"][0]["schema"]}));
  EXPECT_EQ(ValidateValues(pairs), "") << r.out;
  EXPECT_EQ(text["results"].size(), 1u) << r.out;
  EXPECT_EQ(text["steps"], 2) << r.out;
  EXPECT_TRUE(text["second_request_has_result"].get<bool>()) << r.out;
  EXPECT_TRUE(text["finish"] == "stop" || text["finish"] == "length") << r.out;
  EXPECT_EQ(server.Stop(), 0);
}

// The openai client's own zod helpers (zod 3): chat.completions.parse with zodResponseFormat and
// with a zodFunction tool; the parsed object and arguments validate against the schemas it wrote.
TEST(ServeTools, OpenAiZodHelpersParse) {
  for (const Family& family : kFamilies) {
    SCOPED_TRACE(family.name);
    OpenAiZodHelpers(family);
  }
}

void OpenAiZodHelpers(const Family& family) {
  Package p(family.conv_template);
  ServerProcess server(p.dir.path(), {"--json-max-string-length", "12"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string openai = test::NpmPackage("openai@4.104.0");
  const std::string zod = test::NpmPackage("zod@3.25.76");
  ASSERT_FALSE(openai.empty() || zod.empty());
  const std::string node_path = std::filesystem::path(zod).parent_path().string();  // the prefix's node_modules
  auto r = test::RunProgram({"env", "NODE_PATH=" + node_path, "node", test::SourcePath("tests/support/openai_zod_client.mjs"),
                             openai, server.url()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  EXPECT_EQ((*doc)["finish"], "stop") << r.out;
  EXPECT_EQ((*doc)["tool_finish"], "tool_calls") << r.out;
  ASSERT_TRUE((*doc)["parsed"].is_object()) << r.out;
  ASSERT_TRUE((*doc)["tool_args"].is_object()) << r.out;
  Json pairs = Json::array({Json::array({(*doc)["parsed"], (*doc)["schema"]}),
                            Json::array({(*doc)["tool_args"], (*doc)["tool_schema"]})});
  EXPECT_EQ(ValidateValues(pairs), "") << r.out;
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeTools, RefusalsNameTheField) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string tool = R"({"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"x": {"type": "integer"}}}}})";
  auto param_of = [&](const std::string& fields, const std::string& messages) {
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions",
                       R"({"max_tokens": 4, "messages": )" + messages + ", " + fields + "}");
    EXPECT_EQ(r.status, 400) << r.body;
    return r.status == 400 ? BodyJson(r)["error"]["param"].get<std::string>() : "";
  };
  const std::string hi = R"([{"role": "user", "content": "hi"}])";
  EXPECT_EQ(param_of(R"("tools": [)" + tool + R"(], "tool_choice": {"type": "function", "function": {"name": "g"}})", hi),
            "/tool_choice/function/name");
  EXPECT_EQ(param_of(R"("tools": [)" + tool + "]",
                     R"([{"role": "user", "content": "hi"}, {"role": "assistant", "tool_calls": [{"id": "a",
                         "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                         {"role": "tool", "tool_call_id": "b", "content": "1"}])"),
            "/messages/2/tool_call_id");
  EXPECT_EQ(param_of(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                         "properties": {"x": {"not": {}}}}}}])", hi),
            "/tools/0/function/parameters/properties/x/not");
  EXPECT_EQ(param_of(R"("tools": [)" + tool + R"(], "response_format": {"type": "json_object"})", hi), "/response_format");
  EXPECT_EQ(param_of(R"("tool_choice": "required")", hi), "/tool_choice");
  // tool_choice "none": the tools are shown but no call is sampled; the reply is text.
  HttpReply none = Http(server.port(), "POST", "/v1/chat/completions",
                        R"({"max_tokens": 4, "messages": )" + hi + R"(, "tools": [)" + tool + R"(], "tool_choice": "none"})");
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_FALSE(BodyJson(none)["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace mlc
