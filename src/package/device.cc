// Device profiles and the KV-cache estimate for the memory-fit check.
#include "mlc_manifest/device.h"

namespace mlc {

const std::vector<DeviceProfile>& DeviceProfiles() {
  static const std::vector<DeviceProfile> kProfiles = [] {
    std::vector<DeviceProfile> p;
    struct Size {
      const char* tag;
      int64_t bytes;
      const char* what;
    } sizes[] = {{"128mib", int64_t{128} << 20, "the WebGPU default limit"},
                 {"256mib", int64_t{256} << 20, "common on integrated GPUs"},
                 {"1gib", int64_t{1} << 30, "common on discrete GPUs"}};
    for (const Size& s : sizes) {
      for (bool f16 : {false, true}) {
        DeviceProfile d;
        d.limits.name = std::string("webgpu-") + s.tag + (f16 ? "-f16" : "");
        if (f16) d.limits.features = {"shader-f16"};
        d.limits.max_storage_buffer_binding_size = s.bytes;
        d.description = std::string("maxStorageBufferBindingSize ") + s.tag + " (" + s.what +
                        ")" + (f16 ? ", shader-f16" : ", no shader-f16");
        p.push_back(d);
      }
    }
    return p;
  }();
  return kProfiles;
}

const DeviceProfile* FindDeviceProfile(const std::string& name) {
  for (const DeviceProfile& d : DeviceProfiles()) {
    if (d.limits.name == name) return &d;
  }
  return nullptr;
}

namespace {

// A model-config integer, looked up in model_config, then model_config.text_config.
std::optional<int64_t> ModelInt(const ChatConfig& c, const char* key) {
  const Json& mc = c.model_config;
  if (mc.contains(key)) {
    if (auto v = SafeInteger(mc[key])) return v;
  }
  if (mc.contains("text_config") && mc["text_config"].is_object() &&
      mc["text_config"].contains(key)) {
    return SafeInteger(mc["text_config"][key]);
  }
  return std::nullopt;
}

}  // namespace

Result<KvCacheEstimate> EstimateKvCache(const ChatConfig& c) {
  KvCacheEstimate e;
  std::optional<int64_t> layers = ModelInt(c, "num_hidden_layers");
  if (!layers || *layers <= 0) {
    return Invalid("/model_config/num_hidden_layers",
                   "needed for the KV-cache estimate: expected a positive integer");
  }
  e.layers = *layers;
  std::optional<int64_t> heads = ModelInt(c, "num_attention_heads");
  std::optional<int64_t> kv = ModelInt(c, "num_key_value_heads");
  e.kv_heads = kv ? *kv : heads.value_or(0);
  if (e.kv_heads <= 0) {
    return Invalid("/model_config/num_key_value_heads",
                   "needed for the KV-cache estimate (or num_attention_heads)");
  }
  std::optional<int64_t> head_dim = ModelInt(c, "head_dim");
  std::optional<int64_t> hidden = ModelInt(c, "hidden_size");
  if (head_dim && *head_dim > 0) {
    e.head_dim = *head_dim;
  } else if (hidden && heads && *heads > 0) {
    e.head_dim = *hidden / *heads;
  } else {
    return Invalid("/model_config/head_dim",
                   "needed for the KV-cache estimate (or hidden_size and num_attention_heads)");
  }
  std::optional<int64_t> ctx = c.context_window_size;
  if (!ctx || *ctx <= 0) ctx = ModelInt(c, "context_window_size");
  if (!ctx || *ctx <= 0) {
    return Invalid("/context_window_size", "needed for the KV-cache estimate");
  }
  e.positions = *ctx;
  if (c.HasSlidingWindow() && *c.sliding_window_size < e.positions) {
    e.positions = *c.sliding_window_size;
  }
  // The activation dtype: q4f16_1 -> float16, q4f32_1 -> float32, q0bf16 -> bfloat16.
  const std::string& q = c.quantization;
  if (q.find("bf16") != std::string::npos) {
    e.dtype = "bfloat16";
  } else if (q.find("f32") != std::string::npos) {
    e.dtype = "float32";
  } else {
    e.dtype = "float16";
  }
  e.dtype_bytes = *DtypeItemSize(e.dtype);
  int64_t bytes = 2;  // K and V
  for (int64_t f : {e.layers, e.kv_heads, e.head_dim, e.positions, e.dtype_bytes}) {
    if (__builtin_mul_overflow(bytes, f, &bytes)) {
      return Invalid("/model_config", "KV-cache estimate overflows 64 bits");
    }
  }
  e.bytes = bytes;
  return e;
}

}  // namespace mlc
