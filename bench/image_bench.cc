// Benchmark of the image frontend: generated photo-like 4:2:0 JPEGs of 12 MP (4000 x 3000), 1 MP
// and 0.1 MP (the common chat photo sizes) to a 336 x 336 center_crop. Whole-process wall and CPU
// time of `mlc-manifest image` against the decoder's own full decode (`djpeg`, libjpeg-turbo-progs:
// the floor), Pillow (the Hugging Face processor's path: open, convert("RGB"), resize BICUBIC,
// crop, to numpy; Python start-up included, run by /usr/bin/python3) and `vipsthumbnail`
// (libvips-tools), interleaved, medians. Prints each ratio beside its target (12 MP: <= 1.3x
// djpeg, <= 0.2x Pillow, >= 50 dB from Pillow without shrink-on-load) and the load average.
//
//   image_bench [runs=7]
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "bench_main.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/npy.h"

extern char** environ;

namespace {

constexpr int kTarget = 336;

double g_last_cpu = 0;  // user + system seconds of the last TimeProcess child

// Runs argv with stdout/stderr discarded; returns wall seconds (CPU seconds in g_last_cpu), or
// -1 on failure. CPU time is the robust figure on a loaded machine.
double TimeProcess(const std::vector<std::string>& argv) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  rusage usage{};
  wait4(pid, &status, 0, &usage);
  g_last_cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec * 1e-6 + usage.ru_stime.tv_sec +
               usage.ru_stime.tv_usec * 1e-6;
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? s : -1;
}

// Smooth random field: bilinear interpolation of a coarse random grid.
struct ValueNoise {
  int cell;
  int gw, gh;
  std::vector<float> grid;
  ValueNoise(int c, int width, int height, std::mt19937& rng)
      : cell(c), gw(width / c + 2), gh(height / c + 2) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    grid.resize(static_cast<size_t>(gw) * gh);
    for (float& g : grid) g = u(rng);
  }
  float At(int x, int y) const {
    const float fx = static_cast<float>(x) / cell, fy = static_cast<float>(y) / cell;
    const int ix = static_cast<int>(fx), iy = static_cast<int>(fy);
    const float tx = fx - ix, ty = fy - iy;
    const float a = grid[iy * gw + ix], b = grid[iy * gw + ix + 1];
    const float c = grid[(iy + 1) * gw + ix], d = grid[(iy + 1) * gw + ix + 1];
    return (a * (1 - tx) + b * tx) * (1 - ty) + (c * (1 - tx) + d * tx) * ty;
  }
};

// Photo-like content: multi-scale smooth texture per channel, soft-edged discs, sensor noise.
std::string PhotoPpm(int width, int height) {
  std::mt19937 rng(12);
  std::vector<ValueNoise> octaves[3];
  for (auto& o : octaves) {
    for (int cell : {600, 150, 37, 9}) o.emplace_back(cell, width, height, rng);
  }
  struct Disc { float x, y, r, col[3]; };
  std::vector<Disc> discs;
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int i = 0; i < 40; ++i) {
    discs.push_back({u(rng) * width, u(rng) * height, 40 + u(rng) * 500,
                     {u(rng) * 255, u(rng) * 255, u(rng) * 255}});
  }
  std::normal_distribution<float> noise(0.f, 3.f);
  std::string ppm = "P6\n" + std::to_string(width) + " " + std::to_string(height) + "\n255\n";
  const size_t header = ppm.size();
  ppm.resize(header + static_cast<size_t>(width) * height * 3);
  const float weights[4] = {70, 30, 12, 5};
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      float v[3];
      for (int c = 0; c < 3; ++c) {
        v[c] = 128;
        for (int o = 0; o < 4; ++o) v[c] += weights[o] * octaves[c][o].At(x, y);
      }
      for (const Disc& d : discs) {
        const float dist = std::hypot(x - d.x, y - d.y);
        const float a = std::clamp((d.r - dist) / 3.f, 0.f, 1.f) * 0.6f;  // anti-aliased edge
        if (a > 0) {
          for (int c = 0; c < 3; ++c) v[c] = v[c] * (1 - a) + d.col[c] * a;
        }
      }
      char* p = &ppm[header + (static_cast<size_t>(y) * width + x) * 3];
      for (int c = 0; c < 3; ++c) {
        p[c] = static_cast<char>(std::clamp(std::lround(v[c] + noise(rng)), 0L, 255L));
      }
    }
  }
  return ppm;
}

const char* kPillowScript = R"PY(
import sys, math
import numpy as np
from PIL import Image
im = Image.open(sys.argv[1]).convert("RGB")
w, h = im.size
s = max(336 / h, 336 / w)
sw, sh = math.floor(w * s + 0.5), math.floor(h * s + 0.5)
im = im.resize((sw, sh), Image.BICUBIC)
left, top = (sw - 336) // 2, (sh - 336) // 2
arr = np.asarray(im.crop((left, top, left + 336, top + 336)))[None]
if len(sys.argv) > 2:
    np.save(sys.argv[2], arr)
)PY";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

struct Contender {
  const char* name;
  std::vector<std::string> argv;
  std::vector<double> wall, cpu;
};

double LoadAverage() {
  double load[3] = {0, 0, 0};
  return getloadavg(load, 3) > 0 ? load[0] : -1;
}

const char* Verdict(bool ok) { return ok ? "PASS" : "FAIL"; }

// One size: encode the photo, time every contender, compare our pixels with Pillow's.
// Returns false when a command failed.
bool RunSize(const std::string& dir, const char* label, int width, int height, int runs, bool judge) {
  const std::string ppm = dir + "/photo.ppm", jpg = dir + "/photo.jpg";
  std::ofstream(ppm, std::ios::binary) << PhotoPpm(width, height);
  // Q 90 with chroma subsampling forced on: the common camera / web photo (4:2:0).
  if (TimeProcess({"vips", "copy", ppm, jpg + "[Q=90,subsample-mode=on]"}) < 0) {
    std::fprintf(stderr, "cannot encode the JPEG (is libvips-tools installed?)\n");
    return false;
  }
  std::filesystem::remove(ppm);
  const std::string script = dir + "/pillow_path.py";
  std::ofstream(script) << kPillowScript;
  const std::string size = std::to_string(kTarget);
  std::vector<Contender> cs = {
      {"mlc-manifest image", {MLC_CLI_PATH, "image", jpg, "-o", dir + "/ours.npy", "--mode",
                              "center_crop", "--height", size, "--width", size, "--force"}, {}, {}},
      {"djpeg (decode only)", {"djpeg", "-outfile", "/dev/null", jpg}, {}, {}},
      {"Pillow (HF path)", {"/usr/bin/python3", script, jpg}, {}, {}},
      {"vipsthumbnail", {"vipsthumbnail", jpg, "-s", size + "x" + size, "-m", "centre", "-o",
                         dir + "/thumb.v"}, {}, {}},
  };
  for (int i = 0; i <= runs; ++i) {  // the first round warms the page cache and is dropped
    for (Contender& c : cs) {
      const double t = TimeProcess(c.argv);
      if (t < 0) {
        std::fprintf(stderr, "%s failed (is it installed?)\n", c.name);
        if (&c == &cs[0]) return false;
        continue;
      }
      if (i == 0) continue;
      c.wall.push_back(t);
      c.cpu.push_back(g_last_cpu);
    }
  }
  std::printf("%s JPEG (%dx%d, 4:2:0) -> %dx%d center_crop, whole process, median of %d "
              "(load average %.2f)\n", label, width, height, kTarget, kTarget, runs, LoadAverage());
  const double ours = Median(cs[0].wall), ours_cpu = Median(cs[0].cpu);
  for (const Contender& c : cs) {
    if (c.wall.empty()) {
      std::printf("  %-20s unavailable\n", c.name);
      continue;
    }
    std::printf("  %-20s wall %7.1f ms  cpu %7.1f ms", c.name, Median(c.wall) * 1e3, Median(c.cpu) * 1e3);
    if (&c != &cs[0]) {
      std::printf("   ours/this: wall %.2f, cpu %.2f", ours / Median(c.wall), ours_cpu / Median(c.cpu));
    }
    std::printf("\n");
  }
  if (judge && !cs[1].wall.empty() && !cs[2].wall.empty()) {
    const double vs_djpeg = ours / Median(cs[1].wall), vs_pillow = ours / Median(cs[2].wall);
    std::printf("  target: ours <= 1.3x djpeg's full decode: %.2f %s\n", vs_djpeg, Verdict(vs_djpeg <= 1.3));
    std::printf("  target: ours <= 0.2x Pillow:              %.2f %s\n", vs_pillow, Verdict(vs_pillow <= 0.2));
  }
  // Fidelity against Pillow's full-resolution result on the same image.
  const std::string ref = dir + "/pillow.npy";
  if (TimeProcess({"/usr/bin/python3", script, jpg, ref}) >= 0) {
    auto a = mlc::DecodeNpy(*mlc::ReadFile(dir + "/ours.npy"));
    auto b = mlc::DecodeNpy(*mlc::ReadFile(ref));
    if (a.ok() && b.ok()) {
      mlc::RgbImage x, y;
      x.pixels.assign(a->data.begin(), a->data.end());
      y.pixels.assign(b->data.begin(), b->data.end());
      const double psnr = mlc::Psnr(x, y);
      std::printf("  PSNR ours vs Pillow: %.1f dB", psnr);
      if (judge) std::printf("   target >= 50 dB (no shrink-on-load for 4:2:0): %s", Verdict(psnr >= 50));
      std::printf("\n");
    }
  }
  return true;
}

int Main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("mlc-image-bench-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  std::printf("Wall-time ratios need an idle machine; CPU time is the robust figure under load.\n");
  bool ok = RunSize(dir, "12 MP", 4000, 3000, runs, true) &&
            RunSize(dir, "1 MP", 1152, 864, runs, false) &&
            RunSize(dir, "0.1 MP", 368, 276, runs, false);
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::Guarded("image_bench", [&] { return Main(argc, argv); });
}
