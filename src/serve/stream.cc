// A streamed answer (chat or text completion): server-sent events made from the request's engine
// events as the HTTP module asks for them; a client that goes away cancels the request.
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

// One streamed answer: the state its chunks are made from, owned by the module's stream until
// its release.
struct Server::Impl::StreamState {
  Impl* server;
  uint64_t id;
  std::shared_ptr<Channel> channel;
  Job job;
  Clock::time_point deadline;
  bool started = false;
  bool finished = false;
  bool counted = false;  // its outcome is in the metrics

  // The next chunks of the answer; false stops the stream (the client went away or it failed).
  bool Provide(const MlcHttpBackend& backend, MlcHttpSink* sink);
};

bool Server::Impl::StreamState::Provide(const MlcHttpBackend& backend, MlcHttpSink* sink) {
  auto write = [&](const std::string& text) {
    return backend.sink_write(sink, text.data(), text.size()) != 0;
  };
  auto send = [&](const OrderedJson& j) { return write("data: " + Dump(j) + "\n\n"); };
  ReplyFormat& format = job.format;
  if (!started) {
    started = true;
    OrderedJson opening = format.Opening();
    if (!opening.is_null() && !send(opening)) return false;
  }
  if (Clock::now() > deadline) {
    job.model->engine->Cancel(id);
    server->metrics.Count(Outcome::kTimeout);
    counted = true;
    send(OpenAiError("the reply took longer than the request timeout", "timeout"));
    return false;
  }
  for (StreamEvent& e : channel->Take(std::chrono::milliseconds(100))) {
    if (e.done) {
      server->CountEnd(e);
      counted = true;
    }
    if (e.done && e.finish_reason == "error") {
      send(OpenAiError(e.errors));
      finished = true;
      backend.sink_done(sink);
      return true;
    }
    if ((!e.text.empty() || !e.logprobs.empty()) && !send(format.Chunk(e.text, e.logprobs, nullptr))) {
      return false;
    }
    if (e.done) {
      if (OrderedJson rest = format.Rest(); !rest.is_null() && !send(rest)) return false;
      if (!send(format.Chunk("", {}, FinishReason(e.finish_reason)))) return false;
      if (job.include_usage && !send(format.UsageChunk(e))) return false;
      if (!write("data: [DONE]\n\n")) return false;
      finished = true;
      backend.sink_done(sink);
      return true;
    }
  }
  return backend.sink_writable(sink) != 0;
}

void Server::Impl::Stream(uint64_t id, Job job, std::shared_ptr<Channel> channel, const Reply& res) {
  auto* state = new StreamState{this, id, std::move(channel), std::move(job),
                                Clock::now() + std::chrono::seconds(options.request_timeout_s)};
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
    if (!s->finished) s->job.model->engine->Cancel(s->id);  // the client went away or the stream failed
    if (!s->counted) s->server->metrics.Count(Outcome::kCancelled);
    --s->server->in_flight;
  };
  res.http->set_stream(res.res, "text/event-stream", stream);
}

}  // namespace mlc
