// `check`: every verdict about a package in one report: documents, identifiers, binding,
// resources, shards and device fit. A failure in one check does not hide the others.
#include <algorithm>

#include "mlc_manifest/check.h"
#include "mlc_manifest/units.h"
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

// The manifest: present and valid, with its interface_id recomputed.
std::optional<ModelPackage> CheckManifest(const std::string& dir, Reporter& rep) {
  std::string path = JoinPath(dir, kManifestFileName);
  if (!FileExists(path)) {
    rep.Add("manifest", Verdict::kSkip,
            "no mlc-model-manifest.json: the package loads from mlc-chat-config.json the legacy "
            "way (text only, no artifact contract)");
    return std::nullopt;
  }
  Result<Json> doc = ReadJsonFile(path, {}, dir);
  if (!doc) {
    rep.Fail("manifest", doc.errors());
    return std::nullopt;
  }
  Result<ModelPackage> pkg = ParseModelPackage(*doc);
  if (!pkg) {
    // Separate the id verdict from the other rules when the id is the only fault.
    bool only_id = pkg.errors().size() == 1 && pkg.error().path == "/interface_id" &&
                   pkg.error().message.find("does not match") != std::string::npos;
    if (only_id) {
      rep.Add("manifest", Verdict::kPass, "mlc-model-manifest.json follows every rule of the schema");
      rep.Fail("interface_id", pkg.errors());
    } else {
      rep.Fail("manifest", pkg.errors());
    }
    return std::nullopt;
  }
  rep.Add("manifest", Verdict::kPass, "mlc-model-manifest.json is valid");
  rep.Add("interface_id", Verdict::kPass, "recomputed from the tasks: " + pkg->interface_id);
  return std::move(*pkg);
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
  std::optional<ModelPackage> pkg = CheckManifest(dir, rep);

  // Chat config.
  std::optional<ChatConfig> config;
  {
    Result<ChatConfig> c = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
    if (c) {
      config = std::move(*c);
      rep.Add("chat_config", Verdict::kPass, "mlc-chat-config.json is readable");
    } else {
      rep.Fail("chat_config", c.errors());
    }
  }

  // Tensor cache and the parameter schema id.
  std::optional<TensorCache> cache;
  std::optional<ResourceEstimate> estimate;
  std::string weights_id;
  {
    Result<TensorCache> tc = ReadTensorCache(dir);
    if (!tc) {
      rep.Fail("tensor_cache", tc.errors());
    } else {
      cache = std::move(*tc);
      if (cache->legacy_name) {
        rep.Add("tensor_cache", Verdict::kWarn,
                "read the legacy ndarray-cache.json; current runtimes only look for "
                "tensor-cache.json");
      } else {
        rep.Add("tensor_cache", Verdict::kPass, "tensor-cache.json is valid");
      }
      std::vector<ParamSpec> specs = ParamSpecsOf(*cache);
      Result<std::string> id = ComputeParameterSchemaId(specs);
      Result<ResourceEstimate> est = EstimateResources(specs, config ? &*config : nullptr);
      if (est) {
        estimate = *est;
        if (cache->param_bytes && *cache->param_bytes != est->total_bytes) {
          rep.Add("param_bytes", Verdict::kWarn,
                  "metadata.ParamBytes " + std::to_string(*cache->param_bytes) +
                      " differs from the recomputed " + std::to_string(est->total_bytes));
        }
      } else {
        rep.Fail("resources", est.errors());
      }
      if (!id) {
        rep.Fail("parameter_schema_id", id.errors());
      } else {
        weights_id = *id;
      }
    }
  }
  std::optional<std::string> symbolic_id;
  if (options.params_path) {
    Result<Json> doc = ReadJsonFile(*options.params_path, JsonLimits{256ull << 20, 64});
    Result<std::vector<ParamSpec>> specs =
        doc ? ParamSpecsOfDocument(*doc) : Result<std::vector<ParamSpec>>(doc.errors());
    Result<std::string> id = specs ? ComputeParameterSchemaId(*specs) : Result<std::string>(specs.errors());
    if (id) {
      symbolic_id = *id;
    } else {
      rep.Fail("params", id.errors());
    }
  }
  if (pkg && (!weights_id.empty() || symbolic_id)) {
    const std::string& declared = pkg->parameter_schema_id;
    CheckItem* item = nullptr;
    if (declared == weights_id) {
      item = &rep.Add("parameter_schema_id", Verdict::kPass,
                      "matches the tensor cache (integer shapes): " + declared);
      item->details["matched"] = "tensor_cache";
    } else if (symbolic_id && declared == *symbolic_id) {
      item = &rep.Add("parameter_schema_id", Verdict::kPass,
                      "matches the given parameter list (symbolic shapes): " + declared);
      item->details["matched"] = "params";
    } else {
      item = &rep.Add("parameter_schema_id", Verdict::kFail,
                      "declared " + declared + " matches neither the tensor cache (" +
                          (weights_id.empty() ? "unavailable" : weights_id) + ")" +
                          (symbolic_id ? " nor the given parameter list (" + *symbolic_id + ")" : ""));
    }
    item->details["declared"] = declared;
    if (!weights_id.empty()) item->details["tensor_cache"] = weights_id;
    if (symbolic_id) item->details["params"] = *symbolic_id;
  }

  // The compiled program: binding and resources.
  std::optional<CompiledProgram> program;
  if (options.program_path) {
    Result<CompiledProgram> prog = ReadCompiledProgram(*options.program_path);
    if (!prog) {
      rep.Fail("program", prog.errors());
    } else {
      program = std::move(*prog);
      rep.Add("program", Verdict::kPass, *options.program_path + " is a valid compiled-program document");
    }
  }
  if (pkg && program) {
    BindOptions bo;
    bo.task = options.task;  // the weights' id has its own verdict above
    bo.program_document = *options.program_path;
    Result<BoundContract> bound = Bind(*pkg, *program, bo);
    if (bound) {
      CheckItem& item = rep.Add("binding", Verdict::kPass,
                                "task " + options.task + " binds to program " + bound->executor +
                                    " (" + GenerationPairName(bound->pair) + " pair)");
      item.details["contract"] = BoundContractJson(*bound);
    } else {
      rep.Fail("binding", bound.errors());
    }
  }
  if (program && estimate) {
    const Resources& r = program->resources;
    bool same = r.max_storage_buffer_binding_size == estimate->max_parameter_bytes &&
                r.estimated_device_memory_bytes == estimate->total_bytes;
    CheckItem& item = rep.Add(
        "resources", same ? Verdict::kPass : Verdict::kFail,
        same ? "the program's resources equal the recomputed ones"
             : "the program declares max_storage_buffer_binding_size " +
                   std::to_string(r.max_storage_buffer_binding_size) +
                   " and estimated_device_memory_bytes " +
                   std::to_string(r.estimated_device_memory_bytes) + "; the parameters give " +
                   std::to_string(estimate->max_parameter_bytes) + " and " +
                   std::to_string(estimate->total_bytes));
    item.details["max_storage_buffer_binding_size"] = estimate->max_parameter_bytes;
    item.details["estimated_device_memory_bytes"] = estimate->total_bytes;
  }

  // Shards.
  if (cache) {
    ShardCheckOptions so = options.shard_options;
    so.verify_md5 = options.verify_shards;
    std::vector<ShardResult> shards = CheckShards(dir, *cache, so);
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

  // Device fit.
  if (options.device) {
    const DeviceProfile& d = *options.device;
    std::vector<std::string> problems;
    const Resources* r = program ? &program->resources : nullptr;
    int64_t binding = r ? r->max_storage_buffer_binding_size
                        : (estimate ? estimate->max_parameter_bytes : 0);
    if (r) {
      for (const std::string& f : r->required_features) {
        if (std::find(d.limits.features.begin(), d.limits.features.end(), f) == d.limits.features.end()) {
          problems.push_back("feature \"" + f + "\" unsupported");
        }
      }
    }
    if (binding > d.limits.max_storage_buffer_binding_size) {
      problems.push_back("largest binding " + Bytes(binding) + " over the limit " +
                         Bytes(d.limits.max_storage_buffer_binding_size));
    }
    CheckItem& item = rep.Add("device", problems.empty() ? Verdict::kPass : Verdict::kFail, "");
    item.details["device"] = d.limits.name;
    item.details["max_storage_buffer_binding_size"] = binding;
    if (estimate && config) {
      Result<KvCacheEstimate> kv = EstimateKvCache(*config);
      if (!kv) {
        if (d.memory_bytes) rep.Fail("memory", kv.errors());
      } else {
        int64_t need = estimate->total_bytes + kv->bytes;
        item.details["needed_device_memory_bytes"] = need;
        item.details["parameter_bytes"] = estimate->total_bytes;
        item.details["kv_cache_bytes"] = kv->bytes;
        if (d.memory_bytes) item.details["available_device_memory_bytes"] = *d.memory_bytes;
        if (d.memory_bytes && need > *d.memory_bytes) {
          problems.push_back("memory: parameters " + Bytes(estimate->total_bytes) + " + KV cache " +
                             Bytes(kv->bytes) + " > " + Bytes(*d.memory_bytes));
        }
      }
    }
    item.verdict = problems.empty() ? Verdict::kPass : Verdict::kFail;
    if (problems.empty()) {
      item.message = "fits " + d.limits.name;
    } else {
      item.message = "does not fit " + d.limits.name + ": ";
      for (size_t i = 0; i < problems.size(); ++i) item.message += (i ? "; " : "") + problems[i];
    }
  }
  return report;
}

}  // namespace mlc
