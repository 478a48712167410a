// POST /v1/audio/transcriptions and /v1/audio/translations in OpenAI's shape: a multipart form
// (serve/multipart.cc, serve/transcription_request.cc) whose recording is decoded, cut into
// windows at its pauses, and transcribed window by window on the model's engine (one chat turn
// each: the model's template, thinking off, the text so far as context); answered as json, text,
// srt, vtt or verbose_json (one segment a window), or streamed as transcript.text.delta events and
// a transcript.text.done.
#include <cmath>

#include "serve/multipart.h"
#include "serve/server_impl.h"
#include "serve/transcription_request.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

// One request's transcript, window by window: shared by the whole answer and the stream.
struct Server::Impl::TranscriptState {
  Impl* server = nullptr;
  ServedModel* model = nullptr;
  TranscriptionTask task = TranscriptionTask::kTranscribe;
  std::string prompt, language;
  SamplerConfig sampler;
  TranscriptFormat format = TranscriptFormat::kJson;
  WindowedAudio audio;
  std::vector<TranscriptSegment> segments;  // one a window, its text once transcribed
  size_t window = 0;                        // the window queued or next
  std::string text;                         // the queued window's text so far
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::shared_ptr<Channel> channel;
  uint64_t id = 0;
  bool queued = false;
  bool engine_refused = false;  // QueueWindow's error is the engine's refusal (RefuseSubmit)
  Clock::time_point deadline;
  std::unique_ptr<InFlight> slot;

  // Queues the next window on the model's engine; its error is the client's or the engine's.
  Result<uint64_t> QueueWindow() {
    const int64_t start = window == 0 ? 0 : audio.ends[window - 1];
    const std::span<const float> samples(audio.samples.data() + start, static_cast<size_t>(audio.ends[window] - start));
    const std::vector<TranscriptSegment> before(segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(window));
    auto input = TranscriptionTurn(model->package, task, language, TranscriptionContext(prompt, before), samples);
    MLC_RETURN_IF_ERROR(input);
    GenerationRequest g;
    g.input = std::move(*input);
    g.max_tokens = server->options.max_transcript_tokens;
    g.sampler = sampler;
    g.stop_token_ids = model->package.stop_ids;
    g.stop_strings = model->package.stop_strings;
    g.cache = false;  // a window's audio never recurs: the caches stay for requests that repeat
    channel = std::make_shared<Channel>(RequestTimer(&model->metrics, Clock::now()));
    text.clear();
    auto queued_id = model->engine->Submit(std::move(g), channel->Sink());
    engine_refused = !queued_id;
    if (!queued_id) return queued_id.error();
    id = *queued_id;
    queued = true;
    return id;
  }
  // The queued window's last event taken: its text kept, the next window up.
  void EndWindow(const StreamEvent& last) {
    segments[window].text = WindowText(text);
    prompt_tokens += last.prompt_tokens;
    completion_tokens += last.completion_tokens;
    queued = false;
    ++window;
  }
  bool Done() const { return window == segments.size(); }
  // The stream let go of: a window still queued is cancelled (the client went away).
  void Release() {
    if (queued) {
      model->engine->Cancel(id);
      server->metrics.Count(Outcome::kCancelled);
    }
    --server->in_flight;
  }

  OrderedJson Usage() const { return TranscriptUsage(prompt_tokens, completion_tokens); }
  OrderedJson VerboseJson() const {
    OrderedJson out = TranscriptJson(task, language, segments);
    for (auto& segment : out["segments"]) segment["temperature"] = sampler.temperature;
    out["usage"] = Usage();
    return out;
  }
  // The whole transcript in the request's format.
  void Answer(const Reply& res) const {
    auto send_text = [&](const std::string& body, const char* type) {
      res.http->set_status(res.res, 200);
      res.http->set_content(res.res, body.data(), body.size(), type);
    };
    switch (format) {
      case TranscriptFormat::kJson: SendJson(res, 200, {{"text", TranscriptText(segments)}, {"usage", Usage()}}); return;
      case TranscriptFormat::kVerboseJson: SendJson(res, 200, VerboseJson()); return;
      case TranscriptFormat::kText: send_text(TranscriptText(segments) + "\n", "text/plain; charset=utf-8"); return;
      case TranscriptFormat::kSrt: send_text(TranscriptSrt(segments), "application/x-subrip; charset=utf-8"); return;
      case TranscriptFormat::kVtt: send_text(TranscriptVtt(segments), "text/vtt; charset=utf-8"); return;
    }
  }
  // The next events of a streamed transcript; false stops the stream.
  bool Provide(const MlcHttpBackend& backend, MlcHttpSink* sink);
};

bool Server::Impl::TranscriptState::Provide(const MlcHttpBackend& backend, MlcHttpSink* sink) {
  auto send = [&](const OrderedJson& j) {
    const std::string event = "data: " + Dump(j) + "\n\n";
    return backend.sink_write(sink, event.data(), event.size()) != 0;
  };
  auto fail = [&](const OrderedJson& error) {
    send(error);
    backend.sink_done(sink);
    return true;
  };
  if (Done()) {
    server->metrics.Count(Outcome::kCompleted);
    send({{"type", "transcript.text.done"}, {"text", TranscriptText(segments)}, {"usage", Usage()}});
    backend.sink_done(sink);
    return true;
  }
  if (Clock::now() > deadline) {
    model->engine->Cancel(id);
    server->metrics.Count(Outcome::kTimeout);
    return fail(OpenAiError("the transcript took longer than the request timeout", "timeout"));
  }
  if (!queued) {
    auto q = QueueWindow();
    if (!q) {
      server->metrics.Count(Outcome::kError);
      return fail(OpenAiError(q.errors()));
    }
  }
  // A window's text follows the one before after a space (TranscriptText's join).
  const bool after_text = !TranscriptText({segments.begin(), segments.begin() + static_cast<std::ptrdiff_t>(window)}).empty();
  for (StreamEvent& e : channel->Take(std::chrono::milliseconds(100))) {
    if (e.done && e.finish_reason == "error") {
      server->metrics.Count(StatusFor(e.errors) >= 500 ? Outcome::kError : Outcome::kInvalid);
      queued = false;
      return fail(OpenAiError(e.errors));
    }
    // Leading blanks of a window wait until text follows them.
    std::string delta = e.text;
    if (WindowText(text).empty()) {
      const size_t first = delta.find_first_not_of(" \t\r\n");
      delta = first == std::string::npos ? "" : (after_text ? " " : "") + delta.substr(first);
    }
    text += e.text;
    if (!delta.empty() && !send({{"type", "transcript.text.delta"}, {"delta", delta}})) return false;
    if (e.done) {
      EndWindow(e);
      return backend.sink_writable(sink) != 0;
    }
  }
  return backend.sink_writable(sink) != 0;
}

void Server::Impl::Transcribe(TranscriptionTask task, std::string_view content_type, std::string_view body,
                              const Reply& res) {
  auto slot = Slot(res);
  if (!slot) return;
  auto refuse = [&](const Errors& errors) { Refuse(res, StatusFor(errors), OpenAiError(errors)); };
  MultipartLimits limits;
  auto parts = ParseMultipart(content_type, body, limits);
  if (!parts) return refuse(parts.errors());
  auto form = ParseTranscriptionRequest(*parts);
  if (!form) return refuse(form.errors());
  Json pick = Json::object();
  if (!form->model.empty()) pick["model"] = form->model;
  ServedModel* model = Pick(pick, res, /*count=*/true);
  if (!model) return;
  const OpenedPackage& package = model->package;
  if (!package.model.bound.contract.audio) {
    return refuse({Error{ErrorCode::kUnsupported, "/model", "model \"" + model->name + "\" has no audio input"}});
  }
  auto state = std::make_unique<TranscriptState>();
  state->server = this;
  state->model = model;
  state->task = task;
  state->prompt = form->prompt;
  state->language = form->language;
  state->sampler.temperature = form->temperature.value_or(0.0);
  state->format = form->format;
  state->deadline = Clock::now() + std::chrono::seconds(options.request_timeout_s);
  // The recording, at most --max-audio-seconds of it, decoded whole and cut into windows.
  const AudioDecode& processor = package.model.bound.contract.audio->processor;
  const int64_t max_samples = options.max_audio_seconds * processor.sample_rate_hz;
  RequestSegment file;
  file.kind = SegmentKind::kAudio;
  file.bytes = std::make_shared<const std::string>(form->file);
  file.path = "/file";
  const int64_t max_windows = (max_samples + processor.max_samples - 1) / processor.max_samples;
  const Error too_long{ErrorCode::kLimit, "/file",
                       "the recording is longer than this server's " + std::to_string(options.max_audio_seconds) +
                           " s (--max-audio-seconds)"};
  auto audio = DecodeWindowedAudio(*package.model.bound.contract.audio, file, max_windows);
  if (!audio) {
    Errors errors = audio.take_errors();
    for (Error& e : errors) {
      if (e.message.rfind("recording too long", 0) == 0) e = too_long;
    }
    return refuse(errors);
  }
  if (static_cast<int64_t>(audio->samples.size()) > max_samples) return refuse({too_long});
  state->audio = std::move(*audio);
  state->segments = TranscriptSegments(state->audio);
  if (form->stream) {
    state->slot = std::move(slot);
    state->slot->armed = false;  // released with the stream
    return SendEvents(res, std::move(state));
  }
  while (!state->Done()) {
    auto id = state->QueueWindow();
    if (!id) return state->engine_refused ? RefuseSubmit(res, id.errors().front()) : refuse(id.errors());
    StreamEvent last;
    const Waited waited = Await(*model, *id, *state->channel, res, state->deadline, [&](StreamEvent& e) {
      state->text += e.text;
      if (e.done) last = std::move(e);
    });
    if (waited == Waited::kTimedOut) return RefuseTimeout(res);
    if (waited == Waited::kGone) {
      metrics.Count(Outcome::kCancelled);
      return;
    }
    if (last.finish_reason == "error") return refuse(last.errors);
    state->EndWindow(last);
  }
  metrics.Count(Outcome::kCompleted);
  state->Answer(res);
}

}  // namespace mlc
