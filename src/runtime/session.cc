// What sessions and the engine share: the chat config's stop ids, the stop reasons' names and
// the phase timings' JSON (the Session itself is a client of the engine: src/engine/session.cc).
#include <algorithm>
#include <cmath>

#include "mlc_manifest/runtime.h"

namespace mlc {

std::vector<int32_t> StopTokenIds(const ChatConfig& config) {
  std::vector<int32_t> ids;
  if (!config.raw.is_object() || !config.raw.contains("conv_template")) return ids;
  const Json& t = config.raw["conv_template"];
  if (!t.is_object() || !t.contains("stop_token_ids") || !t["stop_token_ids"].is_array()) return ids;
  for (const Json& v : t["stop_token_ids"]) {
    auto id = SafeInteger(v);
    if (id && *id >= 0 && *id <= INT32_MAX) ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

const char* StopReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
      return "stop_token";
    case StopReason::kStopString:
      return "stop_str";
    case StopReason::kLength:
      return "length";
    case StopReason::kCancelled:
      return "cancelled";
    case StopReason::kError:
      return "error";
  }
  return "error";
}

const char* FinishReasonName(StopReason reason) {
  switch (reason) {
    case StopReason::kStopToken:
    case StopReason::kStopString:
      return "stop";
    default:
      return StopReasonName(reason);
  }
}

namespace {

PhaseTimings Combine(PhaseTimings a, const PhaseTimings& b, int sign) {
  a.create_kv_ms += sign * b.create_kv_ms;
  a.embed_ms += sign * b.embed_ms;
  a.adapter_ms += sign * b.adapter_ms;
  a.prefill_ms += sign * b.prefill_ms;
  a.decode_ms += sign * b.decode_ms;
  a.prefill_positions += sign * b.prefill_positions;
  a.prefill_calls += sign * b.prefill_calls;
  a.decode_steps += sign * b.decode_steps;
  return a;
}

}  // namespace

PhaseTimings operator+(PhaseTimings a, const PhaseTimings& b) { return Combine(std::move(a), b, 1); }
PhaseTimings operator-(PhaseTimings a, const PhaseTimings& b) { return Combine(std::move(a), b, -1); }

double RoundToMicroseconds(double ms) { return std::round(ms * 1000.0) / 1000.0; }

OrderedJson PhaseTimingsJson(const PhaseTimings& t) {
  // Rates to a hundredth of a position per second.
  auto per_s = [](int64_t n, double ms) { return ms > 0 ? std::round(n * 100000.0 / ms) / 100.0 : 0.0; };
  return {{"create_kv_ms", RoundToMicroseconds(t.create_kv_ms)},
          {"embed_ms", RoundToMicroseconds(t.embed_ms)},
          {"adapter_ms", RoundToMicroseconds(t.adapter_ms)},
          {"prefill_ms", RoundToMicroseconds(t.prefill_ms)},
          {"decode_ms", RoundToMicroseconds(t.decode_ms)},
          {"prefill_positions", t.prefill_positions},
          {"prefill_calls", t.prefill_calls},
          {"decode_steps", t.decode_steps},
          {"prefill_positions_per_s", per_s(t.prefill_positions, t.prefill_ms)},
          {"decode_steps_per_s", per_s(t.decode_steps, t.decode_ms)}};
}

}  // namespace mlc
