// libFuzzer target: arbitrary bytes through the JPEG marker walk that checks a JPEG's decode
// budget before any decoder runs. Nothing may crash, hang or read outside the bytes (ASan); the
// walk stops at the scan limit; the budget check agrees with the walk.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "media/jpeg_markers.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const int64_t max_scans = 1 + static_cast<int64_t>(size % 7);
  auto layout = mlc::jpeg_markers::WalkJpeg(bytes, max_scans);
  mlc::Status budget = mlc::jpeg_markers::CheckJpegBudget(bytes, max_scans, int64_t{1} << 40);
  if (!layout) {
    if (!budget.ok()) std::abort();  // not a JPEG: nothing to refuse
    return 0;
  }
  if (layout->scans < 0 || layout->scans > max_scans + 1) std::abort();
  if (layout->width < 0 || layout->width > 65535 || layout->height < 0 || layout->height > 65535) std::abort();
  if (budget.ok() != (layout->scans <= max_scans)) std::abort();
  return 0;
}
