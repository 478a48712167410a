// `mlc-manifest inspect DIR`: what a package is, for people or (--json) machines.
#include <cstdio>
#include <iostream>

#include "cli/builtin.h"
#include "cli/command.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/fs.h"

namespace mlc::cli {
namespace {

std::string Text(const OrderedJson& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// A byte count of the report for people ("1.50 GiB"); anything else as Text.
std::string BytesText(const OrderedJson& v) {
  return v.is_number_integer() && v.get<int64_t>() >= 0 ? HumanBytes(v.get<uint64_t>()) : Text(v);
}

void PrintHuman(const OrderedJson& j) {
  std::cout << "package " << Text(j["package"]) << "\n";
  if (j["manifest"].is_null()) {
    std::cout << "  manifest: none" << (j.contains("loads_as") ? " (" + Text(j["loads_as"]) + ")" : "") << "\n";
    if (j.contains("legacy")) {
      for (const auto& line : j["legacy"]["advice"]) std::cout << "    " << Text(line) << "\n";
    }
  } else {
    PrintField("interface_id", j["interface_id"]);
    PrintField("parameter_schema_id", j["parameter_schema_id"]);
    for (auto t = j["tasks"].begin(); t != j["tasks"].end(); ++t) {
      std::cout << "  task " << t.key() << " (executor " << Text(t.value()["executor"]) << ", output "
                << Text(t.value()["output"]) << ")\n";
      for (auto in = t.value()["inputs"].begin(); in != t.value()["inputs"].end(); ++in) {
        std::cout << "    input " << in.key() << ": " << in.value().dump() << "\n";
      }
    }
  }
  if (j.contains("config")) {
    const auto& c = j["config"];
    std::cout << "  model " << Text(c["model_type"]) << " " << Text(c["quantization"])
              << ", context " << Text(c["context_window_size"]) << ", prefill chunk "
              << Text(c["prefill_chunk_size"]) << ", sliding window " << Text(c["sliding_window_size"]) << "\n";
  }
  if (j.contains("parameters")) {
    const auto& p = j["parameters"];
    std::cout << "  parameters: " << Text(p["count"]) << "\n";
    for (auto d = p["by_dtype"].begin(); d != p["by_dtype"].end(); ++d) {
      std::cout << "    " << d.key() << ": " << Text(d.value()["count"]) << " tensors, "
                << BytesText(d.value()["bytes"]) << "\n";
    }
    std::cout << "  largest:\n";
    for (const auto& l : p["largest"]) std::cout << "    " << Text(l["name"]) << "  " << BytesText(l["bytes"]) << "\n";
  }
  if (j.contains("shards")) {
    std::cout << "  shards: " << Text(j["shards"]["count"]) << " in " << Text(j["shards"]["file"]) << ", "
              << BytesText(j["shards"]["bytes"]) << "\n";
  }
  if (j.contains("resources")) {
    std::cout << "  resources: max_storage_buffer_binding_size " << BytesText(j["resources"]["max_storage_buffer_binding_size"])
              << ", estimated_device_memory_bytes " << BytesText(j["resources"]["estimated_device_memory_bytes"]) << "\n";
  }
  if (j.contains("kv_cache_bytes")) std::cout << "  KV cache estimate: " << BytesText(j["kv_cache_bytes"]) << "\n";
  if (j.contains("errors")) {
    for (const auto& e : j["errors"]) {
      std::string where = Text(e["document"]);
      if (!Text(e["path"]).empty()) where += (where.empty() ? "" : ": ") + Text(e["path"]);
      std::cout << "  problem: " << (where.empty() ? "" : where + ": ") << Text(e["message"]) << "\n";
    }
  }
}

const Registration kInspect(60, "inspect",
                            "Summarize a package: tasks, inputs, ids, parameters, shards, resources",
                            [](CLI::App* cmd) {
  auto dir = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("DIR", *dir, "Converted-model folder")->required();
  cmd->add_flag("--json", *json, "One JSON object on stdout");
  return [dir, json]() {
    if (Status s = CheckFolder(*dir); !s) return ReportFailure(s.errors(), *json);
    Result<OrderedJson> r = InspectPackage(*dir, CpuBuiltinPrograms());
    if (!r) return ReportFailure(r.errors(), *json);
    if (*json) {
      PrintJson(*r);
    } else {
      PrintHuman(*r);
    }
    return (*r)["ok"] == true ? kExitOk : kExitProblems;
  };
});

}  // namespace
}  // namespace mlc::cli
