// `mlc-manifest bind PACKAGE PROGRAM`: bind a package to a compiled program (SPEC 5) and print
// the resolved contract: which pair is driven, the functions, the media inputs.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/bind.h"
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

const Registration kBind(20, "bind",
                         "Bind a package to a compiled program and print the resolved contract",
                         [](CLI::App* cmd) {
  struct Args {
    std::string package, program, task = "chat.completions";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("PACKAGE", a->package, "Package folder or its mlc-model-manifest.json")->required();
  cmd->add_option("PROGRAM", a->program, "Compiled-program document (or _metadata JSON)")->required();
  cmd->add_option("--task", a->task, "Task to bind")->capture_default_str();
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() {
    std::string manifest = ManifestPath(a->package);
    Result<ModelPackage> pkg = ReadModelPackage(manifest);
    if (!pkg) return ReportFailure(pkg.errors(), a->json, manifest);
    Result<CompiledProgram> prog = ReadCompiledProgram(a->program);
    if (!prog) return ReportFailure(prog.errors(), a->json, a->program);
    BindOptions options;
    options.task = a->task;
    options.package_document = manifest;
    options.program_document = DocumentName(a->program);
    Result<BoundContract> bound = Bind(*pkg, *prog, options);
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
