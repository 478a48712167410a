// The per-phase clock's totals (phase_clock.h): relaxed atomic counters, read as one snapshot.
#include "runtime/cpu/phase_clock.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "mlc_manifest/cpu_model.h"

namespace mlc::cpu {
namespace {

constexpr int kKinds = static_cast<int>(StepKind::kCount);
constexpr int kPhases = static_cast<int>(Phase::kCount);

struct Counters {
  std::atomic<int64_t> ns[kKinds][kPhases] = {};
  std::atomic<int64_t> steps[kKinds] = {};
  std::atomic<int64_t> rows[kKinds] = {};
  std::atomic<int64_t> pool_wait_ns[kKinds] = {}, pool_jobs[kKinds] = {}, worker_sleeps[kKinds] = {};
  std::atomic<int> pool_kind{0};
};

Counters& Totals() {
  static Counters counters;
  return counters;
}

std::atomic<bool>& On() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("MLC_CPU_PHASES");
    return v != nullptr && std::strcmp(v, "1") == 0;
  }()};
  return on;
}

int PoolKind() { return Totals().pool_kind.load(std::memory_order_relaxed); }

void Add(std::atomic<int64_t>& counter, int64_t v) { counter.fetch_add(v, std::memory_order_relaxed); }

}  // namespace

bool PhaseClockOn() { return On().load(std::memory_order_relaxed); }

void EnablePhaseClock(bool on) { On().store(on, std::memory_order_relaxed); }

void AddPhase(StepKind kind, Phase phase, int64_t ns) {
  if (PhaseClockOn()) Add(Totals().ns[static_cast<int>(kind)][static_cast<int>(phase)], ns);
}

void AddStep(StepKind kind, int64_t rows, int64_t ns) {
  if (!PhaseClockOn()) return;
  Add(Totals().ns[static_cast<int>(kind)][static_cast<int>(Phase::kStep)], ns);
  Add(Totals().steps[static_cast<int>(kind)], 1);
  Add(Totals().rows[static_cast<int>(kind)], rows);
}

void SetPoolKind(StepKind kind) { Totals().pool_kind.store(static_cast<int>(kind), std::memory_order_relaxed); }

void AddPoolWait(int64_t ns) {
  if (PhaseClockOn()) Add(Totals().pool_wait_ns[PoolKind()], ns);
}

void AddPoolJob() {
  if (PhaseClockOn()) Add(Totals().pool_jobs[PoolKind()], 1);
}

void AddWorkerSleep() {
  if (PhaseClockOn()) Add(Totals().worker_sleeps[PoolKind()], 1);
}

void ResetPhaseClock() {
  Counters& c = Totals();
  for (int k = 0; k < kKinds; ++k) {
    for (int p = 0; p < kPhases; ++p) c.ns[k][p].store(0, std::memory_order_relaxed);
    for (auto* counter : {&c.steps[k], &c.rows[k], &c.pool_wait_ns[k], &c.pool_jobs[k], &c.worker_sleeps[k]}) {
      counter->store(0, std::memory_order_relaxed);
    }
  }
}

PhaseTotals PhaseClockTotals() {
  Counters& c = Totals();
  PhaseTotals t;
  for (int k = 0; k < kKinds; ++k) {
    for (int p = 0; p < kPhases; ++p) t.ns[k][p] = c.ns[k][p].load(std::memory_order_relaxed);
    t.steps[k] = c.steps[k].load(std::memory_order_relaxed);
    t.rows[k] = c.rows[k].load(std::memory_order_relaxed);
    t.pool_wait_ns[k] = c.pool_wait_ns[k].load(std::memory_order_relaxed);
    t.pool_jobs[k] = c.pool_jobs[k].load(std::memory_order_relaxed);
    t.worker_sleeps[k] = c.worker_sleeps[k].load(std::memory_order_relaxed);
  }
  return t;
}

OrderedJson PhaseTotals::ToJson() const {
  static const char* const kNames[kPhases] = {"layer_products_ms", "lm_head_ms", "attention_ms",
                                              "norms_rotary_activations_ms", "embedding_ms", "sampling_ms",
                                              "step_ms"};
  // To the nanosecond: a tiny model's phase can take less than a microsecond.
  auto ms = [](int64_t nanos) { return static_cast<double>(nanos) / 1e6; };
  OrderedJson out = OrderedJson::object();
  const char* const kinds[kKinds] = {"decode", "prefill"};
  for (int k = 0; k < kKinds; ++k) {
    OrderedJson j = {{"steps", steps[k]}, {"rows", rows[k]}};
    for (int p = 0; p < kPhases; ++p) j[kNames[p]] = ms(ns[k][p]);
    j["pool_jobs"] = pool_jobs[k];
    j["pool_caller_wait_ms"] = ms(pool_wait_ns[k]);
    j["pool_worker_sleeps"] = worker_sleeps[k];
    out[kinds[k]] = std::move(j);
  }
  return out;
}

}  // namespace mlc::cpu

namespace mlc {

bool CpuPhaseClockOn() { return cpu::PhaseClockOn(); }

void ResetCpuPhases() { cpu::ResetPhaseClock(); }

OrderedJson CpuPhasesJson() { return cpu::PhaseClockTotals().ToJson(); }

}  // namespace mlc
