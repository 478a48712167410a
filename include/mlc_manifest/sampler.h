// Sampling a token from logits: temperature, nucleus (top_p), top_k and MLC's repetition,
// presence and frequency penalties, seeded and reproducible; and the log-probabilities of a
// sampled token (OpenAI's logprobs).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc {

struct SamplerConfig {
  double temperature = 0.0;  // 0: greedy
  double top_p = 1.0;        // nucleus mass in (0, 1]
  int64_t top_k = 0;         // 0: all tokens
  uint64_t seed = 0;
  // Penalties over the tokens this sampler returned before (as MLC applies them to the tokens
  // generated for a request): a logit l of such a token becomes l / r (l > 0) or l * r, then
  // l - presence - count x frequency.
  double repetition_penalty = 1.0;  // > 0; 1: none
  double presence_penalty = 0.0;    // in [-2, 2]
  double frequency_penalty = 0.0;   // in [-2, 2]
};

Status CheckSamplerConfig(const SamplerConfig& config);

// A sampled token's log-probability and the most likely tokens' at its step.
struct TokenLogprobs {
  int32_t token = 0;
  double logprob = 0;
  std::vector<std::pair<int32_t, double>> top;  // most likely first (ties: lower id first)
};

// log-softmax(logits / temperature) over the whole vocabulary, in float64 with the log-sum-exp
// (temperature <= 0: 1, the model's own distribution): the value of `chosen` and the top_n most
// likely tokens. Allocates only the top_n list.
TokenLogprobs LogprobsOf(std::span<const float> logits, double temperature, int32_t chosen,
                         int top_n);

// Picks tokens from logits. A value type: it owns its generator and counts, and copies go on
// independently. Not synchronized.
class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);
  // The next token; it counts for the penalties of the following calls.
  int32_t Sample(std::span<const float> logits);
  // The same, with the token's log-probabilities (LogprobsOf) of the distribution it was drawn
  // from: the penalized logits at the sampler's temperature, before top-k and top-p.
  int32_t Sample(std::span<const float> logits, int top_n, TokenLogprobs* logprobs);

 private:
  int32_t Choose(std::span<const float> logits);
  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::map<int32_t, int64_t> counts_;  // tokens returned so far
};

}  // namespace mlc
