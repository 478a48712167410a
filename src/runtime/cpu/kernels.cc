// Portable kernels of the CPU program (see kernels.h): straightforward loops with float32
// accumulation and a simple thread pool. The vectorised paths replace these where the CPU allows.
#include "runtime/cpu/kernels.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace mlc::cpu {
namespace {

float WeightAt(const Weight& w, int64_t o, int64_t i) {
  switch (w.format) {
    case WeightFormat::kF32:
      return static_cast<const float*>(w.data)[o * w.in + i];
    case WeightFormat::kF16:
      return HalfToFloat(static_cast<const uint16_t*>(w.data)[o * w.in + i]);
    case WeightFormat::kBF16:
      return BFloat16ToFloat(static_cast<const uint16_t*>(w.data)[o * w.in + i]);
    case WeightFormat::kQ4F16:
    case WeightFormat::kQ4F32: {
      uint32_t word = static_cast<const uint32_t*>(w.data)[o * (w.in / 8) + i / 8];
      int q = static_cast<int>((word >> (4 * (i % 8))) & 0xF);
      int64_t s = o * (w.in / 32) + i / 32;
      float scale = w.format == WeightFormat::kQ4F16
                        ? HalfToFloat(static_cast<const uint16_t*>(w.scale)[s])
                        : static_cast<const float*>(w.scale)[s];
      return static_cast<float>(q - 7) * scale;
    }
  }
  return 0.0f;
}

}  // namespace

void DequantizeRow(const Weight& w, int64_t row, float* out) {
  for (int64_t i = 0; i < w.in; ++i) out[i] = WeightAt(w, row, i);
}

void Linear(const Weight& w, const float* x, int64_t n, float* y, const float* bias) {
  ParallelFor(w.out, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(w.in));
    for (int64_t o = begin; o < end; ++o) {
      DequantizeRow(w, o, row.data());
      for (int64_t t = 0; t < n; ++t) {
        const float* xt = x + t * w.in;
        float acc = 0.0f;
        for (int64_t i = 0; i < w.in; ++i) acc += xt[i] * row[static_cast<size_t>(i)];
        y[t * w.out + o] = acc + (bias ? bias[o] : 0.0f);
      }
    }
  });
}

void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t parts = std::min<int64_t>(ThreadCount(), (n + grain - 1) / grain);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  int64_t step = (n + parts - 1) / parts;
  std::vector<std::thread> threads;
  for (int64_t p = 1; p < parts; ++p) {
    int64_t b = p * step, e = std::min(n, b + step);
    if (b < e) threads.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(0, std::min(n, step));
  for (std::thread& t : threads) t.join();
}

int ThreadCount() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

const char* KernelIsa() { return "portable"; }

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F;
  uint32_t mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xFF) - 127 + 15;
  uint32_t mant = x & 0x7FFFFF;
  if (((x >> 23) & 0xFF) == 0xFF) return static_cast<uint16_t>(sign | 0x7C00 | (mant ? 0x200 : 0));
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7C00);
  if (exp <= 0) {  // subnormal or zero, rounded to nearest even
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | static_cast<uint32_t>(exp) << 10 | mant >> 13;
  uint32_t rem = mant & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;  // carries into the exponent
  return static_cast<uint16_t>(half);
}

float BFloat16ToFloat(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace mlc::cpu
