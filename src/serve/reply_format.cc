// The OpenAI answer objects: chat.completion and text_completion, whole or as streamed chunks,
// with logprobs in each API's shape (chat: content[] of token, logprob, bytes, top_logprobs;
// completions: tokens, token_logprobs, top_logprobs, text_offset).
#include "serve/server_impl.h"

namespace mlc::serve {
namespace {

OrderedJson Bytes(const std::string& text) {
  OrderedJson out = OrderedJson::array();
  for (unsigned char c : text) out.push_back(static_cast<int>(c));
  return out;
}

}  // namespace

OrderedJson ReplyFormat::Envelope(bool chunk, OrderedJson choices) const {
  const char* object = wire == Wire::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                           : "text_completion";
  return {{"id", id}, {"object", object}, {"created", created}, {"model", model}, {"choices", std::move(choices)}};
}

OrderedJson ReplyFormat::Logprobs(const std::vector<TokenLogprobs>& logprobs) {
  if (top_logprobs < 0) return nullptr;
  auto text_of = [this](int32_t token) {
    return tokenizer ? tokenizer->Decode(std::span<const int32_t>(&token, 1)) : std::string();
  };
  if (wire == Wire::kChat) {
    OrderedJson content = OrderedJson::array();
    for (const TokenLogprobs& t : logprobs) {
      OrderedJson top = OrderedJson::array();
      for (const auto& [token, lp] : t.top) {
        const std::string s = text_of(token);
        top.push_back({{"token", s}, {"logprob", lp}, {"bytes", Bytes(s)}});
      }
      const std::string s = text_of(t.token);
      content.push_back({{"token", s}, {"logprob", t.logprob}, {"bytes", Bytes(s)}, {"top_logprobs", std::move(top)}});
    }
    return {{"content", std::move(content)}};
  }
  OrderedJson tokens = OrderedJson::array(), values = OrderedJson::array(), tops = OrderedJson::array(),
              offsets = OrderedJson::array();
  for (const TokenLogprobs& t : logprobs) {
    const std::string s = text_of(t.token);
    tokens.push_back(s);
    values.push_back(t.logprob);
    OrderedJson top = OrderedJson::object();
    for (const auto& [token, lp] : t.top) top[text_of(token)] = lp;
    tops.push_back(std::move(top));
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(s.size());
  }
  return {{"tokens", std::move(tokens)},
          {"token_logprobs", std::move(values)},
          {"top_logprobs", std::move(tops)},
          {"text_offset", std::move(offsets)}};
}

OrderedJson ReplyFormat::Delta(const ReasoningSplitter::Parts& parts, bool whole) {
  OrderedJson out = whole ? OrderedJson{{"role", "assistant"}} : OrderedJson::object();
  if (!parts.reasoning.empty()) out["reasoning_content"] = parts.reasoning;
  if (whole || !parts.content.empty() || parts.reasoning.empty()) out["content"] = parts.content;
  return out;
}

namespace {

// A call's delta in OpenAI's stream shape: index, id, type and name first, then arguments.
OrderedJson CallDeltaJson(const ToolCallStream::CallDelta& d) {
  OrderedJson out = {{"index", d.index}};
  OrderedJson function = OrderedJson::object();
  if (!d.id.empty()) {
    out["id"] = d.id;
    out["type"] = "function";
    function["name"] = d.name;
  }
  function["arguments"] = d.arguments;
  out["function"] = std::move(function);
  return out;
}

}  // namespace

OrderedJson ReplyFormat::Finish(const std::string& engine_reason) const {
  const std::string reason = FinishReason(engine_reason);
  if (tools && reason == "stop" && !tools->calls().empty()) return "tool_calls";
  return reason;
}

OrderedJson ReplyFormat::Whole(const std::string& text, const std::vector<TokenLogprobs>& logprobs,
                               const StreamEvent& last) {
  OrderedJson choice = {{"index", 0}};
  if (wire == Wire::kChat) {
    ReasoningSplitter::Parts parts{"", text};
    if (reasoning) {
      parts = reasoning->Push(text);
      auto rest = reasoning->Finish();
      parts.reasoning += rest.reasoning;
      parts.content += rest.content;
    }
    if (tools) {
      std::string content = tools->Push(parts.content).content;
      content += tools->Finish().content;
      parts.content = std::move(content);
    }
    choice["message"] = Delta(parts, true);
    if (tools && !tools->calls().empty()) {
      if (parts.content.empty()) choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = ToolCallsJson(tools->calls());
    }
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = Logprobs(logprobs);
  choice["finish_reason"] = Finish(last.finish_reason);
  OrderedJson out = Envelope(false, OrderedJson::array({std::move(choice)}));
  out["usage"] = Usage(last);
  return out;
}

OrderedJson ReplyFormat::Chunk(const std::string& text, const std::vector<TokenLogprobs>& logprobs,
                               OrderedJson finish) {
  OrderedJson choice = {{"index", 0}};
  const bool end = !finish.is_null();
  if (wire == Wire::kChat) {
    ReasoningSplitter::Parts parts{"", text};
    if (reasoning && !end) parts = reasoning->Push(text);
    ToolCallStream::Delta calls;
    if (tools && !end) {
      calls = tools->Push(parts.content);
      parts.content = std::move(calls.content);
    }
    // Text held back (it may open a call) leaves nothing to say: no chunk.
    if (tools && !end && parts.content.empty() && parts.reasoning.empty() && calls.calls.empty() &&
        (top_logprobs < 0 || logprobs.empty())) {
      return nullptr;
    }
    choice["delta"] = end ? OrderedJson::object() : Delta(parts, false);
    if (!calls.calls.empty()) {
      if (parts.content.empty()) choice["delta"].erase("content");
      OrderedJson list = OrderedJson::array();
      for (const auto& d : calls.calls) list.push_back(CallDeltaJson(d));
      choice["delta"]["tool_calls"] = std::move(list);
    }
  } else {
    choice["text"] = text;
  }
  if (top_logprobs >= 0 && !end) choice["logprobs"] = Logprobs(logprobs);
  choice["finish_reason"] = std::move(finish);
  return Envelope(true, OrderedJson::array({std::move(choice)}));
}

OrderedJson ReplyFormat::Rest() {
  ReasoningSplitter::Parts parts;
  if (reasoning) parts = reasoning->Finish();
  ToolCallStream::Delta calls;
  if (tools) {
    calls = tools->Push(parts.content);
    ToolCallStream::Delta rest = tools->Finish();
    calls.content += rest.content;
    calls.calls.insert(calls.calls.end(), rest.calls.begin(), rest.calls.end());
    parts.content = std::move(calls.content);
  }
  if (parts.reasoning.empty() && parts.content.empty() && calls.calls.empty()) return nullptr;
  OrderedJson delta = Delta(parts, false);
  if (!calls.calls.empty()) {
    if (parts.content.empty()) delta.erase("content");
    OrderedJson list = OrderedJson::array();
    for (const auto& d : calls.calls) list.push_back(CallDeltaJson(d));
    delta["tool_calls"] = std::move(list);
  }
  OrderedJson choice = {{"index", 0}, {"delta", std::move(delta)}, {"finish_reason", nullptr}};
  return Envelope(true, OrderedJson::array({std::move(choice)}));
}

OrderedJson ReplyFormat::Opening() const {
  if (wire != Wire::kChat) return nullptr;
  return Envelope(true, OrderedJson::array({{{"index", 0},
                                             {"delta", {{"role", "assistant"}, {"content", ""}}},
                                             {"finish_reason", nullptr}}}));
}

OrderedJson ReplyFormat::UsageChunk(const StreamEvent& last) const {
  OrderedJson out = Envelope(true, OrderedJson::array());
  out["usage"] = Usage(last);
  return out;
}

}  // namespace mlc::serve
