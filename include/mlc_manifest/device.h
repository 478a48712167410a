// Target devices: shipped WebGPU limit profiles, and the KV-cache estimate that, added to the
// parameter bytes, tells whether a model fits a device's memory.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/package.h"

namespace mlc {

struct DeviceProfile {
  DeviceLimits limits;
  std::optional<int64_t> memory_bytes;  // device memory, when the profile states it
  std::string description;
};

// Common WebGPU limits: 128 MiB (the WebGPU default), 256 MiB and 1 GiB storage buffer bindings,
// each with and without shader-f16.
const std::vector<DeviceProfile>& DeviceProfiles();
const DeviceProfile* FindDeviceProfile(const std::string& name);

struct KvCacheEstimate {
  int64_t bytes = 0;
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  int64_t positions = 0;  // context window (or sliding window when smaller)
  int64_t dtype_bytes = 0;
  std::string dtype;
};

// K and V for every layer: layers x kv_heads x head_dim x positions x 2 x dtype bytes, from the
// model config (model_config, or its text_config) and the quantization's activation dtype.
// Errors name the field that is missing.
Result<KvCacheEstimate> EstimateKvCache(const ChatConfig& config);

}  // namespace mlc
