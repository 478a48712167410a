// Benchmark of the image frontend: a generated 12-megapixel photo-like JPEG (4000 x 3000) to a
// 336 x 336 center_crop, whole-process wall time of `mlc-manifest image` against Pillow (the
// Hugging Face processor's path: open, convert("RGB"), resize BICUBIC, crop, to numpy; Python
// start-up included, run by /usr/bin/python3) and `vipsthumbnail` (libvips-tools). Prints the
// medians, the ratios, and how close our pixels are to Pillow's.
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

#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/npy.h"

extern char** environ;

namespace {

constexpr int kWidth = 4000, kHeight = 3000, kTarget = 336;

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
  ValueNoise(int c, std::mt19937& rng) : cell(c), gw(kWidth / c + 2), gh(kHeight / c + 2) {
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
std::string PhotoPpm() {
  std::mt19937 rng(12);
  std::vector<ValueNoise> octaves[3];
  for (auto& o : octaves) {
    for (int cell : {600, 150, 37, 9}) o.emplace_back(cell, rng);
  }
  struct Disc { float x, y, r, col[3]; };
  std::vector<Disc> discs;
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int i = 0; i < 40; ++i) {
    discs.push_back({u(rng) * kWidth, u(rng) * kHeight, 40 + u(rng) * 500,
                     {u(rng) * 255, u(rng) * 255, u(rng) * 255}});
  }
  std::normal_distribution<float> noise(0.f, 3.f);
  std::string ppm = "P6\n" + std::to_string(kWidth) + " " + std::to_string(kHeight) + "\n255\n";
  const size_t header = ppm.size();
  ppm.resize(header + static_cast<size_t>(kWidth) * kHeight * 3);
  const float weights[4] = {70, 30, 12, 5};
  for (int y = 0; y < kHeight; ++y) {
    for (int x = 0; x < kWidth; ++x) {
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
      char* p = &ppm[header + (static_cast<size_t>(y) * kWidth + x) * 3];
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

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("mlc-image-bench-" + std::to_string(getpid())))
          .string();
  std::filesystem::create_directories(dir);
  const std::string ppm = dir + "/photo.ppm", jpg = dir + "/photo.jpg";
  std::ofstream(ppm, std::ios::binary) << PhotoPpm();
  if (TimeProcess({"vips", "copy", ppm, jpg + "[Q=90]"}) < 0) {
    std::fprintf(stderr, "cannot encode the JPEG (is libvips-tools installed?)\n");
    return 1;
  }
  std::filesystem::remove(ppm);
  const std::string script = dir + "/pillow_path.py";
  std::ofstream(script) << kPillowScript;
  const std::string size = std::to_string(kTarget);

  const std::vector<std::string> ours{MLC_CLI_PATH, "image", jpg, "-o", dir + "/ours.npy",
                                      "--mode", "center_crop", "--height", size, "--width", size,
                                      "--force"};
  const std::vector<std::string> pillow{"/usr/bin/python3", script, jpg};
  const std::vector<std::string> thumb{"vipsthumbnail", jpg, "-s", size + "x" + size,
                                       "-m", "centre", "-o", dir + "/thumb.v"};
  std::vector<double> t_ours, t_pillow, t_thumb, c_ours, c_pillow, c_thumb;
  for (int i = 0; i <= runs; ++i) {  // the first round warms the page cache and is dropped
    const double a = TimeProcess(ours), ca = g_last_cpu;
    const double b = TimeProcess(pillow), cb = g_last_cpu;
    const double c = TimeProcess(thumb), cc = g_last_cpu;
    if (a < 0 || b < 0 || c < 0) {
      std::fprintf(stderr, "a command failed (ours %.3f, pillow %.3f, vipsthumbnail %.3f)\n", a, b,
                   c);
      return 1;
    }
    if (i == 0) continue;
    t_ours.push_back(a);
    t_pillow.push_back(b);
    t_thumb.push_back(c);
    c_ours.push_back(ca);
    c_pillow.push_back(cb);
    c_thumb.push_back(cc);
  }
  const double mo = Median(t_ours), mp = Median(t_pillow), mt = Median(t_thumb);
  std::printf("12 MP JPEG (%dx%d) -> %dx%d center_crop, whole process, median of %d runs\n",
              kWidth, kHeight, kTarget, kTarget, runs);
  std::printf("  mlc-manifest image  %7.1f ms\n", mo * 1e3);
  std::printf("  Pillow (HF path)    %7.1f ms   ours/Pillow        = %.2f\n", mp * 1e3, mo / mp);
  std::printf("  vipsthumbnail       %7.1f ms   ours/vipsthumbnail = %.2f\n", mt * 1e3, mo / mt);
  const double co = Median(c_ours), cp = Median(c_pillow), ct = Median(c_thumb);
  std::printf("  CPU time (user+sys): ours %.1f ms, Pillow %.1f ms, vipsthumbnail %.1f ms; "
              "ours/Pillow = %.2f, ours/vipsthumbnail = %.2f\n",
              co * 1e3, cp * 1e3, ct * 1e3, co / cp, co / ct);

  // Fidelity of the fast path against Pillow's full-resolution result on the same image.
  const std::string ref = dir + "/pillow.npy";
  if (TimeProcess({"/usr/bin/python3", script, jpg, ref}) >= 0) {
    auto a = mlc::DecodeNpy(*mlc::ReadFile(dir + "/ours.npy"));
    auto b = mlc::DecodeNpy(*mlc::ReadFile(ref));
    if (a.ok() && b.ok()) {
      mlc::RgbImage x, y;
      x.pixels.assign(a->data.begin(), a->data.end());
      y.pixels.assign(b->data.begin(), b->data.end());
      std::printf("  PSNR ours vs Pillow: %.1f dB\n", mlc::Psnr(x, y));
    }
  }
  std::filesystem::remove_all(dir);
  return 0;
}
