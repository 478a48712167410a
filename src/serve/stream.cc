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
  // The stream let go of: the request cancelled unless it finished.
  void Release() {
    if (!finished) job.model->engine->Cancel(id);  // the client went away or the stream failed
    if (!counted) server->metrics.Count(Outcome::kCancelled);
    --server->in_flight;
  }
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
    if (!e.text.empty() || !e.logprobs.empty()) {
      OrderedJson chunk = format.Chunk(e.text, e.logprobs, nullptr);
      if (!chunk.is_null() && !send(chunk)) return false;
    }
    if (e.done) {
      if (OrderedJson rest = format.Rest(); !rest.is_null() && !send(rest)) return false;
      if (!send(format.Chunk("", {}, format.Finish(e.finish_reason)))) return false;
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
  SendEvents(res, std::unique_ptr<StreamState>(new StreamState{
                     this, id, std::move(channel), std::move(job),
                     Clock::now() + std::chrono::seconds(options.request_timeout_s)}));
}

}  // namespace mlc
