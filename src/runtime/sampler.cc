// Token sampling: greedy, or temperature softmax restricted by top-k and top-p, from a seeded
// generator so a run is reproducible; a sampled token's log-probabilities.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mlc_manifest/runtime.h"

namespace mlc {
namespace {

// The first index of the largest logit (NaNs never win; a NaN first logit is returned as
// std::max_element would), in two passes the compiler vectorises: the largest value over 16
// independent lanes, then where it first occurs.
int32_t Argmax(std::span<const float> logits) {
  const size_t n = logits.size();
  if (n == 0 || std::isnan(logits[0])) return 0;
  constexpr size_t kLanes = 16;
  float lane[kLanes];
  std::fill_n(lane, kLanes, logits[0]);
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) lane[j] = logits[i + j] > lane[j] ? logits[i + j] : lane[j];
  }
  float best = logits[0];
  for (float v : lane) best = v > best ? v : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (size_t k = 0; k < n; ++k) {
    if (logits[k] == best) return static_cast<int32_t>(k);
  }
  return 0;
}

}  // namespace

Status CheckSamplerConfig(const SamplerConfig& c) {
  Errors errors;
  if (!(c.temperature >= 0) || !std::isfinite(c.temperature)) {
    errors.push_back(Error{ErrorCode::kUsage, "/temperature", "expected a finite value >= 0"});
  }
  if (!(c.top_p > 0 && c.top_p <= 1)) {
    errors.push_back(Error{ErrorCode::kUsage, "/top_p", "expected a value in (0, 1]"});
  }
  if (c.top_k < 0) {
    errors.push_back(Error{ErrorCode::kUsage, "/top_k", "expected an integer >= 0 (0: all)"});
  }
  if (!(c.repetition_penalty > 0) || !std::isfinite(c.repetition_penalty)) {
    errors.push_back(Error{ErrorCode::kUsage, "/repetition_penalty", "expected a finite value > 0"});
  }
  if (!(c.presence_penalty >= -2 && c.presence_penalty <= 2)) {
    errors.push_back(Error{ErrorCode::kUsage, "/presence_penalty", "expected a value in [-2, 2]"});
  }
  if (!(c.frequency_penalty >= -2 && c.frequency_penalty <= 2)) {
    errors.push_back(Error{ErrorCode::kUsage, "/frequency_penalty", "expected a value in [-2, 2]"});
  }
  // Paths point into the sampling settings (the fields of SamplerConfig).
  if (!errors.empty()) return InDocument(std::move(errors), "sampler settings");
  return Status::Ok();
}

Sampler::Sampler(const SamplerConfig& config) : config_(config), rng_(config.seed) {}

TokenLogprobs LogprobsOf(std::span<const float> logits, double temperature, int32_t chosen,
                         int top_n) {
  TokenLogprobs out;
  out.token = chosen;
  if (logits.empty()) return out;
  const double t = temperature > 0 ? temperature : 1.0;
  double max_z = -std::numeric_limits<double>::infinity();
  for (float l : logits) max_z = std::max(max_z, static_cast<double>(l) / t);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) / t - max_z);
  const double lse = max_z + std::log(sum);
  auto logprob = [&](int32_t id) { return static_cast<double>(logits[static_cast<size_t>(id)]) / t - lse; };
  if (chosen >= 0 && static_cast<size_t>(chosen) < logits.size()) out.logprob = logprob(chosen);
  // The top_n by logit, kept sorted while scanning (a larger logit first; ties: the lower id).
  const size_t n = std::min<size_t>(static_cast<size_t>(std::max(top_n, 0)), logits.size());
  std::vector<int32_t> top;
  top.reserve(n + 1);
  auto before = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
  for (size_t i = 0; i < logits.size() && n > 0; ++i) {
    const auto id = static_cast<int32_t>(i);
    if (top.size() == n && !before(id, top.back())) continue;
    top.insert(std::upper_bound(top.begin(), top.end(), id, before), id);
    if (top.size() > n) top.pop_back();
  }
  // A token the distribution cannot produce (a grammar's mask: -infinity) is no alternative.
  for (int32_t id : top) {
    if (std::isfinite(logprob(id))) out.top.emplace_back(id, logprob(id));
  }
  return out;
}

int32_t Sampler::Sample(std::span<const float> raw) { return Sample(raw, 0, nullptr); }

int32_t Sampler::Sample(std::span<const float> raw, int top_n, TokenLogprobs* logprobs) {
  if (raw.empty()) return 0;
  std::vector<float> penalized;
  std::span<const float> logits = raw;
  bool penalize = config_.repetition_penalty != 1.0 || config_.presence_penalty != 0.0 ||
                  config_.frequency_penalty != 0.0;
  if (penalize && !counts_.empty()) {
    penalized.assign(raw.begin(), raw.end());
    for (const auto& [token, count] : counts_) {
      if (token < 0 || static_cast<size_t>(token) >= penalized.size()) continue;
      float& l = penalized[static_cast<size_t>(token)];
      double r = config_.repetition_penalty;
      double v = l > 0 ? l / r : l * r;
      v -= config_.presence_penalty + static_cast<double>(count) * config_.frequency_penalty;
      l = static_cast<float>(v);
    }
    logits = penalized;
  }
  int32_t token = Choose(logits);
  ++counts_[token];
  if (logprobs) *logprobs = LogprobsOf(logits, config_.temperature, token, top_n);
  return token;
}

int32_t Sampler::Choose(std::span<const float> logits) {
  if (config_.temperature <= 0 || config_.top_k == 1) return Argmax(logits);
  // Candidates by descending logit (ties: lower id first).
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t keep = logits.size();
  if (config_.top_k > 0) keep = std::min<size_t>(keep, static_cast<size_t>(config_.top_k));
  auto by_logit = [&](int32_t a, int32_t b) {
    return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
  };
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    by_logit);
  order.resize(keep);
  // Softmax with temperature over the kept candidates.
  double max_logit = logits[order.front()];
  std::vector<double> probs(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - max_logit) / config_.temperature);
    sum += probs[i];
  }
  // Nucleus: the smallest prefix whose mass reaches top_p.
  size_t nucleus = keep;
  if (config_.top_p < 1) {
    double mass = 0;
    for (size_t i = 0; i < keep; ++i) {
      mass += probs[i] / sum;
      if (mass >= config_.top_p) {
        nucleus = i + 1;
        break;
      }
    }
  }
  double total = std::accumulate(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(nucleus), 0.0);
  std::uniform_real_distribution<double> uniform(0.0, total);
  double r = uniform(rng_);
  for (size_t i = 0; i < nucleus; ++i) {
    r -= probs[i];
    if (r < 0) return order[i];
  }
  return order[nucleus - 1];
}

}  // namespace mlc
