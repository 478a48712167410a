// Normalized serialization of the contract documents in the producer's key order (SPEC 4),
// and the identifiers computed from it (SPEC 2).
#include <algorithm>

#include "mlc_manifest/contract.h"

namespace mlc {
namespace {

OrderedJson IdsJson(const std::vector<int64_t>& ids) {
  OrderedJson a = OrderedJson::array();
  for (int64_t id : ids) a.push_back(id);
  return a;
}

OrderedJson ProcessorJson(const Processor& p) {
  if (const auto* name = std::get_if<std::string>(&p)) return *name;
  if (const auto* a = std::get_if<AudioDecode>(&p)) {
    OrderedJson o;
    o["kind"] = "audio_decode";
    o["format"] = "pcm_f32";
    o["sample_rate_hz"] = a->sample_rate_hz;
    o["channels"] = a->channels;
    o["min_samples"] = a->min_samples;
    o["max_samples"] = a->max_samples;
    return o;
  }
  const auto& im = std::get<ImageDecode>(p);
  OrderedJson o;
  o["kind"] = "image_decode";
  o["format"] = "rgb_u8";
  o["layout"] = "nhwc";
  OrderedJson resize;
  resize["mode"] = ResizeModeName(im.mode);
  resize["height"] = im.height;
  resize["width"] = im.width;
  o["resize"] = resize;
  o["num_embeddings"] = im.num_embeddings;
  return o;
}

OrderedJson InputJson(const TaskInput& in) {
  OrderedJson o;
  o["processor"] = ProcessorJson(in.processor);
  if (in.adapter) o["adapter"] = *in.adapter;
  if (in.prompt) {
    OrderedJson pr;
    pr["prefix_token_ids"] = IdsJson(in.prompt->prefix_token_ids);
    pr["placeholder_token_id"] = in.prompt->placeholder_token_id;
    pr["suffix_token_ids"] = IdsJson(in.prompt->suffix_token_ids);
    o["prompt"] = pr;
  }
  return o;
}

OrderedJson StringMapJson(const std::map<std::string, std::string>& m) {
  OrderedJson o = OrderedJson::object();
  for (const auto& [k, v] : m) o[k] = v;
  return o;
}

}  // namespace

const char* ResizeModeName(ResizeMode mode) {
  return mode == ResizeMode::kCenterCrop ? "center_crop" : "stretch";
}

OrderedJson TasksJson(const Tasks& tasks) {
  OrderedJson out = OrderedJson::object();
  for (const auto& [name, task] : tasks) {  // std::map: names sorted by code point
    OrderedJson t;
    t["executor"] = task.executor;
    OrderedJson inputs = OrderedJson::object();
    for (const auto& [in_name, in] : task.inputs) inputs[in_name] = InputJson(in);
    t["inputs"] = inputs;
    t["output"] = task.output;
    out[name] = t;
  }
  return out;
}

OrderedJson ModelPackageJson(const ModelPackage& pkg) {
  OrderedJson o;
  o["schema"] = kModelPackageSchema;
  o["schema_version"] = 1;
  o["chat_config"] = kChatConfigFileName;
  o["interface_id"] = pkg.interface_id;
  OrderedJson w;
  w["manifest"] = kTensorCacheFileName;
  w["parameter_schema_id"] = pkg.parameter_schema_id;
  o["weights"] = w;
  o["tasks"] = TasksJson(pkg.tasks);
  return o;
}

OrderedJson CompiledProgramJson(const CompiledProgram& cp) {
  OrderedJson o;
  o["schema"] = kCompiledProgramSchema;
  o["schema_version"] = 1;
  o["interface_id"] = cp.interface_id;
  o["parameter_schema_id"] = cp.parameter_schema_id;
  OrderedJson programs = OrderedJson::object();
  for (const auto& [name, p] : cp.programs) {
    OrderedJson po;
    po["kind"] = p.kind;
    po["exports"] = StringMapJson(p.exports);
    if (p.adapters) po["adapters"] = StringMapJson(*p.adapters);
    if (p.adapter_dtypes) po["adapter_dtypes"] = StringMapJson(*p.adapter_dtypes);
    programs[name] = po;
  }
  o["programs"] = programs;
  OrderedJson r;
  OrderedJson features = OrderedJson::array();
  for (const std::string& f : cp.resources.required_features) features.push_back(f);
  r["required_features"] = features;
  r["max_storage_buffer_binding_size"] = cp.resources.max_storage_buffer_binding_size;
  r["estimated_device_memory_bytes"] = cp.resources.estimated_device_memory_bytes;
  o["resources"] = r;
  return o;
}

Result<std::string> ComputeInterfaceId(const Tasks& tasks) {
  OrderedJson doc;
  doc["tasks"] = TasksJson(tasks);
  return Sha256Id(CanonicalJson(doc));
}

Result<std::vector<ParamSpec>> ParseParamSpecs(const Json& value, const std::string& path) {
  Errors errors;
  FieldChecker c(&errors);
  std::vector<ParamSpec> out;
  if (!value.is_array()) {
    return Invalid(path, "expected an array of {name, shape, dtype} objects, got " +
                             JsonTypeName(value));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    std::string p = PointerAppend(path, i);
    const Json& v = value[i];
    if (!c.Object(v, p)) continue;
    c.Keys(v, p, {"name", "shape", "dtype"}, {"name", "shape", "dtype"});
    ParamSpec spec;
    if (v.contains("name")) spec.name = c.String(v["name"], p + "/name").value_or("");
    if (v.contains("dtype")) spec.dtype = c.String(v["dtype"], p + "/dtype").value_or("");
    if (v.contains("shape")) {
      const Json& s = v["shape"];
      if (!s.is_array()) {
        c.Fail(p + "/shape", "expected an array of dimensions, got " + JsonTypeName(s));
      } else {
        for (size_t d = 0; d < s.size(); ++d) {
          std::string dp = PointerAppend(p + "/shape", d);
          if (s[d].is_string()) {
            if (auto name = c.String(s[d], dp)) spec.shape.emplace_back(*name);
          } else if (auto n = c.Integer(s[d], dp, 0)) {
            spec.shape.emplace_back(*n);
          }
        }
      }
    }
    out.push_back(std::move(spec));
  }
  if (!errors.empty()) return errors;
  return out;
}

Result<std::string> ComputeParameterSchemaId(std::vector<ParamSpec> params) {
  std::sort(params.begin(), params.end(),
            [](const ParamSpec& a, const ParamSpec& b) { return a.name < b.name; });
  OrderedJson list = OrderedJson::array();
  for (size_t i = 0; i < params.size(); ++i) {
    if (i > 0 && params[i].name == params[i - 1].name) {
      return Invalid("", "duplicate parameter name \"" + params[i].name + "\"");
    }
    OrderedJson shape = OrderedJson::array();
    for (const auto& d : params[i].shape) {
      if (const auto* n = std::get_if<int64_t>(&d)) {
        shape.push_back(*n);
      } else {
        shape.push_back(std::get<std::string>(d));
      }
    }
    OrderedJson e;
    e["name"] = params[i].name;
    e["shape"] = shape;
    e["dtype"] = params[i].dtype;
    list.push_back(e);
  }
  return Sha256Id(CanonicalJson(list));
}

std::string WriteModelPackage(const ModelPackage& pkg) {
  return PythonIndentJson(ModelPackageJson(pkg));
}

std::string WriteCompiledProgram(const CompiledProgram& program, bool as_metadata) {
  OrderedJson doc = CompiledProgramJson(program);
  if (as_metadata) {
    OrderedJson meta;
    meta["artifact"] = doc;
    if (program.kv_state_kind) meta["kv_state_kind"] = *program.kv_state_kind;
    return PythonIndentJson(meta);
  }
  return PythonIndentJson(doc);
}

}  // namespace mlc
