// Sampling a token from logits: temperature, nucleus (top_p), top_k and MLC's repetition,
// presence and frequency penalties, seeded and reproducible.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <span>

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

// Picks tokens from logits. A value type: it owns its generator and counts, and copies go on
// independently. Not synchronized.
class Sampler {
 public:
  explicit Sampler(const SamplerConfig& config);
  // The next token; it counts for the penalties of the following calls.
  int32_t Sample(std::span<const float> logits);

 private:
  int32_t Choose(std::span<const float> logits);
  SamplerConfig config_;
  std::mt19937_64 rng_;
  std::map<int32_t, int64_t> counts_;  // tokens returned so far
};

}  // namespace mlc
