// The image families' shared test parts (see vision_checks.h).
#include "support/vision_checks.h"

#include <gtest/gtest.h>

#include <cstring>

#include "mlc_manifest/cpu_model.h"

namespace mlc::test {

OpenedPackage OpenPackage(const std::string& pkg) {
  OpenedPackage o;
  auto lib = OpenCpuLibrary(pkg);
  EXPECT_TRUE(lib) << lib.error().ToString();
  if (!lib) return o;
  o.lib = std::move(*lib);
  auto params = LoadParameters(pkg, o.lib->Metadata().params);
  EXPECT_TRUE(params) << params.error().ToString();
  if (params) o.params = *params;
  return o;
}

Result<std::vector<Value>> ImageEmbed(const OpenedPackage& o, const NDArray& pixels) {
  std::vector<Value> args = {pixels, ObjectRef(o.params)};
  return (*o.lib->GetFunction("image_embed"))(args);
}

NDArray PixelTensor(const std::vector<uint8_t>& px, int64_t s) {
  NDArray t = NDArray::Empty({1, s, s, 3}, DlUInt8());
  std::memcpy(t.data<uint8_t>(), px.data(), px.size());
  return t;
}

NDArray WidePixelTensor(const std::vector<uint8_t>& px, int64_t s) {
  NDArray t = NDArray::Empty({1, s, s, 3}, DlUInt32());
  for (size_t i = 0; i < px.size(); ++i) t.data<uint32_t>()[i] = px[i];
  return t;
}

std::string ImageMessages(const TempDir& dir, const std::string& image) {
  return dir.Write("m.json", R"([{"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": ")" + image + R"("}},
      {"type": "text", "text": " What is it?"}]}])");
}

std::vector<int32_t> RunImageTokens(const std::string& pkg, const std::string& messages, std::string* report) {
  auto r = RunCli({"run", pkg, "--messages", messages, "--max-tokens", "12", "--temperature", "0", "--json"});
  if (report) *report = r.out;
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  if (r.exit_code != 0) return {};
  Json j = Json::parse(r.out);
  EXPECT_GT(j["timings"]["adapter_ms"].get<double>(), 0.0);
  return j["tokens"].get<std::vector<int32_t>>();
}

void ExpectServeAnswersImage(const TempDir& dir, const std::string& pkg, const std::string& url, int64_t min_prompt) {
  OrderedJson content = OrderedJson::array({{{"type", "image_url"}, {"image_url", {{"url", url}}}},
                                            {{"type", "text"}, {"text", "What is in the picture?"}}});
  OrderedJson req = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", content}}})},
                     {"max_tokens", 6},
                     {"temperature", 0}};
  const std::string body = dir.Write("body.json", req.dump());
  auto served = RunProgram({"/usr/bin/python3", SourcePath("tests/support/serve_once.py"), MLC_CLI_PATH, pkg,
                            "/v1/chat/completions", body});
  ASSERT_EQ(served.exit_code, 0) << served.out << served.err;
  Json reply = Json::parse(served.out);
  ASSERT_EQ(reply["status"], 200) << served.out;
  EXPECT_EQ(reply["exit_code"], 0) << served.out;
  Json answer = Json::parse(reply["body"].get<std::string>());
  EXPECT_GT(answer["usage"]["prompt_tokens"].get<int64_t>(), min_prompt) << served.out;
  EXPECT_GT(answer["usage"]["completion_tokens"].get<int64_t>(), 0) << served.out;
}

}  // namespace mlc::test
