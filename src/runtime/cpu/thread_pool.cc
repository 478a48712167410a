// The kernels' thread pool (ParallelFor in kernels.h): one persistent worker per core beside the
// caller, started on first use. A call publishes its job under a generation number, workers claim
// chunks of the range with one atomic counter that carries the generation (a late worker cannot
// claim a chunk of the next job), and spin briefly before sleeping between jobs, since a decoded
// token issues a few hundred calls. One call at a time drives the workers; a call made from inside
// a chunk runs inline on its thread.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/phase_clock.h"

namespace mlc::cpu {
namespace {

using Fn = std::function<void(int64_t, int64_t)>;

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Iterations a waiting thread polls before it sleeps (~50-100 microseconds).
constexpr int kSpins = 1 << 11;

thread_local bool inside_chunk = false;

class ThreadPool {
 public:
  explicit ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  // The pool lives until the process exits (see Pool()), so no destructor joins the workers.

  void Run(int64_t n, int64_t grain, const Fn& fn) {
    std::lock_guard<std::mutex> lock(caller_);
    const int64_t threads = static_cast<int64_t>(workers_.size()) + 1;
    // A few chunks per thread so a thread slowed by other load does not hold up the rest.
    const int64_t chunk = std::max(grain, (n + 4 * threads - 1) / (4 * threads));
    fn_ = &fn;
    n_ = n;
    chunk_ = chunk;
    chunks_ = (n + chunk - 1) / chunk;  // at most 4 * threads < 2^16
    done_.store(0, std::memory_order_relaxed);
    const uint64_t generation = ++generation_number_ & 0xFFFFFFFFu;
    claim_.store(generation << 32 | static_cast<uint64_t>(chunks_) << 16, std::memory_order_release);
    generation_.store(static_cast<uint32_t>(generation), std::memory_order_release);
    generation_.notify_all();
    RunChunks(generation);
    const int64_t waited_from = PhaseClockOn() ? ClockNs() : 0;
    for (int spin = 0; done_.load(std::memory_order_acquire) < chunks_; ++spin) {
      if (spin < kSpins) {
        CpuRelax();
      } else {
        int64_t seen = done_.load(std::memory_order_acquire);
        if (seen < chunks_) done_.wait(seen, std::memory_order_acquire);
      }
    }
    if (waited_from != 0) {
      AddPoolWait(ClockNs() - waited_from);
      AddPoolJob();
    }
  }

 private:
  void Work() {
    uint32_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      uint32_t now = seen;
      for (int spin = 0; now == seen; ++spin) {
        if (spin >= kSpins) {
          AddWorkerSleep();
          generation_.wait(seen, std::memory_order_acquire);
        } else {
          CpuRelax();
        }
        now = generation_.load(std::memory_order_acquire);
      }
      seen = now;
      RunChunks(claim_.load(std::memory_order_acquire) >> 32);
    }
  }

  // Claims and runs chunks of job `generation` until none is left or a newer job started.
  void RunChunks(uint64_t generation) {
    for (;;) {
      uint64_t claim = claim_.load(std::memory_order_acquire);
      int64_t index;
      do {
        if (claim >> 32 != generation) return;
        index = static_cast<int64_t>(claim & 0xFFFFu);
        if (index >= static_cast<int64_t>((claim >> 16) & 0xFFFFu)) return;
      } while (!claim_.compare_exchange_weak(claim, claim + 1, std::memory_order_acq_rel));
      // The job's fields stay put until its last chunk is done, which this one is not yet.
      const int64_t begin = index * chunk_, end = std::min(n_, begin + chunk_), chunks = chunks_;
      inside_chunk = true;
      (*fn_)(begin, end);
      inside_chunk = false;
      // After this increment the caller may start the next job: no field is read past it.
      if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done_.notify_all();
    }
  }

  std::mutex caller_;
  std::vector<std::thread> workers_;
  uint64_t generation_number_ = 0;                // guarded by caller_
  std::atomic<uint32_t> generation_{0};           // what workers wait on
  // generation << 32 | chunks << 16 | next chunk: a claim names its job and the job's size, so
  // no field of a later job is read before a claim succeeds.
  std::atomic<uint64_t> claim_{0};
  std::atomic<int64_t> done_{0};                  // chunks finished
  const Fn* fn_ = nullptr;
  int64_t n_ = 0, chunk_ = 1, chunks_ = 0;
};

ThreadPool& Pool() {
  static ThreadPool* pool = new ThreadPool(ThreadCount());  // never destroyed: workers may be asleep
  return *pool;
}

}  // namespace

void ParallelFor(int64_t n, int64_t grain, const Fn& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  if (inside_chunk || ThreadCount() == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  Pool().Run(n, grain, fn);
}

int ThreadCount() {
  static const int count = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) {
      return std::min(CPU_COUNT(&set), 4096);  // keeps a job's chunk count below 2^16
    }
    unsigned n = std::thread::hardware_concurrency();
    return n == 0 ? 1 : static_cast<int>(std::min(n, 4096u));
  }();
  return count;
}

}  // namespace mlc::cpu
