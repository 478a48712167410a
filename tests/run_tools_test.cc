// Tool calling through `mlc-manifest run --messages`: the tools from --tools or from the first
// messages file, each reply's calls reported (and constrained to the tools' schemas), a later
// messages file answering them, and an answer to no call refused at its pointer in its file.
#include <gtest/gtest.h>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "support/test_util.h"

namespace mlc {
namespace {

const char* kTools = R"({"tools": [{"type": "function", "function": {"name": "get_time",
  "parameters": {"type": "object", "properties": {"zone": {"type": "integer", "minimum": -12, "maximum": 14}},
  "required": ["zone"], "additionalProperties": false}}}], "tool_choice": "required", "parallel_tool_calls": false})";

std::string MakePackage(const test::TempDir& dir) {
  std::string pkg = dir.File("pkg");
  auto r = test::RunCli({"reference-model", pkg, "--seed", "7", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return pkg;
}

// Each turn's one call: get_time with a zone in range.
void ExpectTimeCall(const Json& turn, const std::string& id) {
  ASSERT_EQ(turn["tool_calls"].size(), 1u) << turn.dump();
  const Json& call = turn["tool_calls"][0];
  EXPECT_EQ(call["id"], id);
  EXPECT_EQ(call["function"]["name"], "get_time");
  auto args = ParseJson(call["function"]["arguments"].get<std::string>());
  ASSERT_TRUE(args.ok()) << turn.dump();
  ASSERT_TRUE((*args)["zone"].is_number_integer()) << turn.dump();
  EXPECT_GE((*args)["zone"].get<int64_t>(), -12);
  EXPECT_LE((*args)["zone"].get<int64_t>(), 14);
}

TEST(RunTools, CallsTheirResultsAndTheNextCall) {
  test::TempDir dir;
  const std::string pkg = MakePackage(dir);
  const std::string tools = dir.Write("tools.json", kTools);
  const std::string first = dir.Write("m1.json", R"([{"role": "user", "content": "The time in UTC+2?"}])");
  const std::string second = dir.Write("m2.json", R"([{"role": "tool", "tool_call_id": "call_0_0", "content": "12:00"}])");
  auto r = test::RunCli({"run", pkg, "--messages", first, "--tools", tools, "--messages", second, "--max-tokens", "80",
                         "--temperature", "1", "--seed", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  ASSERT_EQ((*doc)["turns"].size(), 2u) << r.out;
  ExpectTimeCall((*doc)["turns"][0], "call_0_0");
  ExpectTimeCall((*doc)["turns"][1], "call_1_0");  // tool_choice "required" holds for every turn

  // The tools inside the first messages file (an OpenAI request body) work the same.
  Json request = Json::parse(kTools);
  request["messages"] = Json::parse(R"([{"role": "user", "content": "The time in UTC+2?"}])");
  const std::string body = dir.Write("request.json", request.dump());
  auto same = test::RunCli({"run", pkg, "--messages", body, "--max-tokens", "80", "--temperature", "1", "--seed", "3",
                            "--json"});
  ASSERT_EQ(same.exit_code, 0) << same.err << same.out;
  auto same_doc = ParseJson(same.out);
  ASSERT_TRUE(same_doc.ok());
  EXPECT_EQ((*same_doc)["turns"][0]["tool_calls"], (*doc)["turns"][0]["tool_calls"]);

  // A result for a call that was not made: refused at its pointer in its file.
  const std::string wrong = dir.Write("m3.json", R"([{"role": "tool", "tool_call_id": "call_9_9", "content": "x"}])");
  auto bad = test::RunCli({"run", pkg, "--messages", first, "--tools", tools, "--messages", wrong, "--max-tokens", "80",
                           "--temperature", "1", "--seed", "3", "--json"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("/0/tool_call_id"), std::string::npos) << bad.out << bad.err;
  EXPECT_NE(bad.out.find("m3.json"), std::string::npos) << bad.out << bad.err;
}

}  // namespace
}  // namespace mlc
