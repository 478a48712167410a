// A streamed chat completion: server-sent events made from the request's engine events as the
// HTTP module asks for them; a client that goes away cancels the request.
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

// One streamed answer: the state its chunks are made from, owned by the module's stream until
// its release.
struct Server::Impl::StreamState {
  Impl* server;
  uint64_t id;
  std::shared_ptr<Channel> channel;
  std::string completion_id;
  int64_t created;
  Clock::time_point deadline;
  bool usage;
  bool started = false;
  bool finished = false;

  // The next chunks of the answer; false stops the stream (the client went away or it failed).
  bool Provide(const MlcHttpBackend& backend, MlcHttpSink* sink);
};

bool Server::Impl::StreamState::Provide(const MlcHttpBackend& backend, MlcHttpSink* sink) {
  auto write = [&](const std::string& text) {
    return backend.sink_write(sink, text.data(), text.size()) != 0;
  };
  auto send = [&](const OrderedJson& j) { return write("data: " + Dump(j) + "\n\n"); };
  if (!started) {
    started = true;
    if (!send(server->Chunk(completion_id, created, {{"role", "assistant"}, {"content", ""}}, nullptr))) {
      return false;
    }
  }
  if (Clock::now() > deadline) {
    server->engine->Cancel(id);
    send(OpenAiError("the reply took longer than the request timeout", "timeout"));
    return false;
  }
  for (StreamEvent& e : channel->Take(std::chrono::milliseconds(100))) {
    if (e.done && e.finish_reason == "error") {
      send(OpenAiError(e.errors));
      finished = true;
      backend.sink_done(sink);
      return true;
    }
    if (!e.text.empty() && !send(server->Chunk(completion_id, created, {{"content", e.text}}, nullptr))) {
      return false;
    }
    if (e.done) {
      if (!send(server->Chunk(completion_id, created, OrderedJson::object(),
                              FinishReason(e.finish_reason)))) {
        return false;
      }
      if (usage) {
        OrderedJson u = {{"id", completion_id},
                         {"object", "chat.completion.chunk"},
                         {"created", created},
                         {"model", server->model_id},
                         {"choices", OrderedJson::array()},
                         {"usage", Usage(e)}};
        if (!send(u)) return false;
      }
      if (!write("data: [DONE]\n\n")) return false;
      finished = true;
      backend.sink_done(sink);
      return true;
    }
  }
  return backend.sink_writable(sink) != 0;
}

void Server::Impl::Stream(uint64_t id, const ChatCompletionRequest& r, std::shared_ptr<Channel> channel,
                          const std::string& completion_id, const Reply& res) {
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  auto* state = new StreamState{this, id, std::move(channel), completion_id, created,
                                Clock::now() + std::chrono::seconds(options.request_timeout_s),
                                r.include_usage};
  res.http->set_header(res.res, "Cache-Control", "no-cache");
  MlcHttpStream stream{};
  stream.context = state;
  stream.provide = [](void* context, MlcHttpSink* sink) {
    auto* s = static_cast<StreamState*>(context);
    try {
      return s->Provide(*s->server->http_backend, sink) ? 1 : 0;
    } catch (...) {  // no exception crosses the module's table
      return 0;
    }
  };
  stream.release = [](void* context, int) {
    std::unique_ptr<StreamState> s(static_cast<StreamState*>(context));
    if (!s->finished) s->server->engine->Cancel(s->id);  // the client went away or the stream failed
    --s->server->in_flight;
  };
  res.http->set_stream(res.res, "text/event-stream", stream);
}

}  // namespace mlc
