// Transcription of long recordings (issue 43): the real-time factor and peak memory of
// `mlc-manifest transcribe` as a user runs it, on a random-weight Gemma 4 E2B-shaped q4f16_1
// package with its audio tower (the real shapes; written once under --work by a child of this
// bench, the same package prefix_cache_bench --e2b uses). Each window is one turn: the audio
// tower over the window, a prefill of its rows and the instruction, and a decode of up to
// --tokens tokens (random weights rarely stop early; the mean decoded is printed).
//  1. Writes speech-like recordings (16 kHz mono 16-bit WAV: phrases of 1.5-4.5 s of voiced
//     harmonics with pauses of 0.25-0.9 s between them, seeded) of --short and --minutes lengths.
//  2. Runs `transcribe --format json` on each: wall time, the real-time factor (wall over audio
//     seconds), where the time went (adapter, prefill, decode: the transcript's timings), tokens
//     in and out, and the process's peak RSS; the long recording's peak against the short one's
//     shows whether memory grows with the length (it must not: the windows are cut as the file
//     streams in).
//  3. Checks the transcript's windows: each cut lies in one of the recording's pauses, the
//     segments follow each other without a gap and end at the recording's end.
// No peer runs this job on this machine: llama.cpp's prebuilt CPU library (npm) has no audio
// encoder (its mtmd tool is not built), and Debian has no whisper.cpp; the decoder's own speed
// against llama.cpp on this shape is cpu_model_bench --family gemma4 --shape e2b's.
// Usage: transcribe_bench [--work DIR] [--minutes M=10] [--short S=300] [--tokens N=64]
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "bench_main.h"
#include "child_process.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "runtime/cpu/kernels.h"

namespace {

constexpr int kRate = 16000;

struct Pause {
  double start_s, end_s;
};

// A speech-like recording of `seconds` written to a 16 kHz mono 16-bit WAV as it is made (this
// process stays small: a child's peak RSS from wait4 counts its parent's at the spawn): phrases of
// voiced harmonics (a pitch between 110 and 230 Hz, a syllable-rate envelope, a little noise) with
// quiet pauses between them; the pauses are returned.
std::vector<Pause> WriteSpeechLike(const std::string& path, double seconds, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> phrase_s(1.5, 4.5), pause_s(0.25, 0.9), pitch(110, 230), unit(-1, 1);
  const auto total = static_cast<int64_t>(seconds * kRate);
  std::ofstream out(path, std::ios::binary);
  auto u32 = [&](uint32_t v) { out.write(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { out.write(reinterpret_cast<const char*>(&v), 2); };
  const auto bytes = static_cast<uint32_t>(total * 2);
  out << "RIFF";
  u32(36 + bytes);
  out << "WAVEfmt ";
  u32(16);
  u16(1);  // PCM
  u16(1);  // mono
  u32(kRate);
  u32(kRate * 2);
  u16(2);
  u16(16);
  out << "data";
  u32(bytes);
  int64_t written = 0;
  auto put = [&](double v) {
    u16(static_cast<uint16_t>(static_cast<int16_t>(std::clamp(v, -1.0, 1.0) * 32767)));
    ++written;
  };
  std::vector<Pause> pauses;
  while (written < total) {
    const auto voiced = static_cast<int64_t>(phrase_s(rng) * kRate);
    const double f0 = pitch(rng);
    for (int64_t i = 0; i < voiced && written < total; ++i) {
      const double t = static_cast<double>(i) / kRate;
      const double envelope = 0.5 * (1 - std::cos(2 * std::numbers::pi * 4.0 * t));  // ~4 syllables a second
      double v = 0;
      for (int h = 1; h <= 6; ++h) v += std::sin(2 * std::numbers::pi * f0 * h * t) / h;
      put(0.25 * envelope * v + 0.01 * unit(rng));
    }
    const double start = static_cast<double>(written) / kRate;
    const auto quiet = static_cast<int64_t>(pause_s(rng) * kRate);
    for (int64_t i = 0; i < quiet && written < total; ++i) put(0.001 * unit(rng));
    pauses.push_back({start, static_cast<double>(written) / kRate});
  }
  if (!out.flush()) return {};
  return pauses;
}

// The package, written by this program run again with --write-package (so that this process
// stays small: a child's peak RSS from wait4 counts its parent's at the spawn).
int WritePackage(const std::string& dir) {
  mlc::FamilyModelOptions o;
  o.family = "gemma4";
  o.quantization = "q4f16_1";
  o.shape = "e2b";
  o.seed = 1;
  o.audio = true;
  auto written = mlc::WriteFamilyModel(dir, o);
  if (!written) {
    std::cerr << mlc::FormatErrors(written.errors()) << "\n";
    return 1;
  }
  return 0;
}

struct Measured {
  double audio_s = 0, wall_s = 0;
  long peak_rss_kb = 0;
};

// One transcript: its figures printed, its windows checked against the recording's pauses.
int Transcribe(const std::string& self_dir, const std::string& package, const std::string& name, double seconds,
               uint32_t seed, int64_t tokens, Measured* m) {
  const std::string wav = self_dir + "/" + name + ".wav";
  const std::vector<Pause> pauses = WriteSpeechLike(wav, seconds, seed);
  if (pauses.empty()) {
    std::cerr << "transcribe_bench: cannot write " << wav << "\n";
    return 1;
  }
  m->audio_s = static_cast<double>(static_cast<int64_t>(seconds * kRate)) / kRate;
  const bench::ChildResult r = bench::RunChild({MLC_CLI_PATH, "transcribe", package, wav, "--format", "json",
                                                "--max-tokens", std::to_string(tokens)},
                                               self_dir + "/" + name + ".json");
  if (r.exit_code != 0) {
    std::cerr << "transcribe_bench: transcribe exited with " << r.exit_code << "\n";
    return 1;
  }
  const mlc::Json j = mlc::Json::parse(r.out);
  const auto& segments = j.at("segments");
  const auto& t = j.at("timings");
  const auto& usage = j.at("usage");
  m->wall_s = r.wall_ms / 1000;
  m->peak_rss_kb = r.peak_rss_kb;
  const auto windows = static_cast<double>(segments.size());
  std::printf("%s: %.1f s of audio in %zu windows, %.1f s wall: real-time factor %.3f (%.1fx real time); "
              "peak RSS %.1f MiB\n",
              name.c_str(), m->audio_s, segments.size(), m->wall_s, m->wall_s / m->audio_s, m->audio_s / m->wall_s,
              static_cast<double>(r.peak_rss_kb) / 1024);
  std::printf("  a window: audio tower %.2f s, prefill %.0f positions in %.2f s (%.1f tok/s), decode %.1f tokens "
              "in %.2f s (%.2f tok/s)\n",
              t.at("adapter_ms").get<double>() / 1000 / windows,
              usage.at("input_tokens").get<double>() / windows, t.at("prefill_ms").get<double>() / 1000 / windows,
              t.at("prefill_positions").get<double>() / (t.at("prefill_ms").get<double>() / 1000),
              usage.at("output_tokens").get<double>() / windows, t.at("decode_ms").get<double>() / 1000 / windows,
              t.at("decode_steps").get<double>() / (t.at("decode_ms").get<double>() / 1000));
  // Each cut in a pause; the windows end to end, over the whole recording.
  int in_pause = 0, cuts = 0;
  double previous_end = 0;
  bool contiguous = true;
  for (size_t i = 0; i < segments.size(); ++i) {
    const double start = segments[i].at("start").get<double>(), end = segments[i].at("end").get<double>();
    contiguous = contiguous && std::abs(start - previous_end) < 1e-9 && end > start;
    previous_end = end;
    if (i + 1 == segments.size()) break;
    ++cuts;
    in_pause += std::any_of(pauses.begin(), pauses.end(),
                            [&](const Pause& p) { return end >= p.start_s && end <= p.end_s; });
  }
  const bool whole = std::abs(previous_end - m->audio_s) < 1.0 / kRate;
  std::printf("  windows: %d of %d cuts in a pause, %s, %s\n", in_pause, cuts,
              contiguous ? "end to end" : "NOT end to end", whole ? "to the recording's end" : "NOT to its end");
  return in_pause == cuts && contiguous && whole ? 0 : 1;
}

int Main(int argc, char** argv) {
  std::string work = std::string(MLC_BINARY_DIR) + "/bench-work";
  double minutes = 10, short_s = 300;
  int64_t tokens = 64;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--write-package" && has_value) return WritePackage(argv[i + 1]);
    if (a == "--work" && has_value) work = argv[++i];
    else if (a == "--minutes" && has_value) minutes = std::atof(argv[++i]);
    else if (a == "--short" && has_value) short_s = std::atof(argv[++i]);
    else if (a == "--tokens" && has_value) tokens = std::atoll(argv[++i]);
    else {
      std::cerr << "usage: transcribe_bench [--work DIR] [--minutes M] [--short S] [--tokens N]\n";
      return 2;
    }
  }
  if (minutes <= 0 || short_s <= 0 || tokens < 1) {
    std::cerr << "transcribe_bench: lengths and --tokens must be positive\n";
    return 2;
  }
  const std::string package = work + "/e2b-q4f16_1-audio";
  const std::string self_dir = work + "/transcribe_bench";
  std::error_code ec;
  std::filesystem::create_directories(self_dir, ec);
  if (!mlc::FileExists(mlc::JoinPath(package, mlc::kChatConfigFileName))) {
    std::cout << "writing " << package << "\n";
    const bench::ChildResult w = bench::RunChild({argv[0], "--write-package", package}, "/dev/null");
    if (w.exit_code != 0) return 1;
  }
  std::cout << "kernels: " << mlc::cpu::KernelIsa() << ", " << mlc::cpu::ThreadCount() << " threads; "
            << tokens << " tokens at most a window\n";
  Measured short_run, long_run;
  if (int rc = Transcribe(self_dir, package, "short", short_s, 7, tokens, &short_run); rc) return rc;
  if (int rc = Transcribe(self_dir, package, "long", minutes * 60, 8, tokens, &long_run); rc) return rc;
  std::printf("peak RSS: %.1f MiB for %.0f s against %.1f MiB for %.0f s (%+.1f MiB for %.1fx the audio)\n",
              static_cast<double>(long_run.peak_rss_kb) / 1024, long_run.audio_s,
              static_cast<double>(short_run.peak_rss_kb) / 1024, short_run.audio_s,
              static_cast<double>(long_run.peak_rss_kb - short_run.peak_rss_kb) / 1024,
              long_run.audio_s / short_run.audio_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return bench::Guarded("transcribe_bench", [&] { return Main(argc, argv); }); }
