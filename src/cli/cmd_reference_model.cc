// `mlc-manifest reference-model DIR`: writes the reference transformer as a converted package
// (shards, tensor-cache.json, chat config, both manifest halves) for tests and the demo.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/reference_model.h"

namespace mlc::cli {
namespace {

struct GenArgs {
  std::string dir;
  std::string pair = "tokens";
  ReferenceModelOptions options;
  bool no_manifest = false;
  bool json = false;
  FamilyModelOptions family;  // with --family: a random package of a CPU family
};

// --family: a converted package of one of the CPU program's families, random weights.
int RunFamily(GenArgs a) {
  a.family.manifest = !a.no_manifest;
  a.family.seed = a.options.seed;
  a.family.force = a.options.force;
  a.family.audio = a.options.audio;
  auto report = WriteFamilyModel(a.dir, a.family);
  if (!report) return ReportFailure(report.errors(), a.json);
  if (a.json) {
    PrintJson({{"ok", true},
               {"output", {{"path", a.dir}, {"files", report->files}}},
               {"family", a.family.family},
               {"quantization", a.family.quantization},
               {"shape", a.family.shape},
               {"audio", a.family.audio},
               {"random_weights", true},
               {"manifest", a.family.manifest},
               {"parameter_count", report->parameter_count},
               {"parameter_bytes", report->parameter_bytes},
               {"shard_bytes", report->shard_bytes},
               {"interface_id", report->interface_id},
               {"parameter_schema_id", report->parameter_schema_id}});
    return kExitOk;
  }
  std::cout << "wrote " << report->files.size() << " files to " << a.dir << ": a "
            << a.family.family << " " << a.family.quantization << " package (" << a.family.shape
            << " shape) with RANDOM weights, not a trained model (" << report->parameter_count
            << " parameters, " << HumanBytes(report->parameter_bytes) << " on the device, "
            << HumanBytes(report->shard_bytes) << " of shards"
            << (a.family.manifest ? "" : "; legacy: no manifest") << ")\n";
  PrintField("interface_id", report->interface_id);
  PrintField("parameter_schema_id", report->parameter_schema_id);
  return kExitOk;
}

int Run(GenArgs a) {
  if (!a.family.family.empty()) return RunFamily(std::move(a));
  if (a.pair == "tokens") {
    a.options.pairs = ReferencePairs::kTokens;
  } else if (a.pair == "embeds") {
    a.options.pairs = ReferencePairs::kEmbeds;
  } else {
    a.options.pairs = ReferencePairs::kBoth;
  }
  a.options.manifest = !a.no_manifest;
  auto report = WriteReferenceModel(a.dir, a.options);
  if (!report) return ReportFailure(report.errors(), a.json);
  if (a.json) {
    PrintJson({{"ok", true},
               {"output", {{"path", a.dir}, {"files", report->files}}},
               {"pair", a.pair},
               {"parameter_count", report->parameter_count},
               {"parameter_bytes", report->parameter_bytes},
               {"shard_bytes", report->shard_bytes},
               {"interface_id", report->interface_id},
               {"parameter_schema_id", report->parameter_schema_id}});
    return kExitOk;
  }
  std::cout << "wrote " << report->files.size() << " files to " << a.dir << " ("
            << report->parameter_count << " parameters, " << HumanBytes(report->parameter_bytes)
            << " as float32, " << HumanBytes(report->shard_bytes) << " of bf16 shards; "
            << a.pair << " pair; random weights)\n";
  PrintField("interface_id", report->interface_id);
  PrintField("parameter_schema_id", report->parameter_schema_id);
  return kExitOk;
}

const Registration kReferenceModel(620, "reference-model",
                                   "Write the small reference transformer (or, with --family, a model of a CPU program "
                                   "family) as a converted package with random weights",
                                   [](CLI::App* cmd) {
  auto a = std::make_shared<GenArgs>();
  ReferenceModelOptions& o = a->options;
  cmd->add_option("DIR", a->dir, "Output folder (created when missing)")->required();
  cmd->add_option("--seed", o.seed, "Weight seed");
  cmd->add_option("--pair", a->pair, "Exported pairs")
      ->check(CLI::IsMember({"tokens", "embeds", "both"}));
  cmd->add_flag("--audio", o.audio, "Add an audio input and adapter (with --family gemma4: its audio tower)");
  cmd->add_flag("--image", o.image, "Add an image input and adapter");
  cmd->add_option("--image-dtype", o.image_dtype, "Pixels the image adapter takes")
      ->check(CLI::IsMember({"uint8", "uint32"}));
  cmd->add_option("--context-window", o.context_window_size, "context_window_size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->each([a](const std::string& v) { a->family.context_window_size = std::stoll(v); });
  cmd->add_option("--prefill-chunk", o.prefill_chunk_size, "prefill_chunk_size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->each([a](const std::string& v) { a->family.prefill_chunk_size = std::stoll(v); });
  a->family.family.clear();
  auto* family = cmd->add_option("--family", a->family.family,
                                 "Write a random-weight package of a CPU program family instead")
                     ->check(CLI::IsMember(CpuModelTypes()));
  cmd->add_option("--quantization", a->family.quantization, "With --family: the quantization")
      ->check(CLI::IsMember(CpuQuantizations()))
      ->needs(family)
      ->capture_default_str();
  cmd->add_option("--shape", a->family.shape, "With --family: tiny, qwen2.5-0.5b, llava-1.5-7b or e2b")
      ->check(CLI::IsMember(FamilyShapes()))
      ->needs(family)
      ->capture_default_str();
  cmd->add_option("--sliding-window", a->family.sliding_window_size,
                  "With --family: sliding_window_size (-1: none)")
      ->needs(family);
  cmd->add_option("--attention-sink", a->family.attention_sink_size,
                  "With --family: attention_sink_size (-1: none)")
      ->needs(family);
  cmd->add_flag("--no-manifest", a->no_manifest, "Write a legacy package without a manifest");
  cmd->add_flag("--force", o.force, "Replace existing files");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
