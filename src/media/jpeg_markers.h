// A JPEG's marker structure read without decoding: how many scans it has and its frame size, so
// that the decode budget (ImageOptions::max_jpeg_scans, max_jpeg_scan_pixels) is checked before
// any decoder starts. A progressive file costs a pass over the whole image per scan.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc::jpeg_markers {

struct JpegLayout {
  int64_t scans = 0;        // SOS markers
  int64_t width = 0;        // of the first frame header (0 when none was read)
  int64_t height = 0;
  bool progressive = false; // SOF2 or SOF6 / SOF10 / SOF14
};

// Walks the markers as libjpeg finds them: segment lengths honoured, entropy-coded data skipped
// to the next marker, bytes between segments skipped to the next 0xFF. Stops at EOI, at the end
// of the bytes, or (stopping there) once more than max_scans scans were seen. nullopt when the
// bytes do not start with a JPEG's SOI marker. Reads nothing outside bytes.
std::optional<JpegLayout> WalkJpeg(std::string_view bytes, int64_t max_scans);

// The budget of a JPEG: kLimit when it has more than max_scans scans or scans x pixels over
// max_scan_pixels (path "byte N" of the first scan over the count, "" for the product); Ok for
// anything that is not a JPEG.
Status CheckJpegBudget(std::string_view bytes, int64_t max_scans, int64_t max_scan_pixels);

}  // namespace mlc::jpeg_markers
