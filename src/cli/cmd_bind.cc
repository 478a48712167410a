// `mlc-manifest bind PACKAGE PROGRAM`: bind a package to a compiled program (SPEC 5) and print
// the resolved contract: which pair is driven, the functions, the media inputs. A failure names
// an earlier draft as such and (--explain, always with --json) why the ids differ.
#include <iostream>

#include "cli/builtin.h"
#include "cli/command.h"
#include "mlc_manifest/bind.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"

namespace mlc::cli {
namespace {

void PrintHuman(const BoundContract& b) {
  std::cout << "task " << b.task_name << " -> program " << b.executor << " ("
            << GenerationPairName(b.pair) << " pair, " << b.kv_state_kind << ")\n"
            << "  embed_tokens     " << b.embed_function << "\n"
            << "  create_kv_cache  " << b.create_kv_cache_function << "\n"
            << "  prefill_" << GenerationPairName(b.pair) << "   " << b.prefill_function << "\n"
            << "  decode_" << GenerationPairName(b.pair) << "    " << b.decode_function << "\n";
  if (b.audio) {
    const auto& a = *b.audio;
    std::cout << "  audio input \"" << a.input << "\": adapter " << a.adapter << " -> "
              << a.function << " (float32 [n], " << a.processor.sample_rate_hz << " Hz, "
              << a.processor.min_samples << ".." << a.processor.max_samples << " samples)\n";
  }
  if (b.image) {
    const auto& im = *b.image;
    std::cout << "  image input \"" << im.input << "\": adapter " << im.adapter << " -> "
              << im.function << " (" << im.dtype << " [1, " << im.processor.height << ", "
              << im.processor.width << ", 3], " << ResizeModeName(im.processor.mode) << ", "
              << im.processor.num_embeddings << " embeddings)\n";
  }
}

// A failure with its explanation: under "explain" in JSON, after the errors on stderr for people.
int ReportExplained(const Errors& errors, bool json, const Explanation& e) {
  if (!json || e.data.empty()) {
    int code = ReportFailure(errors, json);
    for (const std::string& line : e.lines) std::cerr << "  " << EscapeControl(line) << "\n";
    return code;
  }
  OrderedJson out{{"ok", false}, {"errors", ErrorsJson(errors)}};
  if (!e.data.empty()) out["explain"] = e.data;
  PrintJson(out);
  return ExitCodeFor(errors);
}

// A document that fails to parse: an earlier draft is named as such, with what changed.
template <class T>
int ReportUnreadable(const Result<T>& r, const std::string& path, bool json) {
  Result<Json> raw = ReadJsonFile(path);
  std::optional<EarlierDraft> draft = raw ? DetectEarlierDraft(*raw) : std::nullopt;
  if (!draft) return ReportFailure(r.errors(), json, path);
  std::string dir = path == "-" ? "." : FolderOf(path);
  Explanation e;
  e.data["draft"] = draft->ToJson(dir);
  return ReportExplained({Error{ErrorCode::kInvalid, draft->changes.front().path, draft->Message(dir),
                                DocumentName(path)}},
                         json, e);
}

const Registration kBind(20, "bind",
                         "Bind a package to a compiled program and print the resolved contract",
                         [](CLI::App* cmd) {
  struct Args {
    std::string package, program, task = "chat.completions";
    bool json = false, explain = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("PACKAGE", a->package, "Package folder or its mlc-model-manifest.json")->required();
  cmd->add_option("PROGRAM", a->program, "Compiled-program document (or _metadata JSON)")->required();
  cmd->add_option("--task", a->task, "Task to bind")->capture_default_str();
  cmd->add_flag("--explain", a->explain,
                "On an id mismatch, say which task fields or parameters differ and why (always with --json)");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() {
    std::string manifest = ManifestPath(a->package);
    Result<ModelPackage> pkg = ReadModelPackage(manifest);
    if (!pkg) return ReportUnreadable(pkg, manifest, a->json);
    Result<CompiledProgram> prog = ReadCompiledProgram(a->program);
    if (!prog) return ReportUnreadable(prog, a->program, a->json);
    if (Result<Json> raw = ReadJsonFile(a->program); raw) {
      // A program that parses may still be an earlier draft (its roles are free-form).
      if (std::optional<EarlierDraft> draft = DetectEarlierDraft(*raw)) return ReportUnreadable(prog, a->program, a->json);
    }
    BindOptions options;
    options.task = a->task;
    options.package_document = manifest;
    options.program_document = DocumentName(a->program);
    Result<BoundContract> bound = Bind(*pkg, *prog, options);
    if (!bound && (a->explain || a->json)) {
      std::string dir = manifest == "-" ? "." : FolderOf(manifest);
      Result<Json> raw = ReadJsonFile(a->program);
      IdEvidence evidence = GatherIdEvidence(dir, raw ? std::optional<Json>(*raw) : std::nullopt,
                                             CpuBuiltinPrograms());
      return ReportExplained(bound.errors(), a->json, ExplainIdErrors(bound.errors(), *pkg, *prog, evidence));
    }
    if (!bound) return ReportFailure(bound.errors(), a->json);
    if (a->json) {
      OrderedJson out;
      out["ok"] = true;
      out["schema"] = kModelPackageSchema;
      out["interface_id"] = pkg->interface_id;
      out["parameter_schema_id"] = pkg->parameter_schema_id;
      out["contract"] = BoundContractJson(*bound);
      PrintJson(out);
    } else {
      PrintHuman(*bound);
    }
    return kExitOk;
  };
});

}  // namespace
}  // namespace mlc::cli
