// The peak signal-to-noise ratio of two RGB images (how close a resize comes to a reference).
#include <cmath>
#include <limits>

#include "mlc_manifest/image.h"

namespace mlc {

double Psnr(const RgbImage& a, const RgbImage& b) {
  if (a.pixels.size() != b.pixels.size() || a.pixels.empty()) return 0.0;
  double sum = 0.0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const double d = static_cast<double>(a.pixels[i]) - static_cast<double>(b.pixels[i]);
    sum += d * d;
  }
  if (sum == 0.0) return std::numeric_limits<double>::infinity();
  const double mse = sum / static_cast<double>(a.pixels.size());
  return 10.0 * std::log10(255.0 * 255.0 / mse);
}

}  // namespace mlc
