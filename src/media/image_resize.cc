// The image resize of SPEC 6.2: the resize geometry (stretch / center_crop) and a separable
// convolution with Pillow's conventions (ImagingResample on 8-bit images): centre of output pixel
// i at in0 + (i + 0.5) * scale, kernel stretched by max(1, scale), weights normalized per output
// pixel in double then rounded to fixed point with 22 fractional bits, horizontal pass first,
// rounding and clamping to 8 bits after each pass. Only the kept crop window is computed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "mlc_manifest/image.h"

namespace mlc {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // as Pillow for 8-bit images
constexpr int32_t kHalf = int32_t{1} << (kPrecisionBits - 1);

double BicubicKernel(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

double BilinearKernel(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

double Sinc(double x) {
  if (x == 0.0) return 1.0;
  x *= M_PI;
  return std::sin(x) / x;
}

double LanczosKernel(double x) {
  return (x >= -3.0 && x < 3.0) ? Sinc(x) * Sinc(x / 3.0) : 0.0;
}

struct Kernel {
  double (*fn)(double);
  double support;
};

Kernel KernelFor(ResizeFilter filter) {
  switch (filter) {
    case ResizeFilter::kBilinear: return {BilinearKernel, 1.0};
    case ResizeFilter::kLanczos: return {LanczosKernel, 3.0};
    case ResizeFilter::kBicubic: break;
  }
  return {BicubicKernel, 2.0};
}

// Fixed-point weights of a run of output pixels along one axis.
struct AxisWeights {
  int ksize = 0;
  std::vector<int32_t> first;    // first source index per output pixel
  std::vector<int32_t> count;    // number of taps per output pixel
  std::vector<int32_t> weights;  // ksize per output pixel
};

// Weights for output pixels [begin, begin + n) of an axis of out_size pixels drawn from the
// source extent [in0, in1) of an axis of in_size pixels.
AxisWeights ComputeWeights(int64_t in_size, double in0, double in1, int64_t out_size,
                           int64_t begin, int64_t n, const Kernel& kernel) {
  const double scale = (in1 - in0) / static_cast<double>(out_size);
  const double filterscale = std::max(scale, 1.0);
  const double support = kernel.support * filterscale;
  AxisWeights w;
  w.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
  w.first.resize(n);
  w.count.resize(n);
  w.weights.assign(static_cast<size_t>(n) * w.ksize, 0);
  std::vector<double> k(w.ksize);
  const double ss = 1.0 / filterscale;
  for (int64_t j = 0; j < n; ++j) {
    const double center = in0 + (static_cast<double>(begin + j) + 0.5) * scale;
    // Pillow truncates toward zero here (a C cast), then clamps.
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    xmin = std::clamp<int64_t>(xmin, 0, in_size);
    xmax = std::clamp<int64_t>(xmax, 0, in_size);
    int64_t taps = std::clamp<int64_t>(xmax - xmin, 0, w.ksize);
    if (taps == 0) {  // cannot happen for sane boxes; keep one tap at the nearest pixel
      xmin = std::clamp<int64_t>(static_cast<int64_t>(center), 0, in_size - 1);
      taps = 1;
    }
    double total = 0.0;
    for (int64_t x = 0; x < taps; ++x) {
      k[x] = kernel.fn((static_cast<double>(x + xmin) - center + 0.5) * ss);
      total += k[x];
    }
    int32_t* out = &w.weights[static_cast<size_t>(j) * w.ksize];
    for (int64_t x = 0; x < taps; ++x) {
      const double v = (total != 0.0 ? k[x] / total : k[x]) * (1 << kPrecisionBits);
      out[x] = static_cast<int32_t>(v < 0 ? v - 0.5 : v + 0.5);
    }
    if (total == 0.0 && taps == 1) out[0] = 1 << kPrecisionBits;
    w.first[j] = static_cast<int32_t>(xmin);
    w.count[j] = static_cast<int32_t>(taps);
  }
  return w;
}

inline uint8_t Clip8(int32_t v) {
  if (v >= (int32_t{1} << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return static_cast<uint8_t>(v >> kPrecisionBits);
}

// Horizontal pass over one source row into dst (cols x 3).
void HorizontalRow(const uint8_t* in, const AxisWeights& w, uint8_t* out) {
  const int64_t cols = static_cast<int64_t>(w.first.size());
  for (int64_t x = 0; x < cols; ++x) {
    const int32_t* k = &w.weights[static_cast<size_t>(x) * w.ksize];
    const uint8_t* p = in + static_cast<size_t>(w.first[x]) * 3;
    int32_t r = kHalf, g = kHalf, b = kHalf;
    for (int32_t t = 0, n = w.count[x]; t < n; ++t) {
      r += p[3 * t] * k[t];
      g += p[3 * t + 1] * k[t];
      b += p[3 * t + 2] * k[t];
    }
    out[3 * x] = Clip8(r);
    out[3 * x + 1] = Clip8(g);
    out[3 * x + 2] = Clip8(b);
  }
}

// Horizontal pass over one RGBX source row (4 bytes a pixel; `in` is source column `c0`): the same
// sums as HorizontalRow, in the same integer arithmetic, so the result is identical.
void HorizontalRowRgbxScalar(const uint8_t* in, int64_t c0, const AxisWeights& w, uint8_t* out) {
  const int64_t cols = static_cast<int64_t>(w.first.size());
  for (int64_t x = 0; x < cols; ++x) {
    const int32_t* k = &w.weights[static_cast<size_t>(x) * w.ksize];
    const uint8_t* p = in + static_cast<size_t>(w.first[x] - c0) * 4;
    int32_t r = kHalf, g = kHalf, b = kHalf;
    for (int32_t t = 0, n = w.count[x]; t < n; ++t) {
      r += p[4 * t] * k[t];
      g += p[4 * t + 1] * k[t];
      b += p[4 * t + 2] * k[t];
    }
    out[3 * x] = Clip8(r);
    out[3 * x + 1] = Clip8(g);
    out[3 * x + 2] = Clip8(b);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

// The horizontal weights laid out for vpmaddwd. Each 22-bit weight k is split exactly into
// k = hi * 2^11 + lo with lo in [0, 2^11), both 16-bit; the sum of pixel * k is then
// (sum of pixel * hi) * 2^11 + sum of pixel * lo, the same integer Pillow computes. Per output
// pixel, groups of four taps; per group one 256-bit vector of hi and one of lo, each holding
// the pairs (k[4g], k[4g+1]) four times (low half) and (k[4g+2], k[4g+3]) four times (high
// half), to meet four RGBX pixels shuffled to R0 R1 G0 G1 B0 B1 X0 X1 | R2 R3 G2 G3 ...
struct MaddWeights {
  int groups = 0;              // groups of four taps per output pixel (the widest pixel's)
  std::vector<int16_t> table;  // output pixels x groups x (16 hi, 16 lo)
  std::vector<int32_t> used;   // groups each output pixel uses: ceil(count / 4)
};

// nullopt when a weight does not split into 16-bit halves (never for normalized weights).
std::optional<MaddWeights> MakeMaddWeights(const AxisWeights& w) {
  MaddWeights m;
  m.groups = (w.ksize + 3) / 4;
  const size_t per_pixel = static_cast<size_t>(m.groups) * 32;
  m.table.assign(w.first.size() * per_pixel, 0);
  m.used.resize(w.first.size());
  for (size_t x = 0; x < w.first.size(); ++x) {
    m.used[x] = (w.count[x] + 3) / 4;
    for (int32_t t = 0; t < w.count[x]; ++t) {
      const int32_t k = w.weights[x * w.ksize + static_cast<size_t>(t)];
      const int32_t hi = k >> 11, lo = k & 2047;  // arithmetic shift: hi * 2048 + lo == k
      if (hi < INT16_MIN || hi > INT16_MAX) return std::nullopt;
      int16_t* group = &m.table[x * per_pixel + static_cast<size_t>(t / 4) * 32];
      const int half = (t % 4) / 2, odd = t % 2;  // which 128-bit half, which of the pair
      for (int c = 0; c < 4; ++c) {
        group[half * 8 + c * 2 + odd] = static_cast<int16_t>(hi);
        group[16 + half * 8 + c * 2 + odd] = static_cast<int16_t>(lo);
      }
    }
  }
  return m;
}

// Four RGBX pixels as 16-bit R0 R1 G0 G1 B0 B1 X0 X1 | R2 R3 G2 G3 B2 B3 X2 X3 (`pairs` is the
// byte shuffle that pairs them).
__attribute__((target("avx2"), always_inline)) inline __m256i FourTaps(const uint8_t* p,
                                                                       __m128i pairs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepu8_epi16(_mm_shuffle_epi8(raw, pairs));
}

// AVX2 horizontal pass over one RGBX row (`in` is source column c0; columns up to `c1` may be
// read): four taps per step, two vpmaddwd (hi and lo halves of the weights). Integer sums are
// exact, so the result is HorizontalRow's. A pixel whose last group would read past c1 is
// copied into `padded` (m.groups * 16 bytes) with zeros after it first.
__attribute__((target("avx2"))) void HorizontalRowRgbxAvx2(const uint8_t* in, int64_t c0,
                                                           int64_t c1, const AxisWeights& w,
                                                           const MaddWeights& m, uint8_t* padded,
                                                           uint8_t* out) {
  // Plain pointers: the byte stores to `out` may alias anything, so the vectors' would be reloaded.
  const int64_t cols = static_cast<int64_t>(w.first.size());
  const int32_t* firsts = w.first.data();
  const int32_t* counts = w.count.data();
  const int32_t* used = m.used.data();
  const size_t vectors_per_pixel = static_cast<size_t>(m.groups) * 2;
  const __m256i* table = reinterpret_cast<const __m256i*>(m.table.data());
  const __m128i pairs = _mm_setr_epi8(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
  const __m256i half = _mm256_set1_epi32(kHalf);
  // The sums of output pixels x - 1 and x are finished together (`pending` holds the first's).
  __m256i pending = _mm256_setzero_si256();
  for (int64_t x = 0; x < cols; ++x) {
    const __m256i* k = table + static_cast<size_t>(x) * vectors_per_pixel;
    const int32_t groups = used[x];
    const uint8_t* p = in + (firsts[x] - c0) * 4;
    if (firsts[x] + groups * 4 > c1) {
      std::memset(padded, 0, static_cast<size_t>(groups) * 16);
      std::memcpy(padded, p, static_cast<size_t>(counts[x]) * 4);
      p = padded;
    }
    __m256i hi0 = _mm256_setzero_si256(), lo0 = hi0, hi1 = hi0, lo1 = hi0;
    int32_t g = 0;
    for (; g + 2 <= groups; g += 2) {
      const __m256i v0 = FourTaps(p + 16 * g, pairs), v1 = FourTaps(p + 16 * g + 16, pairs);
      hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g)));
      lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g + 1)));
      hi1 = _mm256_add_epi32(hi1, _mm256_madd_epi16(v1, _mm256_loadu_si256(k + 2 * g + 2)));
      lo1 = _mm256_add_epi32(lo1, _mm256_madd_epi16(v1, _mm256_loadu_si256(k + 2 * g + 3)));
    }
    if (g < groups) {
      const __m256i v0 = FourTaps(p + 16 * g, pairs);
      hi0 = _mm256_add_epi32(hi0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g)));
      lo0 = _mm256_add_epi32(lo0, _mm256_madd_epi16(v0, _mm256_loadu_si256(k + 2 * g + 1)));
    }
    // R G B X sums of taps 0-1 of each group (low half) and of taps 2-3 (high half).
    const __m256i acc = _mm256_add_epi32(_mm256_slli_epi32(_mm256_add_epi32(hi0, hi1), 11),
                                         _mm256_add_epi32(lo0, lo1));
    const bool second = x % 2 == 1;
    if (!second && x + 1 < cols) {
      pending = acc;
      continue;
    }
    // Low half: the first pixel's halves added (this one's when it has no partner); high half:
    // this pixel's.
    const __m256i a = second ? pending : acc;
    __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(a, acc, 0x20),
                                   _mm256_permute2x128_si256(a, acc, 0x31));
    // (sum + half) >> 22 saturated to 0..255: Clip8's result for every int32.
    sum = _mm256_srai_epi32(_mm256_add_epi32(sum, half), kPrecisionBits);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
    const __m128i bytes = _mm_packus_epi16(words, words);  // R G B X of each pixel
    if (second) {
      const int32_t before = _mm_cvtsi128_si32(bytes);
      std::memcpy(out + 3 * (x - 1), &before, 3);
    }
    const int32_t here = _mm_extract_epi32(bytes, 1);
    std::memcpy(out + 3 * x, &here, 3);
  }
}
#endif

// Columns [x0, n) of one output row of the vertical pass:
// out[x] = Clip8(half + sum over taps of rows[t][x] * k[t]), rows[t] == nullptr counting as black.
void VerticalRowScalar(const uint8_t* const* rows, const int32_t* k, int32_t taps, int64_t x0,
                       int64_t n, uint8_t* out) {
  for (int64_t x = x0; x < n; ++x) {
    int32_t acc = kHalf;
    for (int32_t t = 0; t < taps; ++t) {
      if (rows[t]) acc += rows[t][x] * k[t];
    }
    out[x] = Clip8(acc);
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same, eight columns at a time with the sum held in a register across the taps.
__attribute__((target("avx2"))) void VerticalRowAvx2(const uint8_t* const* rows, const int32_t* k,
                                                     int32_t taps, int64_t n, uint8_t* out) {
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) {
    __m256i acc = _mm256_set1_epi32(kHalf);
    for (int32_t t = 0; t < taps; ++t) {
      if (!rows[t]) continue;
      const __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(rows[t] + x)));
      acc = _mm256_add_epi32(acc, _mm256_mullo_epi32(p, _mm256_set1_epi32(k[t])));
    }
    // (acc >> 22) saturated to 0..255: Clip8's result for every int32.
    acc = _mm256_srai_epi32(acc, kPrecisionBits);
    const __m128i words = _mm_packs_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + x), _mm_packus_epi16(words, words));
  }
  VerticalRowScalar(rows, k, taps, x, n, out);
}
#endif

}  // namespace

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
