// The Prometheus text exposition of the server's counters, histograms and gauges
// (mlc_manifest_* names, _total counters, seconds), and their lock-free recording.
#include "serve/metrics.h"

#include <cstdio>

namespace mlc::serve {
namespace {

constexpr std::array<double, 13> kFirstTokenBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                      1,     2.5,  5,     10,   30,  60};
constexpr std::array<double, 13> kInterTokenBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                      0.25,  0.5,    1,     2.5,  5,     10};

// A bucket bound as written ("0.005"); a sum to full precision.
std::string Number(double v, bool bound = false) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), bound ? "%g" : "%.17g", v);
  return buf;
}

void Header(std::string& out, const char* name, const char* type, const char* help) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Sample(std::string& out, const std::string& name, const std::string& value) {
  out += name + " " + value + "\n";
}

}  // namespace

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kCompleted: return "completed";
    case Outcome::kCancelled: return "cancelled";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kInvalid: return "invalid";
    case Outcome::kRejected: return "rejected";
    case Outcome::kError: return "error";
    case Outcome::kUnauthorized: return "unauthorized";
    case Outcome::kCount: break;
  }
  return "error";
}

void Histogram::Observe(std::chrono::nanoseconds d) {
  const double seconds = std::chrono::duration<double>(d).count();
  size_t i = 0;
  while (i < size_ && seconds > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(d.count(), 0)), std::memory_order_relaxed);
}

void Histogram::Render(const std::string& name, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= size_; ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < size_ ? Number(bounds_[i], true) : "+Inf";
    Sample(out, name + "_bucket{le=\"" + le + "\"}", std::to_string(cumulative));
  }
  Sample(out, name + "_sum", Number(static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9));
  Sample(out, name + "_count", std::to_string(cumulative));
}

Metrics::Metrics() : time_to_first_token(kFirstTokenBounds), inter_token_latency(kInterTokenBounds) {}

std::string Metrics::Render(const Engine::Stats& engine) const {
  std::string out;
  Header(out, "mlc_manifest_requests_total", "counter", "Requests answered, by how they ended.");
  for (size_t i = 0; i < requests.size(); ++i) {
    Sample(out, std::string("mlc_manifest_requests_total{outcome=\"") + OutcomeName(static_cast<Outcome>(i)) + "\"}",
           std::to_string(requests[i].load(std::memory_order_relaxed)));
  }
  Header(out, "mlc_manifest_prompt_tokens_total", "counter", "Prompt positions prefilled.");
  Sample(out, "mlc_manifest_prompt_tokens_total", std::to_string(prompt_tokens.load(std::memory_order_relaxed)));
  Header(out, "mlc_manifest_generation_tokens_total", "counter", "Tokens generated.");
  Sample(out, "mlc_manifest_generation_tokens_total",
         std::to_string(generated_tokens.load(std::memory_order_relaxed)));
  Header(out, "mlc_manifest_time_to_first_token_seconds", "histogram",
         "Time from a request's arrival to its first generated token.");
  time_to_first_token.Render("mlc_manifest_time_to_first_token_seconds", out);
  Header(out, "mlc_manifest_inter_token_latency_seconds", "histogram",
         "Time between a request's consecutive generated tokens.");
  inter_token_latency.Render("mlc_manifest_inter_token_latency_seconds", out);
  Header(out, "mlc_manifest_running_sequences", "gauge", "Sequences in the running batch.");
  Sample(out, "mlc_manifest_running_sequences", std::to_string(engine.running));
  Header(out, "mlc_manifest_waiting_sequences", "gauge", "Requests queued or being prepared.");
  Sample(out, "mlc_manifest_waiting_sequences", std::to_string(engine.queued));
  const int64_t used = (engine.total_pages - engine.free_pages) * engine.page_size;
  Header(out, "mlc_manifest_kv_positions_used", "gauge", "KV cache positions held by sequences.");
  Sample(out, "mlc_manifest_kv_positions_used", std::to_string(used));
  Header(out, "mlc_manifest_kv_positions_free", "gauge", "KV cache positions free.");
  Sample(out, "mlc_manifest_kv_positions_free", std::to_string(engine.free_pages * engine.page_size));
  auto counter = [&](const char* name, const char* help, int64_t v) {
    Header(out, name, "counter", help);
    Sample(out, name, std::to_string(v));
  };
  auto gauge = [&](const char* name, const char* help, int64_t v) {
    Header(out, name, "gauge", help);
    Sample(out, name, std::to_string(v));
  };
  gauge("mlc_manifest_prefix_cache_enabled", "1 when the prefix cache is on.", engine.prefix_cache ? 1 : 0);
  counter("mlc_manifest_prefix_cache_queries_total", "Requests that looked up a cached prefix.",
          engine.prefix_queries);
  counter("mlc_manifest_prefix_cache_hits_total", "Requests that reused at least one cached KV page.",
          engine.prefix_hits);
  counter("mlc_manifest_prefix_cache_reused_tokens_total", "Prompt positions taken from the prefix cache.",
          engine.cached_tokens);
  gauge("mlc_manifest_prefix_cache_pages", "KV pages held by the prefix cache.", engine.cached_pages);
  gauge("mlc_manifest_prefix_cache_positions", "KV positions held by the prefix cache.",
        engine.cached_pages * engine.page_size);
  counter("mlc_manifest_prefix_cache_evictions_total", "KV pages evicted from the prefix cache.",
          engine.evictions);
  counter("mlc_manifest_adapter_cache_hits_total", "Media inputs whose adapter rows came from the adapter cache.",
          engine.adapter_hits);
  counter("mlc_manifest_adapter_runs_total", "Adapter (tower) calls.", engine.adapter_runs);
  gauge("mlc_manifest_adapter_cache_entries", "Adapter outputs held by the adapter cache.",
        engine.adapter_cache_entries);
  return out;
}

void RequestTimer::OnEvent(const StreamEvent& e) {
  const auto now = std::chrono::steady_clock::now();
  if (!e.tokens.empty()) {
    (first_ ? metrics_->time_to_first_token : metrics_->inter_token_latency).Observe(now - last_);
    first_ = false;
    last_ = now;
  }
  if (e.done) {
    metrics_->prompt_tokens.fetch_add(static_cast<uint64_t>(e.prompt_tokens), std::memory_order_relaxed);
    metrics_->generated_tokens.fetch_add(static_cast<uint64_t>(e.completion_tokens),
                                         std::memory_order_relaxed);
  }
}

}  // namespace mlc::serve
