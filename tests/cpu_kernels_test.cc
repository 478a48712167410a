// The CPU program's kernels (src/runtime/cpu/kernels.h): every weight format on every kernel path
// (portable, AVX2, AVX-VNNI, AVX-512 VNNI, AMX, each forced) against a float64 reference over odd shapes (tails in rows, tokens and inputs), the paths
// against each other, half / bfloat16 conversions (exhaustive round trip, subnormals, infinities,
// NaN, rounding to nearest even), and the thread pool's coverage, nesting and concurrent callers.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu/kernels.h"

namespace mlc::cpu {
namespace {

// Restores the automatic choice when a test that forced a path ends.
class KernelPath {
 public:
  explicit KernelPath(const std::string& isa) : ok_(SetKernelIsa(isa)) {}
  ~KernelPath() { SetKernelIsa("auto"); }
  KernelPath(const KernelPath&) = delete;
  KernelPath& operator=(const KernelPath&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_;
};

// ---- half / bfloat16 -------------------------------------------------------------------------

// The value of an IEEE half from its definition, in double.
double HalfValue(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return sign ? -v : v;
}

TEST(CpuHalf, EveryHalfConvertsToItsValueAndBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const float f = HalfToFloat(bits);
    const double expected = HalfValue(bits);
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(f)))) << h;
      continue;
    }
    ASSERT_EQ(static_cast<double>(f), expected) << h;
    ASSERT_EQ(std::signbit(f), (bits >> 15) != 0) << h;
    ASSERT_EQ(FloatToHalf(f), bits) << h;
  }
}

// The nearest half to f (ties to the even one), found by bisection over the finite halves, whose
// values rise with their bits, in double.
uint16_t NearestHalf(float f) {
  const double v = f;
  if (std::isnan(v)) return 0x7E00;
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= 65520.0) return sign | 0x7C00;  // 65504 + half an ulp and beyond overflow
  uint32_t low = 0, high = 0x7BFF;          // the largest half <= a lies in [low, high]
  while (low < high) {
    const uint32_t mid = (low + high + 1) / 2;
    if (HalfValue(static_cast<uint16_t>(mid)) <= a) low = mid; else high = mid - 1;
  }
  uint32_t best = low;
  if (low < 0x7BFF) {
    const double below = a - HalfValue(static_cast<uint16_t>(low));
    const double above = HalfValue(static_cast<uint16_t>(low + 1)) - a;
    if (above < below || (above == below && (low & 1) != 0)) best = low + 1;
  } else if (a - 65504.0 >= 16.0) {
    best = 0x7C00;
  }
  return static_cast<uint16_t>(sign | best);
}

TEST(CpuHalf, FloatToHalfRoundsToNearestEven) {
  std::vector<float> cases = {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 65519.0f, 65520.0f, 1e9f,
                              -1e9f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -25),
                              std::ldexp(1.5f, -25), std::ldexp(1.0f, -26), std::ldexp(3.0f, -25),
                              std::ldexp(1.0f, -14), std::ldexp(1023.5f, -24), 1.0f + std::ldexp(1.0f, -11),
                              1.0f + std::ldexp(3.0f, -11), 2049.0f, 2051.0f, 1e-30f,
                              std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0xFFFFFFFFu);
  for (int i = 0; i < 400; ++i) {
    uint32_t b = bits(rng);
    b = (b & 0x807FFFFFu) | ((100u + b % 50u) << 23);  // exponents around the half range
    float f;
    std::memcpy(&f, &b, sizeof f);
    cases.push_back(f);
  }
  for (float f : cases) EXPECT_EQ(FloatToHalf(f), NearestHalf(f)) << f;
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(FloatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(CpuBFloat16, ConvertsByWidening) {
  EXPECT_EQ(BFloat16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(BFloat16ToFloat(0xC040), -3.0f);
  EXPECT_EQ(BFloat16ToFloat(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(BFloat16ToFloat(0xFF80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(0x7FC0)));
  EXPECT_EQ(BFloat16ToFloat(0x0001), std::ldexp(1.0f, -133));  // smallest subnormal
  EXPECT_TRUE(std::signbit(BFloat16ToFloat(0x8000)));
}

// ---- linear layers ----------------------------------------------------------------------------

// A random weight of one format with its float64 values, decoded here from the layout's
// definition (kernels.h), not by the code under test.
struct TestWeight {
  Weight weight;
  std::vector<uint8_t> data, scale;
  std::vector<double> values;  // [out][in]
};

TestWeight MakeWeight(WeightFormat format, int64_t out, int64_t in, std::mt19937& rng) {
  TestWeight t;
  t.weight.format = format;
  t.weight.out = out;
  t.weight.in = in;
  t.values.resize(static_cast<size_t>(out * in));
  std::normal_distribution<float> normal(0.0f, 0.5f);
  std::uniform_int_distribution<uint32_t> nibble(0, 15);
  auto at = [&](int64_t o, int64_t i) -> double& { return t.values[static_cast<size_t>(o * in + i)]; };
  switch (format) {
    case WeightFormat::kF32: {
      t.data.resize(static_cast<size_t>(out * in) * 4);
      auto* p = reinterpret_cast<float*>(t.data.data());
      for (int64_t k = 0; k < out * in; ++k) p[k] = normal(rng);
      for (int64_t k = 0; k < out * in; ++k) t.values[static_cast<size_t>(k)] = p[k];
      break;
    }
    case WeightFormat::kF16:
    case WeightFormat::kBF16: {
      t.data.resize(static_cast<size_t>(out * in) * 2);
      auto* p = reinterpret_cast<uint16_t*>(t.data.data());
      for (int64_t k = 0; k < out * in; ++k) {
        const float f = normal(rng);
        uint32_t b;
        std::memcpy(&b, &f, sizeof b);
        p[k] = format == WeightFormat::kF16 ? FloatToHalf(f) : static_cast<uint16_t>(b >> 16);
        t.values[static_cast<size_t>(k)] =
            format == WeightFormat::kF16 ? HalfValue(p[k]) : static_cast<double>(BFloat16ToFloat(p[k]));
      }
      break;
    }
    case WeightFormat::kQ4F16:
    case WeightFormat::kQ4F32: {
      // Whole groups per row: a partial last group's missing values hold random nibbles here, which
      // the kernels must never read (the converter stores zeros there).
      const int64_t row_groups = (in + 31) / 32, row_words = row_groups * 4;
      t.data.resize(static_cast<size_t>(out * row_words * 4));
      auto* words = reinterpret_cast<uint32_t*>(t.data.data());
      for (int64_t k = 0; k < out * row_words; ++k) {
        uint32_t w = 0;
        for (int j = 0; j < 8; ++j) w |= nibble(rng) << (4 * j);
        words[k] = w;
      }
      const int64_t groups = out * row_groups;
      const bool half = format == WeightFormat::kQ4F16;
      t.scale.resize(static_cast<size_t>(groups) * (half ? 2 : 4));
      std::vector<double> scales(static_cast<size_t>(groups));
      for (int64_t g = 0; g < groups; ++g) {
        const float s = std::fabs(normal(rng)) * 0.1f + 0.001f;
        if (half) {
          reinterpret_cast<uint16_t*>(t.scale.data())[g] = FloatToHalf(s);
          scales[static_cast<size_t>(g)] = HalfValue(FloatToHalf(s));
        } else {
          reinterpret_cast<float*>(t.scale.data())[g] = s;
          scales[static_cast<size_t>(g)] = s;
        }
      }
      for (int64_t o = 0; o < out; ++o) {
        for (int64_t i = 0; i < in; ++i) {
          const int q = static_cast<int>((words[o * row_words + i / 8] >> (4 * (i % 8))) & 0xF);
          at(o, i) = (q - 7) * scales[static_cast<size_t>(o * row_groups + i / 32)];
        }
      }
      break;
    }
  }
  t.weight.data = t.data.data();
  t.weight.scale = t.scale.empty() ? nullptr : t.scale.data();
  return t;
}

bool IsQ4(WeightFormat f) { return f == WeightFormat::kQ4F16 || f == WeightFormat::kQ4F32; }

// Whether the path in use takes n tokens' products with weights of format f as split bfloat16.
bool IsSplit(WeightFormat f, int64_t n) {
  return (f == WeightFormat::kF16 || f == WeightFormat::kBF16) && SplitBf16MinTokens() > 0 && n >= SplitBf16MinTokens();
}

std::vector<float> Activations(int64_t n, int64_t in, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * in));
  for (float& v : x) v = normal(rng);
  if (in >= 64) {
    for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 + i)] = 0.0f;  // an all-zero block
  }
  if (n * in >= 8) x[7] = 40.0f;  // an outlier that sets its block's scale
  return x;
}

// Checks Linear on the current path against float64. The error allowed is float32 rounding
// (relative 1e-5 of sum |w x|) plus, for 4-bit weights, int8 rounding of x: each element moves by
// at most half its block's step max|x| / 127; or, where the path takes the tokens as bfloat16
// (Bf16MinTokens), that rounding of each weight and activation: relative 2^-9 each, so 2^-8 + 2^-18
// of sum |w x|; for half and bfloat16 weights where the path takes the tokens as split bfloat16
// (SplitBf16MinTokens), 2^-15 of sum |w x|.
// While set, CheckLinear lays its 4-bit weights out for the chosen path first (PackForProducts,
// as the model binding does) and checks that the AVX-512 path got its panels.
bool g_pack_weights = false;

class PackedWeights {
 public:
  PackedWeights() { g_pack_weights = true; }
  ~PackedWeights() { g_pack_weights = false; }
  PackedWeights(const PackedWeights&) = delete;
  PackedWeights& operator=(const PackedWeights&) = delete;
};

void CheckLinear(WeightFormat format, int64_t out, int64_t in, int64_t n, bool with_bias, uint32_t seed,
                 std::vector<float>* result = nullptr) {
  std::mt19937 rng(seed);
  TestWeight tw = MakeWeight(format, out, in, rng);
  if (g_pack_weights) {
    PackForProducts(tw.weight);
    if (IsQ4(format) && (std::string(KernelIsa()) == "avx512" || std::string(KernelIsa()) == "amx")) {
      ASSERT_TRUE(tw.weight.packed);
    }
    if (!IsQ4(format)) {
      ASSERT_FALSE(tw.weight.packed);
    }
  }
  std::vector<float> x = Activations(n, in, rng);
  std::vector<float> bias(static_cast<size_t>(out));
  for (size_t o = 0; o < bias.size(); ++o) bias[o] = static_cast<float>(o % 5) - 2.0f;
  std::vector<float> y(static_cast<size_t>(n * out), std::nanf(""));
  Linear(tw.weight, x.data(), n, y.data(), with_bias ? bias.data() : nullptr);
  const bool bf16 = IsQ4(format) && Bf16MinTokens() > 0 && n >= Bf16MinTokens();
  const bool split = IsSplit(format, n);
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> step(static_cast<size_t>(in / 32 + 1), 0.0);
    if (IsQ4(format) && !bf16) {
      for (int64_t i = 0; i < in; ++i) {
        double& s = step[static_cast<size_t>(i / 32)];
        s = std::max(s, std::fabs(static_cast<double>(x[static_cast<size_t>(t * in + i)])) / 127.0);
      }
    }
    for (int64_t o = 0; o < out; ++o) {
      double ref = with_bias ? bias[static_cast<size_t>(o)] : 0.0, magnitude = 0.0, rounding = 0.0;
      for (int64_t i = 0; i < in; ++i) {
        const double w = tw.values[static_cast<size_t>(o * in + i)];
        const double xv = x[static_cast<size_t>(t * in + i)];
        ref += w * xv;
        magnitude += std::fabs(w * xv);
        if (IsQ4(format)) rounding += std::fabs(w) * step[static_cast<size_t>(i / 32)] / 2;
      }
      if (bf16) rounding = (std::ldexp(1.0, -8) + std::ldexp(1.0, -18)) * magnitude;
      if (split) rounding = std::ldexp(1.0, -15) * magnitude;
      const double got = y[static_cast<size_t>(t * out + o)];
      ASSERT_NEAR(got, ref, 1e-5 * magnitude + 1.0001 * rounding + 1e-6)
          << KernelIsa() << " format " << static_cast<int>(format) << " out " << out << " in " << in
          << " n " << n << " at token " << t << " row " << o;
    }
  }
  if (result) *result = y;
}

struct Shape {
  int64_t out, in, n;
};

// Tails of every tile: rows past a multiple of 4 and of 16 (the AVX-512 panels), tokens past a
// multiple of 2 and of 8, and exact multiples of both.
const Shape kShapes[] = {{1, 32, 1}, {7, 96, 3}, {33, 160, 5}, {130, 288, 1}, {67, 64, 9},
                         {5, 32, 2}, {258, 224, 1}, {19, 320, 4}, {16, 64, 8}, {50, 128, 19}};
const WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kF16, WeightFormat::kBF16,
                                 WeightFormat::kQ4F16, WeightFormat::kQ4F32};

void CheckEveryFormat() {
  uint32_t seed = 1;
  for (WeightFormat format : kFormats) {
    for (const Shape& s : kShapes) {
      CheckLinear(format, s.out, s.in, s.n, seed % 2 == 0, seed);
      ++seed;
    }
    // Inputs that are not a multiple of 8 reach the float paths' scalar tails; for 4-bit weights
    // they end in a partial group (SigLIP's 4304 among them).
    CheckLinear(format, 9, 37, 1, true, seed++);
    CheckLinear(format, 11, 13, 6, false, seed++);
    CheckLinear(format, 17, 80, 5, true, seed++);
    CheckLinear(format, 5, 4304, 2, false, seed++);
  }
  // The float panels (16 or 32 rows) and their tails against token tiles (6 or 8) and theirs, on
  // a tower-sized input.
  CheckLinear(WeightFormat::kF16, 77, 1024, 19, true, seed++);
  CheckLinear(WeightFormat::kBF16, 64, 200, 8, false, seed++);
  CheckLinear(WeightFormat::kF32, 40, 72, 13, true, seed++);
}

TEST(CpuLinear, PortablePathMatchesFloat64) {
  KernelPath path("portable");
  ASSERT_TRUE(path.ok());
  EXPECT_STREQ(KernelIsa(), "portable");
  CheckEveryFormat();
}

TEST(CpuLinear, Avx2PathMatchesFloat64) {
  KernelPath path("avx2");
  if (!path.ok()) GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C";
  EXPECT_STREQ(KernelIsa(), "avx2");
  CheckEveryFormat();
}

TEST(CpuLinear, AvxVnniPathMatchesFloat64) {
  KernelPath path("avxvnni");
  if (!path.ok()) GTEST_SKIP() << "this CPU lacks AVX-VNNI";
  EXPECT_STREQ(KernelIsa(), "avxvnni");
  CheckEveryFormat();
}

TEST(CpuLinear, Avx512PathMatchesFloat64) {
  KernelPath path("avx512");
  if (!path.ok()) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI";
  EXPECT_STREQ(KernelIsa(), "avx512");
  CheckEveryFormat();
  // Several panels and token tiles per thread, on a prefill-sized input; batched decode's token
  // tiles and their tails (15 = 8 + 7, 14 = 8 + 6) over odd block counts.
  CheckLinear(WeightFormat::kQ4F16, 200, 4864, 21, true, 31);
  CheckLinear(WeightFormat::kQ4F16, 37, 160, 15, true, 35);
  CheckLinear(WeightFormat::kQ4F32, 21, 288, 14, false, 36);
  CheckLinear(WeightFormat::kQ4F16, 9, 896, 16, true, 37);
}

// The same with the weights in the AVX-512 path's packed panels (every product of a bound model).
TEST(CpuLinear, Avx512PackedPanelsMatchFloat64) {
  KernelPath path("avx512");
  if (!path.ok()) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI";
  PackedWeights packed;
  CheckEveryFormat();
  CheckLinear(WeightFormat::kQ4F16, 200, 4864, 21, true, 31);
  CheckLinear(WeightFormat::kQ4F16, 37, 160, 15, true, 35);
  CheckLinear(WeightFormat::kQ4F32, 21, 288, 14, false, 36);
  CheckLinear(WeightFormat::kQ4F16, 9, 896, 16, true, 37);
}

// Packed panels compute each block as the unpacked ones do: the same bits for any token count
// (so a row's logits do not depend on its batch), equal to the unpacked panels' (more than 16
// tokens); other paths ignore the packed layout.
TEST(CpuLinear, PackedPanelsGiveTheSameBitsForAnyTokenCount) {
  if (!SetKernelIsa("avx512")) GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/VNNI";
  for (WeightFormat format : {WeightFormat::kQ4F16, WeightFormat::kQ4F32}) {
    for (const Shape& s : {Shape{37, 160, 19}, Shape{130, 896, 24}, Shape{16, 4864, 17}}) {
      SetKernelIsa("avx512");
      std::mt19937 rng(static_cast<uint32_t>(s.out + s.in));
      TestWeight tw = MakeWeight(format, s.out, s.in, rng);
      std::vector<float> x = Activations(s.n, s.in, rng);
      const size_t size = static_cast<size_t>(s.n * s.out);
      std::vector<float> unpacked(size), packed(size), one_by_one(size), other(size);
      Linear(tw.weight, x.data(), s.n, unpacked.data());
      PackForProducts(tw.weight);
      ASSERT_TRUE(tw.weight.packed);
      Linear(tw.weight, x.data(), s.n, packed.data());
      for (int64_t t = 0; t < s.n; ++t) {
        Linear(tw.weight, x.data() + t * s.in, 1, one_by_one.data() + t * s.out);
      }
      ASSERT_TRUE(SetKernelIsa("portable"));
      Linear(tw.weight, x.data(), s.n, other.data());
      for (size_t k = 0; k < size; ++k) {
        ASSERT_EQ(packed[k], unpacked[k]) << "out " << s.out << " in " << s.in << " element " << k;
        ASSERT_EQ(one_by_one[k], packed[k]) << "out " << s.out << " in " << s.in << " element " << k;
        ASSERT_NEAR(other[k], packed[k], 1e-4f * (1.0f + std::fabs(packed[k])));
      }
    }
  }
  SetKernelIsa("auto");
}

// Why the AMX path cannot run here, for the skip message.
const char* NoAmxReason() {
#if !defined(__x86_64__)
  return "not an x86-64 build";
#else
  if (!SetKernelIsa("avx512")) return "this CPU lacks AVX-512 F/BW/VL/VNNI, which the AMX path builds on";
  SetKernelIsa("auto");
  return "this CPU lacks AMX-TILE/AMX-BF16, AVX512-BF16 or AVX512-VBMI, or Linux refused the tile data "
         "state (arch_prctl ARCH_REQ_XCOMP_PERM), or the compiler had no -mamx-bf16";
#endif
}

TEST(CpuLinear, AmxPathMatchesFloat64) {
  KernelPath path("amx");
  if (!path.ok()) GTEST_SKIP() << NoAmxReason();
  EXPECT_STREQ(KernelIsa(), "amx");
  CheckEveryFormat();
  CheckLinear(WeightFormat::kQ4F16, 200, 4864, 21, true, 31);
  CheckLinear(WeightFormat::kQ4F32, 35, 896, 130, false, 32);
  PackedWeights packed;
  CheckEveryFormat();
  CheckLinear(WeightFormat::kQ4F16, 200, 4864, 21, true, 31);
  CheckLinear(WeightFormat::kQ4F32, 35, 896, 130, false, 32);
  CheckLinear(WeightFormat::kQ4F16, 67, 1024, 33, true, 33);  // a third group of 32 tokens, one valid
  // Half and bfloat16 weights as split bfloat16: rows and inputs past a tile, one to three passes of
  // 32 tokens.
  CheckLinear(WeightFormat::kF16, 77, 1024, 40, true, 34);
  CheckLinear(WeightFormat::kBF16, 33, 200, 64, false, 35);
  CheckLinear(WeightFormat::kBF16, 40, 72, 45, true, 36);
  CheckLinear(WeightFormat::kF16, 16, 4304, 33, false, 37);
  CheckLinear(WeightFormat::kF16, 130, 37, SplitBf16MinTokens(), true, 38);
  CheckLinear(WeightFormat::kF32, 40, 72, 45, true, 39);  // float32 weights: float32 products
}

// A CPU flag as Linux lists it in /proc/cpuinfo (the first "flags" line).
bool CpuinfoHas(const std::string& flag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string word; words >> word;) {
      if (word == flag) return true;
    }
    return false;
  }
  return false;
}

// On a CPU with AMX-BF16, AVX512-BF16 and AVX512-VBMI the AMX path runs, takes many tokens as
// bfloat16 (so the checks above met those tiles), and is the path chosen by default.
TEST(CpuLinear, AmxPathIsChosenWhereTheCpuHasBf16Tiles) {
  const bool cpu_has = CpuinfoHas("amx_tile") && CpuinfoHas("amx_bf16") && CpuinfoHas("avx512_bf16") &&
                       CpuinfoHas("avx512vbmi") && CpuinfoHas("avx512_vnni");
#if defined(__x86_64__)
  EXPECT_EQ(SetKernelIsa("amx"), cpu_has);
#endif
  if (!SetKernelIsa("amx")) {
    SetKernelIsa("auto");
    GTEST_SKIP() << NoAmxReason();
  }
  EXPECT_GT(Bf16MinTokens(), 1);
  EXPECT_LE(Bf16MinTokens(), 64);
  EXPECT_GT(SplitBf16MinTokens(), 1);
  EXPECT_LE(SplitBf16MinTokens(), 64);
  ASSERT_TRUE(SetKernelIsa("auto"));
  EXPECT_STREQ(KernelIsa(), "amx");
}

// The paths round activations the same way and sum each block exactly, so they differ only by
// float32 rounding order (except where a path takes the tokens as bfloat16, whole or split:
// CheckLinear bounds those against float64 alone).
void CheckPathAgainstPortable(const std::string& isa) {
  uint32_t seed = 100;
  for (WeightFormat format : kFormats) {
    for (const Shape& s : kShapes) {
      std::vector<float> fast, portable;
      bool bf16 = false;
      {
        KernelPath path(isa);
        CheckLinear(format, s.out, s.in, s.n, true, seed, &fast);
        bf16 = (IsQ4(format) && Bf16MinTokens() > 0 && s.n >= Bf16MinTokens()) || IsSplit(format, s.n);
      }
      if (bf16) {
        ++seed;
        continue;
      }
      {
        KernelPath path("portable");
        CheckLinear(format, s.out, s.in, s.n, true, seed, &portable);
      }
      ASSERT_EQ(fast.size(), portable.size());
      for (size_t k = 0; k < fast.size(); ++k) {
        ASSERT_NEAR(fast[k], portable[k], 1e-4f * (1.0f + std::fabs(portable[k])))
            << isa << " format " << static_cast<int>(format) << " element " << k;
      }
      ++seed;
    }
  }
}

// The AMX path against the portable one for every token count 1 .. 200 (the tile's 16 tokens,
// their tails, the AVX-512 fallback below the thresholds), with rows past a multiple of 16, for
// 4-bit and float weights.
TEST(CpuLinear, AmxPathAgreesWithPortableForEveryTokenCount) {
  if (!SetKernelIsa("amx")) GTEST_SKIP() << NoAmxReason();
  SetKernelIsa("auto");
  uint32_t seed = 500;
  for (WeightFormat format : {WeightFormat::kQ4F16, WeightFormat::kF16}) {
    for (const Shape& s : {Shape{37, 96, 0}, Shape{16, 64, 0}, Shape{130, 288, 0}}) {
      for (int64_t n = 1; n <= 200; n += (s.out == 37 ? 1 : 7)) {
        std::vector<float> amx, portable;
        bool bf16 = false, split = false;
        {
          KernelPath path("amx");
          CheckLinear(format, s.out, s.in, n, n % 2 == 0, seed, &amx);
          bf16 = IsQ4(format) && Bf16MinTokens() > 0 && n >= Bf16MinTokens();
          split = IsSplit(format, n);
          if (bf16) {  // and from the packed panels a bound model's weights come in
            PackedWeights packed;
            CheckLinear(format, s.out, s.in, n, n % 2 == 0, seed);
          }
        }
        if (bf16 || split) {  // bounded against float64 alone (CheckLinear)
          ++seed;
          continue;
        }
        {
          KernelPath path("portable");
          CheckLinear(format, s.out, s.in, n, n % 2 == 0, seed, &portable);
        }
        ASSERT_EQ(amx.size(), portable.size());
        for (size_t k = 0; k < amx.size(); ++k) {
          ASSERT_NEAR(amx[k], portable[k], 1e-4f * (1.0f + std::fabs(portable[k])))
              << "format " << static_cast<int>(format) << " out " << s.out << " in " << s.in << " n " << n
              << " element " << k;
        }
        ++seed;
      }
    }
  }
}

TEST(CpuLinear, VectorPathsAgreeWithPortable) {
  int checked = 0;
  for (const char* isa : {"avx2", "avxvnni", "avx512", "amx"}) {
    if (!SetKernelIsa(isa)) continue;
    CheckPathAgainstPortable(isa);
    ++checked;
  }
  SetKernelIsa("auto");
  if (checked == 0) GTEST_SKIP() << "this CPU runs no vector path";
}

TEST(CpuLinear, LargeShapesSpreadOverThreads) {
  // Decode- and prefill-sized products reach the thread pool and the 4 x 2 tiles, on the path
  // the CPU chooses.
  EXPECT_TRUE(SetKernelIsa("auto"));
  CheckLinear(WeightFormat::kQ4F16, 515, 896, 1, true, 11);
  CheckLinear(WeightFormat::kQ4F16, 130, 4864, 7, false, 12);
  CheckLinear(WeightFormat::kQ4F32, 66, 1024, 3, true, 14);
  CheckLinear(WeightFormat::kF16, 300, 512, 5, true, 13);
}

TEST(CpuLinear, DequantizeRowDecodesEveryFormat) {
  std::mt19937 rng(3);
  for (WeightFormat format : kFormats) {
   for (int64_t in : {int64_t{96}, int64_t{80}}) {  // 80: a partial last 4-bit group
    TestWeight tw = MakeWeight(format, 5, in, rng);
    std::vector<float> row(static_cast<size_t>(in));
    for (int64_t o = 0; o < 5; ++o) {
      DequantizeRow(tw.weight, o, row.data());
      for (int64_t i = 0; i < in; ++i) {
        const double expected = tw.values[static_cast<size_t>(o * in + i)];
        ASSERT_NEAR(row[static_cast<size_t>(i)], expected, 1e-7 * std::fabs(expected))
            << static_cast<int>(format) << " " << o << " " << i;
      }
    }
   }
  }
}

TEST(CpuVector, DotAndAddScaledOnEveryPath) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const char* isa : {"portable", "avx2", "avxvnni", "avx512", "amx"}) {
    KernelPath path(isa);
    if (!path.ok()) continue;
    for (int64_t n : {0, 1, 7, 8, 9, 16, 17, 64, 100}) {
      std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
      for (float& v : a) v = normal(rng);
      for (float& v : b) v = normal(rng);
      double ref = 0, magnitude = 0;
      for (int64_t i = 0; i < n; ++i) {
        ref += static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)];
        magnitude += std::fabs(static_cast<double>(a[static_cast<size_t>(i)]) * b[static_cast<size_t>(i)]);
      }
      EXPECT_NEAR(Dot(a.data(), b.data(), n), ref, 1e-6 * magnitude + 1e-7) << isa << " " << n;
      std::vector<float> y = b;
      AddScaled(0.5f, a.data(), y.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const auto k = static_cast<size_t>(i);
        EXPECT_NEAR(y[k], b[k] + 0.5 * a[k], 1e-6 * (std::fabs(b[k]) + std::fabs(a[k]))) << isa << " " << n;
      }
    }
  }
}

TEST(CpuVector, SiluMulOnEveryPath) {
  // Gates across the whole float range that matters (and past exp's clamp), lengths with tails.
  std::vector<float> gate, up;
  for (float g = -100.0f; g <= 100.0f; g += 0.37f) gate.push_back(g);
  for (float g : {-1e-30f, 0.0f, 1e-30f, 1e-3f, -1e-3f, 87.0f, -87.0f, 89.0f, -89.0f}) gate.push_back(g);
  for (size_t i = 0; i < gate.size(); ++i) up.push_back(0.5f + static_cast<float>(i % 7) - 3.0f);
  for (const char* isa : {"portable", "avx2", "avxvnni", "avx512", "amx"}) {
    KernelPath path(isa);
    if (!path.ok()) continue;
    for (size_t n : {gate.size(), size_t{7}, size_t{1}}) {
      std::vector<float> out(n, std::nanf(""));
      SiluMul(gate.data(), up.data(), out.data(), static_cast<int64_t>(n));
      for (size_t i = 0; i < n; ++i) {
        const double g = gate[i], ref = g / (1.0 + std::exp(-g)) * up[i];
        ASSERT_NEAR(out[i], ref, 1e-6 * std::fabs(ref) + 1e-30) << isa << " gate " << g;
      }
    }
  }
}

TEST(CpuVector, ExpShiftedSumOnEveryPath) {
  // Scores below, at and far below the shift (softmax numerators down to exp's clamp), tails.
  std::vector<float> x;
  for (float v = -120.0f; v <= 3.0f; v += 0.29f) x.push_back(v);
  for (float v : {3.0f, 2.999f, -1e-30f, 0.0f}) x.push_back(v);
  for (const char* isa : {"portable", "avx2", "avxvnni", "avx512"}) {
    KernelPath path(isa);
    if (!path.ok()) continue;
    for (size_t n : {x.size(), size_t{9}, size_t{1}}) {
      std::vector<float> e(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(n));
      const float sum = ExpShiftedSum(e.data(), static_cast<int64_t>(n), 3.0f);
      double want_sum = 0;
      for (size_t i = 0; i < n; ++i) {
        const double ref = std::exp(static_cast<double>(x[i]) - 3.0);
        want_sum += ref;
        ASSERT_NEAR(e[i], ref, 1e-6 * ref + 1e-37) << isa << " x " << x[i];
      }
      EXPECT_NEAR(sum, want_sum, 1e-6 * want_sum + 1e-35) << isa << " n " << n;
    }
  }
}

TEST(CpuVector, MatMulRowsEqualsPortableBitForBitAndFloat64) {
  // Shapes around every tile edge (6x16, 8x32) and tails; a right-hand side given by scattered
  // row pointers, output with a stride wider than n (its padding must stay untouched).
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int64_t m : {1, 5, 6, 7, 8, 9, 13, 17}) {
    for (int64_t k : {1, 3, 64}) {
      for (int64_t n : {1, 15, 16, 17, 31, 32, 33, 70}) {
        const int64_t lda = k + 2, ldc = n + 3;
        std::vector<float> a(static_cast<size_t>(m * lda));
        for (float& v : a) v = normal(rng);
        std::vector<std::vector<float>> b(static_cast<size_t>(k), std::vector<float>(static_cast<size_t>(n)));
        std::vector<const float*> rows;
        for (auto& row : b) {
          for (float& v : row) v = normal(rng);
          rows.push_back(row.data());
        }
        std::vector<float> want(static_cast<size_t>(m * ldc), -7.0f);
        {
          KernelPath path("portable");
          MatMulRows(a.data(), lda, m, k, rows.data(), n, want.data(), ldc);
        }
        for (int64_t r = 0; r < m; ++r) {
          for (int64_t j = 0; j < ldc; ++j) {
            const float got = want[static_cast<size_t>(r * ldc + j)];
            if (j >= n) {
              ASSERT_EQ(got, -7.0f) << "padding written at " << r << "," << j;
              continue;
            }
            double ref = 0, magnitude = 0;
            for (int64_t i = 0; i < k; ++i) {
              const double p = static_cast<double>(a[static_cast<size_t>(r * lda + i)]) * b[static_cast<size_t>(i)][static_cast<size_t>(j)];
              ref += p;
              magnitude += std::fabs(p);
            }
            ASSERT_NEAR(got, ref, 1e-6 * magnitude + 1e-7) << m << "x" << k << "x" << n;
          }
        }
        for (const char* isa : {"avx2", "avxvnni", "avx512", "amx"}) {
          KernelPath path(isa);
          if (!path.ok()) continue;
          std::vector<float> got(static_cast<size_t>(m * ldc), -7.0f);
          MatMulRows(a.data(), lda, m, k, rows.data(), n, got.data(), ldc);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
              << isa << " " << m << "x" << k << "x" << n;
        }
      }
    }
  }
}

TEST(CpuVector, TransposeRowsOnEveryPath) {
  // Row and column counts around the 8x8 blocks, scattered rows, a stride wider than n.
  for (int64_t n : {1, 7, 8, 9, 16, 23}) {
    for (int64_t d : {1, 5, 8, 13, 64}) {
      std::vector<std::vector<float>> rows(static_cast<size_t>(n), std::vector<float>(static_cast<size_t>(d)));
      std::vector<const float*> pointers;
      for (int64_t j = 0; j < n; ++j) {
        for (int64_t i = 0; i < d; ++i) rows[static_cast<size_t>(j)][static_cast<size_t>(i)] = static_cast<float>(j * 1000 + i);
        pointers.push_back(rows[static_cast<size_t>(j)].data());
      }
      for (const char* isa : {"portable", "avx2", "avxvnni", "avx512", "amx"}) {
        KernelPath path(isa);
        if (!path.ok()) continue;
        const int64_t ldo = n + 2;
        std::vector<float> out(static_cast<size_t>(d * ldo), -1.0f);
        TransposeRows(pointers.data(), n, d, out.data(), ldo);
        for (int64_t i = 0; i < d; ++i) {
          for (int64_t j = 0; j < ldo; ++j) {
            const float want = j < n ? static_cast<float>(j * 1000 + i) : -1.0f;
            ASSERT_EQ(out[static_cast<size_t>(i * ldo + j)], want) << isa << " n " << n << " d " << d << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

TEST(CpuLinear, UnknownPathIsRefused) {
  EXPECT_FALSE(SetKernelIsa("neon"));
  EXPECT_FALSE(SetKernelIsa(""));
  EXPECT_TRUE(SetKernelIsa("auto"));
}

// ---- thread pool ------------------------------------------------------------------------------

// Runs ParallelFor and checks that the ranges cover [0, n) once, all but the last at least `grain`.
void CheckCoverage(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  ParallelFor(n, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    std::lock_guard<std::mutex> lock(mutex);
    ranges.emplace_back(begin, end);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << n << " " << grain << " " << i;
  for (const auto& [begin, end] : ranges) {
    ASSERT_LT(begin, end);
    if (end != n) {
      EXPECT_GE(end - begin, std::max<int64_t>(grain, 1)) << n << " " << grain;
    }
  }
}

TEST(CpuThreadPool, CoversEveryIndexOnce) {
  EXPECT_GE(ThreadCount(), 1);
  for (int64_t n : {1, 2, 3, 7, 64, 100, 1000, 4097}) {
    for (int64_t grain : {0, 1, 3, 16, 1000}) CheckCoverage(n, grain);
  }
  int calls = 0;
  ParallelFor(0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(CpuThreadPool, ManySmallJobsInARow) {
  // A decoded token issues a few hundred calls; every one must see its own job.
  for (int round = 0; round < 3000; ++round) {
    std::atomic<int64_t> sum{0};
    const int64_t n = 8 + round % 37;
    ParallelFor(n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) sum.fetch_add(i + round);
    });
    ASSERT_EQ(sum.load(), n * (n - 1) / 2 + n * round) << round;
  }
}

TEST(CpuThreadPool, NestedCallsRunInline) {
  std::atomic<int64_t> total{0};
  ParallelFor(8, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ParallelFor(100, 1, [&](int64_t b, int64_t e) {
        for (int64_t j = b; j < e; ++j) total.fetch_add(i * 100 + j);
      });
    }
  });
  EXPECT_EQ(total.load(), 800 * 799 / 2);
}

TEST(CpuThreadPool, ConcurrentCallersEachGetTheirResult) {
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([c, &failures] {
      for (int round = 0; round < 300; ++round) {
        const int64_t n = 50 + c * 7 + round % 11;
        std::vector<int> seen(static_cast<size_t>(n), 0);
        ParallelFor(n, 2, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) seen[static_cast<size_t>(i)] += c + 1;
        });
        for (int v : seen) {
          if (v != c + 1) failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(CpuThreadPool, ConcurrentLinearCallsMatchOneCaller) {
  std::mt19937 rng(21);
  TestWeight tw = MakeWeight(WeightFormat::kQ4F16, 96, 256, rng);
  std::vector<float> x = Activations(3, 256, rng);
  std::vector<float> expected(3 * 96);
  Linear(tw.weight, x.data(), 3, expected.data());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      std::vector<float> y(3 * 96);
      for (int round = 0; round < 50; ++round) {
        Linear(tw.weight, x.data(), 3, y.data());
        if (std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)) != 0) mismatches.fetch_add(1);
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace mlc::cpu
