// The resize geometry of SPEC 6.2 (stretch / center_crop: the scaled size and the kept window)
// and the resize filters' names.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string_view>

#include "mlc_manifest/image.h"

namespace mlc {

const char* ResizeFilterName(ResizeFilter filter) {
  switch (filter) {
    case ResizeFilter::kBilinear: return "bilinear";
    case ResizeFilter::kLanczos: return "lanczos";
    case ResizeFilter::kBicubic: break;
  }
  return "bicubic";
}

std::optional<ResizeFilter> ParseResizeFilter(std::string_view name) {
  if (name == "bicubic") return ResizeFilter::kBicubic;
  if (name == "bilinear") return ResizeFilter::kBilinear;
  if (name == "lanczos") return ResizeFilter::kLanczos;
  return std::nullopt;
}

ResizePlan PlanResize(int64_t source_width, int64_t source_height, ResizeMode mode,
                      int64_t height, int64_t width) {
  ResizePlan plan;
  plan.mode = mode;
  plan.source_width = source_width;
  plan.source_height = source_height;
  plan.width = width;
  plan.height = height;
  plan.scaled_width = width;
  plan.scaled_height = height;
  if (mode == ResizeMode::kCenterCrop) {
    const double s = std::max(static_cast<double>(height) / static_cast<double>(source_height),
                              static_cast<double>(width) / static_cast<double>(source_width));
    // Math.round: floor(x + 0.5); never below the target (s covers it up to float error).
    plan.scaled_width = std::max<int64_t>(
        width, static_cast<int64_t>(std::floor(static_cast<double>(source_width) * s + 0.5)));
    plan.scaled_height = std::max<int64_t>(
        height, static_cast<int64_t>(std::floor(static_cast<double>(source_height) * s + 0.5)));
    plan.left = (plan.scaled_width - width) / 2;
    plan.top = (plan.scaled_height - height) / 2;
  }
  return plan;
}

}  // namespace mlc
