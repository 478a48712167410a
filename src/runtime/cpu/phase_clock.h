// A per-phase clock for the CPU programs (issue 29): where a decoded token's or a prefill's time
// goes (layer weight products, the LM head, attention, norms/rotary/activations, embedding,
// sampling, and the thread pool's hand-offs). Compiled in but off: each scope then costs one
// relaxed atomic load. On when the environment has MLC_CPU_PHASES=1 (`cpu_model_bench` sets it for
// the run it times) or after EnablePhaseClock(true). Scopes are timed on the thread that drives the
// step (wall time, so a phase includes its wait for the pool's other threads); the pool adds the
// time its caller spends waiting for the others after its own chunks, and its job count.
#pragma once

#include <chrono>
#include <cstdint>

#include "mlc_manifest/json.h"

namespace mlc::cpu {

enum class Phase : int {
  kLayerProducts,  // the weight products of the layers (q/k/v, o, gate/up, down, per-layer)
  kLmHead,         // the final norm and the LM head's product
  kAttention,      // attention over the KV cache
  kNormsRotaryActs,  // RMS norms, rotary positions, q/k norms, KV writes, activations, residual adds
  kEmbedding,      // token embedding rows
  kSampling,       // choosing the next token from the logits
  kStep,           // a whole Forward (the phases above but embedding and sampling run inside it)
  kCount,
};

// Decode: every sequence of the step has one row; prefill: the rest.
enum class StepKind : int { kDecode, kPrefill, kCount };

struct PhaseTotals {
  int64_t ns[static_cast<int>(StepKind::kCount)][static_cast<int>(Phase::kCount)] = {};
  int64_t steps[static_cast<int>(StepKind::kCount)] = {};   // Forward calls
  int64_t rows[static_cast<int>(StepKind::kCount)] = {};    // positions they ran
  // The thread pool, counted under the kind of the step that ran last:
  int64_t pool_wait_ns[static_cast<int>(StepKind::kCount)] = {};   // its caller waiting for the others
  int64_t pool_jobs[static_cast<int>(StepKind::kCount)] = {};      // ParallelFor calls it ran
  int64_t worker_sleeps[static_cast<int>(StepKind::kCount)] = {};  // a worker stopped spinning and slept

  // {"decode": {...}, "prefill": {...}}, times in milliseconds.
  OrderedJson ToJson() const;
};

bool PhaseClockOn();
void EnablePhaseClock(bool on);
PhaseTotals PhaseClockTotals();
void ResetPhaseClock();

// Internal to the clock's users: adds to the totals (no-ops when off). A PhaseLap names the kind
// the pool's counts go to.
void AddPhase(StepKind kind, Phase phase, int64_t ns);
void AddStep(StepKind kind, int64_t rows, int64_t ns);
void SetPoolKind(StepKind kind);
void AddPoolWait(int64_t ns);
void AddPoolJob();
void AddWorkerSleep();

inline int64_t ClockNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Times its own life into (kind, phase) when the clock is on.
class PhaseScope {
 public:
  PhaseScope(StepKind kind, Phase phase) : kind_(kind), phase_(phase), start_(PhaseClockOn() ? ClockNs() : 0) {}
  ~PhaseScope() {
    if (start_ != 0) AddPhase(kind_, phase_, ClockNs() - start_);
  }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  StepKind kind_;
  Phase phase_;
  int64_t start_;
};

// Lap timing of a step's sequence of operations: Mark(p) gives phase p the time since the last mark
// (or since construction); the destructor records the whole step.
class PhaseLap {
 public:
  PhaseLap(StepKind kind, int64_t rows)
      : kind_(kind), rows_(rows), start_(PhaseClockOn() ? ClockNs() : 0), last_(start_) {
    if (start_ != 0) SetPoolKind(kind);
  }
  ~PhaseLap() {
    if (start_ != 0) AddStep(kind_, rows_, ClockNs() - start_);
  }
  PhaseLap(const PhaseLap&) = delete;
  PhaseLap& operator=(const PhaseLap&) = delete;
  // Leaves the time since the last mark to the step's rest.
  void Skip() {
    if (start_ != 0) last_ = ClockNs();
  }
  void Mark(Phase phase) {
    if (start_ == 0) return;
    const int64_t now = ClockNs();
    AddPhase(kind_, phase, now - last_);
    last_ = now;
  }

 private:
  StepKind kind_;
  int64_t rows_;
  int64_t start_, last_;
};

}  // namespace mlc::cpu
