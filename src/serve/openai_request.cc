// The body of an OpenAI chat completion request: messages (SPEC 7's parser), max_tokens or
// max_completion_tokens, temperature, top_p, seed, stop, n, stream and stream_options (the fields
// completions share), logprobs and top_logprobs, each checked with its JSON Pointer; and OpenAI's
// error object.
#include <algorithm>
#include <cmath>
#include <iterator>

#include "serve/request_fields.h"

namespace mlc {

Result<double> Number(const Json& doc, const char* key, double lo, double hi) {
  const Json& v = doc[key];
  std::string at = PointerAppend("", key);
  if (!v.is_number()) return Invalid(at, "expected a number, got " + JsonTypeName(v));
  double x = v.get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    return Invalid(at, "expected a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return x;
}

Result<int64_t> Integer(const Json& doc, const char* key, int64_t lo, int64_t hi) {
  std::string at = PointerAppend("", key);
  auto v = SafeInteger(doc[key]);
  if (!v) return Invalid(at, "expected an integer, got " + JsonTypeName(doc[key]));
  if (*v < lo || *v > hi) {
    return Invalid(at, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }
  return *v;
}

bool Present(const Json& doc, const char* key) { return doc.contains(key) && !doc[key].is_null(); }

void ParseModel(const Json& doc, std::string& model, Errors& errors) {
  if (!Present(doc, "model")) return;
  if (doc["model"].is_string()) {
    model = doc["model"].get<std::string>();
  } else {
    errors.push_back(Invalid("/model", "expected a string"));
  }
}

void ParseSharedFields(const Json& doc, const ChatCompletionLimits& limits, SharedFields& out,
                       Errors& errors) {
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (Present(doc, key)) Keep(errors, Integer(doc, key, 1, limits.max_tokens), out.max_tokens);
  }
  if (Present(doc, "temperature")) Keep(errors, Number(doc, "temperature", 0, 2), out.sampler.temperature);
  if (Present(doc, "top_p")) {
    Keep(errors, Number(doc, "top_p", 0, 1), out.sampler.top_p);
    if (out.sampler.top_p <= 0) errors.push_back(Invalid("/top_p", "expected a number in (0, 1]"));
  }
  if (Present(doc, "seed")) {
    int64_t seed = 0;
    Keep(errors, Integer(doc, "seed", -kMaxSafeInteger, kMaxSafeInteger), seed);
    out.sampler.seed = static_cast<uint64_t>(seed);
  }
  if (Present(doc, "n")) {
    int64_t n = 1;
    Keep(errors, Integer(doc, "n", 1, 1), n);
  }
  if (Present(doc, "stop")) {
    const Json& s = doc["stop"];
    if (s.is_string()) {
      out.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= limits.max_stop_strings) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (!s[i].is_string() || s[i].get<std::string>().empty()) {
          errors.push_back(Invalid(PointerAppend("/stop", i), "expected a non-empty string"));
        } else {
          out.stop.push_back(s[i].get<std::string>());
        }
      }
    } else {
      errors.push_back(Invalid("/stop", "expected a string or an array of at most " +
                                            std::to_string(limits.max_stop_strings) + " strings"));
    }
    for (const std::string& x : out.stop) {
      if (x.empty()) errors.push_back(Invalid("/stop", "a stop string cannot be empty"));
    }
  }
  // Token biases are not applied by this server's sampler: refused rather than ignored.
  if (Present(doc, "logit_bias") && !(doc["logit_bias"].is_object() && doc["logit_bias"].empty())) {
    errors.push_back(Error{ErrorCode::kUnsupported, "/logit_bias",
                           "logit_bias is not supported by this server (leave it out or send {})"});
  }
  if (Present(doc, "stream")) {
    if (doc["stream"].is_boolean()) {
      out.stream = doc["stream"].get<bool>();
    } else {
      errors.push_back(Invalid("/stream", "expected true or false"));
    }
  }
  if (Present(doc, "stream_options")) {
    const Json& o = doc["stream_options"];
    if (!o.is_object()) {
      errors.push_back(Invalid("/stream_options", "expected an object"));
    } else if (o.contains("include_usage")) {
      if (o["include_usage"].is_boolean()) {
        out.include_usage = o["include_usage"].get<bool>();
      } else {
        errors.push_back(Invalid("/stream_options/include_usage", "expected true or false"));
      }
    }
  }
}

Result<int> ParseChatLogprobs(const Json& doc) {
  bool on = false;
  if (Present(doc, "logprobs")) {
    if (!doc["logprobs"].is_boolean()) return Invalid("/logprobs", "expected true or false");
    on = doc["logprobs"].get<bool>();
  }
  if (!Present(doc, "top_logprobs")) return on ? 0 : -1;
  auto n = Integer(doc, "top_logprobs", 0, kMaxTopLogprobs);
  MLC_RETURN_IF_ERROR(n);
  if (!on) return Invalid("/top_logprobs", "top_logprobs needs logprobs: true");
  return static_cast<int>(*n);
}

// reasoning_effort and chat_template_kwargs.enable_thinking: the thinking switch, or none when
// neither is given; the two must agree when both are. Other template arguments are ignored.
Result<std::optional<bool>> ParseThinking(const Json& doc) {
  std::optional<bool> effort, kwarg;
  if (Present(doc, "reasoning_effort")) {
    const Json& e = doc["reasoning_effort"];
    static const char* const kOn[] = {"minimal", "low", "medium", "high", "xhigh"};
    if (e == "none") {
      effort = false;
    } else if (e.is_string() && std::find(std::begin(kOn), std::end(kOn), e.get<std::string>()) != std::end(kOn)) {
      effort = true;
    } else {
      return Invalid("/reasoning_effort", "expected \"none\", \"minimal\", \"low\", \"medium\", \"high\" or \"xhigh\"");
    }
  }
  if (Present(doc, "chat_template_kwargs")) {
    const Json& k = doc["chat_template_kwargs"];
    if (!k.is_object()) return Invalid("/chat_template_kwargs", "expected an object");
    if (k.contains("enable_thinking") && !k["enable_thinking"].is_null()) {
      if (!k["enable_thinking"].is_boolean()) {
        return Invalid("/chat_template_kwargs/enable_thinking", "expected true or false");
      }
      kwarg = k["enable_thinking"].get<bool>();
    }
  }
  if (effort && kwarg && *effort != *kwarg) {
    return Invalid("/reasoning_effort", "disagrees with chat_template_kwargs.enable_thinking");
  }
  return kwarg ? kwarg : effort;
}

Result<ChatCompletionRequest> ParseChatCompletionRequest(const Json& doc,
                                                         const ChatCompletionLimits& limits,
                                                         const SamplerConfig& defaults) {
  if (!doc.is_object()) return Invalid("", "expected a JSON object, got " + JsonTypeName(doc));
  ChatCompletionRequest r;
  r.sampler = defaults;
  Errors errors;
  ParseModel(doc, r.model, errors);
  if (!doc.contains("messages")) {
    errors.push_back(Invalid("/messages", "the request needs messages"));
  } else if (doc["messages"].is_array() && doc["messages"].size() > limits.max_messages) {
    errors.push_back(Error{ErrorCode::kLimit, "/messages",
                           "at most " + std::to_string(limits.max_messages) + " messages"});
  } else {
    Keep(errors, ParseMessages(doc["messages"], "/messages"), r.messages);
  }
  r.max_tokens = limits.default_max_tokens;
  ParseSharedFieldsInto(doc, limits, r, errors);
  Keep(errors, ParseChatLogprobs(doc), r.top_logprobs);
  Keep(errors, ParseThinking(doc), r.thinking);
  if (!errors.empty()) return errors;
  return r;
}

OrderedJson OpenAiError(const std::string& message, const std::string& type,
                        const std::string& param, const std::string& code) {
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? OrderedJson() : OrderedJson(param)},
            {"code", code.empty() ? OrderedJson() : OrderedJson(code)}}}};
}

OrderedJson OpenAiError(const Errors& errors) {
  std::string message;
  for (const Error& e : errors) message += (message.empty() ? "" : "; ") + e.ToString();
  std::string param = errors.empty() ? "" : errors.front().path;
  return OpenAiError(message, "invalid_request_error", param);
}

}  // namespace mlc
