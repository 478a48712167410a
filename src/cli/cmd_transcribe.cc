// `mlc-manifest transcribe DIR FILE [-o OUT] [--format txt|srt|vtt|json]`: a recording of any
// length transcribed (or translated into English) by a package with an audio input, window by
// window (cut at its pauses as it streams in, so that memory does not grow with its length;
// mlc_manifest/transcript.h), with a progress line on a terminal's stderr: windows done, seconds
// of audio, real-time factor.
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <cstdio>
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/audio.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/transcript.h"

namespace mlc::cli {
namespace {

struct TranscribeArgs {
  std::string dir;
  std::string file;
  std::string output;
  std::string format = "txt";
  std::string language;
  std::string prompt;
  bool translate = false;
  int64_t max_tokens = 256;
  int64_t max_seconds = 3600;
  bool force = false;
  bool json = false;  // failures as one JSON object
};

// What the windows' turns took: tokens in and out, and the session's phase timings.
struct TranscriptCost {
  int64_t input_tokens = 0, output_tokens = 0;
  PhaseTimings timings;
};

std::string Render(const std::string& format, TranscriptionTask task, const std::string& language,
                   const std::vector<TranscriptSegment>& segments, const TranscriptCost& cost) {
  if (format == "srt") return TranscriptSrt(segments);
  if (format == "vtt") return TranscriptVtt(segments);
  if (format == "json") {
    OrderedJson out = TranscriptJson(task, language, segments);
    out["usage"] = TranscriptUsage(cost.input_tokens, cost.output_tokens);
    out["timings"] = PhaseTimingsJson(cost.timings);
    return out.dump() + "\n";
  }
  return TranscriptText(segments) + "\n";
}

// "window 3, 90.0 of 600.0 s, RTF 0.42" (processing time over audio time), on one line.
void ShowProgress(size_t done, double audio_s, double total_s, double wall_s) {
  char line[160];
  std::snprintf(line, sizeof(line), "\rtranscribe: window %zu, %.1f of %.1f s, RTF %.2f   ", done, audio_s, total_s,
                audio_s > 0 ? wall_s / audio_s : 0.0);
  std::cerr << line << std::flush;
}

int Run(const TranscribeArgs& a) {
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  const TranscriptionTask task = a.translate ? TranscriptionTask::kTranslate : TranscriptionTask::kTranscribe;
  OpenOptions open;
  open.chat = true;
  auto package = OpenPackage(a.dir, open);
  if (!package) return ReportFailure(package.errors(), a.json);
  const auto& audio_input = package->model.bound.contract.audio;
  if (!audio_input) return ReportFailure({Error{ErrorCode::kUnsupported, a.dir, "this model has no audio input"}}, a.json);
  // Refuse an output that exists (without --force) before any work.
  std::error_code ec;
  if (!a.output.empty() && a.output != "-" && !a.force &&
      std::filesystem::symlink_status(a.output, ec).type() != std::filesystem::file_type::not_found) {
    return ReportFailure({Error{ErrorCode::kExists, a.output, "the output exists"}}, a.json);
  }
  // The recording streams in and each window is transcribed once its cut is known: memory holds
  // about one window of samples, whatever the recording's length.
  AudioDecode processor = audio_input->processor;
  const int64_t window_samples = processor.max_samples;
  processor.max_samples = a.max_seconds * processor.sample_rate_hz;
  const auto rate = static_cast<double>(processor.sample_rate_hz);
  GenerationOptions options;
  options.max_tokens = a.max_tokens;
  options.stop_token_ids = package->stop_ids;
  options.stop_strings = package->stop_strings;
  SessionOptions session_options;
  session_options.tokenizer = package->tokenizer.get();
  const bool progress = !a.json && isatty(STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<TranscriptSegment> segments;
  TranscriptCost cost;
  Session session = package->model.NewSession(session_options);  // each window apart
  AudioDecode windows = audio_input->processor;
  windows.max_samples = window_samples;
  AudioWindower windower(windows, [&](std::span<const float> window, int64_t at) -> Status {
    const auto first = static_cast<double>(at) / rate;
    const double last = static_cast<double>(at + static_cast<int64_t>(window.size())) / rate;
    auto input = TranscriptionTurn(*package, task, a.language, TranscriptionContext(a.prompt, segments), window);
    MLC_RETURN_IF_ERROR(input);
    auto result = session.GenerateApart(*input, options);
    MLC_RETURN_IF_ERROR(result);
    segments.push_back({first, last, WindowText(result->text)});
    cost.input_tokens += result->plan.prompt_length;
    cost.output_tokens += static_cast<int64_t>(result->tokens.size());
    if (progress) ShowProgress(segments.size(), last, static_cast<double>(windower.expected()) / rate, wall());
    return Status::Ok();
  });
  if (progress) ShowProgress(0, 0.0, 0.0, 0.0);
  auto decoded = StreamAudioFile(a.file, processor, windower);
  if (!decoded) return ReportFailure(decoded.errors(), a.json, a.file);
  if (Status s = windower.Finish(); !s) return ReportFailure(s.errors(), a.json, a.file);
  if (progress) std::cerr << "\n";
  cost.timings = session.timings();
  const std::string text = Render(a.format, task, a.language, segments, cost);
  if (a.output.empty()) {
    std::cout << text;
    return kExitOk;
  }
  if (Status s = WriteFileAtomic(a.output, text, a.force); !s) return ReportFailure(s.errors(), a.json);
  return kExitOk;
}

const Registration kTranscribe(615, "transcribe",
                               "Transcribe (or translate) a recording of any length with a package's audio input",
                               [](CLI::App* cmd) {
  auto a = std::make_shared<TranscribeArgs>();
  cmd->add_option("DIR", a->dir, "The converted-model folder")->required();
  cmd->add_option("FILE", a->file, "The recording (WAV, FLAC, Ogg, MP3)")->required();
  cmd->add_option("-o,--output", a->output, "Write the transcript here (atomically) instead of stdout");
  cmd->add_option("--format", a->format, "txt, srt, vtt or json (segments with their times, usage, timings)")
      ->check(CLI::IsMember({"txt", "srt", "vtt", "json"}))
      ->capture_default_str();
  cmd->add_option("--language", a->language, "The speech's language (ISO-639-1, e.g. en)");
  cmd->add_option("--prompt", a->prompt, "Text the transcript continues (names, spelling)");
  cmd->add_flag("--translate", a->translate, "Translate the speech into English");
  cmd->add_option("--max-tokens", a->max_tokens, "Most tokens a window's text takes")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-seconds", a->max_seconds, "Longest recording taken")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--force", a->force, "Overwrite an existing output file");
  cmd->add_flag("--json", a->json, "Failures as one JSON object");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
