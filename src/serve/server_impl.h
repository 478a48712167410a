// The server's parts shared by its files (src/serve/): the state of a running server
// (Server::Impl), the channel that carries a request's events from the engine to the HTTP thread,
// and the OpenAI wire helpers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mlc_manifest/chat.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/serve.h"
#include "serve/http_backend.h"

namespace mlc {

namespace serve {  // the server files' own parts

using Clock = std::chrono::steady_clock;

// Events of one request, from the engine's thread to the HTTP thread answering it. The engine
// may still send events after the client went away and the HTTP side let go of the channel
// (a cancel takes effect between steps), so the sink holds its own reference.
struct Channel : std::enable_shared_from_this<Channel> {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<StreamEvent> events;

  StreamSink Sink() {
    return [self = shared_from_this()](const StreamEvent& e) {
      std::lock_guard<std::mutex> lock(self->mu);
      self->events.push_back(e);
      self->cv.notify_all();
    };
  }
  // Waits up to `wait` for events and takes them.
  std::vector<StreamEvent> Take(std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, wait, [&] { return !events.empty(); });
    std::vector<StreamEvent> out(std::make_move_iterator(events.begin()),
                                 std::make_move_iterator(events.end()));
    events.clear();
    return out;
  }
};

// Model text may hold bytes that are not UTF-8 (a random model's tokens): they become U+FFFD.
std::string Dump(const OrderedJson& j);

// The response of one request, written through the module's table.
struct Reply {
  const MlcHttpBackend* http;
  MlcHttpResponse* res;
};

void SendJson(const Reply& res, int status, const OrderedJson& body);
void SendError(const Reply& res, int status, const OrderedJson& error);
// 400 for what the client sent, 413/429 for limits it hit, 500 for our own faults.
int StatusFor(const Errors& errors);
// The OpenAI finish_reason of the engine's: "length", else "stop".
std::string FinishReason(const std::string& engine_reason);
OrderedJson Usage(const StreamEvent& last);
// The package's sampling defaults for requests that leave them out (OpenAI's temperature 1 where
// it sets none); a value the sampler would refuse is left out.
SamplerConfig SamplingDefaults(const ChatConfig::Sampling& package);

// The server's routes, in the order of Route's values.
enum class Route { kHealth, kModels, kChatCompletions };

// Closes the module's server.
struct HttpServerCloser {
  const MlcHttpBackend* http = nullptr;
  void operator()(MlcHttpServer* s) const {
    if (s) http->destroy(s);
  }
};

}  // namespace serve

struct Server::Impl {
  ServeOptions options;
  std::string dir;
  OpenedPackage package;  // library, model, tokenizer, template, stop ids and strings
  SamplerConfig defaults;
  std::unique_ptr<Engine> engine;
  const MlcHttpBackend* http_backend = nullptr;
  MlcHttpHandler handler{};
  std::unique_ptr<MlcHttpServer, serve::HttpServerCloser> http;
  std::string model_id;
  std::atomic<int> in_flight{0};
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{1};
  std::once_flag vocabulary_once;
  std::shared_ptr<const TokenVocabulary> vocabulary;  // structured output; built on first use
  int port = 0;

  // Creates the module's server with the routes and their handler.
  Status StartHttp();
  void Handle(serve::Route route, std::string_view body, const serve::Reply& res);
  void ChatCompletions(std::string_view body, const serve::Reply& res);
  // The request's response_format into r.json (the body read again in key order).
  Status ReadResponseFormat(std::string_view body, const Json& doc, ChatCompletionRequest& r);
  // Messages -> the engine's request (media decoded); errors are the client's.
  Result<GenerationRequest> BuildRequest(const ChatCompletionRequest& r);
  void Answer(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<serve::Channel> channel,
              const std::string& completion_id, const serve::Reply& res);
  void Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<serve::Channel> channel,
              const std::string& completion_id, const serve::Reply& res);
  struct StreamState;
  OrderedJson Chunk(const std::string& completion_id, int64_t created, OrderedJson delta,
                    OrderedJson finish_reason) const {
    return {{"id", completion_id},
            {"object", "chat.completion.chunk"},
            {"created", created},
            {"model", model_id},
            {"choices", OrderedJson::array({{{"index", 0},
                                             {"delta", std::move(delta)},
                                             {"finish_reason", std::move(finish_reason)}}})}};
  }
};

}  // namespace mlc
