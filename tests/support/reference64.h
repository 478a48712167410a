// Float64 building blocks of the tests' independent model implementations: a package's parameters
// dequantised straight from their stored records (IEEE half, float32, MLC's 4-bit groups), products,
// norms, the int8 activation rounding the 4-bit kernels apply, and the error measure the tests use.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlc_manifest/runtime.h"

namespace mlc::test {

using Vec = std::vector<double>;

double HalfToDouble(uint16_t h);

// Parameters of a package as float64, read from the stored records.
class Params64 {
 public:
  explicit Params64(const ParameterSet& set);
  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }
  Vec Floats(const std::string& name) const;
  // [rows, cols] row-major from "<base>.weight" or q_weight / q_scale ((q - 7) * scale).
  Vec Matrix(const std::string& base, int64_t rows, int64_t cols) const;

 private:
  std::map<std::string, const NDArray*> by_name_;
};

// y = W x for W [rows, cols] row-major.
Vec MatVec(const Vec& w, const Vec& x, int64_t rows, int64_t cols);
Vec RmsNorm(const Vec& x, const Vec& g, double eps);
Vec LayerNorm(const Vec& x, const Vec& g, const Vec& b, double eps);

// The kernels round activations to int8 per block of 32 before a 4-bit product, as llama.cpp
// does for Q4_0 (d = max|x| / 127 in float, q = nearest-even(x / d)); the references do the same
// so that their tolerance can stay tight.
Vec RoundToQ8Blocks(const Vec& x);

// Relative max error of a against the float64 reference b (max |a - b| / max |b|).
double RelError(const std::vector<float>& a, const Vec& b);

}  // namespace mlc::test
