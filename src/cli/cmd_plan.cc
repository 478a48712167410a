// `mlc-manifest plan DIR --program FILE --request FILE`: the prefill chunks a request becomes
// (token ids, modality ids, adapter rows) under the package's chat config, without a runtime;
// a recording's windows (where a long one is cut, one audio input each).
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/session.h"

namespace mlc::cli {
namespace {

struct PlanArgs {
  std::string dir;
  std::string program;
  std::string request;
  std::string task = "chat.completions";
  int64_t kv_length = 0;
  bool json = false;
};

// The contract to plan with: the bound manifest, or the legacy text-only contract.
Result<BoundContract> ContractFor(const PlanArgs& a, std::string* note) {
  bool legacy = false;
  Result<BoundContract> bound = WithProgramHint(BindPackageFolder(a.dir, a.program, a.task, &legacy), a.program);
  *note = legacy ? std::string("no ") + kManifestFileName + ": the legacy embed pair, text only"
                 : "task \"" + a.task + "\"";
  return bound;
}

void PrintHuman(const PrefillPlan& plan, size_t turn, size_t turns) {
  if (turns > 1) std::cout << "turn " << turn << ": ";
  std::cout << "prompt_length " << plan.prompt_length << " (KV " << plan.kv_length << " -> "
            << plan.kv_length + plan.prompt_length << "), " << plan.chunks.size() << " chunks\n";
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const PrefillChunk& c = plan.chunks[i];
    std::cout << "  chunk " << i << ": " << c.size();
    if (c.rows) {
      std::cout << " adapter rows " << c.rows->start << ".." << c.rows->start + c.rows->count - 1
                << " of input \"" << c.rows->input << "\" (placeholder " << c.token_ids.front()
                << ")\n";
      continue;
    }
    std::cout << " text positions [";
    for (size_t k = 0; k < c.token_ids.size(); ++k) {
      if (k == 16) {
        std::cout << " ...";
        break;
      }
      std::cout << (k ? " " : "") << c.token_ids[k];
    }
    std::cout << "]\n";
  }
}

// Each audio file's windows, in the request's order: {path, windows: [{start_s, end_s, samples}]}.
Result<OrderedJson> AudioWindowsJson(const BoundContract& bound, const PlanLimits& limits, int64_t kv_length,
                                     const Request& request) {
  OrderedJson out = OrderedJson::array();
  if (!bound.audio) return out;
  for (const RequestTurn& turn : request.turns) {
    auto pieces = PiecesForTurn(bound, turn);
    MLC_RETURN_IF_ERROR(pieces);
    for (const RequestSegment& seg : turn) {
      if (seg.kind != SegmentKind::kAudio) continue;
      auto audio = DecodeWindowedAudio(*bound.audio, seg, MaxAudioWindows(limits, kv_length, *pieces));
      MLC_RETURN_IF_ERROR(audio);
      OrderedJson windows = OrderedJson::array();
      int64_t start = 0;
      const auto seconds = [&](int64_t n) { return static_cast<double>(n) / static_cast<double>(audio->sample_rate_hz); };
      for (int64_t end : audio->ends) {
        windows.push_back({{"start_s", seconds(start)}, {"end_s", seconds(end)}, {"samples", end - start}});
        start = end;
      }
      out.push_back({{"path", seg.path}, {"windows", std::move(windows)}});
    }
  }
  return out;
}

void PrintWindows(const OrderedJson& inputs) {
  for (const auto& input : inputs) {
    std::cout << "audio " << input["path"].get<std::string>() << ": " << input["windows"].size() << " window"
              << (input["windows"].size() == 1 ? "" : "s") << "\n";
    for (const auto& w : input["windows"]) {
      std::cout << "  " << w["start_s"].get<double>() << " s .. " << w["end_s"].get<double>() << " s ("
                << w["samples"].get<int64_t>() << " samples)\n";
    }
  }
}

int Run(const PlanArgs& a) {
  if (a.kv_length < 0) return ReportFailure({UsageError("--kv-length: expected >= 0")}, a.json);
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  std::string note;
  auto contract = ContractFor(a, &note);
  if (!contract) return ReportFailure(contract.errors(), a.json);
  auto config = ReadChatConfig(JoinPath(a.dir, kChatConfigFileName));
  if (!config) return ReportFailure(config.errors(), a.json);
  auto limits = PlanLimitsFromChatConfig(*config);
  if (!limits) return ReportFailure(limits.errors(), a.json, JoinPath(a.dir, kChatConfigFileName));
  auto request = ReadRequestFile(a.request);
  if (!request) return ReportFailure(request.errors(), a.json, DocumentName(a.request));
  auto windows = AudioWindowsJson(*contract, *limits, a.kv_length, *request);
  if (!windows) return ReportFailure(windows.errors(), a.json, DocumentName(a.request));
  auto plans = PlanRequest(*contract, *limits, a.kv_length, *request);
  // A recording's rows are known once its adapter runs: its windows are the plan there is.
  const bool windows_only = !plans && !windows->empty() && plans.errors().front().message.find("audio_rows") != std::string::npos;
  if (!plans && !windows_only) return ReportFailure(plans.errors(), a.json, DocumentName(a.request));
  if (!a.json) {
    std::cout << note << "; prefill_chunk_size " << limits->prefill_chunk_size
              << ", context_window_size " << limits->context_window_size << "\n";
    PrintWindows(*windows);
    if (windows_only) {
      std::cout << "chunks: each window's rows are known once its adapter runs (plan one with {\"audio_rows\": N})\n";
      return kExitOk;
    }
    for (size_t i = 0; i < plans->size(); ++i) PrintHuman((*plans)[i], i, plans->size());
    return kExitOk;
  }
  OrderedJson out = {{"ok", true}};
  if (!windows->empty()) out["audio_windows"] = *windows;
  if (windows_only) {
    out["chunks"] = nullptr;
    PrintJson(out);
    return kExitOk;
  }
  OrderedJson report = RequestPlanJson(*plans, *limits, a.kv_length);
  for (auto it = report.begin(); it != report.end(); ++it) out[it.key()] = it.value();
  PrintJson(out);
  return kExitOk;
}

const Registration kPlan(600, "plan",
                         "Plan the prefill chunks of a request (no runtime)",
                         [](CLI::App* cmd) {
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("DIR", a->dir, "The converted-model folder")->required();
  cmd->add_option("--program", a->program, "The compiled-program document (or _metadata)");
  cmd->add_option("--request", a->request,
                  "Request JSON: [{\"tokens\": [..]}, {\"audio_rows\": N}, {\"audio\": F}, {\"image\": F}] or "
                  "{\"turns\": [[...], ...]} (\"-\": stdin)")
      ->required();
  cmd->add_option("--task", a->task, "The task to plan for");
  cmd->add_option("--kv-length", a->kv_length, "Positions the KV cache already holds (>= 0)");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
