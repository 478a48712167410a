// `check`: every verdict about a package in one report: documents, identifiers, binding,
// resources, shards and device fit. A failure in one check does not hide the others.
#include <algorithm>

#include "mlc_manifest/check.h"
#include "base/units.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

class Reporter {
 public:
  explicit Reporter(CheckReport* r) : r_(r) {}
  CheckItem& Add(std::string name, Verdict v, std::string message) {
    r_->items.push_back(CheckItem{std::move(name), v, std::move(message), OrderedJson::object()});
    return r_->items.back();
  }
  void Fail(const std::string& name, const Errors& errors) {
    CheckItem& item = Add(name, Verdict::kFail, errors.front().ToString() +
                                                    (errors.size() > 1 ? " (and " + std::to_string(errors.size() - 1) + " more)" : ""));
    item.details["errors"] = ErrorsJson(errors);
  }

 private:
  CheckReport* r_;
};

std::string Bytes(int64_t n) {
  return std::to_string(n) + " bytes (" + HumanBytes(static_cast<uint64_t>(std::max<int64_t>(n, 0))) + ")";
}

// What the verdicts found that later verdicts use.
struct Found {
  std::optional<ModelPackage> pkg;
  std::optional<ChatConfig> config;
  std::optional<TensorCache> cache;
  std::optional<ResourceEstimate> estimate;
  std::string weights_id;                  // "" when the tensor cache gives none
  std::optional<std::string> symbolic_id;  // of the parameter list
  std::optional<CompiledProgram> program;
};

// The manifest: present and valid ("manifest"), and its interface_id recomputed from the tasks
// ("interface_id", a verdict of its own).
void CheckManifest(const std::string& dir, Reporter& rep, Found& f) {
  std::string path = JoinPath(dir, kManifestFileName);
  if (!FileExists(path)) {
    rep.Add("manifest", Verdict::kSkip,
            "no mlc-model-manifest.json: the package loads from mlc-chat-config.json the legacy "
            "way (text only, no artifact contract)");
    return;
  }
  Result<Json> doc = ReadJsonFile(path, {}, dir);
  if (!doc) return rep.Fail("manifest", doc.errors());
  Result<ModelPackage> pkg = ParseModelPackageFields(*doc);
  if (!pkg) return rep.Fail("manifest", pkg.errors());
  if (Status id = CheckInterfaceId(*pkg); !id) {
    rep.Add("manifest", Verdict::kPass, "mlc-model-manifest.json follows every rule of the schema");
    return rep.Fail("interface_id", id.errors());
  }
  rep.Add("manifest", Verdict::kPass, "mlc-model-manifest.json is valid");
  rep.Add("interface_id", Verdict::kPass, "recomputed from the tasks: " + pkg->interface_id);
  f.pkg = std::move(*pkg);
}

// "chat_config": mlc-chat-config.json is readable.
void CheckChatConfig(const std::string& dir, Reporter& rep, Found& f) {
  Result<ChatConfig> c = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  if (!c) return rep.Fail("chat_config", c.errors());
  f.config = std::move(*c);
  rep.Add("chat_config", Verdict::kPass, "mlc-chat-config.json is readable");
}

// "tensor_cache", then the parameters' resources ("resources" on failure, "param_bytes" when the
// recorded total differs) and their parameter_schema_id (a failure only here).
void CheckTensorCache(const std::string& dir, Reporter& rep, Found& f) {
  Result<TensorCache> tc = ReadTensorCache(dir);
  if (!tc) return rep.Fail("tensor_cache", tc.errors());
  f.cache = std::move(*tc);
  if (f.cache->legacy_name) {
    rep.Add("tensor_cache", Verdict::kWarn,
            "read the legacy ndarray-cache.json; current runtimes only look for "
            "tensor-cache.json");
  } else {
    rep.Add("tensor_cache", Verdict::kPass, "tensor-cache.json is valid");
  }
  std::vector<ParamSpec> specs = ParamSpecsOf(*f.cache);
  Result<std::string> id = ComputeParameterSchemaId(specs);
  Result<ResourceEstimate> est = EstimateResources(specs, f.config ? &*f.config : nullptr);
  if (est) {
    f.estimate = *est;
    if (f.cache->param_bytes && *f.cache->param_bytes != est->total_bytes) {
      rep.Add("param_bytes", Verdict::kWarn,
              "metadata.ParamBytes " + std::to_string(*f.cache->param_bytes) +
                  " differs from the recomputed " + std::to_string(est->total_bytes));
    }
  } else {
    rep.Fail("resources", est.errors());
  }
  if (!id) return rep.Fail("parameter_schema_id", id.errors());
  f.weights_id = *id;
}

// "params": the parameter list with symbolic dimensions, when given.
void CheckParams(const std::string& path, Reporter& rep, Found& f) {
  Result<Json> doc = ReadJsonFile(path, JsonLimits{256ull << 20, 64});
  Result<std::vector<ParamSpec>> specs =
      doc ? ParamSpecsOfDocument(*doc) : Result<std::vector<ParamSpec>>(doc.errors());
  Result<std::string> id = specs ? ComputeParameterSchemaId(*specs) : Result<std::string>(specs.errors());
  if (!id) return rep.Fail("params", id.errors());
  f.symbolic_id = *id;
}

// "parameter_schema_id": the package's declared id against the tensor cache's or the list's.
void CheckParameterSchemaId(Reporter& rep, const Found& f) {
  const std::string& declared = f.pkg->parameter_schema_id;
  CheckItem* item = nullptr;
  if (declared == f.weights_id) {
    item = &rep.Add("parameter_schema_id", Verdict::kPass,
                    "matches the tensor cache (integer shapes): " + declared);
    item->details["matched"] = "tensor_cache";
  } else if (f.symbolic_id && declared == *f.symbolic_id) {
    item = &rep.Add("parameter_schema_id", Verdict::kPass,
                    "matches the given parameter list (symbolic shapes): " + declared);
    item->details["matched"] = "params";
  } else {
    item = &rep.Add("parameter_schema_id", Verdict::kFail,
                    "declared " + declared + " matches neither the tensor cache (" +
                        (f.weights_id.empty() ? "unavailable" : f.weights_id) + ")" +
                        (f.symbolic_id ? " nor the given parameter list (" + *f.symbolic_id + ")" : ""));
  }
  item->details["declared"] = declared;
  if (!f.weights_id.empty()) item->details["tensor_cache"] = f.weights_id;
  if (f.symbolic_id) item->details["params"] = *f.symbolic_id;
}

// "program": the compiled-program document is valid.
void CheckProgram(const std::string& path, Reporter& rep, Found& f) {
  Result<CompiledProgram> prog = ReadCompiledProgram(path);
  if (!prog) return rep.Fail("program", prog.errors());
  f.program = std::move(*prog);
  rep.Add("program", Verdict::kPass, path + " is a valid compiled-program document");
}

// "binding": the package's task binds to the program (the weights' id has its own verdict).
void CheckBinding(const std::string& task, const std::string& program_path, Reporter& rep,
                  const Found& f) {
  BindOptions bo;
  bo.task = task;
  bo.program_document = program_path;
  Result<BoundContract> bound = Bind(*f.pkg, *f.program, bo);
  if (!bound) return rep.Fail("binding", bound.errors());
  CheckItem& item = rep.Add("binding", Verdict::kPass,
                            "task " + task + " binds to program " + bound->executor + " (" +
                                GenerationPairName(bound->pair) + " pair)");
  item.details["contract"] = BoundContractJson(*bound);
}

// "resources": the program's declared resources against those recomputed from the parameters.
void CheckResources(Reporter& rep, const Found& f) {
  const Resources& r = f.program->resources;
  const ResourceEstimate& e = *f.estimate;
  bool same = r.max_storage_buffer_binding_size == e.max_parameter_bytes &&
              r.estimated_device_memory_bytes == e.total_bytes;
  CheckItem& item = rep.Add(
      "resources", same ? Verdict::kPass : Verdict::kFail,
      same ? "the program's resources equal the recomputed ones"
           : "the program declares max_storage_buffer_binding_size " +
                 std::to_string(r.max_storage_buffer_binding_size) +
                 " and estimated_device_memory_bytes " +
                 std::to_string(r.estimated_device_memory_bytes) + "; the parameters give " +
                 std::to_string(e.max_parameter_bytes) + " and " + std::to_string(e.total_bytes));
  item.details["max_storage_buffer_binding_size"] = e.max_parameter_bytes;
  item.details["estimated_device_memory_bytes"] = e.total_bytes;
}

// "shards": every shard present (and, with verify_shards, of its recorded md5).
void CheckShardFiles(const std::string& dir, const CheckOptions& options, Reporter& rep,
                     const TensorCache& cache) {
  ShardCheckOptions so = options.shard_options;
  so.verify_md5 = options.verify_shards;
  std::vector<ShardResult> shards = CheckShards(dir, cache, so);
  int ok = 0, unverified = 0, missing = 0, bad = 0, size_only = 0;
  OrderedJson list = OrderedJson::array();
  std::string first_problem;
  for (const ShardResult& s : shards) {
    bool absent_ok = s.status == ShardStatus::kMissing && !options.verify_shards;
    if (s.status == ShardStatus::kOk || s.status == ShardStatus::kSizeOnly) {
      ++ok;
      if (s.status == ShardStatus::kSizeOnly) ++size_only;
    } else if (s.status == ShardStatus::kNotVerified || absent_ok) {
      ++unverified;
      if (s.status == ShardStatus::kMissing) ++missing;
    } else {
      ++bad;
      if (first_problem.empty()) first_problem = s.message;
    }
    OrderedJson j;
    j["dataPath"] = s.data_path;
    j["status"] = ShardStatusName(s.status);
    j["message"] = s.message;
    list.push_back(j);
  }
  Verdict v = bad ? Verdict::kFail : (unverified ? Verdict::kSkip : Verdict::kPass);
  std::string msg;
  if (bad) {
    msg = std::to_string(bad) + " of " + std::to_string(shards.size()) + " shards failed: " + first_problem;
  } else if (missing == static_cast<int>(shards.size()) && missing > 0) {
    msg = "shard files absent: " + std::to_string(missing) + " shards not verified";
  } else if (unverified) {
    msg = std::to_string(ok) + " shards verified, " + std::to_string(unverified) +
          " not verified" + (missing ? " (" + std::to_string(missing) + " absent)" : "") +
          (options.verify_shards ? "" : "; verify the shards to hash them");
  } else {
    msg = "all " + std::to_string(shards.size()) + " shards present" +
          (!options.verify_shards ? ""
           : size_only == 0       ? " with their recorded size and md5"
           : size_only == ok      ? " with their recorded size: size only (no md5sum recorded)"
                                  : " with their recorded size and md5; " +
                                        std::to_string(size_only) +
                                        " by size only (no md5sum recorded)");
  }
  CheckItem& item = rep.Add("shards", v, msg);
  item.details["shards"] = list;
}

// "device": the program's features and largest binding (FitDevice, SPEC 5 rule 8; without a
// program, the largest parameter) and, where the device states its memory, parameters + KV
// cache ("memory" when the KV cache cannot be estimated).
void CheckDevice(const DeviceProfile& d, Reporter& rep, const Found& f) {
  std::vector<std::string> problems;
  const Resources* r = f.program ? &f.program->resources : nullptr;
  int64_t binding = r ? r->max_storage_buffer_binding_size
                      : (f.estimate ? f.estimate->max_parameter_bytes : 0);
  DeviceFit fit = FitDevice(d.limits, r ? r->required_features : std::vector<std::string>{}, binding);
  for (const std::string& feature : fit.missing_features) {
    problems.push_back("feature \"" + feature + "\" unsupported");
  }
  if (!fit.binding_fits) {
    problems.push_back("largest binding " + Bytes(binding) + " over the limit " +
                       Bytes(d.limits.max_storage_buffer_binding_size));
  }
  OrderedJson details = {{"device", d.limits.name}, {"max_storage_buffer_binding_size", binding}};
  std::optional<Errors> memory_errors;  // reported after the device verdict
  if (f.estimate && f.config) {
    Result<KvCacheEstimate> kv = EstimateKvCache(*f.config);
    if (!kv) {
      if (d.memory_bytes) memory_errors = kv.errors();
    } else {
      int64_t need = f.estimate->total_bytes + kv->bytes;
      details["needed_device_memory_bytes"] = need;
      details["parameter_bytes"] = f.estimate->total_bytes;
      details["kv_cache_bytes"] = kv->bytes;
      if (d.memory_bytes) details["available_device_memory_bytes"] = *d.memory_bytes;
      if (d.memory_bytes && need > *d.memory_bytes) {
        problems.push_back("memory: parameters " + Bytes(f.estimate->total_bytes) + " + KV cache " +
                           Bytes(kv->bytes) + " > " + Bytes(*d.memory_bytes));
      }
    }
  }
  std::string message = (problems.empty() ? "fits " : "does not fit ") + d.limits.name;
  for (size_t i = 0; i < problems.size(); ++i) message += (i ? "; " : ": ") + problems[i];
  rep.Add("device", problems.empty() ? Verdict::kPass : Verdict::kFail, message).details = details;
  if (memory_errors) rep.Fail("memory", *memory_errors);
}

}  // namespace

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kPass: return "pass";
    case Verdict::kFail: return "fail";
    case Verdict::kWarn: return "warn";
    case Verdict::kSkip: return "skip";
  }
  return "?";
}

bool CheckReport::ok() const {
  return std::none_of(items.begin(), items.end(),
                      [](const CheckItem& i) { return i.verdict == Verdict::kFail; });
}

OrderedJson CheckReport::ToJson() const {
  OrderedJson out;
  out["ok"] = ok();
  OrderedJson list = OrderedJson::array();
  for (const CheckItem& i : items) {
    OrderedJson j;
    j["check"] = i.name;
    j["verdict"] = VerdictName(i.verdict);
    j["message"] = i.message;
    if (!i.details.empty()) j["details"] = i.details;
    list.push_back(j);
  }
  out["checks"] = list;
  return out;
}

CheckReport CheckPackage(const std::string& dir, const CheckOptions& options) {
  CheckReport report;
  Reporter rep(&report);
  Found f;
  CheckManifest(dir, rep, f);
  CheckChatConfig(dir, rep, f);
  CheckTensorCache(dir, rep, f);
  if (options.params_path) CheckParams(*options.params_path, rep, f);
  if (f.pkg && (!f.weights_id.empty() || f.symbolic_id)) CheckParameterSchemaId(rep, f);
  if (options.program_path) CheckProgram(*options.program_path, rep, f);
  if (f.pkg && f.program) CheckBinding(options.task, *options.program_path, rep, f);
  if (f.program && f.estimate) CheckResources(rep, f);
  if (f.cache) CheckShardFiles(dir, options, rep, *f.cache);
  if (options.device) CheckDevice(*options.device, rep, f);
  return report;
}

}  // namespace mlc
