// libFuzzer target: arbitrary bytes through the image frontend's decode-from-memory path
// (format detection, libvips header and pixel decode, colour conversion, orientation, our
// resize, and the direct libjpeg-turbo path for plain JPEGs). Nothing may crash, hang or leak; an
// image that decodes must come out exactly at the requested size, with the same pixels from the
// streamed or direct path as from libvips's whole-image path. A small
// pixel limit keeps each run fast.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mlc_manifest/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mlc::ImageOptions options;
  options.max_pixels = 1 << 16;
  options.max_file_bytes = 1 << 20;
  // Vary the resize from the size so every path is reached without shifting the image bytes.
  options.filter = static_cast<mlc::ResizeFilter>(size % 3);
  options.composite_on_white = (size / 3) % 2 == 1;
  const auto mode = (size / 6) % 2 ? mlc::ResizeMode::kStretch : mlc::ResizeMode::kCenterCrop;
  const int64_t height = 1 + static_cast<int64_t>(size % 23);
  const int64_t width = 1 + static_cast<int64_t>(size % 17);
  auto r = mlc::PrepareImage(bytes, mode, height, width, options);
  if (!r.ok()) return 0;
  if (r->rgb.width != width || r->rgb.height != height ||
      r->rgb.pixels.size() != static_cast<size_t>(width * height * 3)) {
    std::abort();
  }
  // Decoding straight into the resize (libvips streamed, or libjpeg-turbo direct) must give the
  // pixels of libvips's whole-image path.
  auto decoded = mlc::DecodeImage(bytes, options, r->info.shrink);
  if (!decoded.ok()) std::abort();
  mlc::ResizePlan plan = r->plan;
  plan.source_width = decoded->rgb.width;
  plan.source_height = decoded->rgb.height;
  if (mlc::ResizeRgb(decoded->rgb, plan, options.filter, decoded->box).pixels != r->rgb.pixels) {
    std::abort();
  }
  return 0;
}
