// Long recordings (audio.h AudioWindowEnds): a recording over the processor's max_samples cut
// into windows at the quietest point near each window's end, by short-time energy.
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

}  // namespace

std::vector<int64_t> AudioWindowEnds(std::span<const float> pcm, const AudioDecode& processor) {
  const int64_t n = static_cast<int64_t>(pcm.size());
  const int64_t max = std::max<int64_t>(1, processor.max_samples), min = std::max<int64_t>(1, processor.min_samples);
  const int64_t search = std::min<int64_t>(max / 4, 5 * processor.sample_rate_hz);
  std::vector<int64_t> ends;
  int64_t start = 0;
  while (n - start > max) {
    // Within the window's last `search` samples, leaving at least min_samples on each side.
    const int64_t lo = start + std::max(min, max - search);
    const int64_t hi = std::min(start + max, n - min);
    const int64_t cut = lo <= hi ? QuietestCut(pcm, lo, hi, processor.sample_rate_hz) : start + max;
    ends.push_back(cut);
    start = cut;
  }
  ends.push_back(n);
  return ends;
}

}  // namespace mlc
