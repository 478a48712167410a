// `mlc-manifest id tasks FILE` / `id params FILE`: the identifiers of SPEC 2, computed.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/package.h"

namespace mlc::cli {
namespace {

Result<std::string> TasksId(const Json& doc) {
  // A whole package: hash its tasks (without requiring its declared id to match).
  bool is_package = DetectDocument(doc) == DocumentKind::kModelPackage;
  const Json& tasks_json = is_package && doc.contains("tasks") ? doc["tasks"] : doc;
  Result<Tasks> tasks = ParseTasks(tasks_json, is_package ? "/tasks" : "");
  MLC_RETURN_IF_ERROR(tasks);
  return ComputeInterfaceId(*tasks);
}

const Registration kId(30, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("id", "Compute interface_id (tasks) or parameter_schema_id (params)");
  struct Args {
    std::string what, file;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("WHAT", a->what, "tasks | params")
      ->required()
      ->check(CLI::IsMember({"tasks", "params"}));
  cmd->add_option("FILE", a->file,
                  "tasks: a tasks object or a package; params: a [{name, shape, dtype}] array or "
                  "a tensor-cache.json")
      ->required();
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() {
    Result<Json> doc = ReadJsonFile(a->file, JsonLimits{256ull << 20, 64});
    if (!doc) return ReportFailure(doc.errors(), a->json, a->file);
    OrderedJson out;
    out["ok"] = true;
    std::string id;
    if (a->what == "tasks") {
      Result<std::string> r = TasksId(*doc);
      if (!r) return ReportFailure(r.errors(), a->json, a->file);
      id = *r;
      out["interface_id"] = id;
    } else {
      Result<std::vector<ParamSpec>> specs = ParamSpecsOfDocument(*doc);
      if (!specs) return ReportFailure(specs.errors(), a->json, a->file);
      size_t count = specs->size();
      Result<std::string> r = ComputeParameterSchemaId(std::move(*specs));
      if (!r) return ReportFailure(r.errors(), a->json, a->file);
      id = *r;
      out["parameter_schema_id"] = id;
      out["parameters"] = count;
    }
    if (a->json) {
      PrintJson(out);
    } else {
      std::cout << id << "\n";
    }
    return kExitOk;
  };
});

}  // namespace
}  // namespace mlc::cli
