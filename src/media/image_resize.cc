// The image resize of SPEC 6.2: the resize geometry (stretch / center_crop) and a separable
// convolution with Pillow's conventions (ImagingResample on 8-bit images): centre of output pixel
// i at in0 + (i + 0.5) * scale, kernel stretched by max(1, scale), weights normalized per output
// pixel in double then rounded to fixed point with 22 fractional bits, horizontal pass first,
// rounding and clamping to 8 bits after each pass. Only the kept crop window is computed.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

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
// The weights of an axis with each tap repeated four times (one per RGBX lane), so that a
// 256-bit load gives two taps' multipliers; per output pixel, ksize rounded up to even taps.
std::vector<int32_t> SpreadWeights(const AxisWeights& w) {
  const size_t stride = static_cast<size_t>((w.ksize + 1) / 2 * 2) * 4;
  std::vector<int32_t> out(w.first.size() * stride, 0);
  for (size_t x = 0; x < w.first.size(); ++x) {
    for (int32_t t = 0; t < w.count[x]; ++t) {
      for (int lane = 0; lane < 4; ++lane) {
        out[x * stride + static_cast<size_t>(t) * 4 + lane] = w.weights[x * w.ksize + static_cast<size_t>(t)];
      }
    }
  }
  return out;
}

// AVX2: two taps (two RGBX pixels widened to 8 int32 lanes) per multiply, two accumulators to
// hide the multiply's latency. Integer sums are exact, so the order does not change the result.
__attribute__((target("avx2"))) void HorizontalRowRgbxAvx2(const uint8_t* in, int64_t c0,
                                                           const AxisWeights& w,
                                                           const std::vector<int32_t>& spread,
                                                           uint8_t* out) {
  const int64_t cols = static_cast<int64_t>(w.first.size());
  const size_t stride = static_cast<size_t>((w.ksize + 1) / 2 * 2) * 4;
  const __m128i half = _mm_set1_epi32(kHalf);
  for (int64_t x = 0; x < cols; ++x) {
    const int32_t* k = spread.data() + static_cast<size_t>(x) * stride;
    const uint8_t* p = in + static_cast<size_t>(w.first[x] - c0) * 4;
    const int32_t n = w.count[x];
    __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
    int32_t t = 0;
    for (; t + 4 <= n; t += 4) {
      const __m256i p0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 4 * t)));
      const __m256i p1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 4 * t + 8)));
      const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 4 * t));
      const __m256i k1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 4 * t + 8));
      acc0 = _mm256_add_epi32(acc0, _mm256_mullo_epi32(p0, k0));
      acc1 = _mm256_add_epi32(acc1, _mm256_mullo_epi32(p1, k1));
    }
    if (t + 2 <= n) {
      const __m256i p0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 4 * t)));
      const __m256i k0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(k + 4 * t));
      acc0 = _mm256_add_epi32(acc0, _mm256_mullo_epi32(p0, k0));
      t += 2;
    }
    acc0 = _mm256_add_epi32(acc0, acc1);
    __m128i sum = _mm_add_epi32(_mm256_castsi256_si128(acc0), _mm256_extracti128_si256(acc0, 1));
    if (t < n) {  // the odd last tap: one pixel, read as exactly its 4 bytes
      int32_t pixel = 0;
      std::memcpy(&pixel, p + 4 * t, 4);
      sum = _mm_add_epi32(sum, _mm_mullo_epi32(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(pixel)),
                                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(k + 4 * t))));
    }
    sum = _mm_add_epi32(sum, half);
    alignas(16) int32_t v[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(v), sum);
    out[3 * x] = Clip8(v[0]);
    out[3 * x + 1] = Clip8(v[1]);
    out[3 * x + 2] = Clip8(v[2]);
  }
}

bool HasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

// `spread` is SpreadWeights(w) where AVX2 is used (HasAvx2), else empty.
void HorizontalRowRgbx(const uint8_t* in, int64_t c0, const AxisWeights& w,
                       const std::vector<int32_t>& spread, uint8_t* out) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!spread.empty()) return HorizontalRowRgbxAvx2(in, c0, w, spread, out);
#endif
  (void)spread;
  HorizontalRowRgbxScalar(in, c0, w, out);
}

// a[x] += r[x] * k over a row of bytes: the vertical pass's inner loop.
void AccumulateRowScalar(const uint8_t* r, int32_t k, int64_t n, int32_t* a) {
  for (int64_t x = 0; x < n; ++x) a[x] += r[x] * k;
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2"))) void AccumulateRowAvx2(const uint8_t* r, int32_t k, int64_t n,
                                                       int32_t* a) {
  const __m256i kv = _mm256_set1_epi32(k);
  int64_t x = 0;
  for (; x + 8 <= n; x += 8) {
    const __m256i p = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(r + x)));
    __m256i* dst = reinterpret_cast<__m256i*>(a + x);
    _mm256_storeu_si256(dst, _mm256_add_epi32(_mm256_loadu_si256(dst), _mm256_mullo_epi32(p, kv)));
  }
  for (; x < n; ++x) a[x] += r[x] * k;
}
#endif

void AccumulateRow(const uint8_t* r, int32_t k, int64_t n, int32_t* a) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (HasAvx2()) return AccumulateRowAvx2(r, k, n, a);
#endif
  AccumulateRowScalar(r, k, n, a);
}

// Vertical pass: output row j combines rows of `in` (row `row0` of the source is in[0]).
void VerticalPass(const uint8_t* in, int64_t stride, int64_t row0, int64_t row_bytes,
                  const AxisWeights& w, uint8_t* dst) {
  std::vector<int32_t> acc(row_bytes);
  const int64_t rows = static_cast<int64_t>(w.first.size());
  for (int64_t j = 0; j < rows; ++j) {
    std::fill(acc.begin(), acc.end(), kHalf);
    const int32_t* k = &w.weights[static_cast<size_t>(j) * w.ksize];
    for (int32_t t = 0, n = w.count[j]; t < n; ++t) {
      const uint8_t* r = in + static_cast<size_t>(w.first[j] + t - row0) * stride;
      AccumulateRow(r, k[t], row_bytes, acc.data());
    }
    uint8_t* out = dst + static_cast<size_t>(j) * row_bytes;
    for (int64_t x = 0; x < row_bytes; ++x) out[x] = Clip8(acc[x]);
  }
}

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

struct RowResizer::State {
  ResizePlan plan;
  bool empty = false;   // nothing to compute (a degenerate size)
  bool need_h = false;  // as Pillow: an axis whose size and extent are unchanged is copied
  bool need_v = false;
  AxisWeights wh, wv;
  int64_t row0 = 0, row1 = 0;  // source rows the window needs
  int64_t row_bytes = 0;
  std::vector<uint8_t> mid;    // rows [row0, row1) after the horizontal pass
  std::vector<int32_t> wh_spread;  // wh for the AVX2 RGBX pass, made on its first use
};

RowResizer::RowResizer(const ResizePlan& plan, ResizeFilter filter,
                       const std::optional<SourceBox>& box_in)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.plan = plan;
  s.row_bytes = plan.width * 3;
  s.empty = plan.source_width <= 0 || plan.source_height <= 0 || plan.width <= 0 || plan.height <= 0;
  if (s.empty) return;
  const SourceBox box = box_in.value_or(SourceBox{0, 0, static_cast<double>(plan.source_width),
                                                  static_cast<double>(plan.source_height)});
  const Kernel kernel = KernelFor(filter);
  s.need_h = plan.scaled_width != plan.source_width || box.x0 != 0.0 ||
             box.x1 != static_cast<double>(plan.source_width);
  s.need_v = plan.scaled_height != plan.source_height || box.y0 != 0.0 ||
             box.y1 != static_cast<double>(plan.source_height);
  if (s.need_h) {
    s.wh = ComputeWeights(plan.source_width, box.x0, box.x1, plan.scaled_width, plan.left,
                          plan.width, kernel);
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
    }
  }
  s.mid.assign(static_cast<size_t>(s.row1 - s.row0) * s.row_bytes, 0);
}

RowResizer::~RowResizer() = default;

void RowResizer::PushRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride) {
  State& s = *state_;
  if (s.empty) return;
  for (int64_t i = std::max(y, s.row0), end = std::min(y + count, s.row1); i < end; ++i) {
    const uint8_t* in = rows + static_cast<size_t>(i - y) * stride;
    uint8_t* out = s.mid.data() + static_cast<size_t>(i - s.row0) * s.row_bytes;
    if (s.need_h) {
      HorizontalRow(in, s.wh, out);
    } else {
      std::memcpy(out, in + s.plan.left * 3, s.row_bytes);
    }
  }
}

void RowResizer::PushRgbxRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride,
                              int64_t first_column) {
  State& s = *state_;
  if (s.empty) return;
  for (int64_t i = std::max(y, s.row0), end = std::min(y + count, s.row1); i < end; ++i) {
    const uint8_t* row = rows + static_cast<size_t>(i - y) * stride;
    uint8_t* out = s.mid.data() + static_cast<size_t>(i - s.row0) * s.row_bytes;
    if (s.need_h) {
#if defined(__x86_64__) && defined(__GNUC__)
      if (s.wh_spread.empty() && HasAvx2()) s.wh_spread = SpreadWeights(s.wh);
#endif
      HorizontalRowRgbx(row, first_column, s.wh, s.wh_spread, out);
    } else {
      const uint8_t* in = row + (s.plan.left - first_column) * 4;
      for (int64_t x = 0; x < s.plan.width; ++x) std::memcpy(out + 3 * x, in + 4 * x, 3);
    }
  }
}

std::pair<int64_t, int64_t> RowResizer::NeededColumns() const {
  const State& s = *state_;
  if (s.empty) return {0, 0};
  if (!s.need_h) return {s.plan.left, s.plan.left + s.plan.width};
  int64_t first = s.plan.source_width, last = 0;
  for (size_t j = 0; j < s.wh.first.size(); ++j) {
    first = std::min<int64_t>(first, s.wh.first[j]);
    last = std::max<int64_t>(last, s.wh.first[j] + s.wh.count[j]);
  }
  return {first, std::max(first, last)};
}

std::pair<int64_t, int64_t> RowResizer::NeededRows() const {
  const State& s = *state_;
  return s.empty ? std::pair<int64_t, int64_t>{0, 0} : std::pair<int64_t, int64_t>{s.row0, s.row1};
}

RgbImage RowResizer::Finish() {
  State& s = *state_;
  RgbImage out;
  out.width = s.plan.width;
  out.height = s.plan.height;
  out.pixels.resize(static_cast<size_t>(std::max<int64_t>(0, s.plan.width)) *
                    std::max<int64_t>(0, s.plan.height) * 3);
  if (s.empty) return out;
  if (s.need_v) {
    VerticalPass(s.mid.data(), s.row_bytes, s.row0, s.row_bytes, s.wv, out.pixels.data());
  } else {
    std::memcpy(out.pixels.data(), s.mid.data() + static_cast<size_t>(s.plan.top - s.row0) * s.row_bytes,
                out.pixels.size());
  }
  return out;
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
