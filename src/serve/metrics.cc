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

// A label's value in the text format: backslash, double quote and line feed escaped.
std::string LabelValue(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
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

void Histogram::Render(const std::string& name, const std::string& labels, std::string& out) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= size_; ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    const std::string le = i < size_ ? Number(bounds_[i], true) : "+Inf";
    Sample(out, name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"" + le + "\"}",
           std::to_string(cumulative));
  }
  const std::string braced = labels.empty() ? "" : "{" + labels + "}";
  Sample(out, name + "_sum" + braced,
         Number(static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) * 1e-9));
  Sample(out, name + "_count" + braced, std::to_string(cumulative));
}

ModelMetrics::ModelMetrics()
    : time_to_first_token(kFirstTokenBounds), inter_token_latency(kInterTokenBounds) {}

std::string Metrics::Render(const std::vector<ModelView>& models) const {
  std::string out;
  Header(out, "mlc_manifest_requests_total", "counter", "Requests answered, by how they ended.");
  for (size_t i = 0; i < requests.size(); ++i) {
    Sample(out, std::string("mlc_manifest_requests_total{outcome=\"") + OutcomeName(static_cast<Outcome>(i)) + "\"}",
           std::to_string(requests[i].load(std::memory_order_relaxed)));
  }
  std::vector<std::string> labels;  // model="name", escaped as the text format asks
  for (const ModelView& m : models) labels.push_back("model=\"" + LabelValue(*m.name) + "\"");
  // One family: its header, then one sample per model.
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    Header(out, name, type, help);
    for (size_t i = 0; i < models.size(); ++i) {
      Sample(out, std::string(name) + "{" + labels[i] + "}", std::to_string(value(models[i])));
    }
  };
  auto load = [](const std::atomic<uint64_t>& v) { return v.load(std::memory_order_relaxed); };
  family("mlc_manifest_prompt_tokens_total", "counter", "Prompt positions prefilled.",
         [&](const ModelView& m) { return load(m.metrics->prompt_tokens); });
  family("mlc_manifest_generation_tokens_total", "counter", "Tokens generated.",
         [&](const ModelView& m) { return load(m.metrics->generated_tokens); });
  Header(out, "mlc_manifest_time_to_first_token_seconds", "histogram",
         "Time from a request's arrival to its first generated token.");
  for (size_t i = 0; i < models.size(); ++i) {
    models[i].metrics->time_to_first_token.Render("mlc_manifest_time_to_first_token_seconds", labels[i], out);
  }
  Header(out, "mlc_manifest_inter_token_latency_seconds", "histogram",
         "Time between a request's consecutive generated tokens.");
  for (size_t i = 0; i < models.size(); ++i) {
    models[i].metrics->inter_token_latency.Render("mlc_manifest_inter_token_latency_seconds", labels[i], out);
  }
  auto gauge = [&](const char* name, const char* help, auto value) { family(name, "gauge", help, value); };
  auto counter = [&](const char* name, const char* help, auto value) { family(name, "counter", help, value); };
  gauge("mlc_manifest_running_sequences", "Sequences in the running batch.",
        [](const ModelView& m) { return static_cast<int64_t>(m.engine.running); });
  gauge("mlc_manifest_waiting_sequences", "Requests queued or being prepared.",
        [](const ModelView& m) { return static_cast<int64_t>(m.engine.queued); });
  gauge("mlc_manifest_kv_positions_used", "KV cache positions held by sequences.", [](const ModelView& m) {
    return (m.engine.total_pages - m.engine.free_pages) * m.engine.page_size;
  });
  gauge("mlc_manifest_kv_positions_free", "KV cache positions free.",
        [](const ModelView& m) { return m.engine.free_pages * m.engine.page_size; });
  gauge("mlc_manifest_prefix_cache_enabled", "1 when the prefix cache is on.",
        [](const ModelView& m) { return m.engine.prefix_cache ? 1 : 0; });
  counter("mlc_manifest_prefix_cache_queries_total", "Requests that looked up a cached prefix.",
          [](const ModelView& m) { return m.engine.prefix_queries; });
  counter("mlc_manifest_prefix_cache_hits_total", "Requests that reused at least one cached KV page.",
          [](const ModelView& m) { return m.engine.prefix_hits; });
  counter("mlc_manifest_prefix_cache_reused_tokens_total", "Prompt positions taken from the prefix cache.",
          [](const ModelView& m) { return m.engine.cached_tokens; });
  gauge("mlc_manifest_prefix_cache_pages", "KV pages held by the prefix cache.",
        [](const ModelView& m) { return m.engine.cached_pages; });
  gauge("mlc_manifest_prefix_cache_positions", "KV positions held by the prefix cache.",
        [](const ModelView& m) { return m.engine.cached_pages * m.engine.page_size; });
  counter("mlc_manifest_prefix_cache_evictions_total", "KV pages evicted from the prefix cache.",
          [](const ModelView& m) { return m.engine.evictions; });
  counter("mlc_manifest_adapter_cache_hits_total", "Media inputs whose adapter rows came from the adapter cache.",
          [](const ModelView& m) { return m.engine.adapter_hits; });
  counter("mlc_manifest_adapter_runs_total", "Adapter (tower) calls.",
          [](const ModelView& m) { return m.engine.adapter_runs; });
  gauge("mlc_manifest_adapter_cache_entries", "Adapter outputs held by the adapter cache.",
        [](const ModelView& m) { return m.engine.adapter_cache_entries; });
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
