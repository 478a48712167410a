// `mlc-manifest check DIR`: every verdict about a package before it is published.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/builtin.h"
#include "cli/command.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"

namespace mlc::cli {
namespace {

// Throughput and time left of the hashing so far.
struct Rate {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  // MB/s so far and seconds left at that rate (negative when not yet known).
  std::pair<double, double> At(uint64_t done, uint64_t total) const {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double mbs = s > 0 ? static_cast<double>(done) / 1e6 / s : 0;
    const double left = mbs > 0 ? static_cast<double>(total - std::min(done, total)) / 1e6 / mbs : -1;
    return {mbs, left};
  }
};

std::string SecondsText(double s) {
  if (s < 0) return "?";
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  } else {
    std::snprintf(buf, sizeof buf, "%d:%02d", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  }
  return buf;
}

// On a terminal: a one-line progress bar on stderr with MB/s and the time left, redrawn at most
// once per percent.
ProgressFn TerminalProgress() {
  auto last = std::make_shared<int>(-1);
  auto rate = std::make_shared<Rate>();
  return [last, rate](uint64_t done, uint64_t total) {
    int pct = total ? static_cast<int>(done * 100 / total) : 100;
    if (pct == *last) return;
    *last = pct;
    int bars = pct * 30 / 100;
    auto [mbs, left] = rate->At(done, total);
    std::fprintf(stderr, "\rverifying shards [%s%s] %3d%% %.1f/%.1f MiB  %.0f MB/s  %s left  ",
                 std::string(bars, '#').c_str(), std::string(30 - bars, ' ').c_str(), pct,
                 done / 1048576.0, total / 1048576.0, mbs, SecondsText(left).c_str());
    if (done >= total) std::fprintf(stderr, "\n");
  };
}

// Not on a terminal (a log): one line on stderr per shard as it finishes.
ShardDoneFn ShardLines() {
  struct State {
    Rate rate;
    uint64_t bytes = 0, total = 0;
  };
  auto state = std::make_shared<State>();
  return [state](const ShardResult& r, size_t finished, size_t count) {
    state->bytes += r.actual_size;
    // The total is known only from the shards seen: estimate it from their mean size.
    const uint64_t total = state->bytes / finished * count;
    auto [mbs, left] = state->rate.At(state->bytes, total);
    std::fprintf(stderr, "verified %zu/%zu %s: %s (%s; %.0f MB/s, %s left)\n", finished, count,
                 r.data_path.c_str(), ShardStatusName(r.status), HumanBytes(r.actual_size).c_str(), mbs,
                 SecondsText(left).c_str());
  };
}

// The errors of every failed verdict, in the order of the checks (the JSON report lists them
// under "errors" too, so a failure reads the same as in every other command); a verdict without
// errors of its own (shards, device fit) is one error with its message.
Errors FailedErrors(const CheckReport& report) {
  Errors out;
  for (const CheckItem& i : report.items) {
    if (i.verdict != Verdict::kFail) continue;
    if (!i.details.contains("errors")) {  // a verdict about the package as a whole (shards, device)
      AddError(out, Error{ErrorCode::kInvalid, "", i.name + ": " + i.message});
      continue;
    }
    for (const auto& e : i.details["errors"]) {
      Error err{ErrorCode::kInvalid, e["path"].get<std::string>(), e["message"].get<std::string>(),
                e["document"].get<std::string>()};
      const std::string code = e["code"].get<std::string>();
      for (ErrorCode c : {ErrorCode::kInvalid, ErrorCode::kUsage, ErrorCode::kIo, ErrorCode::kUnsupported,
                          ErrorCode::kLimit, ErrorCode::kExists}) {
        if (code == ErrorCodeName(c)) err.code = c;
      }
      AddError(out, std::move(err));
    }
  }
  return out;
}

// A failed check exits 1 (problems found), or 3 when a file named on the command line
// (--program, --params) cannot be read: the exit code every command gives that failure.
int CheckExitCode(const CheckReport& report, const Errors& errors, const std::vector<std::string>& named) {
  if (report.ok()) return kExitOk;
  for (const Error& e : errors) {
    if (e.code == ErrorCode::kIo && std::find(named.begin(), named.end(), e.document) != named.end()) {
      return kExitIo;
    }
  }
  return kExitProblems;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

const Registration kCheck(50, "check",
                          "Check a whole package: documents, ids, binding, resources, shards, device fit",
                          [](CLI::App* cmd) {
  struct Args {
    std::string dir, program, params, device, features, task = "chat.completions";
    int64_t max_binding = -1, memory = -1;
    int threads = 0;
    bool verify = false, json = false, list_devices = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("DIR", a->dir, "Converted-model folder");
  cmd->add_option("--program", a->program, "Compiled-program document or _metadata JSON");
  cmd->add_option("--params", a->params, "Parameter list with symbolic dimensions");
  cmd->add_option("--task", a->task, "Task to bind")->capture_default_str();
  cmd->add_flag("--verify-shards", a->verify, "Hash every shard and compare md5sum (absent shards fail)");
  cmd->add_option("--threads", a->threads, "Hashing threads (default: one per core)");
  auto* dev = cmd->add_option("--device", a->device, "A shipped device profile (see --list-devices)");
  auto* mb = cmd->add_option("--max-binding", a->max_binding,
                             "Device maxStorageBufferBindingSize (bytes, or with a unit: 128MiB)")
                 ->transform(ByteSize());
  auto* ft = cmd->add_option("--features", a->features, "Device features, comma-separated");
  cmd->add_option("--memory", a->memory,
                  "Device memory (bytes, or with a unit: 8GiB, 1.5GB); parameters + KV cache must fit")
      ->transform(ByteSize());
  dev->excludes(mb)->excludes(ft);
  cmd->add_flag("--list-devices", a->list_devices, "List the shipped device profiles and exit");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() {
    if (a->list_devices) {
      OrderedJson list = OrderedJson::array();
      for (const DeviceProfile& d : DeviceProfiles()) {
        if (!a->json) std::cout << d.limits.name << "  " << d.description << "\n";
        list.push_back({{"name", d.limits.name}, {"max_storage_buffer_binding_size", d.limits.max_storage_buffer_binding_size},
                        {"features", d.limits.features}});
        if (!a->json) std::cout << "  max binding " << HumanBytes(d.limits.max_storage_buffer_binding_size) << "\n";
      }
      if (a->json) PrintJson({{"ok", true}, {"devices", list}});
      return kExitOk;
    }
    if (a->dir.empty()) return ReportFailure({UsageError("DIR is required")}, a->json);
    if (Status s = CheckFolder(a->dir); !s) return ReportFailure(s.errors(), a->json);
    CheckOptions o;
    o.task = a->task;
    o.verify_shards = a->verify;
    o.shard_options.threads = a->threads;
    if (!a->program.empty()) o.program_path = a->program;
    if (!a->params.empty()) o.params_path = a->params;
    if (!a->device.empty()) {
      const DeviceProfile* d = FindDeviceProfile(a->device);
      if (!d) {
        return ReportFailure({UsageError("--device: unknown profile \"" + a->device + "\" (see --list-devices)")},
                             a->json);
      }
      o.device = *d;
    } else if (a->max_binding >= 0 || !a->features.empty() || a->memory >= 0) {
      DeviceProfile d;
      d.limits.name = "the given device";
      d.limits.features = SplitComma(a->features);
      d.limits.max_storage_buffer_binding_size = a->max_binding >= 0 ? a->max_binding : INT64_MAX;
      o.device = d;
    }
    if (a->memory >= 0 && o.device) o.device->memory_bytes = a->memory;
    if (!a->json && ::isatty(2)) {
      o.shard_options.progress = TerminalProgress();
    } else if (!a->json) {
      o.shard_options.on_shard = ShardLines();
    }
    o.builtin_program = CpuBuiltinPrograms();
    o.runtime_config = CheckPackageRuntimeConfig;
    CheckReport report = CheckPackage(a->dir, o);
    const Errors errors = FailedErrors(report);
    if (a->json) {
      OrderedJson out = report.ToJson();
      if (!report.ok()) out["errors"] = ErrorsJson(errors);
      PrintJson(out);
    } else {
      for (const CheckItem& i : report.items) {
        std::printf("%-4s  %-20s %s\n", VerdictName(i.verdict), i.name.c_str(), i.message.c_str());
        if (i.verdict == Verdict::kFail && i.details.contains("errors")) {
          for (const auto& e : i.details["errors"]) {
            Error shown{ErrorCode::kInvalid, e["path"].get<std::string>(), e["message"].get<std::string>(),
                        e["document"].get<std::string>()};
            std::printf("      %s\n", EscapeControl(shown.ToString()).c_str());
          }
        }
        if (i.details.contains("explanation")) {
          for (const auto& line : i.details["explanation"]) {
            std::printf("      %s\n", EscapeControl(line.get<std::string>()).c_str());
          }
        }
        if (i.verdict == Verdict::kFail && i.details.contains("shards")) {
          for (const auto& s : i.details["shards"]) {
            if (s["status"] != "ok" && s["status"] != "not verified") {
              std::printf("      %s\n", s["message"].get<std::string>().c_str());
            }
          }
        }
      }
      std::printf("%s\n", report.ok() ? "package ok" : "package has problems");
    }
    return CheckExitCode(report, errors, {a->program, a->params});
  };
});

}  // namespace
}  // namespace mlc::cli
