// The image resize of SPEC 6.2 as rows arrive (RowResizer) and on a whole image (ResizeRgb): a
// separable convolution with Pillow's conventions (ImagingResample on 8-bit images), horizontal
// pass first, rounding and clamping to 8 bits after each pass; only the kept crop window is
// computed. The geometry is resize_plan.cc's, the arithmetic resize_kernels.cc's.
#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include "media/resize_kernels.h"
#include "mlc_manifest/image.h"

namespace mlc {

using resize::AxisWeights;
using resize::ComputeWeights;
using resize::HorizontalRow;
using resize::HorizontalRowRgbxScalar;
using resize::Kernel;
using resize::KernelFor;
using resize::VerticalRowScalar;
#if defined(__x86_64__) && defined(__GNUC__)
using resize::HasAvx2;
using resize::HorizontalRowRgbxAvx2;
using resize::MaddWeights;
using resize::MakeMaddWeights;
using resize::VerticalRowAvx2;
#endif

// Rows after the horizontal pass wait in a ring just long enough for the output rows that read
// them: output row j is made as soon as its last source row has arrived, so the vertical pass
// runs while the decoder is still producing rows, and the whole source is never held.
struct RowResizer::State {
  ResizePlan plan;
  bool empty = false;   // nothing to compute (a degenerate size)
  bool need_h = false;  // as Pillow: an axis whose size and extent are unchanged is copied
  bool need_v = false;
  AxisWeights wh, wv;
  int64_t row0 = 0, row1 = 0;  // source rows the window needs
  int64_t col0 = 0, col1 = 0;  // source columns the window needs (NeededColumns)
  int64_t row_bytes = 0;
  std::vector<uint8_t> ring;       // `slots` rows of row_bytes after the horizontal pass
  std::vector<int64_t> ring_rows;  // the source row each slot holds, -1 when none
  int64_t slots = 1;
  int64_t next_out = 0;            // the first output row not yet made
  RgbImage out;
  std::vector<const uint8_t*> tap_rows;  // MakeOutputRow's scratch
#if defined(__x86_64__) && defined(__GNUC__)
  std::optional<MaddWeights> wh_madd;  // wh for the AVX2 RGBX pass, when the CPU has AVX2
  std::vector<uint8_t> padded;         // its scratch for the last pixels of a row
#endif

  int64_t LastRowOf(int64_t j) const;  // the last source row output row j reads
  // Source row i after the horizontal pass, or nullptr when the ring does not hold it.
  const uint8_t* MidRow(int64_t i) const;
  uint8_t* TakeSlot(int64_t i);        // the ring slot for source row i, marked as holding it
  void MakeOutputRow(int64_t j);       // from the rows in the ring; absent rows count as black
  // Makes every output row whose source rows have all arrived (up to source row `arrived`).
  void MakeReadyRows(int64_t arrived);
};

// The last source row output row j reads.
int64_t RowResizer::State::LastRowOf(int64_t j) const {
  return need_v ? int64_t{wv.first[j]} + wv.count[j] - 1 : plan.top + j;
}

const uint8_t* RowResizer::State::MidRow(int64_t i) const {
  const int64_t slot = i % slots;
  return ring_rows[slot] == i ? ring.data() + slot * row_bytes : nullptr;
}

uint8_t* RowResizer::State::TakeSlot(int64_t i) {
  const int64_t slot = i % slots;
  ring_rows[slot] = i;
  return ring.data() + slot * row_bytes;
}

void RowResizer::State::MakeOutputRow(int64_t j) {
  uint8_t* dst = out.pixels.data() + static_cast<size_t>(j) * row_bytes;
  if (!need_v) {
    const uint8_t* row = MidRow(plan.top + j);
    if (row) std::memcpy(dst, row, row_bytes);
    return;
  }
  const int32_t taps = wv.count[j];
  tap_rows.resize(taps);
  for (int32_t t = 0; t < taps; ++t) tap_rows[t] = MidRow(int64_t{wv.first[j]} + t);
  const int32_t* k = &wv.weights[static_cast<size_t>(j) * wv.ksize];
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2()) return VerticalRowAvx2(tap_rows.data(), k, taps, row_bytes, dst);
#endif
  VerticalRowScalar(tap_rows.data(), k, taps, 0, row_bytes, dst);
}

void RowResizer::State::MakeReadyRows(int64_t arrived) {
  while (next_out < plan.height && LastRowOf(next_out) <= arrived) MakeOutputRow(next_out++);
}

RowResizer::RowResizer(const ResizePlan& plan, ResizeFilter filter,
                       const std::optional<SourceBox>& box_in)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.plan = plan;
  s.row_bytes = plan.width * 3;
  s.empty = plan.source_width <= 0 || plan.source_height <= 0 || plan.width <= 0 || plan.height <= 0;
  s.out.width = plan.width;
  s.out.height = plan.height;
  s.out.pixels.resize(static_cast<size_t>(std::max<int64_t>(0, plan.width)) *
                      std::max<int64_t>(0, plan.height) * 3);
  if (s.empty) return;
  const SourceBox box = box_in.value_or(SourceBox{0, 0, static_cast<double>(plan.source_width),
                                                  static_cast<double>(plan.source_height)});
  const Kernel kernel = KernelFor(filter);
  s.need_h = plan.scaled_width != plan.source_width || box.x0 != 0.0 ||
             box.x1 != static_cast<double>(plan.source_width);
  s.need_v = plan.scaled_height != plan.source_height || box.y0 != 0.0 ||
             box.y1 != static_cast<double>(plan.source_height);
  s.col0 = plan.left;
  s.col1 = plan.left + plan.width;
  if (s.need_h) {
    s.wh = ComputeWeights(plan.source_width, box.x0, box.x1, plan.scaled_width, plan.left,
                          plan.width, kernel);
    s.col0 = plan.source_width;
    s.col1 = 0;
    for (size_t j = 0; j < s.wh.first.size(); ++j) {
      s.col0 = std::min<int64_t>(s.col0, s.wh.first[j]);
      s.col1 = std::max<int64_t>(s.col1, s.wh.first[j] + s.wh.count[j]);
    }
    s.col1 = std::max(s.col0, s.col1);
#if defined(__x86_64__) && defined(__GNUC__)
    if (HasAvx2()) {
      s.wh_madd = MakeMaddWeights(s.wh);
      if (s.wh_madd) s.padded.resize(static_cast<size_t>(s.wh_madd->groups) * 16);
    }
#endif
  }
  s.row0 = plan.top;
  s.row1 = plan.top + plan.height;
  if (s.need_v) {
    s.wv = ComputeWeights(plan.source_height, box.y0, box.y1, plan.scaled_height, plan.top,
                          plan.height, kernel);
    s.row0 = s.wv.first.front();
    s.row1 = 0;
    for (size_t j = 0; j < s.wv.first.size(); ++j) {
      s.row0 = std::min<int64_t>(s.row0, s.wv.first[j]);
      s.row1 = std::max<int64_t>(s.row1, s.wv.first[j] + s.wv.count[j]);
      s.slots = std::max<int64_t>(s.slots, s.wv.count[j]);
    }
  }
  s.ring.assign(static_cast<size_t>(s.slots) * s.row_bytes, 0);
  s.ring_rows.assign(static_cast<size_t>(s.slots), -1);
}

RowResizer::~RowResizer() = default;

void RowResizer::PushRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride) {
  State& s = *state_;
  if (s.empty) return;
  for (int64_t i = std::max(y, s.row0), end = std::min(y + count, s.row1); i < end; ++i) {
    const uint8_t* in = rows + static_cast<size_t>(i - y) * stride;
    uint8_t* out = s.TakeSlot(i);
    if (s.need_h) {
      HorizontalRow(in, s.wh, out);
    } else {
      std::memcpy(out, in + s.plan.left * 3, s.row_bytes);
    }
    s.MakeReadyRows(i);
  }
}

void RowResizer::PushRgbxRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride,
                              int64_t first_column) {
  State& s = *state_;
  if (s.empty) return;
  for (int64_t i = std::max(y, s.row0), end = std::min(y + count, s.row1); i < end; ++i) {
    const uint8_t* row = rows + static_cast<size_t>(i - y) * stride;
    uint8_t* out = s.TakeSlot(i);
    if (!s.need_h) {
      const uint8_t* in = row + (s.plan.left - first_column) * 4;
      for (int64_t x = 0; x < s.plan.width; ++x) std::memcpy(out + 3 * x, in + 4 * x, 3);
#if defined(__x86_64__) && defined(__GNUC__)
    } else if (s.wh_madd) {
      HorizontalRowRgbxAvx2(row, first_column, s.col1, s.wh, *s.wh_madd, s.padded.data(), out);
#endif
    } else {
      HorizontalRowRgbxScalar(row, first_column, s.wh, out);
    }
    s.MakeReadyRows(i);
  }
}

std::pair<int64_t, int64_t> RowResizer::NeededColumns() const {
  const State& s = *state_;
  return s.empty ? std::pair<int64_t, int64_t>{0, 0} : std::pair<int64_t, int64_t>{s.col0, s.col1};
}

std::pair<int64_t, int64_t> RowResizer::NeededRows() const {
  const State& s = *state_;
  return s.empty ? std::pair<int64_t, int64_t>{0, 0} : std::pair<int64_t, int64_t>{s.row0, s.row1};
}

RgbImage RowResizer::Finish() {
  State& s = *state_;
  if (!s.empty) s.MakeReadyRows(std::numeric_limits<int64_t>::max());
  return std::move(s.out);
}

RgbImage ResizeRgb(const RgbImage& src, const ResizePlan& plan_in, ResizeFilter filter,
                   const std::optional<SourceBox>& box) {
  ResizePlan plan = plan_in;
  plan.source_width = src.width;
  plan.source_height = src.height;
  RowResizer resizer(plan, filter, box);
  if (src.width > 0 && src.height > 0) resizer.PushRows(0, src.height, src.pixels.data(), src.width * 3);
  return resizer.Finish();
}

}  // namespace mlc
