// POST /v1/embeddings over HTTP: through the official `openai` client (its default base64
// encoding, floats, token ids) on a CPU package served beside another model, each vector equal to
// the float64 reference decoder's pooled hidden states of the ids /tokenize gives; --embedding-pooling
// last; the request's refusals (shape, ids, sizes, dimensions, a library without the
// hidden-states function) in OpenAI's error shape; the metrics counting it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/reference_model.h"
#include "runtime/cpu/family.h"
#include "support/family_checks.h"
#include "support/reference64.h"
#include "support/serve_process.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::BodyJson;
using test::Http;
using test::HttpReply;
using test::ServerProcess;
using test::Vec;

// A llama-layout package with float weights (the reference decoder's tolerance stays tight).
struct TinyLlama {
  test::TempDir dir;
  std::string path = dir.File("emb");
  TinyLlama() {
    auto w = WriteFamilyModel(path, test::TinyOptions("llama", "q0f32", 9));
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  }
};

// The float64 reference's embedding of ids: the mean (or last) final-normed hidden state, unit length.
struct Reference {
  explicit Reference(const std::string& dir) {
    auto opened = OpenPackage(dir);
    EXPECT_TRUE(opened.ok()) << (opened.ok() ? "" : FormatErrors(opened.errors()));
    package = std::move(*opened);
    auto chat = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
    config = *cpu::ParseModelConfig(*chat);
    params = std::make_unique<test::Params64>(*package.model.params);
  }
  Vec Embedding(const std::vector<int32_t>& ids, bool last) const {
    const std::vector<Vec> rows = test::Reference64{config, *params}.Hidden(ids);
    Vec v(rows.front().size(), 0.0);
    for (const Vec& r : rows) {
      for (size_t j = 0; j < v.size(); ++j) v[j] = last ? r[j] : v[j] + r[j];
    }
    double norm = 0;
    for (double x : v) norm += x * x;
    for (double& x : v) x /= std::sqrt(norm);
    return v;
  }
  OpenedPackage package;
  cpu::ModelConfig config;
  std::unique_ptr<test::Params64> params;
};

std::vector<float> Floats(const Json& a) {
  std::vector<float> out;
  for (const Json& x : a) out.push_back(x.get<float>());
  return out;
}

std::vector<int32_t> Tokenized(int port, const std::string& text) {
  OrderedJson body = {{"model", "emb"}, {"content", text}, {"add_special", true}};
  HttpReply r = Http(port, "POST", "/tokenize", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return BodyJson(r)["tokens"].get<std::vector<int32_t>>();
}

TEST(ServeEmbeddings, EqualTheFloat64MeanOfHiddenStatesThroughTheOpenAiClient) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  TinyLlama llama;
  test::TempDir other;
  ReferenceModelOptions ro;
  ro.seed = 3;
  ASSERT_TRUE(WriteReferenceModel(other.path(), ro).ok());
  // Two models side by side; one request's three inputs go to the engine two at a time.
  ServerProcess server(std::vector<std::string>{},
                       {"--model", "emb=" + llama.path, "--model", "other=" + other.path(), "--max-batch-size", "2"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::vector<std::string> texts = {"Hello there", "A river runs through the valley at dusk", "x"};
  const std::vector<int32_t> ids = {3, 17, 5, 9, 30, 2};
  std::string ids_arg;
  for (int32_t id : ids) ids_arg += (ids_arg.empty() ? "" : ",") + std::to_string(id);
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai, server.url(),
                             "embeddings", "emb", Json(texts).dump(), ids_arg});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const Reference ref(llama.path);
  int64_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> t = Tokenized(server.port(), texts[i]);
    tokens += static_cast<int64_t>(t.size());
    const Vec want = ref.Embedding(t, false);
    for (const char* form : {"default", "float"}) {
      const Json& d = (*doc)[form][i];
      EXPECT_EQ(d["index"], i);
      EXPECT_EQ(d["object"], "embedding");
      ASSERT_EQ(d["embedding"].size(), static_cast<size_t>(ref.config.hidden_size)) << form;
      EXPECT_LT(test::RelError(Floats(d["embedding"]), want), 1e-4) << form << " input " << i;
    }
  }
  EXPECT_EQ((*doc)["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ((*doc)["usage"]["total_tokens"], tokens);
  EXPECT_EQ((*doc)["model"], "emb");
  EXPECT_EQ((*doc)["object"], "list");
  EXPECT_LT(test::RelError(Floats((*doc)["tokens"][0]["embedding"]), ref.Embedding(ids, false)), 1e-4);
  EXPECT_EQ((*doc)["refused"]["status"], 400) << r.out;
  EXPECT_EQ((*doc)["refused"]["param"], "/dimensions") << r.out;

  // Plain HTTP: the width itself is accepted; every refusal names its field.
  const std::string width = std::to_string(ref.config.hidden_size);
  EXPECT_EQ(Http(server.port(), "POST", "/v1/embeddings",
                 R"({"model": "emb", "input": "hi", "dimensions": )" + width + "}").status, 200);
  const std::pair<std::string, std::string> refusals[] = {
      {R"({"model": "emb"})", "/input"},
      {R"({"model": "emb", "input": ""})", "/input"},
      {R"({"model": "emb", "input": []})", "/input"},
      {R"({"model": "emb", "input": ["a", 7]})", "/input/1"},
      {R"({"model": "emb", "input": [[1, 2], [3, -1]]})", "/input/1/1"},
      {R"({"model": "emb", "input": [1, 99999999]})", "/input/1"},
      {R"({"model": "emb", "input": ["a", []]})", "/input/1"},
      {R"({"model": "emb", "input": "a", "encoding_format": "hex"})", "/encoding_format"},
      {R"({"model": "emb", "input": "a", "dimensions": 0})", "/dimensions"},
      {R"({"model": "other", "input": "a"})", "/input"},  // no prefill_to_last_hidden_states
  };
  for (const auto& [body, param] : refusals) {
    HttpReply refused = Http(server.port(), "POST", "/v1/embeddings", body);
    EXPECT_EQ(refused.status, 400) << body << " " << refused.body;
    EXPECT_EQ(BodyJson(refused)["error"]["param"], param) << body << " " << refused.body;
    EXPECT_EQ(BodyJson(refused)["error"]["type"], "invalid_request_error") << refused.body;
  }
  HttpReply unknown = Http(server.port(), "POST", "/v1/embeddings", R"({"model": "gamma", "input": "a"})");
  EXPECT_EQ(unknown.status, 404) << unknown.body;
  Json metrics = test::ScrapeMetrics(server.port());
  EXPECT_GE(test::Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"), 4);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeEmbeddings, PoolingLastAndSizeLimits) {
  TinyLlama llama;
  ServerProcess server(llama.path, {"--embedding-pooling", "last", "--max-embedding-inputs", "2",
                                    "--max-embedding-tokens", "40"});
  ASSERT_GT(server.port(), 0) << server.log();
  const Reference ref(llama.path);
  const std::vector<int32_t> ids = {1, 4, 9, 16, 25};
  OrderedJson body = {{"input", ids}, {"encoding_format", "float"}};
  HttpReply r = Http(server.port(), "POST", "/v1/embeddings", body.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_LT(test::RelError(Floats(BodyJson(r)["data"][0]["embedding"]), ref.Embedding(ids, true)), 1e-4);
  EXPECT_EQ(BodyJson(r)["usage"]["prompt_tokens"], 5);
  // base64: the same floats' little-endian bytes.
  body["encoding_format"] = "base64";
  HttpReply b64 = Http(server.port(), "POST", "/v1/embeddings", body.dump());
  ASSERT_EQ(b64.status, 200) << b64.body;
  auto bytes = DecodeDataUrl("data:a;base64," + BodyJson(b64)["data"][0]["embedding"].get<std::string>(), "");
  ASSERT_TRUE(bytes.ok());
  const std::vector<float> floats = Floats(BodyJson(r)["data"][0]["embedding"]);
  ASSERT_EQ(bytes->size(), floats.size() * 4);
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t u = 0;
    for (int k = 0; k < 4; ++k) u |= static_cast<uint32_t>(static_cast<unsigned char>((*bytes)[i * 4 + k])) << (8 * k);
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_EQ(f, floats[i]) << i;
  }
  HttpReply many = Http(server.port(), "POST", "/v1/embeddings", R"({"input": ["a", "b", "c"]})");
  EXPECT_EQ(many.status, 400) << many.body;
  EXPECT_NE(test::ErrorMessage(many).find("at most 2"), std::string::npos) << many.body;
  OrderedJson long_input = {{"input", std::vector<std::vector<int32_t>>{std::vector<int32_t>(30, 5), std::vector<int32_t>(11, 6)}}};
  HttpReply tokens = Http(server.port(), "POST", "/v1/embeddings", long_input.dump());
  EXPECT_EQ(tokens.status, 400) << tokens.body;
  EXPECT_NE(test::ErrorMessage(tokens).find("41 tokens"), std::string::npos) << tokens.body;
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace mlc
