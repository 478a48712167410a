// `mlc-manifest emit package|program|tensor-cache`: write the contract documents (and a tensor
// cache layout) from a converted-model directory; atomic, never overwriting without --force.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/presets.h"

namespace mlc::cli {
namespace {

struct EmitArgs {
  std::string dir, tasks_file, programs_file, preset, params_file, output, target = "webgpu";
  std::vector<std::string> features;
  bool metadata = false, force = false, json = false, upgrade = false;
};

Result<Tasks> LoadTasks(const EmitArgs& a) {
  if (!a.preset.empty()) return PresetTasks(a.preset);
  Result<Json> doc = ReadJsonFile(a.tasks_file);
  MLC_RETURN_IF_ERROR(doc);
  // A tasks object, or a package whose tasks to reuse.
  if (DetectDocument(*doc) == DocumentKind::kModelPackage && doc->contains("tasks")) {
    return ParseTasks((*doc)["tasks"], "/tasks");
  }
  return ParseTasks(*doc);
}

// The parameter list: --params (may be symbolic), else the package's tensor cache.
Result<std::vector<ParamSpec>> LoadParams(const EmitArgs& a) {
  if (!a.params_file.empty()) {
    Result<Json> doc = ReadJsonFile(a.params_file, JsonLimits{256ull << 20, 64});
    MLC_RETURN_IF_ERROR(doc);
    return ParamSpecsOfDocument(*doc);
  }
  Result<TensorCache> cache = ReadTensorCache(a.dir);
  MLC_RETURN_IF_ERROR(cache);
  return ParamSpecsOf(*cache);
}

int Finish(const EmitArgs& a, const std::string& path, const std::string& text, OrderedJson info) {
  Status st = WriteFileAtomic(path, text, a.force);
  if (!st) return ReportFailure(st.errors(), a.json);
  if (a.json) {
    OrderedJson out;
    out["ok"] = true;
    out["output"] = {{"path", path}};
    for (auto it = info.begin(); it != info.end(); ++it) out[it.key()] = it.value();
    PrintJson(out);
  } else {
    std::cout << "wrote " << path << "\n";
    for (auto it = info.begin(); it != info.end(); ++it) PrintField(it.key(), it.value());
  }
  return kExitOk;
}

int EmitPackage(const EmitArgs& a) {
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  Result<Tasks> tasks = LoadTasks(a);
  if (!tasks) return ReportFailure(tasks.errors(), a.json);
  Result<TensorCache> cache = ReadTensorCache(a.dir);
  if (!cache) return ReportFailure(cache.errors(), a.json);
  Result<std::string> pid = ComputeParameterSchemaId(ParamSpecsOf(*cache));
  if (!pid) return ReportFailure(pid.errors(), a.json);
  Result<std::string> iid = ComputeInterfaceId(*tasks);
  if (!iid) return ReportFailure(iid.errors(), a.json);
  ModelPackage pkg{*iid, *pid, *tasks};
  std::string out = a.output.empty() ? JoinPath(a.dir, kManifestFileName) : a.output;
  return Finish(a, out, WriteModelPackage(pkg),
                {{"interface_id", pkg.interface_id}, {"parameter_schema_id", pkg.parameter_schema_id}});
}

// --upgrade: DIR/mlc-model-manifest.json written by an earlier draft, rewritten to the current
// text in place (or to -o) with everything else kept; a current manifest is left alone.
int UpgradePackage(const EmitArgs& a) {
  std::string path = JoinPath(a.dir, kManifestFileName);
  Result<Json> doc = ReadJsonFile(path, {}, a.dir);
  if (!doc) return ReportFailure(doc.errors(), a.json, path);
  if (!DetectEarlierDraft(*doc)) {
    Result<ModelPackage> current = ParseModelPackage(*doc);
    if (!current) return ReportFailure(current.errors(), a.json, path);
    if (a.json) {
      PrintJson({{"ok", true}, {"upgraded", false}, {"output", {{"path", path}}}});
    } else {
      std::cout << path << " already follows the current text: nothing to upgrade\n";
    }
    return kExitOk;
  }
  Result<Json> upgraded = UpgradeEarlierDraft(*doc);
  if (!upgraded) return ReportFailure(upgraded.errors(), a.json, path);
  if (Status s = CheckUpgradedWeights(a.dir, *upgraded); !s) return ReportFailure(s.errors(), a.json, path);
  Result<ModelPackage> pkg = ParseModelPackage(*upgraded);
  if (!pkg) return ReportFailure(pkg.errors(), a.json, path);
  EmitArgs in_place = a;
  in_place.force = a.output.empty() || a.force;  // rewriting the draft itself is the point
  return Finish(in_place, a.output.empty() ? path : a.output, WriteModelPackage(*pkg),
                {{"upgraded", true}, {"interface_id", pkg->interface_id},
                 {"parameter_schema_id", pkg->parameter_schema_id}});
}

// --target cpu: the built-in CPU program's own document for the package's chat config.
int EmitCpuProgram(const EmitArgs& a) {
  Result<ChatConfig> config = ReadChatConfig(JoinPath(a.dir, kChatConfigFileName));
  if (!config) return ReportFailure(config.errors(), a.json);
  Result<CompiledProgram> cp = CpuCompiledProgram(*config);
  if (!cp) return ReportFailure(cp.errors(), a.json);
  return Finish(a, a.output, WriteCompiledProgram(*cp, a.metadata),
                {{"interface_id", cp->interface_id},
                 {"parameter_schema_id", cp->parameter_schema_id},
                 {"max_storage_buffer_binding_size", cp->resources.max_storage_buffer_binding_size},
                 {"estimated_device_memory_bytes", cp->resources.estimated_device_memory_bytes}});
}

int EmitProgram(const EmitArgs& a) {
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  if (a.target == "cpu") return EmitCpuProgram(a);
  Target target = a.target == "native" ? Target::kNative : Target::kWebGPU;
  Result<Tasks> tasks = LoadTasks(a);
  if (!tasks) return ReportFailure(tasks.errors(), a.json);
  Result<std::map<std::string, Program>> programs = [&]() -> Result<std::map<std::string, Program>> {
    if (!a.preset.empty()) return PresetPrograms(a.preset, target);
    Result<Json> doc = ReadJsonFile(a.programs_file);
    MLC_RETURN_IF_ERROR(doc);
    return ParsePrograms(*doc);
  }();
  if (!programs) return ReportFailure(programs.errors(), a.json);
  Result<std::vector<ParamSpec>> params = LoadParams(a);
  if (!params) return ReportFailure(params.errors(), a.json);
  Result<ChatConfig> config = ReadChatConfig(JoinPath(a.dir, kChatConfigFileName));
  if (!config) return ReportFailure(config.errors(), a.json);
  ProgramParts parts{*tasks, *programs, *params, a.features, a.metadata};
  if (!a.preset.empty()) {
    for (const std::string& f : TargetFeatures(target, config->quantization)) parts.features.push_back(f);
  }
  Result<CompiledProgram> program = AssembleCompiledProgram(parts, &*config);
  if (!program) return ReportFailure(program.errors(), a.json);
  const CompiledProgram& cp = *program;
  return Finish(a, a.output, WriteCompiledProgram(cp, a.metadata),
                {{"interface_id", cp.interface_id},
                 {"parameter_schema_id", cp.parameter_schema_id},
                 {"max_storage_buffer_binding_size", cp.resources.max_storage_buffer_binding_size},
                 {"estimated_device_memory_bytes", cp.resources.estimated_device_memory_bytes}});
}

int EmitTensorCache(const EmitArgs& a) {
  Result<Json> doc = ReadJsonFile(a.params_file, JsonLimits{256ull << 20, 64});
  if (!doc) return ReportFailure(doc.errors(), a.json, a.params_file);
  Result<std::vector<ParamSpec>> params = ParseParamSpecs(*doc);
  if (!params) return ReportFailure(params.errors(), a.json, a.params_file);
  Result<TensorCache> cache = LayoutTensorCache(*params);
  if (!cache) return ReportFailure(cache.errors(), a.json, a.params_file);
  return Finish(a, a.output, WriteTensorCache(*cache),
                {{"shard_count", cache->shards.size()}, {"parameter_count", params->size()}});
}

const Registration kEmit(40, "emit",
                         "Write mlc-model-manifest.json, the compiled-program document, or a tensor-cache layout",
                         [](CLI::App* cmd) {
  cmd->require_subcommand(1);
  auto a = std::make_shared<EmitArgs>();
  auto action = std::make_shared<int>(0);
  std::string presets = "gemma-4-e2b-audio | llava-1.5 | gemma-3";

  auto* pkg = cmd->add_subcommand("package", "Write DIR/mlc-model-manifest.json");
  pkg->add_option("DIR", a->dir, "Converted-model folder (tensor-cache.json)")->required();
  auto* pt = pkg->add_option("--tasks", a->tasks_file, "Tasks JSON (or a package to take them from)");
  auto* pp = pkg->add_option("--preset", a->preset, presets)->check(CLI::IsMember(PresetNames()));
  pt->excludes(pp);
  auto* pu = pkg->add_flag("--upgrade", a->upgrade,
                           "Rewrite DIR/mlc-model-manifest.json of an earlier draft to the current text, "
                           "keeping everything else");
  pu->excludes(pt)->excludes(pp);
  pkg->add_option("-o,--output", a->output, "Output file (default DIR/mlc-model-manifest.json)");
  pkg->add_flag("--force", a->force, "Overwrite an existing file");
  pkg->add_flag("--json", a->json, "One JSON object on stdout");
  pkg->callback([action, pt, pp, pu]() {
    if (pt->count() + pp->count() + pu->count() == 0) throw CLI::RequiredError("--tasks, --preset or --upgrade");
    *action = pu->count() ? 4 : 1;
  });

  auto* prog = cmd->add_subcommand("program", "Write the compiled-program document");
  prog->add_option("DIR", a->dir, "Converted-model folder (mlc-chat-config.json, tensor-cache.json)")
      ->required();
  auto* gp = prog->add_option("--preset", a->preset, presets)->check(CLI::IsMember(PresetNames()));
  auto* gt = prog->add_option("--tasks", a->tasks_file, "Tasks JSON (with --programs)");
  auto* gg = prog->add_option("--programs", a->programs_file, "Programs JSON {name: {kind, exports, adapters}}");
  gp->excludes(gt)->excludes(gg);
  gt->needs(gg);
  gg->needs(gt);
  prog->add_option("--feature", a->features, "A required device feature (repeatable)");
  prog->add_option("--target", a->target,
                   "webgpu | native | cpu (the built-in CPU program for the chat config's model_type; "
                   "no --preset or --tasks)")
      ->check(CLI::IsMember({"webgpu", "native", "cpu"}))
      ->capture_default_str();
  prog->add_option("--params", a->params_file, "Parameter list [{name, shape, dtype}] (default: the tensor cache)");
  prog->add_flag("--metadata", a->metadata, "Write a _metadata object holding the document under \"artifact\"");
  prog->add_option("-o,--output", a->output, "Output file")->required();
  prog->add_flag("--force", a->force, "Overwrite an existing file");
  prog->add_flag("--json", a->json, "One JSON object on stdout");
  prog->callback([action, gp, gt, a]() {
    if (a->target == "cpu" && gp->count() + gt->count() > 0) {
      throw CLI::ValidationError("--target cpu", "writes the CPU program's own tasks; drop --preset/--tasks");
    }
    if (a->target != "cpu" && gp->count() + gt->count() == 0) {
      throw CLI::RequiredError("--preset or --tasks/--programs");
    }
    *action = 2;
  });

  auto* tc = cmd->add_subcommand("tensor-cache", "Lay out a parameter list as the converter's tensor-cache.json (no shard data)");
  tc->add_option("--params", a->params_file, "Parameter list [{name, shape, dtype}]")->required();
  tc->add_option("-o,--output", a->output, "Output file")->required();
  tc->add_flag("--force", a->force, "Overwrite an existing file");
  tc->add_flag("--json", a->json, "One JSON object on stdout");
  tc->callback([action]() { *action = 3; });

  return [a, action]() {
    switch (*action) {
      case 1: return EmitPackage(*a);
      case 2: return EmitProgram(*a);
      case 3: return EmitTensorCache(*a);
      case 4: return UpgradePackage(*a);
      default: return kExitUsage;
    }
  };
});

}  // namespace
}  // namespace mlc::cli
