// A parameter set bound by name for the CPU programs: each parameter checked against the program's
// list, matrices as kernel views into the mapped shards (quantized or float, as the package stores
// them), vectors (norms, biases) widened to float32.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"

namespace mlc::cpu {

// Parameters by name, each checked against the program's list (names, shapes, dtypes, order).
class ParamIndex {
 public:
  static Result<ParamIndex> Make(const std::vector<ParamSpec>& order, const ParameterSet& params);
  const NDArray& operator[](const std::string& name) const { return *by_name_.at(name); }
  bool Has(const std::string& name) const { return by_name_.count(name) > 0; }

 private:
  std::map<std::string, const NDArray*> by_name_;
};

// Each of `specs` (a tower's parameters) present in p with its shape and dtype; the error names
// the first that is not, prefixed by `owner` ("audio tower", "vision tower").
Status CheckParamsPresent(const std::vector<ParamSpec>& specs, const ParamIndex& p, const std::string& owner);

// The table "<base>" [out, in] as the config's quantization stores it (q_weight / q_scale, or a
// float "weight"), for row lookups (embeddings).
Weight TableOf(const ModelConfig& c, const ParamIndex& p, const std::string& base, int64_t out, int64_t in);
// The same for a matrix of products (Linear), with the kernels' own layout attached
// (PackForProducts).
Weight MatrixOf(const ModelConfig& c, const ParamIndex& p, const std::string& base, int64_t out,
                int64_t in);
// A matrix kept in float ("<base>.weight" float16 or float32, whatever the quantization), viewed
// as [out, in] (a convolution's [out, c, h, w] is [out, c * h * w]).
Weight FloatMatrixOf(const ParamIndex& p, const std::string& base, int64_t out, int64_t in);
// A float16 / float32 tensor's values as float32.
std::vector<float> FloatsOf(const NDArray& t);

}  // namespace mlc::cpu
