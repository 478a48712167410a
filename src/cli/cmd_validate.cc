// `mlc-manifest validate FILE...`: detect each document's kind from its content, apply every
// rule, and report validity, schema and identifiers.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"

namespace mlc::cli {
namespace {

struct FileReport {
  OrderedJson json;
  Errors errors;
};

FileReport ValidateFile(const std::string& file) {
  FileReport rep;
  rep.json["file"] = file;
  Result<Json> doc = ReadJsonFile(file);
  if (!doc) {
    rep.errors = doc.errors();
    return rep;
  }
  switch (DetectDocument(*doc)) {
    case DocumentKind::kModelPackage: {
      rep.json["schema"] = kModelPackageSchema;
      Result<ModelPackage> pkg = ParseModelPackage(*doc);
      if (!pkg) {
        rep.errors = pkg.errors();
        break;
      }
      rep.json["interface_id"] = pkg->interface_id;
      rep.json["parameter_schema_id"] = pkg->parameter_schema_id;
      OrderedJson tasks = OrderedJson::array();
      for (const auto& [name, t] : pkg->tasks) tasks.push_back(name);
      rep.json["tasks"] = tasks;
      break;
    }
    case DocumentKind::kCompiledProgram:
    case DocumentKind::kMetadata: {
      bool meta = DetectDocument(*doc) == DocumentKind::kMetadata;
      rep.json["schema"] = kCompiledProgramSchema;
      if (meta) rep.json["embedded_in"] = "_metadata";
      Result<CompiledProgram> prog = ParseCompiledProgram(*doc);
      if (!prog) {
        rep.errors = prog.errors();
        break;
      }
      rep.json["interface_id"] = prog->interface_id;
      rep.json["parameter_schema_id"] = prog->parameter_schema_id;
      OrderedJson programs = OrderedJson::array();
      for (const auto& [name, p] : prog->programs) programs.push_back(name);
      rep.json["programs"] = programs;
      break;
    }
    case DocumentKind::kUnknown:
      rep.errors.push_back(Invalid(doc->is_object() && doc->contains("schema") ? "/schema" : "",
                                   "expected \"schema\": \"mlc.model-package\" or "
                                   "\"mlc.compiled-program\", or a _metadata object with "
                                   "\"artifact\""));
      break;
  }
  return rep;
}

const Registration kValidate(10, "validate",
                             "Check mlc-model-manifest.json / compiled-program documents",
                             [](CLI::App* cmd) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("FILE", *files, "Documents to check (kind detected from \"schema\")")->required();
  cmd->add_flag("--json", *json, "One JSON object on stdout");
  return [files, json]() {
    OrderedJson reports = OrderedJson::array();
    Errors all;
    int code = kExitOk;
    for (const std::string& f : *files) {
      FileReport rep = ValidateFile(f);
      rep.json["ok"] = rep.errors.empty();
      if (!rep.errors.empty()) {
        rep.json["errors"] = ErrorsJson(InDocument(rep.errors, DocumentName(f)));
        code = std::max(code, ExitCodeFor(rep.errors));
      }
      if (!*json) {
        if (rep.errors.empty()) {
          std::cout << f << ": valid " << rep.json["schema"].get<std::string>() << "\n";
          PrintField("interface_id", rep.json["interface_id"]);
          PrintField("parameter_schema_id", rep.json["parameter_schema_id"]);
        } else {
          std::cout << f << ": invalid\n";
          for (const Error& e : rep.errors) std::cout << "  " << EscapeControl(e.ToString()) << "\n";
        }
      }
      reports.push_back(rep.json);
    }
    if (*json) {
      if (reports.size() == 1) {
        OrderedJson one;
        one["ok"] = reports[0]["ok"];
        for (auto it = reports[0].begin(); it != reports[0].end(); ++it) {
          if (it.key() != "ok") one[it.key()] = it.value();
        }
        PrintJson(one);
      } else {
        PrintJson({{"ok", code == kExitOk}, {"files", reports}});
      }
    }
    return code;
  };
});

}  // namespace
}  // namespace mlc::cli
