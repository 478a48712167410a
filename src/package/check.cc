// `check`: every verdict about a package in one report: documents, identifiers, binding,
// resources, shards and device fit. A failure in one check does not hide the others.
#include <algorithm>

#include "mlc_manifest/check.h"
#include "base/units.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/presets.h"

namespace mlc {
namespace {

class Reporter {
 public:
  explicit Reporter(CheckReport* r) : r_(r) {}
  CheckItem& Last() { return r_->items.back(); }
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

// Puts an explanation on a verdict: its lines under "explanation", its data under "explain"
// (appended to what is there).
void Explain(CheckItem& item, const Explanation& e) {
  if (!item.details.contains("explanation")) item.details["explanation"] = OrderedJson::array();
  for (const std::string& line : e.lines) item.details["explanation"].push_back(line);
  if (!item.details.contains("explain")) item.details["explain"] = OrderedJson::object();
  for (auto it = e.data.begin(); it != e.data.end(); ++it) item.details["explain"][it.key()] = it.value();
}

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
  std::vector<ParamSpec> weights_specs;                  // of the tensor cache
  std::optional<std::vector<ParamSpec>> symbolic_specs;  // the given parameter list
  std::optional<std::vector<ParamSpec>> program_params;  // the program's _metadata params
  std::optional<BuiltinProgram> builtin;                 // for this chat config
  bool legacy = false;                                   // no manifest

  // The parameter lists the weights can be compared with, the program's own first.
  std::vector<NamedParams> ParamLists() const {
    std::vector<NamedParams> lists;
    if (program_params) lists.push_back({"the program's params", *program_params});
    if (symbolic_specs) lists.push_back({"the given parameter list", *symbolic_specs});
    if (builtin) lists.push_back({builtin->name, builtin->params});
    return lists;
  }
  NamedParams Weights() const { return {cache && cache->legacy_name ? "ndarray-cache.json" : kTensorCacheFileName, weights_specs}; }
};

// The manifest: present and valid ("manifest"), and its interface_id recomputed from the tasks
// ("interface_id", a verdict of its own).
void CheckManifest(const std::string& dir, Reporter& rep, Found& f) {
  std::string path = JoinPath(dir, kManifestFileName);
  if (!FileExists(path)) {
    rep.Add("manifest", Verdict::kSkip,
            "no mlc-model-manifest.json: the package loads from mlc-chat-config.json the legacy "
            "way (text only, no artifact contract)");
    f.legacy = true;
    return;
  }
  Result<Json> doc = ReadJsonFile(path, {}, dir);
  if (!doc) return rep.Fail("manifest", doc.errors());
  Result<ModelPackage> pkg = ParseModelPackageFields(*doc);
  if (!pkg) {
    // An earlier draft is named as such, with what changed and how to rewrite it.
    if (std::optional<EarlierDraft> draft = DetectEarlierDraft(*doc)) {
      CheckItem& item = rep.Add("manifest", Verdict::kFail, draft->Message(dir));
      item.details["draft"] = draft->ToJson(dir);
      return;
    }
    return rep.Fail("manifest", pkg.errors());
  }
  if (Status id = CheckInterfaceId(*pkg); !id) {
    rep.Add("manifest", Verdict::kPass, "mlc-model-manifest.json follows every rule of the schema");
    rep.Fail("interface_id", id.errors());
    return Explain(rep.Last(), ExplainInterfaceId(pkg->interface_id, pkg->tasks));
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

// Whether a JSON Pointer names a value present in doc.
bool Present(const Json& doc, const std::string& pointer) {
  try {
    return doc.contains(Json::json_pointer(pointer));
  } catch (const std::exception&) {
    return false;
  }
}

// "runtime_config": the chat config through the runtime's own checks, so that `check` refuses
// what `run` would. A value present in the file that the runtime refuses fails; a field it needs
// that the file lacks, or a feature it lacks, is a warning (a compiled library may run the
// package all the same); a model_type or quantization without that runtime is a skip.
void CheckRuntimeConfig(const std::string& dir, const RuntimeConfigFn& runtime, Reporter& rep, const Found& f) {
  Status s = runtime(dir, *f.config);
  if (s) return (void)rep.Add("runtime_config", Verdict::kPass, "the runtime accepts mlc-chat-config.json");
  const Errors& errors = s.errors();
  auto no_runtime = [](const Error& e) {
    return e.code == ErrorCode::kUnsupported && (e.path == "/model_type" || e.path == "/quantization");
  };
  Errors refused;
  for (const Error& e : errors) {
    if (e.code != ErrorCode::kUnsupported && Present(f.config->raw, e.path)) refused.push_back(e);
  }
  if (!refused.empty()) return rep.Fail("runtime_config", refused);
  const bool skip = std::any_of(errors.begin(), errors.end(), no_runtime);
  CheckItem& item = rep.Add("runtime_config", skip ? Verdict::kSkip : Verdict::kWarn,
                            (skip ? "" : "the runtime cannot run it: ") + errors.front().ToString());
  item.details["errors"] = ErrorsJson(errors);
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
  f.weights_specs = specs;
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
  f.symbolic_specs = *specs;
}

// "parameter_schema_id": the package's declared id against the tensor cache's, or against the
// given parameter list when the tensor cache lists the same parameters (the list adds symbolic
// shapes; it never stands in for the weights). A failure says which parameters differ and why.
void CheckParameterSchemaId(Reporter& rep, const Found& f) {
  const std::string& declared = f.pkg->parameter_schema_id;
  const ChatConfig* config = f.config ? &*f.config : nullptr;
  bool list_agrees = f.symbolic_specs &&
                     (!f.cache || DiffParams(f.weights_specs, *f.symbolic_specs, config, "", "").empty());
  CheckItem* item = nullptr;
  if (declared == f.weights_id) {
    item = &rep.Add("parameter_schema_id", Verdict::kPass,
                    "matches the tensor cache (integer shapes): " + declared);
    item->details["matched"] = "tensor_cache";
  } else if (f.symbolic_id && declared == *f.symbolic_id && list_agrees) {
    item = &rep.Add("parameter_schema_id", Verdict::kPass,
                    "matches the given parameter list (symbolic shapes): " + declared);
    item->details["matched"] = "params";
  } else {
    std::string weights = f.weights_id.empty() ? "unavailable" : f.weights_id;
    std::string message =
        f.symbolic_id && declared == *f.symbolic_id
            ? "declared " + declared + " matches the given parameter list but the tensor cache (" + weights +
                  ") does not list the same parameters"
            : "declared " + declared + " matches neither the tensor cache (" + weights + ")" +
                  (f.symbolic_id ? " nor the given parameter list (" + *f.symbolic_id + ")" : "");
    item = &rep.Add("parameter_schema_id", Verdict::kFail, message);
    if (f.cache) Explain(*item, ExplainParameterSchemaId(declared, f.Weights(), f.ParamLists(), config));
  }
  item->details["declared"] = declared;
  if (!f.weights_id.empty()) item->details["tensor_cache"] = f.weights_id;
  if (f.symbolic_id) item->details["params"] = *f.symbolic_id;
}

// "program": the compiled-program document is valid.
void CheckProgram(const std::string& path, Reporter& rep, Found& f) {
  if (Result<Json> raw = ReadJsonFile(path); raw) {
    // An earlier draft is named as such, never bound silently.
    if (std::optional<EarlierDraft> draft = DetectEarlierDraft(*raw)) {
      CheckItem& item = rep.Add("program", Verdict::kFail, path + ": " + draft->Message(FolderOf(path)));
      item.details["draft"] = draft->ToJson(FolderOf(path));
      return;
    }
    f.program_params = MetadataParams(*raw);
  }
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
  if (!bound) {
    rep.Fail("binding", bound.errors());
    IdEvidence evidence{std::nullopt, f.ParamLists(), f.config};
    if (f.cache) evidence.weights = f.Weights();
    Explain(rep.Last(), ExplainIdErrors(bound.errors(), *f.pkg, *f.program, evidence));
    return;
  }
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

// The files to fetch again, each {file, expected_size, reason, beside?}: every shard whose
// status says its bytes are wrong or absent (absent ones only when `absent_counts`), and every
// shard with a download's leftover (DATA.part, DATA.incomplete) beside it.
OrderedJson RefetchList(const std::string& dir, const std::vector<ShardResult>& shards, bool absent_counts) {
  OrderedJson out = OrderedJson::array();
  for (const ShardResult& s : shards) {
    std::string reason, beside;
    for (const char* suffix : {".part", ".incomplete"}) {
      if (beside.empty() && !HasControlChar(s.data_path) && FileExists(JoinPath(dir, s.data_path + suffix))) {
        beside = s.data_path + suffix;
      }
    }
    switch (s.status) {
      case ShardStatus::kMissing:
        if (absent_counts || !beside.empty()) reason = "missing";
        break;
      case ShardStatus::kSizeMismatch:
        reason = std::to_string(s.actual_size) + " bytes" + (s.actual_size < s.expected_size ? " (short)" : " (too long)");
        break;
      case ShardStatus::kMd5Mismatch: reason = "md5 differs from the recorded md5sum"; break;
      case ShardStatus::kLfsPointer: reason = "a Git LFS pointer, not the data"; break;
      default: break;
    }
    if (!beside.empty()) {
      reason = (reason.empty() ? "" : reason + "; ") + "a partial download (" + beside + " beside it)";
    }
    if (reason.empty()) continue;
    OrderedJson r{{"file", s.data_path}, {"expected_size", s.expected_size}, {"reason", reason}};
    if (!beside.empty()) r["beside"] = beside;
    out.push_back(std::move(r));
  }
  return out;
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
  // A partial download: what to fetch again (a shard absent while others are present, short,
  // corrupt, a Git LFS pointer, or with a .part / .incomplete file beside it).
  const bool partial = missing > 0 && missing < static_cast<int>(shards.size());
  OrderedJson refetch = RefetchList(dir, shards, partial || options.verify_shards);
  bool downloading = std::any_of(refetch.begin(), refetch.end(),
                                 [](const OrderedJson& r) { return r.contains("beside"); });
  if (downloading && !bad) {
    ++bad;
    for (const auto& r : refetch) {
      if (r.contains("beside") && first_problem.empty()) first_problem = r["reason"].get<std::string>();
    }
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
  if (!refetch.empty() && !bad) msg += "; a partial download: " + std::to_string(refetch.size()) + " to fetch again";
  CheckItem& item = rep.Add("shards", v, msg);
  item.details["shards"] = list;
  if (!refetch.empty()) {
    Explanation e;
    uint64_t total = 0;
    for (const auto& r : refetch) {
      total += r["expected_size"].get<uint64_t>();
      e.lines.push_back("fetch again: " + r["file"].get<std::string>() + " (" +
                        std::to_string(r["expected_size"].get<uint64_t>()) + " bytes): " +
                        r["reason"].get<std::string>());
    }
    e.data["refetch"] = refetch;
    e.data["refetch_bytes"] = total;
    Explain(item, e);
  }
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

// The preset whose tasks a model_type's converted packages declare.
std::optional<std::string> PresetForModelType(const std::string& model_type) {
  if (model_type == "gemma4") return "gemma-4-e2b-audio";
  if (model_type == "llava") return "llava-1.5";
  if (model_type == "gemma3") return "gemma-3";
  return std::nullopt;
}

}  // namespace

IdEvidence GatherIdEvidence(const std::string& dir, const std::optional<Json>& program_doc,
                            const BuiltinProgramFn& builtin) {
  IdEvidence e;
  if (Result<TensorCache> cache = ReadTensorCache(dir)) {
    e.weights = NamedParams{cache->legacy_name ? "ndarray-cache.json" : kTensorCacheFileName, ParamSpecsOf(*cache)};
  }
  if (program_doc) {
    if (std::optional<std::vector<ParamSpec>> params = MetadataParams(*program_doc)) {
      e.lists.push_back({"the program's params", *params});
    }
  }
  if (Result<ChatConfig> config = ReadChatConfig(JoinPath(dir, kChatConfigFileName))) {
    e.config = *config;
    if (builtin) {
      if (Result<BuiltinProgram> b = builtin(*config)) e.lists.push_back({b->name, b->params});
    }
  }
  return e;
}

LegacyAdvice AdviseLegacyPackage(const std::string& dir, const ChatConfig& config,
                                 const std::optional<TensorCache>& cache, const BuiltinProgramFn& builtin) {
  LegacyAdvice a;
  a.data["model_type"] = config.model_type;
  a.data["quantization"] = config.quantization;
  std::optional<std::string> preset = PresetForModelType(config.model_type);
  std::optional<std::string> preset_id;
  if (preset) {
    a.data["preset"] = *preset;
    a.data["command"] = "mlc-manifest emit package " + dir + " --preset " + *preset;
    if (Result<Tasks> t = PresetTasks(*preset)) {
      if (Result<std::string> id = ComputeInterfaceId(*t)) preset_id = *id;
    }
    a.lines.push_back("`" + a.data["command"].get<std::string>() + "` would write the " + *preset +
                      " manifest for model_type " + config.model_type +
                      (preset_id ? " (interface_id " + *preset_id + ")" : ""));
  } else {
    a.data["preset"] = nullptr;
    a.data["command"] = "mlc-manifest emit package " + dir + " --tasks TASKS.json";
    a.lines.push_back("no preset covers model_type " + config.model_type + ": write its tasks to a file and run `" +
                      a.data["command"].get<std::string>() + "`");
  }
  OrderedJson b;
  Result<BuiltinProgram> program = builtin ? builtin(config) : Result<BuiltinProgram>(Error{
      ErrorCode::kUnsupported, "", "no built-in programs were consulted"});
  b["exists"] = program.ok();
  if (!program) {
    b["reason"] = program.error().message;
    a.lines.push_back("no built-in CPU program for " + config.model_type + " " + config.quantization + ": " +
                      program.error().message);
  } else {
    b["name"] = program->name;
    b["interface_id"] = program->document.interface_id;
    b["parameter_schema_id"] = program->document.parameter_schema_id;
    std::string line = program->name + " exists";
    if (preset_id) {
      bool binds = *preset_id == program->document.interface_id;
      b["serves_preset"] = binds;
      line += binds ? "; it serves the preset's tasks" : "; its tasks are not the preset's (another interface_id)";
    }
    if (cache) {
      Result<std::string> wid = ComputeParameterSchemaId(ParamSpecsOf(*cache));
      bool same = wid && *wid == program->document.parameter_schema_id;
      b["matches_weights"] = same;
      if (same) {
        line += "; its parameters match the weights";
      } else {
        ParamDiff d = DiffParams(ParamSpecsOf(*cache), program->params, &config,
                                 cache->legacy_name ? "ndarray-cache.json" : kTensorCacheFileName, program->name);
        line += "; its parameters do not match the weights: " + d.Summary();
        b["diff"] = d.ToJson();
      }
    }
    a.lines.push_back(line);
  }
  a.data["builtin_program"] = b;
  return a;
}

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
  if (f.config && options.runtime_config) CheckRuntimeConfig(dir, options.runtime_config, rep, f);
  CheckTensorCache(dir, rep, f);
  if (f.config && options.builtin_program) {
    if (Result<BuiltinProgram> b = options.builtin_program(*f.config)) f.builtin = std::move(*b);
  }
  if (f.legacy && f.config) {
    LegacyAdvice advice = AdviseLegacyPackage(dir, *f.config, f.cache, options.builtin_program);
    Explain(report.items.front(), Explanation{advice.lines, {{"legacy", advice.data}}});
  }
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
