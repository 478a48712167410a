// LLaVA 1.5 on the CPU program (issue 23 item 6). No prebuilt llama.cpp CLIP encoder is reachable
// from Debian or npm (node-llama-cpp's prebuilt libraries carry no mtmd), so the image encoder is
// measured against the speed our own float16 kernel reaches on the tower's products in the same
// run:
//  1. writes (once) a random-weight llava q4f16_1 package with the real CLIP ViT-L/14-336 tower
//     (float16, as MLC keeps it) and projector, over a Qwen2.5-0.5B-shaped llama decoder
//     (`mlc-manifest reference-model DIR --family llava --shape qwen2.5-0.5b`);
//  2. times image_embed on a 336 x 336 image (best and median of N) and divides the tower's
//     floating-point operations (counted from its shapes) by that time;
//  3. times the f16 kernel alone on the tower's two MLP products ([577, 1024] x [1024, 4096] and
//     back) and prints the ratio: the share of the kernel's GFLOP/s the whole tower keeps; then
//     the kernel and the whole embed again on each slower vector path the CPU runs;
//  4. runs an image prompt through `mlc-manifest run --messages --json`: prefill and decode
//     tokens/s of the 0.5B-shaped decoder with the image's 576 rows in the prompt.
// Usage: llava_bench [--reps N] [--work DIR] (default: <build>/bench-work/llava_bench).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "child_process.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/kernels.h"

namespace {

double NowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The tower's shapes (CLIP ViT-L/14 at 336 pixels) and the projector into the decoder's width.
struct TowerShape {
  int64_t hidden = 1024, inter = 4096, layers = 24, patch = 14, image = 336, text = 896;
  int64_t patches() const { return (image / patch) * (image / patch); }
  // Multiply-adds x 2 of image_embed: patch convolution, the 23 layers vision_feature_layer -2
  // runs (q, k, v, out, attention scores and sums, fc1, fc2), the projector.
  double Flops() const {
    const double n = static_cast<double>(patches() + 1), h = static_cast<double>(hidden);
    const double conv = static_cast<double>(patches()) * 3.0 * patch * patch * h;
    const double layer = n * h * h * 4 + n * n * h * 2 + n * h * static_cast<double>(inter) * 2;
    const double proj = static_cast<double>(patches()) * (h * text + static_cast<double>(text) * text);
    return 2 * (conv + layer * static_cast<double>(layers - 1) + proj);
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// GFLOP/s of the f16 kernel on the tower's MLP products, best of reps.
double KernelGflops(const TowerShape& s, int reps) {
  std::mt19937 rng(7);
  const int64_t n = s.patches() + 1;
  std::vector<uint16_t> w1(static_cast<size_t>(s.inter * s.hidden)), w2(w1.size());
  for (uint16_t& v : w1) v = mlc::cpu::FloatToHalf(static_cast<float>(rng() % 1000) * 1e-5f - 5e-3f);
  for (uint16_t& v : w2) v = mlc::cpu::FloatToHalf(static_cast<float>(rng() % 1000) * 1e-5f - 5e-3f);
  mlc::cpu::Weight fc1{mlc::cpu::WeightFormat::kF16, s.inter, s.hidden, w1.data(), nullptr, nullptr};
  mlc::cpu::Weight fc2{mlc::cpu::WeightFormat::kF16, s.hidden, s.inter, w2.data(), nullptr, nullptr};
  std::vector<float> x(static_cast<size_t>(n * s.hidden), 0.5f), mid(static_cast<size_t>(n * s.inter)), y(x.size());
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const double start = NowMs();
    mlc::cpu::Linear(fc1, x.data(), n, mid.data());
    mlc::cpu::Linear(fc2, mid.data(), n, y.data());
    best = std::min(best, NowMs() - start);
  }
  return 2.0 * 2.0 * static_cast<double>(n * s.hidden * s.inter) / (best * 1e6);
}

int Main(int argc, char** argv) {
  int reps = 5;
  std::string work;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--work" && i + 1 < argc) {
      work = argv[++i];
    } else {
      std::cerr << "usage: llava_bench [--reps N] [--work DIR]\n";
      return 2;
    }
  }
  if (work.empty()) work = std::string(MLC_BINARY_DIR) + "/bench-work/llava_bench";
  if (mlc::Status made = mlc::DefaultEnv()->CreateDirs(work); !made) {
    std::cerr << "llava_bench: cannot use " << work << ": " << mlc::FormatErrors(made.errors()) << "\n";
    return 1;
  }
  const std::string pkg = work + "/llava-clip-l-qwen0.5b-q4f16_1";
  std::cout << "llava_bench: kernels " << mlc::cpu::KernelIsa() << ", " << mlc::cpu::ThreadCount()
            << " threads; package " << pkg << "\n";
  if (!mlc::FileExists(mlc::JoinPath(pkg, "tensor-cache.json"))) {
    std::cout << "  writing the package (CLIP ViT-L/14-336 f16 + projector + 0.5B-shaped decoder)...\n";
    mlc::FamilyModelOptions o;
    o.family = "llava";
    o.quantization = "q4f16_1";
    o.shape = "qwen2.5-0.5b";
    o.seed = 1;
    auto w = mlc::WriteFamilyModel(pkg, o);
    if (!w) {
      std::cerr << "llava_bench: " << mlc::FormatErrors(w.errors()) << "\n";
      return 1;
    }
  }
  auto lib = mlc::OpenCpuLibrary(pkg);
  if (!lib) {
    std::cerr << "llava_bench: " << mlc::FormatErrors(lib.errors()) << "\n";
    return 1;
  }
  auto params = mlc::LoadParameters(pkg, (*lib)->Metadata().params);
  if (!params) {
    std::cerr << "llava_bench: " << mlc::FormatErrors(params.errors()) << "\n";
    return 1;
  }
  const TowerShape shape;
  mlc::NDArray pixels = mlc::NDArray::Empty({1, shape.image, shape.image, 3}, mlc::DlUInt8());
  for (int64_t i = 0; i < pixels.Elements(); ++i) pixels.data<uint8_t>()[i] = static_cast<uint8_t>(i * 31 % 256);
  const mlc::PackedFunction* embed = (*lib)->GetFunction("image_embed");
  auto embed_times = [&]() -> std::vector<double> {
    std::vector<double> times;
    for (int r = 0; r < reps + 1; ++r) {  // the first run binds the weights (or warms up): not timed
      std::vector<mlc::Value> args = {pixels, mlc::ObjectRef(*params)};
      const double start = NowMs();
      auto out = (*embed)(args);
      const double ms = NowMs() - start;
      if (!out) {
        std::cerr << "llava_bench: " << mlc::FormatErrors(out.errors()) << "\n";
        std::exit(1);
      }
      if (r > 0) times.push_back(ms);
    }
    return times;
  };
  const std::vector<double> times = embed_times();
  const double best = *std::min_element(times.begin(), times.end());
  const double gflops = shape.Flops() / (best * 1e6);
  const double kernel = KernelGflops(shape, reps);
  std::printf("  image_embed 336x336 -> [%lld, %lld]: best %.1f ms, median %.1f ms (%d runs)\n",
              static_cast<long long>(shape.patches()), static_cast<long long>(shape.text), best,
              Median(times), reps);
  std::printf("  tower + projector: %.1f GFLOP -> %.1f GFLOP/s; f16 kernel alone on the MLP products: "
              "%.1f GFLOP/s; ratio %.2fx of the kernel\n",
              shape.Flops() / 1e9, gflops, kernel, gflops / kernel);
  // The same products, and the whole embed, on each slower vector path this CPU runs.
  const std::string chosen = mlc::cpu::KernelIsa();
  for (const char* isa : {"avx512", "avxvnni", "avx2"}) {
    if (chosen == isa || !mlc::cpu::SetKernelIsa(isa)) continue;
    const double slower = KernelGflops(shape, reps);
    const std::vector<double> slower_embed = embed_times();
    const double slower_best = *std::min_element(slower_embed.begin(), slower_embed.end());
    std::printf("  %s path: f16 kernel %.1f GFLOP/s (%s is %.2fx this), image_embed best %.1f ms (%s is %.2fx this)\n",
                isa, slower, chosen.c_str(), kernel / slower, slower_best, chosen.c_str(), slower_best / best);
  }
  mlc::cpu::SetKernelIsa("auto");

  // An image prompt end to end through the CLI.
  const std::string image_path = work + "/image.bmp";
  {
    std::string bmp = "BM";
    const int s = 336, stride = s * 3;
    auto put = [&bmp](uint32_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) bmp.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    put(54 + stride * s, 4), put(0, 4), put(54, 4), put(40, 4), put(s, 4), put(s, 4), put(1, 2), put(24, 2);
    put(0, 4), put(stride * s, 4), put(2835, 4), put(2835, 4), put(0, 4), put(0, 4);
    for (int i = 0; i < stride * s; ++i) bmp.push_back(static_cast<char>(i * 7 % 251));
    std::ofstream(image_path, std::ios::binary) << bmp;
  }
  const std::string messages = work + "/messages.json";
  std::ofstream(messages) << R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": ")"
                          << image_path << R"("}}, {"type": "text", "text": "Describe the picture in detail, please."}]}])";
  bench::ChildResult run = bench::RunChild({MLC_CLI_PATH, "run", pkg, "--messages", messages, "--max-tokens",
                                            "32", "--temperature", "0", "--json"},
                                           work + "/run.json");
  auto report = mlc::ParseJson(run.out);
  if (run.exit_code != 0 || !report) {
    std::cout << "  run: failed (exit " << run.exit_code << "): " << run.out.substr(0, 400) << "\n";
    return 1;
  }
  const mlc::Json& t = (*report)["timings"];
  std::printf("  run --messages (image + text, %lld prompt positions): adapter %.1f ms, prefill %.1f tok/s, "
              "decode %.1f tok/s\n",
              static_cast<long long>((*report)["prompt_length"].get<int64_t>()), t["adapter_ms"].get<double>(),
              t["prefill_positions_per_s"].get<double>(), t["decode_steps_per_s"].get<double>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::Guarded("llava_bench", [&] { return Main(argc, argv); });
}
