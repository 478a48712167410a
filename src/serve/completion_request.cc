// The body of a legacy completion request (POST /v1/completions): the prompt (one string or one
// array of token ids), logprobs, and the refused options (echo, several prompts, suffix, best_of),
// the rest shared with chat completions (serve/request_fields.h).
#include <limits>

#include "serve/request_fields.h"

namespace mlc {
namespace {

// One prompt: a string or an array of token ids; a list of either is refused.
Status ParsePrompt(const Json& p, CompletionRequest& r) {
  if (p.is_string()) {
    r.prompt = p.get<std::string>();
    return Status::Ok();
  }
  if (!p.is_array()) return Invalid("/prompt", "expected a string or an array of token ids, got " + JsonTypeName(p));
  if (p.empty()) return Invalid("/prompt", "expected at least one token id");
  if (p[0].is_string() || p[0].is_array()) {
    return Invalid("/prompt", "one prompt per request: this server does not take a list of prompts");
  }
  Errors errors;
  for (size_t i = 0; i < p.size(); ++i) {
    auto id = SafeInteger(p[i]);
    if (!id || *id < 0 || *id > std::numeric_limits<int32_t>::max()) {
      errors.push_back(Invalid(PointerAppend("/prompt", i), "expected a token id (an integer >= 0)"));
    } else {
      r.prompt_ids.push_back(static_cast<int32_t>(*id));
    }
  }
  if (!errors.empty()) return errors;
  r.prompt_is_ids = true;
  return Status::Ok();
}

// What this server does not do, each named.
void RefuseUnsupported(const Json& doc, Errors& errors) {
  if (Present(doc, "echo") && !(doc["echo"].is_boolean() && !doc["echo"].get<bool>())) {
    errors.push_back(Invalid("/echo", "echo is not supported: only echo false"));
  }
  if (Present(doc, "suffix") && !(doc["suffix"].is_string() && doc["suffix"].get<std::string>().empty())) {
    errors.push_back(Invalid("/suffix", "suffix is not supported"));
  }
  if (Present(doc, "best_of")) {
    int64_t best_of = 1;
    Keep(errors, Integer(doc, "best_of", 1, 1), best_of);
  }
}

}  // namespace

Result<CompletionRequest> ParseCompletionRequest(const Json& doc, const ChatCompletionLimits& limits,
                                                 const SamplerConfig& defaults) {
  if (!doc.is_object()) return Invalid("", "expected a JSON object, got " + JsonTypeName(doc));
  CompletionRequest r;
  Errors errors;
  ParseModel(doc, r.model, errors);
  if (!Present(doc, "prompt")) {
    errors.push_back(Invalid("/prompt", "the request needs a prompt"));
  } else if (Status s = ParsePrompt(doc["prompt"], r); !s) {
    errors.insert(errors.end(), s.errors().begin(), s.errors().end());
  }
  r.sampler = defaults;
  ParseSharedFieldsInto(doc, limits, r, errors);
  if (Present(doc, "logprobs")) {
    int64_t n = -1;
    Keep(errors, Integer(doc, "logprobs", 0, kMaxTopLogprobs), n);
    r.top_logprobs = static_cast<int>(n);
  }
  RefuseUnsupported(doc, errors);
  if (!errors.empty()) return errors;
  return r;
}

}  // namespace mlc
