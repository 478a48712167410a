// The request fields chat completions and completions share (max_tokens, sampling, stop, n,
// stream, stream_options; logit_bias refused) and the small field readers, each error carrying its JSON Pointer.
#pragma once

#include <string>
#include <vector>

#include "mlc_manifest/serve.h"

namespace mlc {

constexpr int64_t kMaxTopLogprobs = 20;

// A number in [lo, hi] / an integer in [lo, hi] at doc[key]; present and not null.
Result<double> Number(const Json& doc, const char* key, double lo, double hi);
Result<int64_t> Integer(const Json& doc, const char* key, int64_t lo, int64_t hi);
bool Present(const Json& doc, const char* key);

// out = *result, or result's errors appended.
template <typename T, typename U>
void Keep(Errors& errors, Result<T> result, U& out) {
  if (result) {
    out = *result;
  } else {
    errors.insert(errors.end(), result.errors().begin(), result.errors().end());
  }
}

// model: a string when present.
void ParseModel(const Json& doc, std::string& model, Errors& errors);

struct SharedFields {
  int64_t max_tokens = 0;  // the default when the request leaves it out
  SamplerConfig sampler;   // the defaults, overridden by temperature, top_p, seed
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
};
// Reads the shared fields into out; their errors are appended.
void ParseSharedFields(const Json& doc, const ChatCompletionLimits& limits, SharedFields& out,
                       Errors& errors);

// Reads the shared fields into a request (its max_tokens and sampler are the defaults).
template <typename Request>
void ParseSharedFieldsInto(const Json& doc, const ChatCompletionLimits& limits, Request& r, Errors& errors) {
  SharedFields shared;
  shared.max_tokens = r.max_tokens;
  shared.sampler = r.sampler;
  ParseSharedFields(doc, limits, shared, errors);
  r.max_tokens = shared.max_tokens;
  r.sampler = shared.sampler;
  r.stop = std::move(shared.stop);
  r.stream = shared.stream;
  r.include_usage = shared.include_usage;
}

// Chat's logprobs (true/false) and top_logprobs (0..20, needs logprobs): -1 when off, else the
// number of alternatives.
Result<int> ParseChatLogprobs(const Json& doc);

}  // namespace mlc
