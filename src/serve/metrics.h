// The server's Prometheus metrics (GET /metrics, text format 0.0.4): requests by outcome (401s for
// want of an API key among them) for the whole server; per model (label `model`), prompt and
// generated tokens, time to first token and inter-token latency histograms, and gauges read from
// its engine at scrape time. Recording is lock-free (atomics, no allocation), from any thread.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "mlc_manifest/engine.h"

namespace mlc::serve {

// How a request ended, the `outcome` label of mlc_manifest_requests_total.
// kUnauthorized: refused for want of a valid API key (401), on any route.
enum class Outcome { kCompleted, kCancelled, kTimeout, kInvalid, kRejected, kError, kUnauthorized, kCount };
const char* OutcomeName(Outcome o);

// A histogram over fixed bucket bounds (seconds); the sum kept in nanoseconds.
class Histogram {
 public:
  static constexpr size_t kMaxBuckets = 16;
  template <size_t N>
  explicit Histogram(const std::array<double, N>& bounds) : size_(N) {
    static_assert(N <= kMaxBuckets);
    for (size_t i = 0; i < N; ++i) bounds_[i] = bounds[i];
  }
  void Observe(std::chrono::nanoseconds d);
  // The `name_bucket`, `name_sum` and `name_count` lines.
  // labels: more labels before `le` ("model=\"a\"" or ""), written as they are.
  void Render(const std::string& name, const std::string& labels, std::string& out) const;

 private:
  std::array<double, kMaxBuckets> bounds_{};
  size_t size_;
  std::array<std::atomic<uint64_t>, kMaxBuckets + 1> counts_{};  // the last: above every bound
  std::atomic<uint64_t> sum_ns_{0};
};

// One model's tokens and latencies.
struct ModelMetrics {
  ModelMetrics();
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generated_tokens{0};
  Histogram time_to_first_token;
  Histogram inter_token_latency;
};

// A model as the exposition shows it: its name (the `model` label), counters and engine's gauges.
struct ModelView {
  const std::string* name;
  const ModelMetrics* metrics;
  Engine::Stats engine;
};

struct Metrics {
  void Count(Outcome o) { requests[static_cast<size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
  // The text exposition, each model's series labelled with its name.
  std::string Render(const std::vector<ModelView>& models) const;

  std::array<std::atomic<uint64_t>, static_cast<size_t>(Outcome::kCount)> requests{};
};

// The timing of one request's tokens as its events arrive (on the engine's thread): the first
// token's delay from the request's start, then the gap before each next one; token counts at
// the end.
class RequestTimer {
 public:
  RequestTimer(ModelMetrics* metrics, std::chrono::steady_clock::time_point start)
      : metrics_(metrics), last_(start) {}
  void OnEvent(const StreamEvent& e);

 private:
  ModelMetrics* metrics_;
  std::chrono::steady_clock::time_point last_;
  bool first_ = true;
};

}  // namespace mlc::serve
