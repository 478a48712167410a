// Benchmark of the audio frontend: 30 s of 48 kHz stereo 16-bit WAV to 16 kHz mono, whole-process
// time of `mlc-manifest audio` against sox (rate -h) and ffmpeg in the same run (interleaved
// repetitions, medians, ratios), and the library call alone.
// Usage: audio_bench [repetitions=9]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "mlc_manifest/audio.h"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

void PutLe(std::string& out, uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// 30 s of 48 kHz stereo s16: a 440 Hz + 3 kHz mix left, a 1 kHz tone and noise right.
std::string MakeWav(int seconds) {
  const uint32_t rate = 48000, frames = rate * static_cast<uint32_t>(seconds);
  std::string data;
  data.reserve(frames * 4);
  uint32_t lcg = 12345;
  for (uint32_t i = 0; i < frames; ++i) {
    double t = static_cast<double>(i) / rate;
    lcg = lcg * 1664525u + 1013904223u;
    double noise = (static_cast<double>(lcg >> 8) / (1 << 24) - 0.5) * 0.05;
    double l = 0.4 * std::sin(2 * std::numbers::pi * 440 * t) + 0.2 * std::sin(2 * std::numbers::pi * 3000 * t);
    double r = 0.5 * std::sin(2 * std::numbers::pi * 1000 * t) + noise;
    PutLe(data, static_cast<uint16_t>(static_cast<int16_t>(std::lrint(l * 32767))), 2);
    PutLe(data, static_cast<uint16_t>(static_cast<int16_t>(std::lrint(r * 32767))), 2);
  }
  std::string fmt;
  PutLe(fmt, 1, 2);
  PutLe(fmt, 2, 2);
  PutLe(fmt, rate, 4);
  PutLe(fmt, rate * 4, 4);
  PutLe(fmt, 4, 2);
  PutLe(fmt, 16, 2);
  std::string wav = "RIFF";
  PutLe(wav, static_cast<uint32_t>(4 + 8 + fmt.size() + 8 + data.size()), 4);
  wav += "WAVEfmt ";
  PutLe(wav, static_cast<uint32_t>(fmt.size()), 4);
  wav += fmt + "data";
  PutLe(wav, static_cast<uint32_t>(data.size()), 4);
  return wav + data;
}

struct Timing {
  double wall_ms = -1;  // negative when the process failed to start or exit 0
  double cpu_ms = -1;   // user + system time of the process
};

double Ms(const timeval& tv) { return static_cast<double>(tv.tv_sec) * 1e3 + static_cast<double>(tv.tv_usec) / 1e3; }

// Wall and CPU time of one process run.
Timing TimeProcess(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  auto start = Clock::now();
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return {};
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return {};
  return {ms, Ms(usage.ru_utime) + Ms(usage.ru_stime)};
}

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Contender {
  std::string name;
  std::vector<std::string> argv;
  std::vector<double> times;
  std::vector<double> cpu;
  bool failed = false;
};

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  std::string dir = (std::filesystem::temp_directory_path() / "mlc-audio-bench-XXXXXX").string();
  if (!::mkdtemp(dir.data())) return 3;
  const std::string in = dir + "/in.wav";
  std::ofstream(in, std::ios::binary) << MakeWav(30);

  std::vector<Contender> contenders = {
      {"mlc-manifest audio",
       {MLC_CLI_PATH, "audio", in, "-o", dir + "/mlc.npy", "--rate", "16000", "--force"}, {}, {}, false},
      {"sox rate -h", {"sox", in, "-r", "16000", "-c", "1", dir + "/sox.wav", "rate", "-h"}, {}, {}, false},
      {"ffmpeg", {"ffmpeg", "-y", "-i", in, "-ar", "16000", "-ac", "1", dir + "/ffmpeg.wav"}, {}, {}, false},
  };
  for (int r = 0; r < reps; ++r) {  // interleaved, so drift hits every contender alike
    for (Contender& c : contenders) {
      Timing t = TimeProcess(c.argv);
      if (t.wall_ms < 0) {
        c.failed = true;
      } else {
        c.times.push_back(t.wall_ms);
        c.cpu.push_back(t.cpu_ms);
      }
    }
  }
  mlc::AudioDecode processor;  // 16 kHz, up to 480000 samples: exactly 30 s
  std::vector<double> lib_times;
  size_t samples = 0;
  for (int r = 0; r < reps; ++r) {
    auto start = Clock::now();
    auto decoded = mlc::DecodeAudioFile(in, processor);
    lib_times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    if (!decoded.ok()) {
      std::fprintf(stderr, "library decode failed: %s\n", mlc::FormatErrors(decoded.errors()).c_str());
      return 1;
    }
    samples = decoded->samples.size();
  }

  std::printf("audio: 30 s 48 kHz stereo s16 WAV -> 16 kHz mono (%zu samples), median of %d\n",
              samples, reps);
  const double ours = Median(contenders[0].times), ours_cpu = Median(contenders[0].cpu);
  for (const Contender& c : contenders) {
    if (c.failed || c.times.empty()) {
      std::printf("  %-20s unavailable or failed\n", c.name.c_str());
      continue;
    }
    double m = Median(c.times), cpu = Median(c.cpu);
    std::printf("  %-20s wall %7.1f ms (%.2fx of mlc-manifest)   cpu %7.1f ms (%.2fx)\n",
                c.name.c_str(), m, m / ours, cpu, cpu / ours_cpu);
  }
  std::printf("  %-20s %8.1f ms   (library call alone, in process)\n", "DecodeAudioFile",
              Median(lib_times));
  std::filesystem::remove_all(dir);
  return contenders[0].failed ? 1 : 0;
}
