// Long recordings (audio.h AudioWindowEnds, AudioWindower): a recording over the processor's
// max_samples cut into windows at the quietest point near each window's end, by short-time
// energy, whole or as it streams in.
#include <algorithm>
#include <vector>

#include "mlc_manifest/audio.h"

namespace mlc {
namespace {

// The cut in [lo, hi] whose 20 ms around it (clipped to [begin, end)) holds the least energy,
// tried every 10 ms from lo and at hi; the latest of equals.
int64_t QuietestCut(std::span<const float> pcm, int64_t lo, int64_t hi, int64_t rate) {
  const int64_t half = std::max<int64_t>(1, rate / 100), hop = std::max<int64_t>(1, rate / 100);
  const int64_t begin = std::max<int64_t>(0, lo - half), end = std::min<int64_t>(static_cast<int64_t>(pcm.size()), hi + half);
  std::vector<double> sums(static_cast<size_t>(end - begin + 1), 0.0);  // prefix sums of squares
  for (int64_t i = begin; i < end; ++i) {
    const double x = pcm[static_cast<size_t>(i)];
    sums[static_cast<size_t>(i - begin + 1)] = sums[static_cast<size_t>(i - begin)] + x * x;
  }
  auto energy = [&](int64_t c) {
    const int64_t a = std::max(begin, c - half), b = std::min(end, c + half);
    return sums[static_cast<size_t>(b - begin)] - sums[static_cast<size_t>(a - begin)];
  };
  int64_t best = hi;
  double best_energy = energy(hi);
  for (int64_t c = hi - hop; c >= lo; c -= hop) {
    const double e = energy(c);
    if (e < best_energy) {
      best_energy = e;
      best = c;
    }
  }
  return best;
}

int64_t MaxSamples(const AudioDecode& p) { return std::max<int64_t>(1, p.max_samples); }
int64_t MinSamples(const AudioDecode& p) { return std::max<int64_t>(1, p.min_samples); }
// Samples past a cut that QuietestCut may look at.
int64_t Guard(const AudioDecode& p) { return std::max<int64_t>(1, p.sample_rate_hz / 100); }

// The cut ending the window that starts at `start` of a recording of n samples (n - start >
// max_samples): within the window's last quarter (at most 5 s), leaving at least min_samples on
// each side. Reads pcm up to the cut's limit plus Guard.
int64_t WindowCut(std::span<const float> pcm, int64_t start, int64_t n, const AudioDecode& p) {
  const int64_t max = MaxSamples(p), min = MinSamples(p);
  const int64_t search = std::min<int64_t>(max / 4, 5 * p.sample_rate_hz);
  const int64_t lo = start + std::max(min, max - search);
  const int64_t hi = std::min(start + max, n - min);
  return lo <= hi ? QuietestCut(pcm, lo, hi, p.sample_rate_hz) : start + max;
}

}  // namespace

std::vector<int64_t> AudioWindowEnds(std::span<const float> pcm, const AudioDecode& processor) {
  const int64_t n = static_cast<int64_t>(pcm.size());
  std::vector<int64_t> ends;
  int64_t start = 0;
  while (n - start > MaxSamples(processor)) {
    start = WindowCut(pcm, start, n, processor);
    ends.push_back(start);
  }
  ends.push_back(n);
  return ends;
}

AudioWindower::AudioWindower(const AudioDecode& processor, OnWindow on_window)
    : processor_(processor), on_window_(std::move(on_window)) {}

Status AudioWindower::Write(std::span<const float> samples) {
  buffer_.insert(buffer_.end(), samples.begin(), samples.end());
  // With max + max(min, guard) samples held, the next cut is what the whole recording would give
  // (the recording goes on at least that far, and the cut looks no further).
  const int64_t ready = MaxSamples(processor_) + std::max(MinSamples(processor_), Guard(processor_));
  size_t used = 0;
  while (static_cast<int64_t>(buffer_.size() - used) >= ready) {
    const std::span<const float> rest(buffer_.data() + used, buffer_.size() - used);
    const int64_t cut = WindowCut(rest, 0, static_cast<int64_t>(rest.size()), processor_);
    MLC_RETURN_IF_ERROR(on_window_(rest.first(static_cast<size_t>(cut)), start_));
    start_ += cut;
    used += static_cast<size_t>(cut);
  }
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(used));
  return Status::Ok();
}

Status AudioWindower::Finish() {
  int64_t begin = 0;
  for (int64_t end : AudioWindowEnds(buffer_, processor_)) {
    if (end == begin) continue;  // nothing left (a recording ending at a cut)
    MLC_RETURN_IF_ERROR(on_window_(std::span<const float>(buffer_).subspan(static_cast<size_t>(begin),
                                                                            static_cast<size_t>(end - begin)),
                                   start_ + begin));
    begin = end;
  }
  start_ += static_cast<int64_t>(buffer_.size());
  buffer_.clear();
  return Status::Ok();
}

}  // namespace mlc
