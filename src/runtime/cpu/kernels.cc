// The CPU program's kernel entry points (see kernels.h): chooses the instruction-set path at run
// time, rounds activations for the 4-bit products, spreads output rows over the thread pool
// (thread_pool.cc), and converts half / bfloat16 values.
#include "runtime/cpu/kernels.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <vector>

#include "runtime/cpu/huge_pages.h"
#include "runtime/cpu/kernels_internal.h"

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
      const int64_t groups = Weight::Q4Groups(w.in);
      uint32_t word = static_cast<const uint32_t*>(w.data)[o * groups * 4 + i / 8];
      int q = static_cast<int>((word >> (4 * (i % 8))) & 0xF);
      int64_t s = o * groups + i / 32;
      float scale = w.format == WeightFormat::kQ4F16
                        ? HalfToFloat(static_cast<const uint16_t*>(w.scale)[s])
                        : static_cast<const float*>(w.scale)[s];
      return static_cast<float>(q - 7) * scale;
    }
  }
  return 0.0f;
}

// The path in use: the best table the CPU runs (AMX, AVX-512 VNNI, AVX-VNNI, AVX2), else the portable one.
std::atomic<const detail::KernelTable*> active_kernels{nullptr};

const detail::KernelTable* BestKernels() {
  if (const detail::KernelTable* amx = detail::AmxKernels()) return amx;
  if (const detail::KernelTable* avx512 = detail::Avx512Kernels()) return avx512;
  if (const detail::KernelTable* vnni = detail::AvxVnniKernels()) return vnni;
  if (const detail::KernelTable* avx2 = detail::Avx2Kernels()) return avx2;
  return &detail::PortableKernels();
}

const detail::KernelTable& Kernels() {
  const detail::KernelTable* table = active_kernels.load(std::memory_order_acquire);
  if (table == nullptr) {
    table = BestKernels();
    active_kernels.store(table, std::memory_order_release);
  }
  return *table;
}

// The four arrays of Q8Activations for n rows of `blocks` blocks, writable, carved from one block
// of scratch kept per calling thread (no allocation, and no page faults, per product).
struct Q8Buffer {
  int8_t* q;
  float* d;
  float* offset;
  int32_t* start;
};

Q8Buffer Q8Scratch(int64_t n, int64_t blocks) {
  auto line = [](size_t bytes) { return (bytes + 63) / 64 * 64; };
  const size_t q_bytes = line(static_cast<size_t>(n * blocks * 32));
  const size_t part = line(static_cast<size_t>(n * blocks) * sizeof(float));
  thread_local HugeScratch scratch;
  auto* base = static_cast<uint8_t*>(scratch.Reserve(q_bytes + 3 * part));
  return {reinterpret_cast<int8_t*>(base), reinterpret_cast<float*>(base + q_bytes),
          reinterpret_cast<float*>(base + q_bytes + part), reinterpret_cast<int32_t*>(base + q_bytes + 2 * part)};
}

// `parts` arrays of n rows of `in` bfloat16 values each, every one rounded up to a multiple of 32
// rows (the extra ones zero), from a per-calling-thread block as Q8Scratch's: part k at
// base + k * Bf16Rows(n) * in.
int64_t Bf16Rows(int64_t n) { return (n + 31) / 32 * 32; }

uint16_t* Bf16Scratch(int64_t n, int64_t in, int parts) {
  const int64_t rows = Bf16Rows(n);
  thread_local HugeScratch scratch;
  auto* base = static_cast<uint16_t*>(scratch.Reserve(static_cast<size_t>(parts * rows * in) * sizeof(uint16_t)));
  for (int k = 0; k < parts; ++k) {
    std::memset(base + (k * rows + n) * in, 0, static_cast<size_t>((rows - n) * in) * sizeof(uint16_t));
  }
  return base;
}

// fn over the n token rows of an `in`-wide product's input: on the pool when there is enough of it.
void OverTokens(int64_t n, int64_t in, const std::function<void(int64_t, int64_t)>& fn) {
  if (n * in >= 65536) {
    ParallelFor(n, 1, fn);
  } else {
    fn(0, n);
  }
}

// 4-bit rows are handed out in panels of this many (the AVX-512 path's tile height).
constexpr int64_t kPanelRows = 16;

// Rows per ParallelFor range: enough work per range to pay for the hand-over.
int64_t RowGrain(const Weight& w, int64_t n) {
  const int64_t per_row = std::max<int64_t>(1, w.in * n);
  return std::clamp<int64_t>(16384 / per_row, 4, 64) / 4 * 4;
}

}  // namespace

namespace detail {

uint8_t* ThreadScratch(size_t bytes) {
  thread_local HugeScratch scratch;
  return static_cast<uint8_t*>(scratch.Reserve(bytes));
}

void PackQ4Group(const Weight& w, int64_t g, uint8_t* group) {
  const int64_t blocks = Weight::Q4Groups(w.in), group_bytes = PackGroupBytes(w.format, blocks);
  const int64_t scale_bytes = PackScaleBytes(w.format) / kPackRows;
  const auto* words = static_cast<const uint8_t*>(w.data);
  const auto* scales = static_cast<const uint8_t*>(w.scale);
  std::memset(group, 0, static_cast<size_t>(group_bytes));
  for (int64_t r = 0; r < kPackRows && g * kPackRows + r < w.out; ++r) {
    const int64_t o = g * kPackRows + r;
    for (int64_t b = 0; b < blocks; ++b) {
      for (int k = 0; k < 4; ++k) {
        std::memcpy(group + b * kPackWeightBytes + 64 * k + 4 * r, words + ((o * blocks + b) * 4 + k) * 4, 4);
      }
      std::memcpy(group + blocks * kPackWeightBytes + (b * kPackRows + r) * scale_bytes,
                  scales + (o * blocks + b) * scale_bytes, static_cast<size_t>(scale_bytes));
    }
  }
}

std::shared_ptr<const void> PackQ4Panels(const Weight& w) {
  const int64_t blocks = Weight::Q4Groups(w.in), groups = (w.out + kPackRows - 1) / kPackRows;
  const int64_t group_bytes = PackGroupBytes(w.format, blocks);
  const size_t bytes = static_cast<size_t>(groups * group_bytes);
  // Large panels start on a 2 MB boundary and are advised as huge pages (fewer TLB misses while
  // decode streams them); small ones need only the loads' 64 bytes.
  HugeBlock block = AllocateHuge(bytes);
  auto* base = static_cast<uint8_t*>(block.get());
  std::shared_ptr<const void> packed(std::move(block));
  ParallelFor(groups, 1, [&](int64_t g_begin, int64_t g_end) {
    for (int64_t g = g_begin; g < g_end; ++g) PackQ4Group(w, g, base + g * group_bytes);
  });
  return packed;
}

}  // namespace detail

void PackForProducts(Weight& w) {
  if ((w.format != WeightFormat::kQ4F16 && w.format != WeightFormat::kQ4F32) || w.out <= 0 || w.in <= 0) return;
  if (&Kernels() != detail::Avx512Kernels() && &Kernels() != detail::AmxKernels()) return;
  w.packed = detail::PackQ4Panels(w);
}

namespace {

// fn(o_begin, o_end) over ranges of an even number of panels (the AMX kernels take them in pairs),
// about four per thread.
void OverPanelPairs(const Weight& w, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t panels = (w.out + kPanelRows - 1) / kPanelRows;
  const int64_t per_thread = (panels + 4 * ThreadCount() - 1) / (4 * ThreadCount());
  ParallelFor(panels, std::max<int64_t>(2, (per_thread + 1) / 2 * 2), [&](int64_t begin, int64_t end) {
    fn(begin * kPanelRows, std::min(w.out, end * kPanelRows));
  });
}

// 4-bit weights and many tokens on a path with WideProducts: x rounded to bfloat16 once.
void LinearWide(const detail::WideProducts& wide, const Weight& w, const float* x, int64_t n, float* y,
                const float* bias) {
  uint16_t* rounded = Bf16Scratch(n, w.in, 1);
  OverTokens(n, w.in, [&](int64_t begin, int64_t end) { wide.round(x, w.in, begin, end, rounded); });
  OverPanelPairs(w, [&](int64_t begin, int64_t end) { wide.linear_q4(w, rounded, n, y, bias, begin, end); });
}

// Half and bfloat16 weights and many tokens on a path with WideProducts: x split into bfloat16
// halves once.
void LinearWideFloat(const detail::WideProducts& wide, const Weight& w, const float* x, int64_t n, float* y,
                     const float* bias) {
  const int64_t in_pad = (w.in + 31) / 32 * 32;
  uint16_t* hi = Bf16Scratch(n, in_pad, 2);
  uint16_t* lo = hi + Bf16Rows(n) * in_pad;
  OverTokens(n, w.in, [&](int64_t begin, int64_t end) { wide.split(x, w.in, in_pad, begin, end, hi, lo); });
  OverPanelPairs(w, [&](int64_t begin, int64_t end) {
    wide.linear_float(w, hi, lo, in_pad, n, y, bias, begin, end);
  });
}

}  // namespace

void DequantizeRow(const Weight& w, int64_t row, float* out) {
  for (int64_t i = 0; i < w.in; ++i) out[i] = WeightAt(w, row, i);
}

void Linear(const Weight& w, const float* x, int64_t n, float* y, const float* bias) {
  if (n <= 0 || w.out <= 0) return;
  const detail::KernelTable& kernels = Kernels();
  const int64_t grain = RowGrain(w, n);
  if (w.format != WeightFormat::kQ4F16 && w.format != WeightFormat::kQ4F32) {
    // float32 weights keep float32 products: their precision is what they were chosen for (the audio
    // frontend's DFT and mel tables, q0f32 packages).
    if (kernels.wide != nullptr && w.format != WeightFormat::kF32 && n >= kernels.wide->float_min_tokens) {
      return LinearWideFloat(*kernels.wide, w, x, n, y, bias);
    }
    ParallelFor(w.out, grain, [&](int64_t begin, int64_t end) {
      kernels.linear_float(w, x, n, y, bias, begin, end);
    });
    return;
  }
  if (w.in % 32) {
    // A partial last group: the rows of x widened with zeros to whole groups, which the padded
    // weights multiply exactly to nothing (and which leave each block's int8 scale as it was).
    const int64_t padded = Weight::Q4Groups(w.in) * 32;
    std::vector<float> wide(static_cast<size_t>(n * padded), 0.0f);
    for (int64_t t = 0; t < n; ++t) {
      std::memcpy(&wide[static_cast<size_t>(t * padded)], x + t * w.in, static_cast<size_t>(w.in) * sizeof(float));
    }
    Weight whole = w;
    whole.in = padded;
    Linear(whole, wide.data(), n, y, bias);
    return;
  }
  if (kernels.wide != nullptr && n >= kernels.wide->min_tokens) return LinearWide(*kernels.wide, w, x, n, y, bias);
  const int64_t blocks = w.in / 32;
  const Q8Buffer b = Q8Scratch(n, blocks);  // the pool's threads see the caller's buffer, not their own
  OverTokens(n, w.in, [&](int64_t begin, int64_t end) {
    kernels.quantize(x, w.in, begin, end, b.q, b.d, b.offset, b.start);
  });
  const detail::Q8Activations q8{blocks, b.q, b.d, b.offset, b.start};
  // Ranges of whole panels of kPanelRows rows (the vector paths' tiles divide it).
  const int64_t panels = (w.out + kPanelRows - 1) / kPanelRows;
  ParallelFor(panels, std::max<int64_t>(1, grain / kPanelRows), [&](int64_t begin, int64_t end) {
    kernels.linear_q4(w, q8, n, y, bias, begin * kPanelRows, std::min(w.out, end * kPanelRows));
  });
}

float Dot(const float* a, const float* b, int64_t n) { return Kernels().dot(a, b, n); }

void AddScaled(float alpha, const float* x, float* y, int64_t n) { Kernels().add_scaled(alpha, x, y, n); }

void SiluMul(const float* gate, const float* up, float* out, int64_t n) { Kernels().silu_mul(gate, up, out, n); }

float ExpShiftedSum(float* x, int64_t n, float shift) { return Kernels().exp_shifted_sum(x, n, shift); }

void MatMulRows(const float* a, int64_t lda, int64_t m, int64_t k, const float* const* b_rows, int64_t n, float* c,
                int64_t ldc) {
  Kernels().matmul_rows(a, lda, m, k, b_rows, n, c, ldc);
}

void TransposeRows(const float* const* rows, int64_t n, int64_t d, float* out, int64_t ldo) {
  Kernels().transpose_rows(rows, n, d, out, ldo);
}

const char* KernelIsa() {
  const detail::KernelTable* table = &Kernels();
  if (table == detail::AmxKernels()) return "amx";
  if (table == detail::Avx512Kernels()) return "avx512";
  if (table == detail::AvxVnniKernels()) return "avxvnni";
  return table == detail::Avx2Kernels() ? "avx2" : "portable";
}

int64_t Bf16MinTokens() {
  const detail::WideProducts* wide = Kernels().wide;
  return wide ? wide->min_tokens : 0;
}

int64_t SplitBf16MinTokens() {
  const detail::WideProducts* wide = Kernels().wide;
  return wide ? wide->float_min_tokens : 0;
}

bool SetKernelIsa(std::string_view isa) {
  const detail::KernelTable* table = nullptr;
  if (isa == "auto") {
    table = BestKernels();
  } else if (isa == "portable") {
    table = &detail::PortableKernels();
  } else if (isa == "avx2") {
    table = detail::Avx2Kernels();
  } else if (isa == "avxvnni") {
    table = detail::AvxVnniKernels();
  } else if (isa == "avx512") {
    table = detail::Avx512Kernels();
  } else if (isa == "amx") {
    table = detail::AmxKernels();
  }
  if (table == nullptr) return false;
  active_kernels.store(table, std::memory_order_release);
  return true;
}

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
