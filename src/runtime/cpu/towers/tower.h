// An adapter's model inside a CPU program (SPEC 9.1): what a vision or audio tower declares (its
// adapter and function names, the task input it serves, its parameters in the converter's order)
// and, bound to a parameter set, the run from the canonical input of SPEC 6 to [rows, hidden]
// float32 rows. One file per tower in this folder (clip, siglip, conformer).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/tensor.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {

// A tower bound to its parameters (views into the mapped shards): safe to run from several
// threads at once, and beside the decoder.
class BoundTower {
 public:
  virtual ~BoundTower() = default;
  // The adapter's rows for one input; `function` names the call in errors.
  virtual Result<NDArray> Embed(const NDArray& input, const std::string& function) const = 0;
};

class Tower {
 public:
  virtual ~Tower() = default;
  virtual std::string adapter() const = 0;   // the input and adapter name: "image", "audio"
  virtual std::string function() const = 0;  // the library function: "image_embed"
  virtual TaskInput Input() const = 0;       // the manifest input it serves
  // Appends its parameters (and its projector's) in the converter's order.
  virtual void AppendParams(ParamListBuilder& b) const = 0;
  virtual Result<std::unique_ptr<BoundTower>> Bind(const ModelConfig& c, const ParamIndex& p) const = 0;
  // The values the converter stores for one of its float parameters when they are fixed rather
  // than learned (a DFT matrix, a filter bank, a sinusoid table, clip bounds), row-major; nullopt:
  // a learned parameter (random-weight packages draw it).
  virtual std::optional<std::vector<float>> StoredValues(const std::string& /*name*/) const {
    return std::nullopt;
  }
};

// A tower's Bind: every parameter it declares (AppendParams) checked present in p with its shape
// and dtype (an error naming the first that is not, prefixed by `owner`), then Bound(config, c, p).
template <class Bound, class Config>
Result<std::unique_ptr<BoundTower>> BindChecked(const Tower& tower, const Config& config, const ModelConfig& c,
                                                const ParamIndex& p, const std::string& owner) {
  ParamListBuilder b(c);
  tower.AppendParams(b);
  MLC_RETURN_IF_ERROR(CheckParamsPresent(b.Take(), p, owner));
  std::unique_ptr<BoundTower> bound = std::make_unique<Bound>(config, c, p);
  return bound;
}

}  // namespace mlc::cpu
