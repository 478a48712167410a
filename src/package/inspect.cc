// `inspect`: a summary of what a package is, built from whatever of it is readable.
#include <algorithm>
#include <map>

#include "mlc_manifest/check.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

OrderedJson InputSummary(const TaskInput& in) {
  OrderedJson j;
  if (const auto* name = std::get_if<std::string>(&in.processor)) {
    j["processor"] = *name;
  } else if (const auto* a = std::get_if<AudioDecode>(&in.processor)) {
    j["processor"] = "audio_decode";
    j["sample_rate_hz"] = a->sample_rate_hz;
    j["min_samples"] = a->min_samples;
    j["max_samples"] = a->max_samples;
  } else {
    const auto& im = std::get<ImageDecode>(in.processor);
    j["processor"] = "image_decode";
    j["resize"] = ResizeModeName(im.mode);
    j["height"] = im.height;
    j["width"] = im.width;
    j["num_embeddings"] = im.num_embeddings;
  }
  if (in.adapter) j["adapter"] = *in.adapter;
  if (in.prompt) {
    j["prefix_token_ids"] = in.prompt->prefix_token_ids;
    j["placeholder_token_id"] = in.prompt->placeholder_token_id;
    j["suffix_token_ids"] = in.prompt->suffix_token_ids;
  }
  return j;
}

}  // namespace

Result<OrderedJson> InspectPackage(const std::string& dir, const BuiltinProgramFn& builtin) {
  OrderedJson out;
  out["ok"] = true;
  out["package"] = dir;
  Errors problems;
  std::string manifest = JoinPath(dir, kManifestFileName);
  if (FileExists(manifest)) {
    Result<ModelPackage> pkg = ReadModelPackage(manifest);
    if (pkg) {
      out["manifest"] = kManifestFileName;
      out["interface_id"] = pkg->interface_id;
      out["parameter_schema_id"] = pkg->parameter_schema_id;
      OrderedJson tasks = OrderedJson::object();
      for (const auto& [name, t] : pkg->tasks) {
        OrderedJson tj;
        tj["executor"] = t.executor;
        tj["output"] = t.output;
        OrderedJson inputs = OrderedJson::object();
        for (const auto& [in_name, in] : t.inputs) inputs[in_name] = InputSummary(in);
        tj["inputs"] = inputs;
        tasks[name] = tj;
      }
      out["tasks"] = tasks;
    } else {
      out["manifest"] = nullptr;
      for (const Error& e : pkg.errors()) problems.push_back(e);
    }
  } else {
    out["manifest"] = nullptr;
    out["loads_as"] = "legacy (no mlc-model-manifest.json: text only, from mlc-chat-config.json)";
  }
  Result<ChatConfig> config = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  if (config) {
    OrderedJson c;
    c["model_type"] = config->model_type;
    c["quantization"] = config->quantization;
    auto opt = [](const std::optional<int64_t>& v) { return v ? OrderedJson(*v) : OrderedJson(nullptr); };
    c["context_window_size"] = opt(config->context_window_size);
    c["prefill_chunk_size"] = opt(config->prefill_chunk_size);
    c["sliding_window_size"] = opt(config->sliding_window_size);
    c["vocab_size"] = opt(config->vocab_size);
    out["config"] = c;
    Result<KvCacheEstimate> kv = EstimateKvCache(*config);
    if (kv) out["kv_cache_bytes"] = kv->bytes;
  } else {
    for (const Error& e : config.errors()) problems.push_back(e);
  }
  Result<TensorCache> cache = ReadTensorCache(dir);
  if (cache) {
    std::vector<ParamSpec> specs = ParamSpecsOf(*cache);
    OrderedJson params;
    params["count"] = specs.size();
    std::map<std::string, std::pair<int64_t, int64_t>> by_dtype;  // dtype -> (count, bytes)
    std::vector<std::pair<int64_t, std::string>> sizes;
    for (const ParamSpec& p : specs) {
      Result<ResourceEstimate> one = EstimateResources({p}, config ? &*config : nullptr);
      int64_t bytes = one ? one->total_bytes : 0;
      by_dtype[p.dtype].first += 1;
      by_dtype[p.dtype].second += bytes;
      sizes.emplace_back(bytes, p.name);
    }
    OrderedJson dt = OrderedJson::object();
    for (const auto& [d, cb] : by_dtype) dt[d] = {{"count", cb.first}, {"bytes", cb.second}};
    params["by_dtype"] = dt;
    std::sort(sizes.begin(), sizes.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    OrderedJson largest = OrderedJson::array();
    for (size_t i = 0; i < std::min<size_t>(5, sizes.size()); ++i) {
      largest.push_back({{"name", sizes[i].second}, {"bytes", sizes[i].first}});
    }
    params["largest"] = largest;
    Result<std::string> id = ComputeParameterSchemaId(specs);
    if (id) params["parameter_schema_id"] = *id;
    out["parameters"] = params;
    uint64_t shard_bytes = 0;
    for (const TensorShard& s : cache->shards) shard_bytes += s.nbytes;
    out["shards"] = {{"file", cache->file}, {"legacy_name", cache->legacy_name},
                     {"count", cache->shards.size()}, {"bytes", shard_bytes}};
    Result<ResourceEstimate> est = EstimateResources(specs, config ? &*config : nullptr);
    if (est) {
      out["resources"] = {{"max_storage_buffer_binding_size", est->max_parameter_bytes},
                          {"largest_parameter", est->largest_parameter},
                          {"estimated_device_memory_bytes", est->total_bytes}};
    } else {
      for (const Error& e : est.errors()) problems.push_back(e);
    }
  } else {
    for (const Error& e : cache.errors()) problems.push_back(e);
  }
  if (out["manifest"].is_null() && !FileExists(manifest) && config) {
    std::optional<TensorCache> weights;
    if (cache) weights = *cache;
    LegacyAdvice advice = AdviseLegacyPackage(dir, *config, weights, builtin);
    out["legacy"] = advice.data;
    out["legacy"]["advice"] = advice.lines;
  }
  if (!problems.empty()) {
    out["ok"] = false;
    out["errors"] = ErrorsJson(problems);
  }
  if (!config && !cache && !FileExists(manifest)) return problems;
  return out;
}

}  // namespace mlc
