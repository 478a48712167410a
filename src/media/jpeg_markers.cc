// The JPEG marker walk and decode budget (jpeg_markers.h).
#include "media/jpeg_markers.h"

#include <string>

namespace mlc::jpeg_markers {
namespace {

constexpr uint8_t kSoi = 0xD8, kEoi = 0xD9, kSos = 0xDA;

uint8_t At(std::string_view b, size_t i) { return static_cast<uint8_t>(b[i]); }

// Markers without a length: TEM, RST0..7, SOI, EOI.
bool Standalone(uint8_t m) { return m == 0x01 || (m >= 0xD0 && m <= 0xD9); }

// Start-of-frame markers (SOF0..SOF15 but DHT, JPG and DAC), and which are progressive.
bool StartOfFrame(uint8_t m) { return m >= 0xC0 && m <= 0xCF && m != 0xC4 && m != 0xC8 && m != 0xCC; }
bool Progressive(uint8_t m) { return m == 0xC2 || m == 0xC6 || m == 0xCA || m == 0xCE; }

// The position of the next marker's 0xFF at or after i: a 0xFF followed by a byte that is not
// 0x00 (a stuffed 0xFF), not 0xFF (fill) and not RSTn (inside entropy-coded data); size() if none.
size_t NextMarker(std::string_view b, size_t i, bool in_scan) {
  for (; i + 1 < b.size(); ++i) {
    if (At(b, i) != 0xFF) continue;
    const uint8_t m = At(b, i + 1);
    if (m == 0xFF || m == 0x00) continue;
    if (in_scan && m >= 0xD0 && m <= 0xD7) continue;
    return i;
  }
  return b.size();
}

// Where the last scan counted began, when WalkJpeg stopped over the count.
struct Walk {
  JpegLayout layout;
  size_t last_scan_at = 0;
};

std::optional<Walk> Run(std::string_view b, int64_t max_scans) {
  if (b.size() < 2 || At(b, 0) != 0xFF || At(b, 1) != kSoi) return std::nullopt;
  Walk w;
  size_t i = 2;
  bool in_scan = false;
  while (true) {
    i = NextMarker(b, i, in_scan);
    if (i >= b.size()) break;
    const uint8_t m = At(b, i + 1);
    in_scan = false;
    if (m == kEoi) break;
    if (Standalone(m)) {
      i += 2;
      continue;
    }
    if (i + 4 > b.size()) break;
    const size_t length = (static_cast<size_t>(At(b, i + 2)) << 8) | At(b, i + 3);
    if (length < 2) {
      i += 2;  // a broken length: resynchronise at the next marker, as libjpeg does
      continue;
    }
    const size_t body = i + 4, end = i + 2 + length;
    if (StartOfFrame(m) && w.layout.width == 0 && body + 5 <= b.size()) {
      w.layout.height = (static_cast<int64_t>(At(b, body + 1)) << 8) | At(b, body + 2);
      w.layout.width = (static_cast<int64_t>(At(b, body + 3)) << 8) | At(b, body + 4);
      w.layout.progressive = Progressive(m);
    }
    if (m == kSos) {
      ++w.layout.scans;
      w.last_scan_at = i;
      if (w.layout.scans > max_scans) break;
      in_scan = true;
    }
    if (end > b.size()) break;
    i = end;
  }
  return w;
}

}  // namespace

std::optional<JpegLayout> WalkJpeg(std::string_view bytes, int64_t max_scans) {
  auto w = Run(bytes, max_scans);
  if (!w) return std::nullopt;
  return w->layout;
}

Status CheckJpegBudget(std::string_view bytes, int64_t max_scans, int64_t max_scan_pixels) {
  auto w = Run(bytes, max_scans);
  if (!w) return Status::Ok();
  const JpegLayout& l = w->layout;
  if (l.scans > max_scans) {
    return Error{ErrorCode::kLimit, "byte " + std::to_string(w->last_scan_at),
                 "the JPEG has more than " + std::to_string(max_scans) +
                     " scans (the max_jpeg_scans limit): each scan is a pass over the whole image"};
  }
  // width and height are 16-bit: the product of three fits in 64 bits.
  if (l.scans * l.width * l.height > max_scan_pixels) {
    return Error{ErrorCode::kLimit, "",
                 "the JPEG's " + std::to_string(l.scans) + " scans of " + std::to_string(l.width) + "x" +
                     std::to_string(l.height) + " pixels are over the decode budget of " +
                     std::to_string(max_scan_pixels) + " scan pixels (the max_jpeg_scan_pixels limit)"};
  }
  return Status::Ok();
}

}  // namespace mlc::jpeg_markers
