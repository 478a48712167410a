// Writing tensor caches: the converter's shard grouping and its file format.
#include "mlc_manifest/package.h"

namespace mlc {

Result<TensorCache> LayoutTensorCache(const std::vector<ParamSpec>& params, uint64_t shard_cap) {
  TensorCache cache;
  TensorShard current;
  auto flush = [&]() {
    if (current.records.empty()) return;
    current.data_path = "params_shard_" + std::to_string(cache.shards.size()) + ".bin";
    current.format = "raw-shard";
    cache.shards.push_back(std::move(current));
    current = TensorShard{};
  };
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamSpec& p = params[i];
    TensorRecord r;
    r.name = p.name;
    r.dtype = p.dtype;
    r.format = "f32-to-bf16";
    for (const auto& d : p.shape) {
      const auto* n = std::get_if<int64_t>(&d);
      if (!n) {
        return Invalid(PointerAppend("", i) + "/shape",
                       "a tensor cache needs concrete dimensions, got \"" +
                           std::get<std::string>(d) + "\"");
      }
      r.shape.push_back(*n);
    }
    if (!DtypeItemSize(p.dtype)) {
      return Invalid(PointerAppend("", i) + "/dtype", "unknown dtype \"" + p.dtype + "\"");
    }
    if (__builtin_mul_overflow(r.Elements(), r.StoredItemSize(), &r.nbytes)) {
      return Invalid(PointerAppend("", i) + "/shape", "byte size overflows 64 bits");
    }
    if (!current.records.empty() && current.nbytes + r.nbytes > shard_cap) flush();
    r.byte_offset = current.nbytes;
    current.nbytes += r.nbytes;
    current.records.push_back(std::move(r));
  }
  flush();
  Result<ResourceEstimate> est = EstimateResources(params, nullptr);
  MLC_RETURN_IF_ERROR(est);
  cache.param_size = est->parameter_count;
  cache.param_bytes = est->total_bytes;
  return cache;
}

std::string WriteTensorCache(const TensorCache& cache) {
  OrderedJson doc;
  OrderedJson meta;
  meta["ParamSize"] = cache.param_size.value_or(0);
  meta["ParamBytes"] = static_cast<double>(cache.param_bytes.value_or(0));
  doc["metadata"] = meta;
  OrderedJson shards = OrderedJson::array();
  for (const TensorShard& s : cache.shards) {
    OrderedJson sj;
    sj["dataPath"] = s.data_path;
    sj["format"] = s.format;
    sj["nbytes"] = s.nbytes;
    OrderedJson recs = OrderedJson::array();
    for (const TensorRecord& r : s.records) {
      OrderedJson rj;
      rj["name"] = r.name;
      rj["shape"] = r.shape;
      rj["dtype"] = r.dtype;
      rj["format"] = r.format;
      rj["nbytes"] = r.nbytes;
      rj["byteOffset"] = r.byte_offset;
      recs.push_back(rj);
    }
    sj["records"] = recs;
    if (!s.md5sum.empty()) sj["md5sum"] = s.md5sum;
    shards.push_back(sj);
  }
  doc["records"] = shards;
  return PythonIndentJson(doc, 4);
}

}  // namespace mlc
