// POST /v1/chat/completions: the request parsed and built into the engine's (the conversation
// template through ChatTurns, media decoded from data: URLs, or local files when allowed); and
// what the generation routes share: admission, queueing on the engine, the outcome counted in
// the metrics, and the answer as one JSON object, or the request cancelled when its client goes
// away (streams: serve/stream.cc).
#include <unistd.h>

#include <random>

#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

namespace {

// "call_" and 16 random letters and digits; a reply's calls are this and their index.
std::string CallIdPrefix() {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  std::string out = "call_";
  for (int i = 0; i < 16; ++i) out += kChars[rd() % (sizeof(kChars) - 1)];
  return out + "_";
}

// The body again in key order (a schema's properties come in its order), for the field at `at`.
Result<OrderedJson> KeyOrdered(std::string_view body, const char* at) {
  OrderedJson ordered = OrderedJson::parse(body, nullptr, false);
  if (ordered.is_discarded()) return Invalid(at, "the body could not be read in key order");
  return ordered;
}

}  // namespace

Result<GenerationRequest> Server::Impl::BuildRequest(ServedModel& model, const ChatCompletionRequest& r) {
  const OpenedPackage& package = model.package;
  for (const ChatMessage& m : r.messages) {
    for (const ContentPart& p : m.parts) {
      if (p.kind == PartKind::kText) continue;
      auto inline_bytes = InlineMedia(p, "", options.allow_local_files);  // no file looked at unless allowed
      MLC_RETURN_IF_ERROR(inline_bytes);
      if (!*inline_bytes && !options.allow_local_files) {
        return Invalid(p.path, "expected a data: URL (base64) or base64 audio; this server does "
                               "not read local files");
      }
    }
  }
  // A conversation's first turn, as `run --messages` builds it, with the tools, calls and
  // results written the family's way.
  const ConvTemplate& tmpl = *package.tmpl;
  const ToolFormat tool_format = ToolFormatFor(tmpl);
  auto messages = WriteToolMessages(tool_format, tmpl, r.tools, r.messages);
  MLC_RETURN_IF_ERROR(messages);
  bool thinking = tmpl.thinking && r.thinking.value_or(tmpl.thinking->default_on);
  ChatTurns turns(WithThinking(tmpl, thinking), *package.tokenizer);
  auto turn = turns.Next(*messages, "", "", options.allow_local_files);
  MLC_RETURN_IF_ERROR(turn);
  // A request that cannot fit is refused before any of its media is decoded.
  auto input = PrepareTurn(package.model.bound.contract, *turn, package.model.limits, 0);
  MLC_RETURN_IF_ERROR(input);
  GenerationRequest g;
  g.input = std::move(*input);
  SetOptions(package, g, r);
  std::shared_ptr<const JsonGrammar> grammar = r.json;
  if (r.tools.Active()) {
    if (r.json) {
      return Error{ErrorCode::kUnsupported, "/response_format",
                   "a response format with tools is not supported (send tool_choice \"none\" or leave one out)"};
    }
    auto calls = ToolCallGrammar(tool_format, r.tools, GrammarOptions());
    MLC_RETURN_IF_ERROR(calls);
    grammar = *calls;
  }
  MLC_RETURN_IF_ERROR(Constrain(model, g, grammar, r.tools.Active() ? &tool_format : nullptr));
  return g;
}

Status Server::Impl::Constrain(ServedModel& model, GenerationRequest& g,
                               std::shared_ptr<const JsonGrammar> grammar, const ToolFormat* tools) {
  if (!grammar) return Status::Ok();
  if (!model.package.tokenizer) {
    return Error{ErrorCode::kUnsupported, "/response_format",
                 "structured output needs the package's tokenizer, and this package has none"};
  }
  if (tools) {  // the package's format is the same every time
    std::call_once(model.tool_vocabulary_once, [&] {
      model.tool_vocabulary = TokenVocabulary::FromTokenizer(*model.package.tokenizer, ToolMarkers(*tools));
    });
    g.json = JsonConstraint{std::move(grammar), model.tool_vocabulary};
    return Status::Ok();
  }
  std::call_once(model.vocabulary_once,
                 [&] { model.vocabulary = TokenVocabulary::FromTokenizer(*model.package.tokenizer); });
  g.json = JsonConstraint{std::move(grammar), model.vocabulary};
  return Status::Ok();
}

JsonGrammarOptions Server::Impl::GrammarOptions() const {
  JsonGrammarOptions o;
  o.max_string_length = options.json_max_string_length;
  return o;
}

Status Server::Impl::ReadResponseFormat(std::string_view body, const Json& doc,
                                        std::shared_ptr<const JsonGrammar>& grammar) {
  if (!doc.contains("response_format")) return Status::Ok();
  auto ordered = KeyOrdered(body, "/response_format");
  MLC_RETURN_IF_ERROR(ordered);
  auto parsed = ParseResponseFormat(*ordered, GrammarOptions());
  MLC_RETURN_IF_ERROR(parsed);
  grammar = *parsed;
  return Status::Ok();
}

Status Server::Impl::ReadTools(std::string_view body, const Json& doc, ToolSet& tools) {
  if (!doc.contains("tools") && !doc.contains("tool_choice") && !doc.contains("parallel_tool_calls")) {
    return Status::Ok();
  }
  auto ordered = KeyOrdered(body, "/tools");
  MLC_RETURN_IF_ERROR(ordered);
  auto parsed = ParseToolSet(*ordered, GrammarOptions());
  MLC_RETURN_IF_ERROR(parsed);
  tools = std::move(*parsed);
  return Status::Ok();
}

Result<Job> Server::Impl::ChatJob(ServedModel& model, std::string_view body, const Json& doc) {
  auto parsed = ParseChatCompletionRequest(doc, options.request_limits, model.defaults);
  MLC_RETURN_IF_ERROR(parsed);
  MLC_RETURN_IF_ERROR(ReadResponseFormat(body, doc, parsed->json));
  MLC_RETURN_IF_ERROR(ReadTools(body, doc, parsed->tools));
  auto gen = BuildRequest(model, *parsed);
  MLC_RETURN_IF_ERROR(gen);
  Job job;
  job.gen = std::move(*gen);
  job.stream = parsed->stream;
  job.include_usage = parsed->include_usage;
  job.format.wire = Wire::kChat;
  job.format.top_logprobs = parsed->top_logprobs;
  if (const auto& mode = model.package.tmpl->thinking) job.format.reasoning.emplace(*mode);
  if (parsed->tools.Active()) {
    job.format.tools.emplace(ToolFormatFor(*model.package.tmpl), CallIdPrefix());
  }
  return job;
}

Result<Json> Server::Impl::ParseBody(std::string_view body) const {
  JsonLimits limits;
  limits.max_bytes = options.max_body_bytes;
  limits.max_values = options.max_json_values;
  return ParseJson(body, limits);
}

void Server::Impl::Refuse(const Reply& res, int status, const OrderedJson& error) {
  metrics.Count(status == 429 || status == 503 ? Outcome::kRejected
                : status >= 500                ? Outcome::kError
                                               : Outcome::kInvalid);
  SendError(res, status, error);
}

void Server::Impl::CountEnd(const StreamEvent& last) {
  if (last.finish_reason == "error") {
    metrics.Count(StatusFor(last.errors) >= 500 ? Outcome::kError : Outcome::kInvalid);
  } else {
    metrics.Count(last.finish_reason == "cancelled" ? Outcome::kCancelled : Outcome::kCompleted);
  }
}

std::unique_ptr<InFlight> Server::Impl::Slot(const Reply& res) {
  if (draining) {
    Refuse(res, 503, OpenAiError("the server is shutting down", "server_error"));
    return nullptr;
  }
  auto slot = std::make_unique<InFlight>(in_flight);
  if (in_flight > options.max_concurrent) {
    Refuse(res, 429, OpenAiError("too many requests in flight; retry later", "rate_limit_error"));
    return nullptr;
  }
  return slot;
}

std::optional<Server::Impl::Admitted> Server::Impl::Admit(std::string_view body, const Reply& res) {
  Admitted in;
  in.slot = Slot(res);
  if (!in.slot) return std::nullopt;
  auto doc = ParseBody(body);
  if (!doc) {
    Refuse(res, 400, OpenAiError(doc.errors()));
    return std::nullopt;
  }
  in.doc = std::move(*doc);
  in.model = Pick(in.doc, res, /*count=*/true);
  if (!in.model) return std::nullopt;
  return in;
}

void Server::Impl::Generate(Wire wire, std::string_view body, const Reply& res) {
  const auto start = Clock::now();
  auto in = Admit(body, res);
  if (!in) return;
  ServedModel* model = in->model;
  auto job = wire == Wire::kChat ? ChatJob(*model, body, in->doc) : CompletionJob(*model, body, in->doc);
  if (!job) {
    Refuse(res, StatusFor(job.errors()), OpenAiError(job.errors()));
    return;
  }
  job->model = model;
  auto channel = std::make_shared<Channel>(RequestTimer(&model->metrics, start));
  auto id = model->engine->Submit(std::move(job->gen), channel->Sink());
  if (!id) {
    RefuseSubmit(res, id.error());
    return;
  }
  ReplyFormat& format = job->format;
  format.id = (wire == Wire::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(getpid()) + "-" +
              std::to_string(next_id++);
  format.created = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch()).count();
  format.model = model->name;
  format.tokenizer = model->package.tokenizer.get();
  if (job->stream) {
    in->slot->armed = false;  // the stream's releaser gives the slot back
    Stream(*id, std::move(*job), channel, res);
  } else {
    Answer(*id, *job, channel, res);
  }
}

void Server::Impl::RefuseSubmit(const Reply& res, const Error& e) {
  const bool full = e.code == ErrorCode::kLimit;
  const bool client = e.code == ErrorCode::kUnsupported || e.code == ErrorCode::kInvalid;
  Refuse(res, full ? 429 : client ? 400 : 503,
         OpenAiError(e.message, full ? "rate_limit_error" : client ? "invalid_request_error" : "server_error",
                     client ? e.path : ""));
}

Waited Server::Impl::Await(ServedModel& model, uint64_t id, Channel& channel, const Reply& res,
                           Clock::time_point deadline, const std::function<void(StreamEvent&)>& on) {
  bool gone = false;
  for (;;) {
    // A client that went away cancels its request wherever it is (queued, its media being
    // encoded, prefilling, decoding); its last event then says "cancelled".
    if (!gone && res.ClientGone()) {
      gone = true;
      model.engine->Cancel(id);
    }
    if (Clock::now() > deadline) {
      model.engine->Cancel(id);
      return Waited::kTimedOut;
    }
    for (StreamEvent& e : channel.Take(std::chrono::milliseconds(200))) {
      const bool done = e.done;
      on(e);
      if (done) return gone ? Waited::kGone : Waited::kDone;
    }
  }
}

void Server::Impl::Answer(uint64_t id, Job& job, std::shared_ptr<Channel> channel, const Reply& res) {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  StreamEvent last;
  const Waited waited = Await(*job.model, id, *channel, res, Clock::now() + std::chrono::seconds(options.request_timeout_s),
                              [&](StreamEvent& e) {
                                text += e.text;
                                logprobs.insert(logprobs.end(), std::make_move_iterator(e.logprobs.begin()),
                                                std::make_move_iterator(e.logprobs.end()));
                                if (e.done) last = std::move(e);
                              });
  if (EndFailed(waited, last, res)) return;
  SendJson(res, 200, job.format.Whole(text, logprobs, last));
}

bool Server::Impl::EndFailed(Waited waited, const StreamEvent& last, const Reply& res) {
  if (waited == Waited::kTimedOut) {
    RefuseTimeout(res);
    return true;
  }
  CountEnd(last);
  if (waited == Waited::kGone) return true;
  if (last.finish_reason != "error") return false;
  SendError(res, StatusFor(last.errors), OpenAiError(last.errors));
  return true;
}

void Server::Impl::RefuseTimeout(const Reply& res) {
  metrics.Count(Outcome::kTimeout);
  SendError(res, 504, OpenAiError("the reply took longer than the request timeout", "timeout"));
}

}  // namespace mlc
