// `mlc-manifest serve` as a process on loopback: routes and OpenAI-style errors, hostile clients
// (malformed JSON, a 100 MB body, a client sending one byte a second, one trickling a request
// past the read timeout, a client leaving mid-stream) while others are served, SIGTERM draining a
// stream, the official `openai` npm client (streamed and not, audio and image parts; a CPU-program
// package, batched), and a 32-client streaming load test that checks every stream against the
// same request run alone; GET /metrics read by the Prometheus client's parser, POST
// /v1/completions, logprobs checked against the CPU program's own logits, and the chat page at /
// driven in a headless Chromium.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>
#include <thread>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/tokenizer.h"
#include "support/sanitizer.h"
#include "support/serve_process.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using test::kSanitized;

using test::BodyJson;
using test::Connect;
using test::ErrorMessage;
using test::Http;
using test::HttpReply;
using test::ParseReply;
using test::ReadAll;
using test::Sample;
using test::ScrapeMetrics;
using test::SendAll;
using test::ServerProcess;

// A chat completion's request line and the headers every one needs.
const std::string kPostHead =
    "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n";

// A chunked body's data (the body itself when it is not chunked).
std::string Dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos || eol == pos) return body;
    size_t size = 0;
    for (size_t i = pos; i < eol; ++i) {
      int d = std::isxdigit(static_cast<unsigned char>(body[i])) ? std::stoi(std::string(1, body[i]), nullptr, 16) : -1;
      if (d < 0) return body;
      size = size * 16 + static_cast<size_t>(d);
    }
    if (size == 0) return out;
    if (eol + 2 + size > body.size()) return body;
    out += body.substr(eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return out;
}

// The JSON objects of a server-sent event stream ("data: [DONE]" left out).
std::vector<Json> SseChunks(const std::string& body) {
  std::vector<Json> out;
  std::istringstream in(Dechunk(body));
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: ", 0) != 0 || line == "data: [DONE]") continue;
    auto j = ParseJson(line.substr(6));
    if (j.ok()) out.push_back(*j);
  }
  return out;
}

std::string Chat(const std::string& text, int max_tokens, bool stream = false) {
  OrderedJson j = {{"model", "reference"},
                   {"messages", OrderedJson::array({{{"role", "user"}, {"content", text}}})},
                   {"max_tokens", max_tokens},
                   {"temperature", 0},
                   {"stream", stream}};
  return j.dump();
}

struct Package {
  test::TempDir dir;
  explicit Package(uint64_t seed = 3, bool media = true) {
    ReferenceModelOptions o;
    o.seed = seed;
    o.audio = o.image = media;
    auto w = WriteReferenceModel(dir.path(), o);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  }
};

// A package the built-in CPU program runs: Qwen2 layout, 4-bit weights, random.
struct TinyQwen2 {
  test::TempDir dir;
  TinyQwen2() {
    FamilyModelOptions o;
    o.family = "qwen2";
    o.quantization = "q4f16_1";
    o.shape = "tiny";
    o.seed = 4;
    auto w = WriteFamilyModel(dir.path(), o);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
  }
};

TEST(Serve, RoutesAndOpenAiErrors) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  HttpReply health = Http(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(BodyJson(health)["status"], "ok");
  HttpReply models = Http(server.port(), "GET", "/v1/models");
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(BodyJson(models)["data"][0]["object"], "model");
  HttpReply missing = Http(server.port(), "GET", "/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(ErrorMessage(missing), "");

  HttpReply malformed = Http(server.port(), "POST", "/v1/chat/completions", "{\"messages\": [");
  EXPECT_EQ(malformed.status, 400);
  EXPECT_NE(ErrorMessage(malformed), "");
  HttpReply wrong = Http(server.port(), "POST", "/v1/chat/completions", "{\"messages\": 5}");
  EXPECT_EQ(wrong.status, 400);
  EXPECT_EQ(BodyJson(wrong)["error"]["param"], "/messages");
  HttpReply zero = Http(server.port(), "POST", "/v1/chat/completions", Chat("hi", 0));
  EXPECT_EQ(zero.status, 400);
  EXPECT_EQ(BodyJson(zero)["error"]["param"], "/max_tokens");
  HttpReply last_assistant = Http(server.port(), "POST", "/v1/chat/completions",
                                  R"({"messages": [{"role": "assistant", "content": "x"}]})");
  EXPECT_EQ(last_assistant.status, 400);
  // A local file is refused unless the server was started to allow it.
  std::string secret = p.dir.Write("picture.png", "not really a picture");
  OrderedJson local = {{"messages", OrderedJson::array({{{"role", "user"},
                                                        {"content", OrderedJson::array({{{"type", "image_url"},
                                                                                         {"image_url", {{"url", secret}}}}})}}})}};
  HttpReply refused = Http(server.port(), "POST", "/v1/chat/completions", local.dump());
  EXPECT_EQ(refused.status, 400);
  EXPECT_NE(ErrorMessage(refused).find("local files"), std::string::npos) << refused.body;
  // Raw base64 is never tried as a file name: a name that exists and one that does not get the
  // same answer.
  std::string answers[2];
  for (int i = 0; i < 2; ++i) {
    OrderedJson probe = {{"messages", OrderedJson::array({{{"role", "user"},
                                                          {"content", OrderedJson::array({{{"type", "input_audio"},
                                                                                           {"input_audio", {{"data", i ? "/etc//passwd" : "/etc//passwo"}, {"format", "wav"}}}}})}}})}};
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", probe.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    answers[i] = r.body;
  }
  EXPECT_EQ(answers[0], answers[1]);
  // Images that cannot fit the context are refused before any is decoded: the answer is the
  // context error although none of them is an image.
  OrderedJson parts = OrderedJson::array();
  for (int i = 0; i < 600; ++i) parts.push_back({{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,AAAA"}}}});
  OrderedJson crowded = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", parts}}})}};
  HttpReply too_many = Http(server.port(), "POST", "/v1/chat/completions", crowded.dump());
  EXPECT_EQ(too_many.status, 400) << too_many.body;
  EXPECT_NE(ErrorMessage(too_many).find("positions"), std::string::npos) << too_many.body;
  EXPECT_EQ(ErrorMessage(too_many).find("inline"), std::string::npos) << too_many.body;
  // A bad data: URL.
  OrderedJson bad_audio = {{"messages", OrderedJson::array({{{"role", "user"},
                                                            {"content", OrderedJson::array({{{"type", "input_audio"},
                                                                                             {"input_audio", {{"data", "data:audio/wav;base64,@@@"}, {"format", "wav"}}}}})}}})}};
  HttpReply bad = Http(server.port(), "POST", "/v1/chat/completions", bad_audio.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(ErrorMessage(bad), "");

  HttpReply ok = Http(server.port(), "POST", "/v1/chat/completions", Chat("hello", 5));
  ASSERT_EQ(ok.status, 200) << ok.body;
  Json reply = BodyJson(ok);
  EXPECT_EQ(reply["object"], "chat.completion");
  EXPECT_EQ(reply["usage"]["completion_tokens"].get<int>() + reply["usage"]["prompt_tokens"].get<int>(),
            reply["usage"]["total_tokens"].get<int>());
  EXPECT_LE(reply["usage"]["completion_tokens"].get<int>(), 5);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(Serve, HostileClientsGetErrorsAndOthersAreServed) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-body-bytes", "1000000", "--idle-timeout", "3"});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::string expected = BodyJson(Http(server.port(), "POST", "/v1/chat/completions",
                                             Chat("steady", 8)))["choices"][0]["message"]["content"];

  // One byte a second for six seconds: its connection is held while the others are served.
  std::thread slow([&] {
    int fd = Connect(server.port());
    std::string req = "POST /v1/chat/completions HTTP/1.1\r\n";
    for (size_t i = 0; i < 6; ++i) {
      if (!SendAll(fd, req.substr(i, 1))) break;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    close(fd);
  });
  // Leaves mid-stream.
  {
    int fd = Connect(server.port());
    std::string body = Chat("leave early", 400, true);
    SendAll(fd, kPostHead + "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body);
    char buf[256];
    EXPECT_GT(recv(fd, buf, sizeof(buf), 0), 0);
    close(fd);
  }
  // 100 MB body.
  {
    int fd = Connect(server.port());
    const size_t size = 100u << 20;
    SendAll(fd, kPostHead + "Connection: close\r\nContent-Length: " +
                    std::to_string(size) + "\r\n\r\n");
    std::string chunk(1 << 20, ' ');
    for (size_t sent = 0; sent < size; sent += chunk.size()) {
      if (!SendAll(fd, chunk)) break;  // the server may close early
    }
    shutdown(fd, SHUT_WR);
    HttpReply r = ParseReply(ReadAll(fd));
    close(fd);
    // 413, or the connection closed while the client was still sending.
    EXPECT_TRUE(r.status == 413 || r.status == 0) << r.status;
  }
  for (int i = 0; i < 3; ++i) {
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", Chat("steady", 8));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(BodyJson(r)["choices"][0]["message"]["content"], expected);
    HttpReply junk = Http(server.port(), "POST", "/v1/chat/completions", "\x01\x02not json");
    EXPECT_EQ(junk.status, 400);
  }
  slow.join();
  // The client that left was cancelled: nothing keeps running.
  int running = -1;
  for (int i = 0; i < 200 && running != 0; ++i) {
    running = BodyJson(Http(server.port(), "GET", "/health"))["running"].get<int>();
    if (running != 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(running, 0);
  EXPECT_EQ(server.Stop(), 0);
}

// A request whose bytes trickle in, each well within the idle timeout, is cut off once reading it
// has taken longer than --read-timeout; the server keeps serving.
TEST(Serve, SlowSenderIsCutOffAfterTheReadTimeout) {
  Package p;
  ServerProcess server(p.dir.path(), {"--read-timeout", "2", "--idle-timeout", "30"});
  ASSERT_GT(server.port(), 0) << server.log();
  std::string body = Chat("slow", 4);
  std::string req = kPostHead + "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_GT(req.size(), 120u);
  int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  // Four bytes a second: without a total deadline the request would take half a minute or more.
  size_t sent = 0;
  bool cut = false;
  for (; sent < 120 && !cut; ++sent) {
    if (!SendAll(fd, req.substr(sent, 1))) {
      cut = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    char byte;
    ssize_t n = recv(fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK);
    // Closed (0 or a reset), or an answer before the request was complete: cut off.
    cut = n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
  close(fd);
  EXPECT_TRUE(cut) << "the server still read the request after " << sent << " bytes";
  HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", Chat("after", 4));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(server.Stop(), 0);
}

TEST(Serve, SigtermLetsAStreamFinish) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  int fd = Connect(server.port());
  std::string body = Chat("finish me", 40, true);
  SendAll(fd, kPostHead + "Connection: close\r\nContent-Length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  char buf[64];
  ASSERT_GT(recv(fd, buf, sizeof(buf), MSG_PEEK), 0);
  kill(server.pid(), SIGTERM);
  std::string rest = ReadAll(fd);
  close(fd);
  EXPECT_NE(rest.find("data: [DONE]"), std::string::npos) << rest;
  EXPECT_NE(rest.find("\"finish_reason\":\"length\""), std::string::npos) << rest;
  EXPECT_EQ(server.Stop(), 0);
  EXPECT_LT(Connect(server.port()), 0);
}

TEST(Serve, OpenAiClientStreamsTextAudioAndImage) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "basic"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const Json& replies = (*doc)["replies"];
  ASSERT_EQ(replies.size(), 6u);
  const int lengths[] = {4, 9, 16, 12, 7, 20};
  for (size_t i = 0; i < replies.size(); ++i) {
    const Json& plain = replies[i]["plain"];
    const Json& streamed = replies[i]["streamed"];
    EXPECT_EQ(plain["content"], streamed["content"]) << "prompt " << i;
    EXPECT_EQ(plain["finish"], streamed["finish"]) << "prompt " << i;
    EXPECT_EQ(plain["usage"], streamed["usage"]) << "prompt " << i;
    EXPECT_GT(plain["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_LE(plain["usage"]["completion_tokens"].get<int>(), lengths[i]);
    if (plain["finish"] == "length") {
      EXPECT_EQ(plain["usage"]["completion_tokens"].get<int>(), lengths[i]);
    }
  }
  // The audio and image prompts are longer than their text alone: the media positions count.
  EXPECT_GT(replies[2]["plain"]["usage"]["prompt_tokens"].get<int>(), 13);
  EXPECT_GT(replies[3]["plain"]["usage"]["prompt_tokens"].get<int>(), 16);
  EXPECT_EQ((*doc)["error"]["status"], 400);
  EXPECT_EQ((*doc)["models"].size(), 1u);
  EXPECT_EQ(server.Stop(), 0);
}

// A package the built-in CPU program runs (Qwen2 layout, 4-bit weights): the openai client gets
// the same text streamed and not, and eight clients at once (batched) each get the reply the
// request gets alone.
TEST(Serve, CpuProgramPackageThroughTheOpenAiClient) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  TinyQwen2 p;
  const test::TempDir& dir = p.dir;
  ServerProcess server(dir.path(), {"--max-batch-size", "4"});
  ASSERT_GT(server.port(), 0) << server.log();
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "text", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const Json& replies = (*doc)["replies"];
  ASSERT_EQ(replies.size(), 3u);
  for (size_t i = 0; i < replies.size(); ++i) {
    const Json& plain = replies[i]["plain"];
    EXPECT_EQ(plain["content"], replies[i]["streamed"]["content"]) << "prompt " << i;
    const Json& streamed_usage = replies[i]["streamed"]["usage"];
    EXPECT_EQ(plain["usage"]["prompt_tokens"], streamed_usage["prompt_tokens"]) << "prompt " << i;
    EXPECT_EQ(plain["usage"]["completion_tokens"], streamed_usage["completion_tokens"]) << "prompt " << i;
    // The streamed request repeats the plain one's prompt: the prefix cache holds all of it but
    // the last position, in whole pages (OpenAI's usage.prompt_tokens_details.cached_tokens).
    const int prompt_tokens = plain["usage"]["prompt_tokens"].get<int>();
    EXPECT_EQ(streamed_usage["prompt_tokens_details"]["cached_tokens"].get<int>(), (prompt_tokens - 1) / 16 * 16)
        << "prompt " << i;
    EXPECT_GT(plain["usage"]["prompt_tokens"].get<int>(), 0);
    EXPECT_LE(plain["usage"]["completion_tokens"].get<int>(), 10);
  }
  const Json& concurrent = (*doc)["concurrent"];
  EXPECT_EQ(concurrent["ok"], 8) << concurrent.dump();
  EXPECT_EQ(concurrent["failed"], 0);
  EXPECT_EQ(concurrent["mismatched"], 0);
  EXPECT_EQ((*doc)["models"][0], dir.path().substr(dir.path().rfind('/') + 1));
  // The package takes text only: an audio part is the client's error.
  OrderedJson audio = {{"messages", OrderedJson::array({{{"role", "user"},
                                                        {"content", OrderedJson::array({{{"type", "input_audio"},
                                                                                         {"input_audio", {{"data", "UklGRg=="}, {"format", "wav"}}}}})}}})}};
  HttpReply refused = Http(server.port(), "POST", "/v1/chat/completions", audio.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(ErrorMessage(refused), "");
  EXPECT_EQ(server.Stop(), 0);
}

// A LLaVA-layout package (CLIP tower, projector, llama decoder; random weights): an image part
// (a local file, allowed by the flag) is decoded, encoded by the tower and answered; its 16 rows
// count in the prompt; the same request again gives the same greedy reply.
TEST(Serve, LlavaPackageAnswersAnImage) {
  test::TempDir dir;
  FamilyModelOptions o;
  o.family = "llava";
  o.quantization = "q4f16_1";
  o.seed = 6;
  auto w = WriteFamilyModel(dir.File("llava"), o);
  ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
  std::string image = dir.Write("photo.bmp", test::BmpImage(45, 30));
  ServerProcess server(dir.File("llava"), {"--allow-local-files"});
  ASSERT_GT(server.port(), 0) << server.log();
  OrderedJson content = OrderedJson::array({{{"type", "image_url"}, {"image_url", {{"url", image}}}},
                                            {{"type", "text"}, {"text", "What is this?"}}});
  OrderedJson req = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", content}}})},
                     {"max_tokens", 6},
                     {"temperature", 0}};
  HttpReply first = Http(server.port(), "POST", "/v1/chat/completions", req.dump());
  ASSERT_EQ(first.status, 200) << first.body;
  Json a = BodyJson(first);
  EXPECT_GT(a["usage"]["prompt_tokens"].get<int>(), 16);
  EXPECT_EQ(a["usage"]["completion_tokens"].get<int>() > 0, true) << first.body;
  HttpReply again = Http(server.port(), "POST", "/v1/chat/completions", req.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(BodyJson(again)["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"]);
  EXPECT_EQ(server.Stop(), 0);
}

// Gemma 4 with its audio tower over HTTP: an input_audio part (base64 WAV, as OpenAI's clients send
// it) through the token pair; the same request twice gives the same greedy reply.
TEST(Serve, Gemma4PackageAnswersASpokenQuestion) {
  test::TempDir dir;
  FamilyModelOptions o;
  o.family = "gemma4";
  o.quantization = "q4f16_1";
  o.audio = true;
  o.seed = 6;
  auto w = WriteFamilyModel(dir.File("gemma4"), o);
  ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
  std::vector<double> tone;
  for (int i = 0; i < 12000; ++i) tone.push_back(0.3 * std::sin(2 * M_PI * 500.0 * i / 16000.0));
  const std::string wav = test::EncodeWav(test::WavLayout{}, tone);
  ServerProcess server(dir.File("gemma4"), {});
  ASSERT_GT(server.port(), 0) << server.log();
  OrderedJson content = OrderedJson::array(
      {{{"type", "input_audio"}, {"input_audio", {{"data", test::Base64(wav)}, {"format", "wav"}}}},
       {{"type", "text"}, {"text", "What did you hear?"}}});
  OrderedJson req = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", content}}})},
                     {"max_tokens", 6},
                     {"temperature", 0}};
  HttpReply first = Http(server.port(), "POST", "/v1/chat/completions", req.dump());
  ASSERT_EQ(first.status, 200) << first.body;
  Json a = BodyJson(first);
  EXPECT_GT(a["usage"]["prompt_tokens"].get<int>(), 19) << first.body;  // 19 audio rows for 0.75 s
  EXPECT_GT(a["usage"]["completion_tokens"].get<int>(), 0) << first.body;
  HttpReply again = Http(server.port(), "POST", "/v1/chat/completions", req.dump());
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(BodyJson(again)["choices"][0]["message"]["content"], a["choices"][0]["message"]["content"]);
  EXPECT_EQ(server.Stop(), 0);
}

// Gemma 4's thinking switch over HTTP: reasoning_effort and chat_template_kwargs.enable_thinking
// change the prompt to what Gemma 4's published template renders (counted with the package's
// tokenizer, each string segment encoded on its own), off by default; a disagreement or an unknown
// effort is a 400. A reply without Gemma 4's markers is all answer.
TEST(Serve, Gemma4ThinkingIsSwitchedByEffortOrTemplateArgument) {
  test::TempDir dir;
  const std::string pkg = dir.File("gemma4");
  FamilyModelOptions o;
  o.family = "gemma4";
  o.quantization = "q4f16_1";
  o.seed = 6;
  auto w = WriteFamilyModel(pkg, o);
  ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
  OpenOptions open;
  open.chat = true;
  auto package = OpenPackage(pkg, open);
  ASSERT_TRUE(package.ok()) << FormatErrors(package.errors());
  auto count = [&](std::initializer_list<std::string> segments) {
    int64_t n = static_cast<int64_t>(package->tmpl->system_prefix_token_ids.value_or(std::vector<int32_t>{}).size());
    for (const std::string& s : segments) n += static_cast<int64_t>(package->tokenizer->Encode(s).size());
    return n;
  };
  const std::string user = "<|turn>user\nHi<turn|>\n";
  const int64_t off = count({user, "<|turn>model\n<|channel>thought\n<channel|>"});
  const int64_t on = count({"<|turn>system\n<|think|>\n<turn|>\n", user, "<|turn>model\n"});
  ASSERT_NE(off, on);
  auto request = [](const OrderedJson& extra) {
    OrderedJson j = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", "Hi"}}})},
                     {"max_tokens", 4}, {"temperature", 0}};
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
    return j.dump();
  };
  ServerProcess server(pkg, {});
  ASSERT_GT(server.port(), 0) << server.log();
  const std::vector<std::pair<OrderedJson, int64_t>> switches = {
      {OrderedJson::object(), off},
      {{{"reasoning_effort", "none"}}, off},
      {{{"reasoning_effort", "high"}}, on},
      {{{"chat_template_kwargs", {{"enable_thinking", false}, {"other", 1}}}}, off},
      {{{"chat_template_kwargs", {{"enable_thinking", true}}}}, on},
      {{{"reasoning_effort", "low"}, {"chat_template_kwargs", {{"enable_thinking", true}}}}, on}};
  for (const auto& [extra, tokens] : switches) {
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", request(extra));
    ASSERT_EQ(r.status, 200) << extra.dump() << r.body;
    EXPECT_EQ(BodyJson(r)["usage"]["prompt_tokens"].get<int64_t>(), tokens) << extra.dump();
    EXPECT_FALSE(BodyJson(r)["choices"][0]["message"].contains("reasoning_content")) << r.body;
  }
  for (const auto& [extra, param] : std::vector<std::pair<OrderedJson, std::string>>{
           {{{"reasoning_effort", "none"}, {"chat_template_kwargs", {{"enable_thinking", true}}}}, "/reasoning_effort"},
           {{{"reasoning_effort", "lots"}}, "/reasoning_effort"},
           {{{"chat_template_kwargs", {{"enable_thinking", "yes"}}}}, "/chat_template_kwargs/enable_thinking"},
           {{{"chat_template_kwargs", "think"}}, "/chat_template_kwargs"}}) {
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", request(extra));
    EXPECT_EQ(r.status, 400) << extra.dump() << r.body;
    EXPECT_EQ(BodyJson(r)["error"]["param"], param) << r.body;
  }
  EXPECT_EQ(server.Stop(), 0);
}

// The separation over HTTP. A random model never writes Gemma 4's markers, so a package's
// template is given a thinking object whose markers are taken from its own greedy reply (the
// prompt unchanged): the reply then comes back split at them, the thought in
// message.reasoning_content (streamed as delta.reasoning_content), never in content, with every
// token's logprobs still there.
TEST(Serve, ThoughtIsAnsweredAsReasoningContentNeverContent) {
  Package p(3, /*media=*/false);
  const std::string pkg = p.dir.path();
  auto request = [](bool stream) {
    return OrderedJson({{"messages", OrderedJson::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
                        {"max_tokens", 24}, {"temperature", 0}, {"stream", stream}, {"logprobs", true}})
        .dump();
  };
  Json plain;
  {
    ServerProcess server(pkg, {});
    ASSERT_GT(server.port(), 0) << server.log();
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", request(false));
    ASSERT_EQ(r.status, 200) << r.body;
    plain = BodyJson(r);
    EXPECT_EQ(server.Stop(), 0);
  }
  const std::string text = plain["choices"][0]["message"]["content"].get<std::string>();
  // Markers from the reply: two of its token pieces (printable ASCII), the open one where it first
  // appears, the close one first after it, neither again after the close.
  std::vector<std::pair<size_t, std::string>> pieces;
  size_t at = 0;
  for (const Json& t : plain["choices"][0]["logprobs"]["content"]) {
    std::string s = t["token"].get<std::string>();
    bool printable = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
    if (printable && text.compare(at, s.size(), s) == 0) pieces.emplace_back(at, s);
    at += s.size();
  }
  std::string open_marker, close_marker, reasoning, content;
  for (size_t i = 0; i < pieces.size() && open_marker.empty(); ++i) {
    for (size_t j = i + 1; j < pieces.size(); ++j) {
      const auto& [oa, os] = pieces[i];
      const auto& [ca, cs] = pieces[j];
      if (text.find(os) != oa || ca < oa + os.size() || text.find(cs, oa + os.size()) != ca ||
          text.find(os, ca + cs.size()) != std::string::npos || ca == oa + os.size()) {
        continue;
      }
      open_marker = os;
      close_marker = cs;
      content = text.substr(0, oa) + text.substr(ca + cs.size());
      reasoning = text.substr(oa + os.size(), ca - oa - os.size());
      size_t first = reasoning.find_first_not_of("\r\n");
      reasoning.erase(0, first == std::string::npos ? reasoning.size() : first);
      break;
    }
  }
  ASSERT_FALSE(open_marker.empty()) << "no usable markers in " << Json(text).dump();
  ASSERT_FALSE(reasoning.empty());
  Json config = *ReadJsonFile(JoinPath(pkg, "mlc-chat-config.json"));
  config["conv_template"]["thinking"] = {{"open", open_marker}, {"close", close_marker}, {"default", true}};
  ASSERT_TRUE(WriteFileAtomic(JoinPath(pkg, "mlc-chat-config.json"), config.dump(2), true).ok());

  ServerProcess server(pkg, {});
  ASSERT_GT(server.port(), 0) << server.log();
  HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", request(false));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json split = BodyJson(r)["choices"][0]["message"];
  EXPECT_EQ(split.value("reasoning_content", std::string()), reasoning) << split.dump();
  EXPECT_EQ(split["content"], content) << split.dump();
  EXPECT_EQ(BodyJson(r)["choices"][0]["logprobs"]["content"], plain["choices"][0]["logprobs"]["content"]);
  HttpReply streamed = Http(server.port(), "POST", "/v1/chat/completions", request(true));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  std::string streamed_reasoning, streamed_content;
  for (const Json& chunk : SseChunks(streamed.body)) {
    if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
    const Json& delta = chunk["choices"][0]["delta"];
    streamed_reasoning += delta.value("reasoning_content", std::string());
    streamed_content += delta.value("content", std::string());
  }
  EXPECT_EQ(streamed_reasoning, reasoning);
  EXPECT_EQ(streamed_content, content);
  EXPECT_EQ(server.Stop(), 0);
}

// Every JSON route parses its body under the same limits: a body of more values than the server's
// limit (1 Mi) is a 400 naming that limit, on the generation routes and on /tokenize and
// /detokenize alike, and the server goes on answering.
TEST(Serve, EveryJsonRouteCountsTheBodysValues) {
  Package p(3, /*media=*/false);
  ServerProcess server(p.dir.path(), {});
  ASSERT_GT(server.port(), 0) << server.log();
  std::string many = "[0";
  for (int i = 0; i < (1 << 20); ++i) many += ",0";
  many += "]";
  for (const char* route : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"}) {
    HttpReply r = Http(server.port(), "POST", route, "{\"content\": \"x\", \"junk\": " + many + "}");
    EXPECT_EQ(r.status, 400) << route << ": " << r.body.substr(0, 200);
    EXPECT_NE(ErrorMessage(r).find("more values than the limit of 1048576"), std::string::npos) << route << ": " << r.body.substr(0, 300);
  }
  HttpReply ok = Http(server.port(), "POST", "/tokenize", R"({"content": "still here"})");
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(server.Stop(), 0);
}

// The counters move as requests end (three answered, one streamed, one refused), the token
// counters match the replies' usage, every token is in a latency histogram, and the gauges add up
// to the KV cache.
TEST(Serve, MetricsCountRequestsTokensAndLatency) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  Json before = ScrapeMetrics(server.port());
  ASSERT_TRUE(before.is_object());
  EXPECT_EQ(before["mlc_manifest_requests"]["type"], "counter");
  EXPECT_EQ(before["mlc_manifest_time_to_first_token_seconds"]["type"], "histogram");
  EXPECT_EQ(before["mlc_manifest_running_sequences"]["type"], "gauge");
  EXPECT_EQ(Sample(before, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"), 0);
  int64_t prompt = 0, generated = 0, with_tokens = 0;
  for (int i = 0; i < 3; ++i) {
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", Chat("count me " + std::to_string(i), 4 + i));
    ASSERT_EQ(r.status, 200) << r.body;
    Json usage = BodyJson(r)["usage"];
    prompt += usage["prompt_tokens"].get<int64_t>();
    generated += usage["completion_tokens"].get<int64_t>();
    with_tokens += usage["completion_tokens"].get<int64_t>() > 0;
  }
  OrderedJson streamed = {{"messages", OrderedJson::array({{{"role", "user"}, {"content", "stream"}}})},
                          {"max_tokens", 6}, {"temperature", 0}, {"stream", true},
                          {"stream_options", {{"include_usage", true}}}};
  HttpReply s = Http(server.port(), "POST", "/v1/chat/completions", streamed.dump());
  ASSERT_EQ(s.status, 200);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(s.body, m, std::regex(R"("prompt_tokens":(\d+),"completion_tokens":(\d+))"))) << s.body;
  prompt += std::stoll(m[1]);
  generated += std::stoll(m[2]);
  with_tokens += std::stoll(m[2]) > 0;
  EXPECT_EQ(Http(server.port(), "POST", "/v1/chat/completions", "{\"messages\": 5}").status, 400);

  Json after = ScrapeMetrics(server.port());
  ASSERT_TRUE(after.is_object());
  auto requests = [&](const char* outcome) {
    return Sample(after, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", outcome);
  };
  EXPECT_EQ(requests("completed"), 4);
  EXPECT_EQ(requests("invalid"), 1);
  EXPECT_EQ(requests("error"), 0);
  EXPECT_EQ(requests("cancelled"), 0);
  EXPECT_EQ(Sample(after, "mlc_manifest_prompt_tokens", "mlc_manifest_prompt_tokens_total"), prompt);
  EXPECT_EQ(Sample(after, "mlc_manifest_generation_tokens", "mlc_manifest_generation_tokens_total"), generated);
  const std::string ttft = "mlc_manifest_time_to_first_token_seconds";
  const std::string itl = "mlc_manifest_inter_token_latency_seconds";
  EXPECT_EQ(Sample(after, ttft, ttft + "_count"), with_tokens);
  EXPECT_EQ(Sample(after, ttft, ttft + "_bucket", "le", "+Inf"), with_tokens);
  EXPECT_GT(Sample(after, ttft, ttft + "_sum"), 0);
  EXPECT_EQ(Sample(after, itl, itl + "_count"), generated - with_tokens);
  // Buckets are cumulative.
  double previous = 0;
  for (const Json& sample : after[ttft]["samples"]) {
    if (sample["name"] != ttft + "_bucket") continue;
    EXPECT_GE(sample["value"].get<double>(), previous);
    previous = sample["value"].get<double>();
  }
  EXPECT_EQ(Sample(after, "mlc_manifest_running_sequences", "mlc_manifest_running_sequences"), 0);
  EXPECT_EQ(Sample(after, "mlc_manifest_waiting_sequences", "mlc_manifest_waiting_sequences"), 0);
  Json health = BodyJson(Http(server.port(), "GET", "/health"));
  const double used = Sample(after, "mlc_manifest_kv_positions_used", "mlc_manifest_kv_positions_used");
  const double free = Sample(after, "mlc_manifest_kv_positions_free", "mlc_manifest_kv_positions_free");
  EXPECT_EQ(used, 0);
  EXPECT_GT(free, 0);
  const double per_page = free / health["kv_free_pages"].get<double>();
  EXPECT_EQ(per_page, std::floor(per_page)) << "positions are whole pages";
  EXPECT_EQ(used + free, per_page * health["kv_total_pages"].get<double>());
  EXPECT_EQ(server.Stop(), 0);
}

// POST /v1/completions over HTTP: a text prompt and token ids answered; what it does not take is a
// 400 naming the field.
TEST(Serve, CompletionsAnswerTextOrTokenIdsAndNameWhatTheyRefuse) {
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  HttpReply text = Http(server.port(), "POST", "/v1/completions",
                        R"({"prompt": "Once upon", "max_tokens": 5, "temperature": 0})");
  ASSERT_EQ(text.status, 200) << text.body;
  Json t = BodyJson(text);
  EXPECT_EQ(t["object"], "text_completion");
  EXPECT_TRUE(t["choices"][0]["text"].is_string());
  EXPECT_TRUE(t["choices"][0]["logprobs"].is_null());
  EXPECT_LE(t["usage"]["completion_tokens"].get<int>(), 5);
  HttpReply ids = Http(server.port(), "POST", "/v1/completions",
                       R"({"prompt": [1, 10, 11, 12], "max_tokens": 3, "temperature": 0, "logprobs": 2})");
  ASSERT_EQ(ids.status, 200) << ids.body;
  Json i = BodyJson(ids);
  EXPECT_EQ(i["usage"]["prompt_tokens"], 4);
  const Json& lp = i["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"].size(), i["usage"]["completion_tokens"].get<size_t>()) << ids.body;
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u) << ids.body;
  struct Refused {
    std::string body, param;
  };
  const Refused refused[] = {
      {R"({"prompt": ["a", "b"]})", "/prompt"},
      {R"({"prompt": [[1, 2]]})", "/prompt"},
      {R"({"prompt": "a", "echo": true})", "/echo"},
      {R"({"prompt": "a", "logprobs": 21})", "/logprobs"},
      {R"({"prompt": [1, -2]})", "/prompt/1"},
      {R"({"max_tokens": 3})", "/prompt"},
      {R"({"prompt": "a", "suffix": "b"})", "/suffix"},
      {R"({"prompt": "a", "logit_bias": {"5": 10}})", "/logit_bias"},
      {R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "n",
          "schema": {"type": "integer", "maxLength": 2}}}})", "/response_format/json_schema/schema/maxLength"},
      {R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "n",
          "schema": {"$defs": {"a~b": {}}, "$ref": "#/$defs/a~b"}}}})", "/response_format/json_schema/schema/$ref"},
  };
  for (const Refused& r : refused) {
    HttpReply reply = Http(server.port(), "POST", "/v1/completions", r.body);
    EXPECT_EQ(reply.status, 400) << r.body;
    EXPECT_EQ(BodyJson(reply)["error"]["param"], r.param) << r.body << " -> " << reply.body;
  }
  // response_format applies to completions as to chat: the reply is one of the enum's values.
  for (bool stream : {false, true}) {
    const std::string body = std::string(R"({"prompt": "Once upon", "max_tokens": 40, "temperature": 1, "seed": 3,
        "logit_bias": {}, "stream": )") + (stream ? "true" : "false") +
        R"(, "response_format": {"type": "json_schema", "json_schema": {"name": "answer",
        "schema": {"enum": ["yes", "no", 12]}}}})";
    HttpReply reply = Http(server.port(), "POST", "/v1/completions", body);
    ASSERT_EQ(reply.status, 200) << reply.body;
    std::string content;
    if (stream) {
      for (const Json& chunk : SseChunks(reply.body)) {
        if (!chunk["choices"].empty()) content += chunk["choices"][0]["text"].get<std::string>();
      }
    } else {
      content = BodyJson(reply)["choices"][0]["text"].get<std::string>();
      EXPECT_EQ(BodyJson(reply)["choices"][0]["finish_reason"], "stop") << reply.body;
    }
    EXPECT_TRUE(content == "\"yes\"" || content == "\"no\"" || content == "12") << content;
  }
  for (const char* chat : {R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"1": -100}})"}) {
    HttpReply reply = Http(server.port(), "POST", "/v1/chat/completions", chat);
    EXPECT_EQ(reply.status, 400) << chat;
    EXPECT_EQ(BodyJson(reply)["error"]["param"], "/logit_bias") << reply.body;
  }
  for (const char* chat : {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})",
                           R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21})"}) {
    HttpReply reply = Http(server.port(), "POST", "/v1/chat/completions", chat);
    EXPECT_EQ(reply.status, 400) << chat;
    EXPECT_EQ(BodyJson(reply)["error"]["param"], "/top_logprobs") << reply.body;
  }
  EXPECT_EQ(server.Stop(), 0);
}

// A stop string's cut tokens leave logprobs, streamed and not: the tokens listed are those whose
// text starts before the cut (chat and completions).
TEST(Serve, StopStringsCutTheirTokensFromLogprobs) {
  // Some 30 greedy replies: minutes under the sanitizers. The cut itself is tested there by
  // Engine.StopStringCutsTheLogprobsOfCutTokens and ReplyStream.TokensShownEndWhereTheShownTextDoes.
  if (kSanitized) GTEST_SKIP() << "runs in the release build only";
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  // A prompt whose greedy reply is the concatenation of its tokens' texts (random weights pick
  // byte tokens, and a character split over two tokens shows as U+FFFD in each token's text).
  std::string prompt;
  Json w;
  for (int first : {50, 30, 10, 20, 40, 60, 70, 80}) {
    prompt = "\"prompt\": [1, " + std::to_string(first) + ", " + std::to_string(first + 1) + ", " +
             std::to_string(first + 2) + R"(], "max_tokens": 14, "temperature": 0, "logprobs": 1)";
    HttpReply whole = Http(server.port(), "POST", "/v1/completions", "{" + prompt + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    w = BodyJson(whole);
    std::string joined;
    for (const Json& t : w["choices"][0]["logprobs"]["tokens"]) joined += t.get<std::string>();
    if (joined == w["choices"][0]["text"].get<std::string>()) break;
    w = Json();
  }
  ASSERT_FALSE(w.is_null()) << "no prompt whose reply is its tokens' texts";
  const std::string full = w["choices"][0]["text"].get<std::string>();
  const Json& offsets = w["choices"][0]["logprobs"]["text_offset"];
  const Json& tokens = w["choices"][0]["logprobs"]["tokens"];
  ASSERT_GE(offsets.size(), 8u) << w.dump();
  int checked = 0;
  for (size_t from : {size_t{3}, size_t{6}}) {
    // Two whole tokens' texts: whole characters.
    const std::string stop = tokens[from].get<std::string>() + tokens[from + 1].get<std::string>();
    if (stop.empty()) continue;
    const size_t cut = full.find(stop);
    size_t kept = 0;
    while (kept < offsets.size() && offsets[kept].get<size_t>() < cut) ++kept;
    OrderedJson stop_json = stop;
    for (bool stream : {false, true}) {
      const std::string body = "{" + prompt + R"(, "stop": )" + stop_json.dump() +
                               R"(, "stream": )" + (stream ? "true" : "false") + "}";
      HttpReply r = Http(server.port(), "POST", "/v1/completions", body);
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text;
      size_t listed = 0;
      std::vector<Json> chunks = stream ? SseChunks(r.body) : std::vector<Json>{BodyJson(r)};
      for (const Json& c : chunks) {
        if (!c.is_object() || !c.contains("choices") || c["choices"].empty()) continue;
        text += c["choices"][0]["text"].get<std::string>();
        const Json& lp = c["choices"][0]["logprobs"];
        if (lp.is_object()) listed += lp["tokens"].size();
      }
      EXPECT_EQ(text, full.substr(0, cut)) << "stop " << stop_json.dump() << (stream ? " streamed" : "");
      EXPECT_EQ(listed, kept) << "stop " << stop_json.dump() << (stream ? " streamed" : "") << ": " << r.body;
    }
    ++checked;
  }
  // Chat's logprobs.content ends where its content does, too: a stop string of two whole tokens'
  // texts from the middle of a reply whose tokens' texts make up its content.
  bool chat_checked = false;
  for (const char* ask : {"cut me", "cut this", "a cut", "stop here", "one more"}) {
    const std::string chat = std::string(R"({"messages": [{"role": "user", "content": ")") + ask +
                             R"("}], "max_tokens": 14, "temperature": 0, "logprobs": true})";
    Json plain = BodyJson(Http(server.port(), "POST", "/v1/chat/completions", chat));
    const std::string content = plain["choices"][0]["message"]["content"].get<std::string>();
    const Json& listed = plain["choices"][0]["logprobs"]["content"];
    std::string joined;
    for (const Json& t : listed) joined += t["token"].get<std::string>();
    if (joined != content || listed.size() < 6) continue;
    const size_t mid = listed.size() / 2;
    OrderedJson chat_stop = listed[mid]["token"].get<std::string>() + listed[mid + 1]["token"].get<std::string>();
    if (chat_stop.get<std::string>().empty()) continue;
    std::string asked = chat.substr(0, chat.size() - 1) + R"(, "stop": )" + chat_stop.dump() + "}";
    Json cut_reply = BodyJson(Http(server.port(), "POST", "/v1/chat/completions", asked));
    const std::string shown = cut_reply["choices"][0]["message"]["content"].get<std::string>();
    std::string listed_text, last;
    for (const Json& t : cut_reply["choices"][0]["logprobs"]["content"]) {
      last = t["token"].get<std::string>();
      listed_text += last;
    }
    EXPECT_TRUE(listed_text.starts_with(shown)) << listed_text << " | " << shown;
    if (!shown.empty()) {
      EXPECT_LT(listed_text.size() - last.size(), shown.size())
          << "the last token listed starts before the cut: " << listed_text << " | " << shown;
    } else {
      EXPECT_TRUE(listed_text.empty()) << listed_text;
    }
    chat_checked = true;
    break;
  }
  EXPECT_TRUE(chat_checked) << "no chat reply whose tokens' texts make up its content";
  EXPECT_GT(checked, 0);
  EXPECT_EQ(server.Stop(), 0);
}

// The openai client's completions (plain and streamed, a text prompt and token ids) and logprobs
// (completions and chat, plain and streamed) on a CPU-program package: the first token's
// logprobs are the log-softmax of the logits the CPU program gives for the same ids, computed
// here; at temperature 0 the chosen token is the most likely one.
TEST(Serve, CompletionsAndLogprobsThroughTheOpenAiClient) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  TinyQwen2 p;
  const test::TempDir& dir = p.dir;
  const std::vector<int32_t> ids = {5, 17, 42, 99, 3, 64};
  // The CPU program's logits for the prompt, and their log-softmax in float64.
  std::vector<double> expected;
  {
    auto package = OpenPackage(dir.path());
    ASSERT_TRUE(package.ok()) << FormatErrors(package.errors());
    Session session = package->model.NewSession();
    TurnInput input;
    input.pieces.push_back(PromptPiece{TextPiece{ids}, ""});
    input.media.emplace_back();
    auto prefill = session.Prefill(input);
    ASSERT_TRUE(prefill.ok()) << FormatErrors(prefill.errors());
    double max = -INFINITY, sum = 0;
    for (float l : prefill->logits) max = std::max(max, static_cast<double>(l));
    for (float l : prefill->logits) sum += std::exp(l - max);
    for (float l : prefill->logits) expected.push_back(l - max - std::log(sum));
  }
  std::vector<double> sorted = expected;
  std::sort(sorted.rbegin(), sorted.rend());
  ServerProcess server(dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  std::string id_list;
  for (int32_t id : ids) id_list += (id_list.empty() ? "" : ",") + std::to_string(id);
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "completions", id_list});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const Json& text = (*doc)["text"];
  EXPECT_EQ(text["plain"]["text"], text["streamed"]["text"]);
  EXPECT_EQ(text["plain"]["finish"], text["streamed"]["finish"]);
  EXPECT_EQ(text["plain"]["usage"], text["streamed"]["usage"]);
  EXPECT_GT(text["plain"]["usage"]["completion_tokens"].get<int>(), 0);

  const Json& tokens = (*doc)["tokens"];
  const Json& lp = tokens["plain"]["logprobs"];
  EXPECT_EQ(tokens["plain"]["usage"]["prompt_tokens"], ids.size());
  ASSERT_EQ(lp["tokens"].size(), tokens["plain"]["usage"]["completion_tokens"].get<size_t>()) << r.out;
  ASSERT_GT(lp["tokens"].size(), 0u);
  EXPECT_EQ(tokens["plain"]["text"], tokens["streamed"]["text"]);
  EXPECT_EQ(lp, tokens["streamed"]["logprobs"]) << "streamed logprobs as the plain ones";
  // The first token: the most likely (greedy), its logprob and its top 5 the log-softmax's.
  const double first = lp["token_logprobs"][0].get<double>();
  EXPECT_NEAR(first, sorted[0], 1e-4);
  std::vector<double> top;
  for (const auto& [token, value] : lp["top_logprobs"][0].items()) top.push_back(value.get<double>());
  std::sort(top.rbegin(), top.rend());
  ASSERT_GE(top.size(), 1u);
  for (size_t k = 0; k < top.size(); ++k) EXPECT_NEAR(top[k], sorted[k], 1e-4) << "top " << k;
  for (size_t k = 0; k < lp["token_logprobs"].size(); ++k) {
    double best = -INFINITY;
    for (const auto& [token, value] : lp["top_logprobs"][k].items()) best = std::max(best, value.get<double>());
    EXPECT_DOUBLE_EQ(lp["token_logprobs"][k].get<double>(), best) << "token " << k;
    if (k > 0) {
      EXPECT_GE(lp["text_offset"][k].get<int64_t>(), lp["text_offset"][k - 1].get<int64_t>());
    }
  }

  const Json& chat = (*doc)["chat"];
  const Json& content = chat["plain"]["logprobs"];
  EXPECT_EQ(chat["plain"]["text"], chat["streamed"]["text"]);
  ASSERT_EQ(content.size(), chat["plain"]["usage"]["completion_tokens"].get<size_t>()) << r.out;
  EXPECT_EQ(content, chat["streamed"]["logprobs"]);
  for (const Json& entry : content) {
    ASSERT_EQ(entry["top_logprobs"].size(), 3u) << entry.dump();
    EXPECT_DOUBLE_EQ(entry["logprob"].get<double>(), entry["top_logprobs"][0]["logprob"].get<double>());
    EXPECT_EQ(entry["token"], entry["top_logprobs"][0]["token"]);
    EXPECT_GE(entry["top_logprobs"][0]["logprob"].get<double>(), entry["top_logprobs"][2]["logprob"].get<double>());
    EXPECT_LE(entry["logprob"].get<double>(), 0);
    EXPECT_TRUE(entry["bytes"].is_array());
  }
  EXPECT_EQ((*doc)["error"]["status"], 400);
  EXPECT_EQ((*doc)["error"]["param"], "/echo");
  EXPECT_EQ(server.Stop(), 0);
}

// Debian's chromium, or "" when it is not installed.
std::string Chromium() {
  for (const char* c : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (access(c, X_OK) == 0) return c;
  }
  return "";
}

// The chat page at / in a real headless Chromium: an image attached with the file input, a message
// sent, the reply streamed into the page; a screenshot shows it (the reply's box is not blank).
TEST(Serve, ChatPageAnswersAnImageInChromium) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/deps test installs it)";
  Package p;
  ServerProcess server(p.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  HttpReply page = Http(server.port(), "GET", "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("/v1/chat/completions"), std::string::npos);
  test::TempDir work;
  std::string image = work.Write("photo.bmp", test::BmpImage(40, 30));
  const std::string shot = work.File("page.png");
  auto r = test::RunProgram({"node", "--experimental-websocket", test::SourcePath("tests/support/chat_page.mjs"),
                             chromium, server.url(), image, shot, work.File("profile")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  EXPECT_EQ((*doc)["status"], "done") << r.out;
  EXPECT_NE((*doc)["reply"].get<std::string>(), "") << r.out;
  EXPECT_NE((*doc)["note"].get<std::string>().find("photo.bmp"), std::string::npos) << r.out;
  // The image counted in the prompt: more positions than the text alone.
  Json metrics = ScrapeMetrics(server.port());
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"), 1);
  EXPECT_GT(Sample(metrics, "mlc_manifest_prompt_tokens", "mlc_manifest_prompt_tokens_total"), 16);
  // The reply's box in the screenshot holds more than its background: the streamed text is drawn.
  const Json& box = (*doc)["box"];
  auto pixels = test::RunProgram(
      {"/usr/bin/python3", "-c",
       "import sys\nfrom PIL import Image\nim = Image.open(sys.argv[1]).convert('RGB')\n"
       "box = tuple(int(v) for v in sys.argv[2:6])\nregion = im.crop(box)\n"
       "colors = region.getcolors(1 << 20) or []\n"
       "bg = max(colors)[1] if colors else None\n"
       "ink = sum(n for n, c in colors if sum(abs(a - b) for a, b in zip(c, bg)) > 150)\n"
       "print(im.size[0], im.size[1], len(colors), ink)\n",
       shot, std::to_string(box[0].get<int>()), std::to_string(box[1].get<int>()),
       std::to_string(box[2].get<int>()), std::to_string(box[3].get<int>())});
  ASSERT_EQ(pixels.exit_code, 0) << pixels.err;
  int width = 0, height = 0, colors = 0, ink = 0;
  std::istringstream(pixels.out) >> width >> height >> colors >> ink;
  EXPECT_GT(width, 0);
  EXPECT_GT(colors, 2) << pixels.out;
  EXPECT_GT(ink, 20) << "dark pixels of text in the reply's box: " << pixels.out;
  EXPECT_EQ(server.Stop(), 0);
}

// A server with an API key: the chat page (open itself) asks for the key when the server answers
// 401, and sends it with the models list and the streamed chat.
TEST(Serve, ChatPageAsksForTheApiKeyInChromium) {
  const std::string chromium = Chromium();
  if (chromium.empty()) GTEST_SKIP() << "chromium is not installed (scripts/deps test installs it)";
  Package p;
  ServerProcess server(p.dir.path(), {"--api-key", "sk-page"});
  ASSERT_GT(server.port(), 0) << server.log();
  test::TempDir work;
  std::string image = work.Write("photo.bmp", test::BmpImage(40, 30));
  auto r = test::RunProgram({"node", "--experimental-websocket", test::SourcePath("tests/support/chat_page.mjs"),
                             chromium, server.url(), image, work.File("page.png"), work.File("profile"), "sk-page"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  EXPECT_EQ((*doc)["asked"], true) << r.out;
  EXPECT_NE((*doc)["model"].get<std::string>(), "") << r.out;
  EXPECT_EQ((*doc)["status"], "done") << r.out;
  EXPECT_NE((*doc)["reply"].get<std::string>(), "") << r.out;
  Json metrics = ScrapeMetrics(server.port());
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"), 1);
  EXPECT_GE(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "unauthorized"), 1);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(Serve, LoadThirtyTwoStreamingClients) {
  if (kSanitized) GTEST_SKIP() << "the 30 s load test runs in the release build only";
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  Package p;
  ServerProcess server(p.dir.path(), {"--max-batch-size", "16"});
  ASSERT_GT(server.port(), 0) << server.log();
  ASSERT_EQ(Http(server.port(), "GET", "/health").status, 200);
  const int64_t rss_before = server.RssKb();
  const char* seconds = std::getenv("MLC_LOAD_SECONDS");
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "load", "32", seconds ? seconds : "30"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const int64_t rss_after = server.RssKb();
  std::cout << "load: " << r.out << "rss before " << rss_before << " kB, after " << rss_after << " kB\n";
  EXPECT_EQ((*doc)["failed"], 0) << r.out;
  EXPECT_EQ((*doc)["mismatched"], 0) << r.out;
  EXPECT_GT((*doc)["ok"].get<int>(), 32);
  // Bounded memory: the KV cache is allocated up front; load must not grow the process much.
  EXPECT_LT(rss_after - rss_before, 64 * 1024) << "kB";
  // Every stream counted in the metrics, none as failed.
  Json metrics = ScrapeMetrics(server.port());
  EXPECT_GE(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"),
            (*doc)["ok"].get<double>());
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "error"), 0);
  EXPECT_EQ(server.Stop(), 0);
}

// The same load with two packages loaded side by side (each with its own engine): clients go to
// both in turn, every stream compared with that model's reply alone.
TEST(Serve, LoadThirtyTwoStreamingClientsOverTwoModels) {
  if (kSanitized) GTEST_SKIP() << "the 30 s load test runs in the release build only";
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  Package a(3), b(7);
  ServerProcess server(std::vector<std::string>{},
                       {"--model", "alpha=" + a.dir.path(), "--model", "beta=" + b.dir.path(),
                        "--max-batch-size", "16"});
  ASSERT_GT(server.port(), 0) << server.log();
  const char* seconds = std::getenv("MLC_LOAD_SECONDS");
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "load", "32", seconds ? seconds : "30", "alpha,beta"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  std::cout << "load over two models: " << r.out;
  EXPECT_EQ((*doc)["failed"], 0) << r.out;
  EXPECT_EQ((*doc)["mismatched"], 0) << r.out;
  EXPECT_GT((*doc)["ok"].get<int>(), 32);
  Json metrics = ScrapeMetrics(server.port());
  EXPECT_GE(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"),
            (*doc)["ok"].get<double>());
  for (const char* model : {"alpha", "beta"}) {
    EXPECT_GT(Sample(metrics, "mlc_manifest_generation_tokens", "mlc_manifest_generation_tokens_total", "model", model), 0)
        << model;
  }
  EXPECT_EQ(server.Stop(), 0);
}

// Stop strings never cut a structured reply: with stop strings that occur in every JSON value of
// the schema (a quote, a brace, a colon), each reply is the whole value, parses and ends "stop".
TEST(Serve, StopStringsNeverCutAStructuredReply) {
  Package p;
  ServerProcess server(p.dir.path(), {"--json-max-string-length", "8"});
  ASSERT_GT(server.port(), 0) << server.log();
  int stopped = 0;
  for (int seed = 0; seed < 8; ++seed) {
    const std::string body = R"({"messages": [{"role": "user", "content": "give me a record"}],
        "max_tokens": 200, "temperature": 1, "seed": )" + std::to_string(seed) + R"(,
        "stop": ["\"", "}", ":", "</s>"],
        "response_format": {"type": "json_schema", "json_schema": {"name": "r", "schema": {
          "type": "object", "additionalProperties": false, "required": ["tag", "n"],
          "properties": {"tag": {"type": "string"}, "n": {"type": "integer"}}}}}})";
    HttpReply r = Http(server.port(), "POST", "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const Json reply = BodyJson(r);
    const std::string content = reply["choices"][0]["message"]["content"].get<std::string>();
    if (reply["choices"][0]["finish_reason"] != "stop") continue;  // "length": ran out of tokens
    ++stopped;
    auto value = ParseJson(content);
    ASSERT_TRUE(value.ok()) << "seed " << seed << ": " << content;
    EXPECT_TRUE((*value)["tag"].is_string() && (*value)["n"].is_number()) << content;  // digits past int64 read as a double
  }
  EXPECT_GT(stopped, 0);
  EXPECT_EQ(server.Stop(), 0);
}

// Structured output (response_format): 100 replies sampled at temperature 1 (seeds 0..99, four
// requests at a time so they share batches) per format all parse and validate with an
// independent validator (python3-jsonschema); the openai client's json_schema request parses,
// streamed and not; a keyword outside the subset is a 400 naming it.
TEST(Serve, StructuredOutputAlwaysValidates) {
  Package p;
  ServerProcess server(p.dir.path(), {"--max-batch-size", "4", "--json-max-string-length", "12"});
  ASSERT_GT(server.port(), 0) << server.log();
  test::TempDir dir;
  const std::vector<std::string> formats = {
      R"({"type": "json_object"})",
      R"({"type": "json_schema", "json_schema": {"name": "record", "strict": true, "schema": {
          "type": "object", "additionalProperties": false,
          "properties": {"name": {"type": "string"}, "count": {"type": "integer"},
                         "color": {"enum": ["red", "green", "blue"]},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}},
          "required": ["name", "count", "color", "tags"]}}})",
      R"({"type": "json_schema", "json_schema": {"name": "nested", "schema": {
          "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                              "required": ["x", "y"], "additionalProperties": false}},
          "type": "object", "additionalProperties": false,
          "properties": {"shape": {"type": "object", "additionalProperties": false,
                                   "properties": {"kind": {"const": "polygon"},
                                                  "points": {"type": "array", "items": {"$ref": "#/$defs/point"},
                                                             "minItems": 1, "maxItems": 3},
                                                  "closed": {"type": "boolean"},
                                                  "label": {"type": ["string", "null"]}},
                                   "required": ["kind", "points", "closed", "label"]},
                         "note": {"type": "string"}},
          "required": ["shape"]}}})"};
  for (size_t i = 0; i < formats.size(); ++i) {
    std::string file = dir.Write("format" + std::to_string(i) + ".json", formats[i]);
    auto r = test::RunProgram({"/usr/bin/python3", test::SourcePath("tests/support/json_replies.py"),
                               server.url(), file, "100", "4", "1000"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    auto doc = ParseJson(r.out);
    ASSERT_TRUE(doc.ok()) << r.out;
    std::cout << "format " << i << ": " << r.out;
    EXPECT_EQ((*doc)["ok"], 100) << r.out;
  }

  // The official client, streamed and not.
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_json_client.mjs"), openai,
                             server.url()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  for (const char* how : {"plain", "streamed"}) {
    const Json& reply = (*doc)[how];
    EXPECT_EQ(reply["finish"], "stop") << r.out;
    auto person = ParseJson(reply["content"].get<std::string>());
    ASSERT_TRUE(person.ok()) << r.out;
    EXPECT_TRUE((*person)["name"].is_string()) << r.out;
    EXPECT_TRUE((*person)["age"].is_number_integer()) << r.out;
    EXPECT_TRUE((*person)["role"] == "admin" || (*person)["role"] == "user") << r.out;
  }
  EXPECT_EQ((*doc)["plain"]["content"], (*doc)["streamed"]["content"]);  // same seed, same reply

  // max_tokens cuts a reply, as OpenAI does: finish_reason "length".
  auto ask = [&](const std::string& format, int max_tokens) {
    return Http(server.port(), "POST", "/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": )" +
                    std::to_string(max_tokens) + R"(, "response_format": )" + format + "}");
  };
  HttpReply cut = ask(formats[1], 3);
  ASSERT_EQ(cut.status, 200) << cut.body;
  EXPECT_EQ(BodyJson(cut)["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(BodyJson(cut)["usage"]["completion_tokens"], 3);
  HttpReply text = ask(R"({"type": "text"})", 4);
  EXPECT_EQ(text.status, 200) << text.body;

  // Outside the subset: 400 naming the keyword and where it is.
  HttpReply minimum = ask(R"({"type": "json_schema", "json_schema": {"name": "n", "schema": {
      "type": "object", "properties": {"age": {"type": "string", "not": {"const": "0"}}}}}})", 8);
  EXPECT_EQ(minimum.status, 400);
  EXPECT_EQ(BodyJson(minimum)["error"]["param"], "/response_format/json_schema/schema/properties/age/not");
  EXPECT_NE(ErrorMessage(minimum).find("\"not\" at /properties/age/not"), std::string::npos)
      << minimum.body;
  for (const char* bad : {R"({"type": "yaml"})", R"({"type": "json_schema"})", R"("json")",
                          R"({"type": "json_schema", "json_schema": {"schema": {}}})"}) {
    HttpReply r400 = ask(bad, 8);
    EXPECT_EQ(r400.status, 400) << bad;
    EXPECT_NE(ErrorMessage(r400), "") << bad;
  }
  EXPECT_EQ(server.Stop(), 0);
}

// The bytes of a /tokenize piece: its text, or the list of its byte values.
std::string PieceBytes(const Json& piece) {
  if (piece.is_string()) return piece.get<std::string>();
  std::string out;
  for (const Json& b : piece) {
    EXPECT_TRUE(b.is_number_integer() && b.get<int>() >= 0 && b.get<int>() <= 255) << b.dump();
    out.push_back(static_cast<char>(b.get<int>()));
  }
  return out;
}

// POST /tokenize and /detokenize in llama-server's shapes, against the package's own tokenizer
// and template opened in this process: ids, add_special (the template's prefix ids), pieces as
// text or bytes, round trips, and every bad id or field a 400 at its JSON Pointer.
TEST(Serve, TokenizeAndDetokenizeAsTheLibraryDoes) {
  Package p;
  OpenOptions open;
  open.chat = true;
  auto package = OpenPackage(p.dir.path(), open);
  ASSERT_TRUE(package.ok()) << FormatErrors(package.errors());
  const Tokenizer& tokenizer = *package->tokenizer;
  ASSERT_TRUE(package->tmpl && package->tmpl->system_prefix_token_ids);
  const std::vector<int32_t> prefix = *package->tmpl->system_prefix_token_ids;
  ASSERT_FALSE(prefix.empty());
  ServerProcess server(p.dir.path(), {"--max-body-bytes", "64KiB"});
  ASSERT_GT(server.port(), 0) << server.log();

  const std::vector<std::string> texts = {"Hello world", "h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xe2\x9c\x93!",
                                          "  spaces\tand\nlines  ", "", "<s>user: hi</s>"};
  bool saw_bytes = false;
  for (const std::string& text : texts) {
    const std::vector<int32_t> expected = tokenizer.Encode(text);
    HttpReply plain = Http(server.port(), "POST", "/tokenize", OrderedJson({{"content", text}}).dump());
    ASSERT_EQ(plain.status, 200) << plain.body;
    EXPECT_EQ(BodyJson(plain)["tokens"].get<std::vector<int32_t>>(), expected) << text;

    std::vector<int32_t> special = prefix;
    special.insert(special.end(), expected.begin(), expected.end());
    HttpReply with_special = Http(server.port(), "POST", "/tokenize",
                                  OrderedJson({{"content", text}, {"add_special", true}}).dump());
    ASSERT_EQ(with_special.status, 200) << with_special.body;
    EXPECT_EQ(BodyJson(with_special)["tokens"].get<std::vector<int32_t>>(), special) << text;

    // Pieces: the same ids; together their bytes are the text (a byte-level vocabulary).
    HttpReply pieces = Http(server.port(), "POST", "/tokenize",
                            OrderedJson({{"content", text}, {"with_pieces", true}}).dump());
    ASSERT_EQ(pieces.status, 200) << pieces.body;
    const Json piece_reply = BodyJson(pieces);
    const Json& list = piece_reply["tokens"];
    ASSERT_EQ(list.size(), expected.size()) << pieces.body;
    std::string joined;
    for (size_t i = 0; i < list.size(); ++i) {
      EXPECT_EQ(list[i]["id"].get<int32_t>(), expected[i]);
      const Json& piece = list[i]["piece"];
      ASSERT_TRUE(piece.is_string() || piece.is_array()) << pieces.body;
      if (piece.is_array()) saw_bytes = true;
      // A piece is bytes only when they are not UTF-8 alone; text pieces are what the token decodes to.
      if (piece.is_string()) {
        EXPECT_EQ(piece.get<std::string>(), tokenizer.Decode(std::vector<int32_t>{expected[i]})) << pieces.body;
      }
      joined += PieceBytes(piece);
    }
    EXPECT_EQ(joined, text);

    // And back: the ids decode to the text, as the library decodes them.
    HttpReply back = Http(server.port(), "POST", "/detokenize", OrderedJson({{"tokens", expected}}).dump());
    ASSERT_EQ(back.status, 200) << back.body;
    EXPECT_EQ(BodyJson(back)["content"], tokenizer.Decode(expected));
    EXPECT_EQ(BodyJson(back)["content"], text);
    HttpReply back_special = Http(server.port(), "POST", "/detokenize", OrderedJson({{"tokens", special}}).dump());
    ASSERT_EQ(back_special.status, 200) << back_special.body;
    EXPECT_EQ(BodyJson(back_special)["content"], tokenizer.Decode(special));
  }
  EXPECT_TRUE(saw_bytes) << "a piece of a character is a list of bytes";

  // The prefix ids' pieces are their token text.
  HttpReply bos = Http(server.port(), "POST", "/tokenize",
                       R"({"content": "a", "add_special": true, "with_pieces": true})");
  ASSERT_EQ(bos.status, 200) << bos.body;
  EXPECT_EQ(BodyJson(bos)["tokens"][0]["piece"], tokenizer.Decode(std::vector<int32_t>{prefix[0]}));

  // Every id is checked against the vocabulary; the error names the first bad one's place.
  const int64_t vocab = static_cast<int64_t>(tokenizer.VocabSize());
  HttpReply last = Http(server.port(), "POST", "/detokenize", "{\"tokens\": [" + std::to_string(vocab - 1) + "]}");
  EXPECT_EQ(last.status, 200) << last.body;
  struct Bad {
    std::string body;
    std::string param;
  };
  const std::vector<Bad> bad = {
      {"{\"tokens\": [1, 2, 3, " + std::to_string(vocab) + "]}", "/tokens/3"},
      {"{\"tokens\": [1, -1]}", "/tokens/1"},
      {"{\"tokens\": [4294967297]}", "/tokens/0"},
      {"{\"tokens\": [1, 2.5]}", "/tokens/1"},
      {"{\"tokens\": [\"7\"]}", "/tokens/0"},
      {"{\"tokens\": 7}", "/tokens"},
      {"{}", "/tokens"},
  };
  for (const Bad& b : bad) {
    HttpReply r = Http(server.port(), "POST", "/detokenize", b.body);
    EXPECT_EQ(r.status, 400) << b.body << " -> " << r.body;
    EXPECT_EQ(BodyJson(r)["error"]["param"], b.param) << b.body << " -> " << r.body;
    EXPECT_EQ(BodyJson(r)["error"]["type"], "invalid_request_error") << r.body;
  }
  HttpReply vocab_message = Http(server.port(), "POST", "/detokenize", bad[0].body);
  EXPECT_NE(ErrorMessage(vocab_message).find("vocabulary"), std::string::npos) << vocab_message.body;
  const std::vector<Bad> bad_tokenize = {
      {R"({"content": 5})", "/content"},
      {R"({})", "/content"},
      {R"({"content": "a", "with_pieces": "yes"})", "/with_pieces"},
      {R"({"content": "a", "add_special": 1})", "/add_special"},
  };
  for (const Bad& b : bad_tokenize) {
    HttpReply r = Http(server.port(), "POST", "/tokenize", b.body);
    EXPECT_EQ(r.status, 400) << b.body << " -> " << r.body;
    EXPECT_EQ(BodyJson(r)["error"]["param"], b.param) << b.body << " -> " << r.body;
  }
  EXPECT_EQ(Http(server.port(), "POST", "/tokenize", "{\"content\": ").status, 400);
  // Sizes: the body limit refuses a large text or id list before any of it is read.
  const std::string big_text = OrderedJson({{"content", std::string(70000, 'a')}}).dump();
  EXPECT_EQ(Http(server.port(), "POST", "/tokenize", big_text).status, 413);
  std::string big_ids = "{\"tokens\": [1";
  while (big_ids.size() < 70000) big_ids += ",1";
  EXPECT_EQ(Http(server.port(), "POST", "/detokenize", big_ids + "]}").status, 413);
  EXPECT_EQ(server.Stop(), 0);
}

// --api-key / --api-key-file: every /v1/* route and /tokenize, /detokenize need "Authorization:
// Bearer KEY" (401 in OpenAI's shape with WWW-Authenticate otherwise), /health, /metrics and the
// chat page stay open, 401s are counted; with --metrics-need-key /metrics needs the key too.
TEST(Serve, ApiKeysGuardTheApi) {
  Package p;
  test::TempDir keys;
  const std::string file = keys.Write("keys.txt", "# the team's keys\n\nsk-from-file\n  sk-second  \n");
  ServerProcess server(p.dir.path(), {"--api-key", "sk-from-flag", "--api-key-file", file});
  ASSERT_GT(server.port(), 0) << server.log();
  const int port = server.port();
  auto bearer = [](const std::string& key) { return "Authorization: Bearer " + key + "\r\n"; };
  int refused = 0;
  auto expect_401 = [&](const HttpReply& r, const std::string& what) {
    ++refused;
    EXPECT_EQ(r.status, 401) << what << ": " << r.head << r.body;
    EXPECT_NE(r.head.find("\r\nWWW-Authenticate: Bearer\r\n"), std::string::npos) << what << ": " << r.head;
    const Json body = BodyJson(r);
    EXPECT_EQ(body["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(body["error"]["code"], "invalid_api_key") << r.body;
    EXPECT_TRUE(body["error"]["message"].is_string()) << r.body;
  };
  // Open without a key.
  EXPECT_EQ(Http(port, "GET", "/health").status, 200);
  EXPECT_EQ(Http(port, "GET", "/metrics").status, 200);
  HttpReply page = Http(port, "GET", "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("Authorization"), std::string::npos) << "the chat page sends the key";

  const std::string chat = Chat("hello", 3);
  const std::string tokenize = R"({"content": "hi"})";
  expect_401(Http(port, "GET", "/v1/models"), "models without a key");
  expect_401(Http(port, "POST", "/v1/chat/completions", chat), "chat without a key");
  expect_401(Http(port, "POST", "/v1/completions", R"({"prompt": "x"})"), "completions without a key");
  expect_401(Http(port, "POST", "/tokenize", tokenize), "tokenize without a key");
  expect_401(Http(port, "POST", "/detokenize", R"({"tokens": [1]})"), "detokenize without a key");
  expect_401(Http(port, "GET", "/v1/nothing"), "an unknown route without a key");
  expect_401(Http(port, "GET", "/v1/models", "", bearer("sk-from-fla")), "a key's prefix");
  expect_401(Http(port, "GET", "/v1/models", "", bearer("sk-from-flagg")), "a key extended");
  expect_401(Http(port, "GET", "/v1/models", "", bearer("# the team's keys")), "a comment of the file");
  expect_401(Http(port, "GET", "/v1/models", "", "Authorization: Basic sk-from-flag\r\n"), "another scheme");
  expect_401(Http(port, "GET", "/v1/models", "", "Authorization: sk-from-flag\r\n"), "no scheme");
  expect_401(Http(port, "POST", "/v1/chat/completions", chat, bearer("wrong")), "chat with a wrong key");

  for (const char* key : {"sk-from-flag", "sk-from-file", "sk-second"}) {
    HttpReply models = Http(port, "GET", "/v1/models", "", bearer(key));
    EXPECT_EQ(models.status, 200) << key << ": " << models.body;
  }
  HttpReply lower = Http(port, "GET", "/v1/models", "", "authorization: bearer sk-second\r\n");
  EXPECT_EQ(lower.status, 200) << lower.body;
  HttpReply ok = Http(port, "POST", "/v1/chat/completions", chat, bearer("sk-from-file"));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(BodyJson(ok)["object"], "chat.completion");
  HttpReply tokens = Http(port, "POST", "/tokenize", tokenize, bearer("sk-from-flag"));
  EXPECT_EQ(tokens.status, 200) << tokens.body;
  HttpReply text = Http(port, "POST", "/detokenize", BodyJson(tokens).dump(), bearer("sk-from-flag"));
  EXPECT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(BodyJson(text)["content"], "hi");

  // The official client: apiKey sent as a Bearer header; a wrong one is its AuthenticationError.
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai, server.url(),
                             "apikey", "sk-second"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  EXPECT_EQ((*doc)["models"].size(), 1u) << r.out;
  EXPECT_GT((*doc)["usage"]["completion_tokens"].get<int>(), 0) << r.out;
  for (const char* which : {"wrong", "empty"}) {
    const Json& e = (*doc)[which];
    EXPECT_EQ(e["status"], 401) << which << ": " << r.out;
    EXPECT_EQ(e["code"], "invalid_api_key") << which << ": " << r.out;
    EXPECT_EQ(e["authentication_error"], true) << which << ": " << r.out;
    EXPECT_EQ(e["www_authenticate"], "Bearer") << which << ": " << r.out;
    ++refused;
  }

  // Every 401 counted, and nothing else counted for them.
  Json metrics = ScrapeMetrics(port);
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "unauthorized"),
            refused);
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "invalid"), 0);
  EXPECT_EQ(Sample(metrics, "mlc_manifest_requests", "mlc_manifest_requests_total", "outcome", "completed"), 2);
  EXPECT_EQ(server.Stop(), 0);

  // --metrics-need-key: /metrics closed too, /health still open.
  ServerProcess closed(p.dir.path(), {"--api-key", "sk-metrics", "--metrics-need-key"});
  ASSERT_GT(closed.port(), 0) << closed.log();
  EXPECT_EQ(Http(closed.port(), "GET", "/health").status, 200);
  expect_401(Http(closed.port(), "GET", "/metrics"), "metrics without a key");
  HttpReply scrape = Http(closed.port(), "GET", "/metrics", "", bearer("sk-metrics"));
  EXPECT_EQ(scrape.status, 200);
  EXPECT_NE(scrape.body.find("mlc_manifest_requests_total{outcome=\"unauthorized\"} 1"), std::string::npos)
      << scrape.body;
  EXPECT_EQ(closed.Stop(), 0);
}

// Keys that cannot be used stop `serve` before it loads anything: an unreadable key file (exit 3),
// one without a key or with a line that is not one (exit 1, naming the line), a bad --api-key or
// --metrics-need-key without keys (exit 2).
TEST(Serve, ApiKeyFileErrorsStopTheStart) {
  Package p;
  test::TempDir keys;
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = {"serve", p.dir.path(), "--port", "0"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::RunCli(args);
  };
  auto missing = run({"--api-key-file", keys.File("absent.txt")});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  EXPECT_NE(missing.err.find("absent.txt"), std::string::npos) << missing.err;
  auto empty = run({"--api-key-file", keys.Write("empty.txt", "# no keys yet\n\n")});
  EXPECT_EQ(empty.exit_code, 1) << empty.out << empty.err;
  EXPECT_NE(empty.err.find("no API key"), std::string::npos) << empty.err;
  auto spaced = run({"--api-key-file", keys.Write("spaced.txt", "sk-good\nsk bad\n"), "--json"});
  EXPECT_EQ(spaced.exit_code, 1) << spaced.out << spaced.err;
  EXPECT_NE(spaced.out.find("line 2"), std::string::npos) << spaced.out;
  auto bad_flag = run({"--api-key", "two words"});
  EXPECT_EQ(bad_flag.exit_code, 2) << bad_flag.out << bad_flag.err;
  auto metrics_alone = run({"--metrics-need-key"});
  EXPECT_EQ(metrics_alone.exit_code, 2) << metrics_alone.out << metrics_alone.err;
}

}  // namespace
}  // namespace mlc

namespace mlc {
namespace {

// A greedy chat completion naming `model`.
std::string ChatFor(const std::string& model, const std::string& text, int max_tokens) {
  return OrderedJson({{"model", model},
                      {"messages", OrderedJson::array({{{"role", "user"}, {"content", text}}})},
                      {"max_tokens", max_tokens},
                      {"temperature", 0}})
      .dump();
}

std::string CompletionFor(const std::string& model, const std::string& prompt, int max_tokens) {
  return OrderedJson({{"model", model}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0}}).dump();
}

// The content of a chat completion's or a completion's answer.
std::string ReplyText(const HttpReply& r) {
  Json j = BodyJson(r);
  if (!j.contains("choices")) return "<no reply: " + r.body + ">";
  const Json& c = j["choices"][0];
  return c.contains("message") ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
}

// Two packages with different weights served side by side: each request answered by the model it
// names, exactly as a server of that package alone answers it; an unknown name is a 404 and no
// name a 400, both listing the names; /v1/models lists both with their inputs, also through the
// openai client; /tokenize routes too; the metrics label each model's series.
TEST(Serve, SeveralModelsAnswerFromTheirOwnWeights) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  Package a(3), b(7, /*media=*/false);
  const std::vector<std::string> prompts = {"Hello there", "Tell me a story about a river"};
  // The replies of each package served alone (any model name is taken there).
  std::vector<std::string> alone_chat[2], alone_text[2];
  for (int k = 0; k < 2; ++k) {
    ServerProcess single((k ? b : a).dir.path());
    ASSERT_GT(single.port(), 0) << single.log();
    for (const std::string& p : prompts) {
      HttpReply chat = Http(single.port(), "POST", "/v1/chat/completions", ChatFor("anything", p, 12));
      ASSERT_EQ(chat.status, 200) << chat.body;
      alone_chat[k].push_back(ReplyText(chat));
      HttpReply text = Http(single.port(), "POST", "/v1/completions", CompletionFor("anything", p, 12));
      ASSERT_EQ(text.status, 200) << text.body;
      alone_text[k].push_back(ReplyText(text));
    }
    EXPECT_EQ(single.Stop(), 0);
  }
  // Different weights answer differently, so the comparisons below tell the models apart.
  EXPECT_NE(alone_chat[0], alone_chat[1]);

  ServerProcess server(std::vector<std::string>{},
                       {"--model", "alpha=" + a.dir.path(), "--model", "beta=" + b.dir.path()});
  ASSERT_GT(server.port(), 0) << server.log();
  const char* names[] = {"alpha", "beta"};
  for (int k = 0; k < 2; ++k) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      HttpReply chat = Http(server.port(), "POST", "/v1/chat/completions", ChatFor(names[k], prompts[i], 12));
      ASSERT_EQ(chat.status, 200) << chat.body;
      EXPECT_EQ(ReplyText(chat), alone_chat[k][i]) << names[k] << " " << prompts[i];
      EXPECT_EQ(BodyJson(chat)["model"], names[k]);
      HttpReply text = Http(server.port(), "POST", "/v1/completions", CompletionFor(names[k], prompts[i], 12));
      ASSERT_EQ(text.status, 200) << text.body;
      EXPECT_EQ(ReplyText(text), alone_text[k][i]) << names[k] << " " << prompts[i];
    }
  }
  // A name not served: 404 in OpenAI's shape, listing the names; on every routed route.
  for (const char* route : {"/v1/chat/completions", "/v1/completions", "/tokenize", "/detokenize"}) {
    OrderedJson body = {{"model", "gamma"}, {"messages", OrderedJson::array({{{"role", "user"}, {"content", "hi"}}})},
                        {"prompt", "hi"}, {"content", "hi"}, {"tokens", OrderedJson::array({1})}};
    HttpReply unknown = Http(server.port(), "POST", route, body.dump());
    EXPECT_EQ(unknown.status, 404) << route << unknown.body;
    Json error = BodyJson(unknown)["error"];
    EXPECT_EQ(error["code"], "model_not_found") << route;
    EXPECT_EQ(error["type"], "invalid_request_error") << route;
    EXPECT_EQ(error["param"], "/model") << route;
    EXPECT_NE(error["message"].get<std::string>().find("available: alpha, beta"), std::string::npos) << unknown.body;
    body.erase("model");
    HttpReply missing = Http(server.port(), "POST", route, body.dump());
    EXPECT_EQ(missing.status, 400) << route << missing.body;
    EXPECT_EQ(BodyJson(missing)["error"]["param"], "/model") << route;
    EXPECT_NE(ErrorMessage(missing).find("alpha, beta"), std::string::npos) << missing.body;
  }
  // /tokenize and /detokenize answer with the named model's tokenizer.
  HttpReply tokens = Http(server.port(), "POST", "/tokenize", R"({"model": "beta", "content": "Hello"})");
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  OrderedJson detokenize = {{"model", "beta"}, {"tokens", BodyJson(tokens)["tokens"]}};
  HttpReply text = Http(server.port(), "POST", "/detokenize", detokenize.dump());
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(BodyJson(text)["content"], "Hello");
  // /v1/models: both, with their inputs; /v1/models/NAME.
  Json models = BodyJson(Http(server.port(), "GET", "/v1/models"));
  EXPECT_EQ(models["object"], "list");
  ASSERT_EQ(models["data"].size(), 2u) << models.dump();
  EXPECT_EQ(models["data"][0]["id"], "alpha");
  EXPECT_EQ(models["data"][0]["object"], "model");
  EXPECT_EQ(models["data"][0]["inputs"], Json::array({"text", "audio", "image"}));
  EXPECT_EQ(models["data"][1]["id"], "beta");
  EXPECT_EQ(models["data"][1]["inputs"], Json::array({"text"}));
  HttpReply one = Http(server.port(), "GET", "/v1/models/beta");
  EXPECT_EQ(one.status, 200);
  EXPECT_EQ(BodyJson(one)["id"], "beta");
  EXPECT_EQ(Http(server.port(), "GET", "/v1/models/gamma").status, 404);
  // The official client: models.list() and a chat per model, each its own package's reply.
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai,
                             server.url(), "models"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  ASSERT_EQ((*doc)["models"].size(), 2u) << r.out;
  EXPECT_EQ((*doc)["models"][0]["inputs"], Json::array({"text", "audio", "image"}));
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ((*doc)["replies"][names[k]]["content"], alone_chat[k][0]) << names[k];
    EXPECT_EQ((*doc)["replies"][names[k]]["model"], names[k]);
  }
  EXPECT_EQ((*doc)["missing"]["status"], 404) << r.out;
  EXPECT_EQ((*doc)["missing"]["code"], "model_not_found") << r.out;
  EXPECT_EQ((*doc)["missing"]["name"], "NotFoundError") << r.out;
  // One health answer; each model's series labelled.
  HttpReply health = Http(server.port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(BodyJson(health)["status"], "ok");
  Json metrics = ScrapeMetrics(server.port());
  for (const char* model : names) {
    EXPECT_GT(Sample(metrics, "mlc_manifest_prompt_tokens", "mlc_manifest_prompt_tokens_total", "model", model), 0)
        << model;
    EXPECT_EQ(Sample(metrics, "mlc_manifest_running_sequences", "mlc_manifest_running_sequences", "model", model), 0)
        << model;
  }
  EXPECT_EQ(server.Stop(), 0);
}

// Folders given alone are named by their base names; two alike stop the start, naming both
// folders, as does a --model without NAME=DIR.
TEST(Serve, SeveralModelsNamedByTheirFolders) {
  test::TempDir root;
  for (const char* dir : {"one/ref", "two/ref", "one/other"}) {
    ReferenceModelOptions o;
    o.seed = 3;
    auto w = WriteReferenceModel(root.File(dir), o);
    ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
  }
  auto clash = test::RunProgram({MLC_CLI_PATH, "serve", root.File("one/ref"), root.File("two/ref"), "--port", "0"});
  EXPECT_NE(clash.exit_code, 0);
  EXPECT_NE(clash.err.find(root.File("one/ref")), std::string::npos) << clash.err;
  EXPECT_NE(clash.err.find(root.File("two/ref")), std::string::npos) << clash.err;
  auto named_clash = test::RunProgram({MLC_CLI_PATH, "serve", root.File("one/ref"), "--model",
                                       "ref=" + root.File("one/other"), "--port", "0"});
  EXPECT_NE(named_clash.exit_code, 0);
  EXPECT_NE(named_clash.err.find(root.File("one/other")), std::string::npos) << named_clash.err;
  auto bad = test::RunProgram({MLC_CLI_PATH, "serve", "--model", "nameless", "--port", "0"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;

  // A name is matched exactly, also where it holds characters a pattern would take as special.
  ServerProcess server(std::vector<std::string>{root.File("one/ref"), root.File("two/ref") + "/../../one/other/"},
                       {"--model", "(v2.5)=" + root.File("one/ref")});
  ASSERT_GT(server.port(), 0) << server.log();
  Json models = BodyJson(Http(server.port(), "GET", "/v1/models"));
  ASSERT_EQ(models["data"].size(), 3u) << models.dump();
  EXPECT_EQ(models["data"][0]["id"], "ref");
  EXPECT_EQ(models["data"][1]["id"], "other");
  EXPECT_EQ(models["data"][2]["id"], "(v2.5)");
  EXPECT_EQ(Http(server.port(), "POST", "/v1/chat/completions", ChatFor("other", "hi", 3)).status, 200);
  EXPECT_EQ(Http(server.port(), "POST", "/v1/chat/completions", ChatFor("(v2.5)", "hi", 3)).status, 200);
  EXPECT_EQ(Http(server.port(), "POST", "/v1/chat/completions", ChatFor("(v2x5)", "hi", 3)).status, 404);
  EXPECT_EQ(Http(server.port(), "GET", "/v1/models/(v2.5)").status, 200);
  EXPECT_EQ(Http(server.port(), "GET", "/v1/models/(v2x5)").status, 404);
  EXPECT_EQ(server.Stop(), 0);
}

}  // namespace
}  // namespace mlc
