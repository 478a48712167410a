// `mlc-manifest id tasks|params SOURCE`: the identifiers of SPEC 2, computed. SOURCE is a package
// folder, a document ("-": standard input) or a compiled-program document, which declares ids
// it cannot recompute (it holds neither tasks nor, unless a _metadata lists "params", parameters).
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"

namespace mlc::cli {
namespace {

constexpr JsonLimits kParamLimits{256ull << 20, 64};

struct IdReport {
  std::string id;
  bool computed = true;                  // false: declared by a compiled program
  std::optional<size_t> parameter_count;  // params computed from a list
};

bool IsFolder(const std::string& path) { return path != "-" && CheckFolder(path).ok(); }

bool IsProgram(const Json& doc) {
  DocumentKind kind = DetectDocument(doc);
  return kind == DocumentKind::kCompiledProgram || kind == DocumentKind::kMetadata;
}

// A compiled program's declared id (`field`: interface_id or parameter_schema_id).
Result<IdReport> DeclaredId(const Json& doc, const std::string& document, bool tasks) {
  auto program = InDocument(ParseCompiledProgram(doc), document);
  MLC_RETURN_IF_ERROR(program);
  return IdReport{tasks ? program->interface_id : program->parameter_schema_id, false, std::nullopt};
}

Result<IdReport> TasksId(const std::string& source) {
  // A package folder: the tasks of its manifest (without requiring its declared id to match).
  const std::string file = IsFolder(source) ? JoinPath(source, kManifestFileName) : source;
  Result<Json> doc = ReadJsonFile(file, {}, IsFolder(source) ? source : "");
  MLC_RETURN_IF_ERROR(doc);
  if (IsProgram(*doc)) return DeclaredId(*doc, DocumentName(file), true);
  bool is_package = DetectDocument(*doc) == DocumentKind::kModelPackage;
  const Json& tasks_json = is_package && doc->contains("tasks") ? (*doc)["tasks"] : *doc;
  Result<Tasks> tasks = InDocument(ParseTasks(tasks_json, is_package ? "/tasks" : ""), DocumentName(file));
  MLC_RETURN_IF_ERROR(tasks);
  Result<std::string> id = ComputeInterfaceId(*tasks);
  MLC_RETURN_IF_ERROR(id);
  return IdReport{*id, true, std::nullopt};
}

Result<IdReport> ParamsId(const std::string& source) {
  Result<std::vector<ParamSpec>> specs = Errors{};
  if (IsFolder(source)) {  // a package folder: its tensor cache
    Result<TensorCache> cache = ReadTensorCache(source);
    MLC_RETURN_IF_ERROR(cache);
    specs = ParamSpecsOf(*cache);
  } else {
    Result<Json> doc = ReadJsonFile(source, kParamLimits);
    MLC_RETURN_IF_ERROR(doc);
    const bool listed = doc->is_object() && doc->contains("params") && (*doc)["params"].is_array();
    if (IsProgram(*doc) && !listed) return DeclaredId(*doc, DocumentName(source), false);
    specs = InDocument(listed ? ParseParamSpecs((*doc)["params"], "/params") : ParamSpecsOfDocument(*doc),
                       DocumentName(source));
  }
  MLC_RETURN_IF_ERROR(specs);
  const size_t count = specs->size();
  Result<std::string> id = ComputeParameterSchemaId(std::move(*specs));
  MLC_RETURN_IF_ERROR(id);
  return IdReport{*id, true, count};
}

const Registration kId(30, "id",
                       "Compute interface_id (tasks) or parameter_schema_id (params)",
                       [](CLI::App* cmd) {
  struct Args {
    std::string what, source;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("WHAT", a->what, "tasks | params")
      ->required()
      ->check(CLI::IsMember({"tasks", "params"}));
  cmd->add_option("SOURCE", a->source,
                  "A package folder, or a document (\"-\": stdin). tasks: a tasks object or a "
                  "package; params: a [{name, shape, dtype}] array or a tensor-cache.json; either: a "
                  "compiled-program document (its declared id)")
      ->required();
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() {
    const bool tasks = a->what == "tasks";
    Result<IdReport> r = tasks ? TasksId(a->source) : ParamsId(a->source);
    if (!r) return ReportFailure(r.errors(), a->json, DocumentName(a->source));
    if (a->json) {
      OrderedJson out{{"ok", true}, {tasks ? "interface_id" : "parameter_schema_id", r->id},
                      {"source", r->computed ? "computed" : "declared"}};
      if (r->parameter_count) out["parameter_count"] = *r->parameter_count;
      PrintJson(out);
    } else {
      std::cout << r->id << "\n";
      if (!r->computed) std::cerr << "(declared by the compiled program, not recomputed)\n";
    }
    return kExitOk;
  };
});

}  // namespace
}  // namespace mlc::cli
