// Resources (SPEC 3): bytes per parameter from its shape and declared dtype, the largest one
// (max_storage_buffer_binding_size) and the sum (estimated_device_memory_bytes).
#include <algorithm>
#include <map>

#include "mlc_manifest/package.h"

namespace mlc {

std::optional<int64_t> DtypeItemSize(const std::string& dtype) {
  static const std::map<std::string, int64_t> kSizes = {
      {"float64", 8}, {"int64", 8}, {"uint64", 8},
      {"float32", 4}, {"int32", 4}, {"uint32", 4},
      {"float16", 2}, {"bfloat16", 2}, {"int16", 2}, {"uint16", 2},
      {"int8", 1}, {"uint8", 1}, {"bool", 1}, {"float8_e4m3fn", 1}, {"float8_e5m2", 1},
      {"e4m3_float8", 1}, {"e5m2_float8", 1}};
  auto it = kSizes.find(dtype);
  if (it == kSizes.end()) return std::nullopt;
  return it->second;
}

Result<ResourceEstimate> EstimateResources(const std::vector<ParamSpec>& params,
                                           const ChatConfig* config) {
  Errors errors;
  ResourceEstimate est;
  for (const ParamSpec& p : params) {
    std::optional<int64_t> item = DtypeItemSize(p.dtype);
    if (!item) {
      AddError(errors, Invalid(p.name, "unknown dtype \"" + p.dtype + "\" (no itemsize)"));
      continue;
    }
    int64_t bytes = *item;
    bool ok = true;
    for (const auto& dim : p.shape) {
      int64_t d = 0;
      if (const auto* n = std::get_if<int64_t>(&dim)) {
        d = *n;
      } else {
        const std::string& name = std::get<std::string>(dim);
        std::optional<int64_t> v = config ? config->Dimension(name) : std::nullopt;
        if (!v || *v < 0) {
          AddError(errors, Invalid(p.name, "dimension \"" + name +
                                               "\" is not an integer of mlc-chat-config.json "
                                               "(top level or model_config)"));
          ok = false;
          break;
        }
        d = *v;
      }
      if (__builtin_mul_overflow(bytes, d, &bytes)) {
        AddError(errors, Invalid(p.name, "byte size overflows 64 bits"));
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    ++est.parameter_count;
    if (bytes > est.max_parameter_bytes || est.largest_parameter.empty()) {
      if (bytes >= est.max_parameter_bytes) {
        est.max_parameter_bytes = bytes;
        est.largest_parameter = p.name;
      }
    }
    if (__builtin_add_overflow(est.total_bytes, bytes, &est.total_bytes)) {
      AddError(errors, Invalid(p.name, "total byte size overflows 64 bits"));
    }
  }
  if (!errors.empty()) return errors;
  return est;
}

Resources MakeResources(const ResourceEstimate& estimate, std::vector<std::string> features) {
  std::sort(features.begin(), features.end());
  features.erase(std::unique(features.begin(), features.end()), features.end());
  Resources r;
  r.required_features = std::move(features);
  r.max_storage_buffer_binding_size = estimate.max_parameter_bytes;
  r.estimated_device_memory_bytes = estimate.total_bytes;
  return r;
}

}  // namespace mlc
