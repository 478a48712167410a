// POST /v1/chat/completions: the request parsed and built into the engine's (the conversation
// template through ChatTurns, media decoded from data: URLs, or local files when allowed), queued
// on the engine, and answered as one JSON object (streams: serve/stream.cc).
#include <unistd.h>

#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

Result<GenerationRequest> Server::Impl::BuildRequest(const ChatCompletionRequest& r) {
  for (const ChatMessage& m : r.messages) {
    for (const ContentPart& p : m.parts) {
      if (p.kind == PartKind::kText) continue;
      auto inline_bytes = InlineMedia(p, "");
      MLC_RETURN_IF_ERROR(inline_bytes);
      if (!*inline_bytes && !options.allow_local_files) {
        return Invalid(p.path, "expected a data: URL (base64) or base64 audio; this server does "
                               "not read local files");
      }
    }
  }
  // A conversation's first turn, as `run --messages` builds it.
  ChatTurns turns(*package.tmpl, *package.tokenizer);
  auto turn = turns.Next(r.messages, "", "");
  MLC_RETURN_IF_ERROR(turn);
  auto input = PrepareTurn(package.model.bound.contract, *turn);
  MLC_RETURN_IF_ERROR(input);
  GenerationRequest g;
  g.input = std::move(*input);
  g.max_tokens = r.max_tokens;
  g.sampler = r.sampler;
  g.stop_token_ids = package.stop_ids;
  g.stop_strings = package.stop_strings;
  g.stop_strings.insert(g.stop_strings.end(), r.stop.begin(), r.stop.end());
  if (r.json) {
    std::call_once(vocabulary_once,
                   [&] { vocabulary = TokenVocabulary::FromTokenizer(*package.tokenizer); });
    g.json = JsonConstraint{r.json, vocabulary};
  }
  return g;
}

Status Server::Impl::ReadResponseFormat(std::string_view body, const Json& doc,
                                        ChatCompletionRequest& r) {
  if (!doc.contains("response_format")) return Status::Ok();
  OrderedJson ordered = OrderedJson::parse(body, nullptr, false);
  if (ordered.is_discarded()) return Invalid("/response_format", "the body could not be read in key order");
  JsonGrammarOptions o;
  o.max_string_length = options.json_max_string_length;
  auto grammar = ParseResponseFormat(ordered, o);
  MLC_RETURN_IF_ERROR(grammar);
  r.json = *grammar;
  return Status::Ok();
}

void Server::Impl::ChatCompletions(std::string_view body, const Reply& res) {
  if (draining) {
    SendError(res, 503, OpenAiError("the server is shutting down", "server_error"));
    return;
  }
  struct Slot {  // counts the request in flight until its answer is written
    explicit Slot(std::atomic<int>& count) : n(count) { ++n; }
    ~Slot() {
      if (armed) --n;
    }
    Slot(const Slot&) = delete;
    Slot& operator=(const Slot&) = delete;
    std::atomic<int>& n;
    bool armed = true;
  };
  auto slot = std::make_unique<Slot>(in_flight);
  if (in_flight > options.max_concurrent) {
    SendError(res, 429, OpenAiError("too many requests in flight; retry later", "rate_limit_error"));
    return;
  }
  JsonLimits limits;
  limits.max_bytes = options.max_body_bytes;
  auto doc = ParseJson(body, limits);
  if (!doc) {
    SendError(res, 400, OpenAiError(doc.errors()));
    return;
  }
  auto parsed = ParseChatCompletionRequest(*doc, options.request_limits, defaults);
  if (!parsed) {
    SendError(res, 400, OpenAiError(parsed.errors()));
    return;
  }
  if (Status s = ReadResponseFormat(body, *doc, *parsed); !s) {
    SendError(res, 400, OpenAiError(s.errors()));
    return;
  }
  auto gen = BuildRequest(*parsed);
  if (!gen) {
    SendError(res, StatusFor(gen.errors()), OpenAiError(gen.errors()));
    return;
  }
  auto channel = std::make_shared<Channel>();
  auto id = engine->Submit(std::move(*gen), channel->Sink());
  if (!id) {
    bool full = id.error().code == ErrorCode::kLimit;
    SendError(res, full ? 429 : 503,
              OpenAiError(id.error().message, full ? "rate_limit_error" : "server_error"));
    return;
  }
  std::string completion_id = "chatcmpl-" + std::to_string(getpid()) + "-" + std::to_string(next_id++);
  if (parsed->stream) {
    slot->armed = false;  // the stream's releaser gives the slot back
    Stream(*id, *parsed, channel, completion_id, res);
  } else {
    Answer(*id, *parsed, channel, completion_id, res);
  }
}

void Server::Impl::Answer(uint64_t id, const ChatCompletionRequest&, std::shared_ptr<Channel> channel,
                          const std::string& completion_id, const Reply& res) {
  const auto deadline = Clock::now() + std::chrono::seconds(options.request_timeout_s);
  std::string text;
  StreamEvent last;
  for (bool done = false; !done;) {
    if (Clock::now() > deadline) {
      engine->Cancel(id);
      SendError(res, 504, OpenAiError("the reply took longer than the request timeout", "timeout"));
      return;
    }
    for (StreamEvent& e : channel->Take(std::chrono::milliseconds(200))) {
      text += e.text;
      if (e.done) {
        last = std::move(e);
        done = true;
      }
    }
  }
  if (last.finish_reason == "error") {
    SendError(res, StatusFor(last.errors), OpenAiError(last.errors));
    return;
  }
  int64_t created = std::chrono::duration_cast<std::chrono::seconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  SendJson(res, 200,
           {{"id", completion_id},
            {"object", "chat.completion"},
            {"created", created},
            {"model", model_id},
            {"choices", OrderedJson::array({{{"index", 0},
                                             {"message", {{"role", "assistant"}, {"content", text}}},
                                             {"finish_reason", FinishReason(last.finish_reason)}}})},
            {"usage", Usage(last)}});
}

}  // namespace mlc
