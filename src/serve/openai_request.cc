// The body of an OpenAI chat completion request: messages (SPEC 7's parser), max_tokens or
// max_completion_tokens, temperature, top_p, seed, stop, n, stream and stream_options, each
// checked with its JSON Pointer; and OpenAI's error object.
#include <cmath>

#include "mlc_manifest/serve.h"

namespace mlc {
namespace {

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

}  // namespace

Result<ChatCompletionRequest> ParseChatCompletionRequest(const Json& doc,
                                                         const ChatCompletionLimits& limits,
                                                         const SamplerConfig& defaults) {
  if (!doc.is_object()) return Invalid("", "expected a JSON object, got " + JsonTypeName(doc));
  ChatCompletionRequest r;
  r.sampler = defaults;
  Errors errors;
  auto keep = [&errors](auto result, auto& out) {
    if (result) {
      out = *result;
    } else {
      errors.insert(errors.end(), result.errors().begin(), result.errors().end());
    }
  };
  if (Present(doc, "model")) {
    if (doc["model"].is_string()) {
      r.model = doc["model"].get<std::string>();
    } else {
      errors.push_back(Invalid("/model", "expected a string"));
    }
  }
  if (!doc.contains("messages")) {
    errors.push_back(Invalid("/messages", "the request needs messages"));
  } else if (doc["messages"].is_array() && doc["messages"].size() > limits.max_messages) {
    errors.push_back(Error{ErrorCode::kLimit, "/messages",
                           "at most " + std::to_string(limits.max_messages) + " messages"});
  } else {
    keep(ParseMessages(doc["messages"], "/messages"), r.messages);
  }
  r.max_tokens = limits.default_max_tokens;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (Present(doc, key)) keep(Integer(doc, key, 1, limits.max_tokens), r.max_tokens);
  }
  if (Present(doc, "temperature")) keep(Number(doc, "temperature", 0, 2), r.sampler.temperature);
  if (Present(doc, "top_p")) {
    keep(Number(doc, "top_p", 0, 1), r.sampler.top_p);
    if (r.sampler.top_p <= 0) errors.push_back(Invalid("/top_p", "expected a number in (0, 1]"));
  }
  if (Present(doc, "seed")) {
    int64_t seed = 0;
    keep(Integer(doc, "seed", -kMaxSafeInteger, kMaxSafeInteger), seed);
    r.sampler.seed = static_cast<uint64_t>(seed);
  }
  if (Present(doc, "n")) {
    int64_t n = 1;
    keep(Integer(doc, "n", 1, 1), n);
  }
  if (Present(doc, "stop")) {
    const Json& s = doc["stop"];
    if (s.is_string()) {
      r.stop.push_back(s.get<std::string>());
    } else if (s.is_array() && s.size() <= limits.max_stop_strings) {
      for (size_t i = 0; i < s.size(); ++i) {
        if (!s[i].is_string() || s[i].get<std::string>().empty()) {
          errors.push_back(Invalid(PointerAppend("/stop", i), "expected a non-empty string"));
        } else {
          r.stop.push_back(s[i].get<std::string>());
        }
      }
    } else {
      errors.push_back(Invalid("/stop", "expected a string or an array of at most " +
                                            std::to_string(limits.max_stop_strings) + " strings"));
    }
    for (const std::string& x : r.stop) {
      if (x.empty()) errors.push_back(Invalid("/stop", "a stop string cannot be empty"));
    }
  }
  if (Present(doc, "stream")) {
    if (doc["stream"].is_boolean()) {
      r.stream = doc["stream"].get<bool>();
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
        r.include_usage = o["include_usage"].get<bool>();
      } else {
        errors.push_back(Invalid("/stream_options/include_usage", "expected true or false"));
      }
    }
  }
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
