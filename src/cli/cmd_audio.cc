// `mlc-manifest audio`: turns a recording into the mono float32 PCM an `audio_decode` processor
// declares (SPEC 6.1) and writes it as .npy (<f4, shape (n,)) or raw little-endian .f32. The
// processor comes from a model package (--model) or from --rate/--min/--max.
#include <bit>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "mlc_manifest/audio.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/npy.h"

namespace mlc::cli {
namespace {

struct AudioArgs {
  std::string input;
  std::string output;
  std::string model;
  std::string task = "chat.completions";
  std::string input_name;
  int64_t rate = 0;
  int64_t min_samples = 1;
  int64_t max_samples = 480000;
  std::string quality = "high";
  bool force = false;
  bool json = false;
  // Set once the options exist, to tell given flags from defaults.
  CLI::Option* task_opt = nullptr;
  CLI::Option* input_opt = nullptr;
  CLI::Option* rate_opt = nullptr;
  CLI::Option* min_opt = nullptr;
  CLI::Option* max_opt = nullptr;
};

enum class OutputKind { kNpy, kF32 };

Error Usage(std::string message) { return UsageError(std::move(message)); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<OutputKind> OutputKindOf(const std::string& path) {
  if (EndsWith(path, ".npy")) return OutputKind::kNpy;
  if (EndsWith(path, ".f32")) return OutputKind::kF32;
  return Usage("output " + path + " must end in .npy (NumPy <f4) or .f32 (raw float32 LE)");
}

Result<AudioDecode> ProcessorFromModel(const AudioArgs& a) {
  auto pkg = ReadModelPackage(JoinPath(a.model, kManifestFileName));
  MLC_RETURN_IF_ERROR(pkg);
  auto found = FindMediaInput(*pkg, a.task, a.input_name, /*want_audio=*/true);
  MLC_RETURN_IF_ERROR(found);
  return std::get<AudioDecode>(found->input->processor);
}

Result<AudioDecode> ProcessorFromFlags(const AudioArgs& a) {
  AudioDecode p;
  p.sample_rate_hz = a.rate;
  p.min_samples = a.min_samples;
  p.max_samples = a.max_samples;
  if (a.rate < 1) return Usage("--rate must be >= 1");
  if (a.min_samples < 1) return Usage("--min must be >= 1");
  if (a.max_samples < a.min_samples) return Usage("--max must be >= --min");
  return p;
}

Result<AudioDecode> ResolveProcessor(const AudioArgs& a) {
  const bool by_flags = a.rate_opt->count() + a.min_opt->count() + a.max_opt->count() > 0;
  const bool model_only = a.task_opt->count() + a.input_opt->count() > 0;
  if (!a.model.empty() && by_flags) return Usage("give either --model or --rate/--min/--max, not both");
  if (a.model.empty() && !by_flags) return Usage("give --model DIR, or --rate HZ");
  if (a.model.empty() && model_only) return Usage("--task and --input need --model");
  if (a.model.empty() && a.rate_opt->count() == 0) return Usage("--min/--max need --rate");
  return a.model.empty() ? ProcessorFromFlags(a) : ProcessorFromModel(a);
}

Result<ResampleQuality> ParseQuality(const std::string& q) {
  if (q == "high") return ResampleQuality::kHigh;
  if (q == "very-high") return ResampleQuality::kVeryHigh;
  return Usage("--quality must be high or very-high");
}

// The decoded samples go straight into the output file as they are made.
class FileSink final : public AudioSink {
 public:
  explicit FileSink(ArrayFileWriter& file) : file_(file) {}
  Status Write(std::span<const float> samples) override {
    // The samples in memory are the file's little-endian float32 bytes: written without a copy.
    static_assert(std::endian::native == std::endian::little, "float32 output assumes little-endian");
    return file_.Append({reinterpret_cast<const char*>(samples.data()), samples.size_bytes()});
  }

 private:
  ArrayFileWriter& file_;
};

OrderedJson ResultJson(const AudioArgs& a, const StreamedAudio& d, const AudioDecode& p,
                       ResampleQuality quality) {
  const AudioSourceInfo& s = d.source;
  return {{"ok", true},
          {"input", a.input},
          {"format", s.container},
          {"sample_format", s.sample_format},
          {"sample_rate_hz", s.sample_rate_hz},
          {"channels", s.channels},
          {"frames", s.frames},
          {"duration_s", std::round(s.duration_s * 1e6) / 1e6},  // to the microsecond
          {"processor_from", a.model.empty() ? "options" : "model"},
          {"quality", ResampleQualityName(quality)},
          {"output", {{"path", a.output},
                      {"dtype", "float32"},
                      {"sample_rate_hz", d.sample_rate_hz},
                      {"samples", d.samples},
                      {"min_samples", p.min_samples},
                      {"max_samples", p.max_samples}}}};
}

void PrintHuman(const AudioArgs& a, const StreamedAudio& d, ResampleQuality quality) {
  const AudioSourceInfo& s = d.source;
  std::ostringstream o;
  o << "input:  " << a.input << ": " << s.container << " " << s.sample_format << ", "
    << s.sample_rate_hz << " Hz, " << s.channels << (s.channels == 1 ? " channel" : " channels")
    << ", " << s.frames << " frames (" << std::fixed << std::setprecision(3) << s.duration_s
    << " s)\n";
  o << "output: " << a.output << ": mono float32, " << d.sample_rate_hz << " Hz, "
    << d.samples << " samples";
  if (s.sample_rate_hz != d.sample_rate_hz) o << " (resampled, " << ResampleQualityName(quality) << " quality)";
  o << "\n";
  std::cout << o.str();
}

int Run(const AudioArgs& a) {
  auto processor = ResolveProcessor(a);
  if (!processor) return ReportFailure(processor.errors(), a.json);
  auto quality = ParseQuality(a.quality);
  if (!quality) return ReportFailure(quality.errors(), a.json);
  auto kind = OutputKindOf(a.output);
  if (!kind) return ReportFailure(kind.errors(), a.json);
  AudioOptions options;
  options.quality = *quality;
  // Refuses an existing output without --force, or one that is not a regular file, before decoding.
  auto file = ArrayFileWriter::Create(a.output, "<f4", processor->max_samples, *kind == OutputKind::kNpy, a.force);
  if (!file) return ReportFailure(file.errors(), a.json);
  FileSink sink(**file);
  auto decoded = StreamAudioFile(a.input, *processor, sink, options);
  if (!decoded) return ReportFailure(decoded.errors(), a.json);  // the unfinished file is removed
  Status wrote = (*file)->Commit();
  if (!wrote) return ReportFailure(wrote.errors(), a.json);
  if (a.json) {
    PrintJson(ResultJson(a, *decoded, *processor, *quality));
  } else {
    PrintHuman(a, *decoded, *quality);
  }
  return kExitOk;
}

const Registration kAudio(50, "audio",
                          "Decode, downmix and resample a recording into the mono float32 PCM an "
                          "audio_decode processor declares (.npy or .f32)",
                          [](CLI::App* cmd) {
  auto a = std::make_shared<AudioArgs>();
  cmd->add_option("INPUT", a->input, "Recording (WAV/RF64, FLAC, Ogg, MP3, ... via libsndfile)")
      ->required();
  cmd->add_option("-o,--output", a->output, "Output file: .npy (<f4, shape (n,)) or .f32 (raw)")
      ->required();
  cmd->add_option("--model", a->model, "Model folder holding mlc-model-manifest.json");
  a->task_opt = cmd->add_option("--task", a->task, "Task of the package")->capture_default_str();
  a->input_opt = cmd->add_option("--input", a->input_name,
                                 "Input of the task (default: its audio input)");
  a->rate_opt = cmd->add_option("--rate", a->rate, "Output sample rate in Hz (without --model)")
                    ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));  // no silent overflow
  a->min_opt = cmd->add_option("--min", a->min_samples, "Fewest output samples (with --rate)")
                   ->capture_default_str();
  a->max_opt = cmd->add_option("--max", a->max_samples, "Most output samples (with --rate)")
                   ->capture_default_str();
  cmd->add_option("--quality", a->quality, "Resampling quality: high or very-high")
      ->capture_default_str();
  cmd->add_flag("--force", a->force, "Overwrite an existing output file");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
