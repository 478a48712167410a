// Binding parameters by name (weights.h).
#include "runtime/cpu/weights.h"

#include <cstring>

namespace mlc::cpu {
namespace {

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Result<ParamIndex> ParamIndex::Make(const std::vector<ParamSpec>& order, const ParameterSet& params) {
  if (params.names.size() != order.size() || params.tensors.size() != order.size()) {
    return Invalid("", "params: expected " + std::to_string(order.size()) +
                           " parameters in the program's order, got " +
                           std::to_string(params.tensors.size()));
  }
  ParamIndex index;
  for (size_t i = 0; i < order.size(); ++i) {
    const ParamSpec& spec = order[i];
    const NDArray& t = params.tensors[i];
    std::vector<int64_t> shape;
    for (const auto& d : spec.shape) shape.push_back(std::get<int64_t>(d));
    if (params.names[i] != spec.name || !t.defined() || t.shape() != shape ||
        DlDtypeName(t.dtype()) != spec.dtype) {
      return Invalid("", "params: parameter " + std::to_string(i) + " is \"" + params.names[i] +
                             "\" " + (t.defined() ? t.Describe() : "undefined") + ", expected \"" +
                             spec.name + "\" " + ShapeText(shape) + " " + spec.dtype);
    }
    index.by_name_[spec.name] = &t;
  }
  return index;
}

Status CheckParamsPresent(const std::vector<ParamSpec>& specs, const ParamIndex& p, const std::string& owner) {
  for (const ParamSpec& spec : specs) {
    std::vector<int64_t> shape;
    for (const auto& d : spec.shape) shape.push_back(std::get<int64_t>(d));
    const std::string want = "\"" + spec.name + "\" " + ShapeText(shape) + " " + spec.dtype;
    if (!p.Has(spec.name)) return Invalid("", owner + ": the parameter set has no " + want);
    const NDArray& t = p[spec.name];
    if (t.shape() != shape || DlDtypeName(t.dtype()) != spec.dtype) {
      return Invalid("", owner + ": parameter \"" + spec.name + "\" is " + t.Describe() + ", expected " + want);
    }
  }
  return Status::Ok();
}

Weight MatrixOf(const ModelConfig& c, const ParamIndex& p, const std::string& base, int64_t out,
                int64_t in) {
  Weight w = TableOf(c, p, base, out, in);
  PackForProducts(w);
  return w;
}

Weight TableOf(const ModelConfig& c, const ParamIndex& p, const std::string& base, int64_t out, int64_t in) {
  if (!c.quantized()) return FloatMatrixOf(p, base, out, in);
  Weight w;
  w.out = out;
  w.in = in;
  w.format = c.quant == Quant::kQ4F16 ? WeightFormat::kQ4F16 : WeightFormat::kQ4F32;
  w.data = p[base + ".q_weight"].dl().data;
  w.scale = p[base + ".q_scale"].dl().data;
  return w;
}

Weight FloatMatrixOf(const ParamIndex& p, const std::string& base, int64_t out, int64_t in) {
  const NDArray& t = p[base + ".weight"];
  Weight w;
  w.out = out;
  w.in = in;
  w.format = SameDtype(t.dtype(), DlFloat32()) ? WeightFormat::kF32 : WeightFormat::kF16;
  w.data = t.dl().data;
  return w;
}

std::vector<float> FloatsOf(const NDArray& t) {
  std::vector<float> out(static_cast<size_t>(t.Elements()));
  if (SameDtype(t.dtype(), DlFloat32())) {
    std::memcpy(out.data(), t.data<float>(), out.size() * sizeof(float));
  } else {
    const uint16_t* h = t.data<uint16_t>();
    for (size_t i = 0; i < out.size(); ++i) out[i] = HalfToFloat(h[i]);
  }
  return out;
}

}  // namespace mlc::cpu
