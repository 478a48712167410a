// The OpenAI wire format's small parts: JSON bodies and errors with their HTTP status, finish
// reasons, usage, and the sampling defaults a request starts from.
#include "serve/server_impl.h"

namespace mlc::serve {

std::string Dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

void SendJson(const Reply& res, int status, const OrderedJson& body) {
  const std::string text = Dump(body);
  res.http->set_status(res.res, status);
  res.http->set_content(res.res, text.data(), text.size(), "application/json");
}

void SendError(const Reply& res, int status, const OrderedJson& error) {
  SendJson(res, status, error);
}

int StatusFor(const Errors& errors) {
  if (errors.empty()) return 500;
  switch (errors.front().code) {
    case ErrorCode::kIo:
      return 500;
    default:
      return 400;
  }
}

std::string FinishReason(const std::string& engine_reason) {
  return engine_reason == "length" ? "length" : "stop";
}

OrderedJson Usage(const StreamEvent& last) {
  return {{"prompt_tokens", last.prompt_tokens},
          {"completion_tokens", last.completion_tokens},
          {"total_tokens", last.prompt_tokens + last.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", last.cached_tokens}}}};
}

SamplerConfig SamplingDefaults(const ChatConfig::Sampling& package) {
  SamplerConfig openai;
  openai.temperature = 1.0;
  ChatSamplingOptions options;
  options.skip_refused = true;
  return ChatSamplerConfig(openai, package, options);
}

}  // namespace mlc::serve
