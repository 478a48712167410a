// Batched decode on the built-in CPU program (issue 15 item 5): writes (or reuses) a
// Qwen2.5-0.5B-shaped random q4f16_1 package (`mlc-manifest reference-model DIR --family qwen2
// --quantization q4f16_1 --shape qwen2.5-0.5b`), then for batch sizes 1, 4, 8 and 16 prefills
// one short prompt per sequence and times decode steps of the whole batch through BatchModel
// (one decode call per step; the Linear layers take every sequence's row in one product). Prints
// decode tokens/s (wall and per CPU second; greedy sampling included) and the ratio to batch 1 of the same run, against the
// target: batch 8 >= 3x the tokens per second of batch 1.
// Usage: batch_bench [--work DIR] [--prompt N] [--steps N] [--batches 1,4,8,16]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "bench_main.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/sampler.h"
#include "runtime/cpu/kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

struct Figure {
  int64_t batch = 0;
  double tokens_per_s = 0;       // wall clock
  double tokens_per_cpu_s = 0;   // user + sys of the process
};

// Prefills `prompt` positions into each of `batch` sequences, then times `steps` decode steps.
mlc::Result<Figure> Measure(const mlc::LoadedModel& model, int64_t batch, int64_t prompt, int64_t steps) {
  mlc::BatchOptions bo;
  bo.max_batch_size = batch;
  bo.kv_positions = batch * (prompt + steps + 32);
  auto created = mlc::BatchModel::Create(model, bo);
  MLC_RETURN_IF_ERROR(created);
  mlc::BatchModel& b = **created;
  std::vector<int64_t> ids;
  std::vector<int32_t> tokens;
  for (int64_t s = 0; s < batch; ++s) {
    ids.push_back(s);
    MLC_RETURN_IF_ERROR(b.kv().AddSequence(s));
    std::vector<int32_t> text;
    for (int64_t i = 0; i < prompt; ++i) text.push_back(static_cast<int32_t>(1 + (s * 131 + i * 17) % 400));
    mlc::TurnInput in;
    in.pieces.push_back(mlc::PromptPiece{mlc::TextPiece{text}, "/0"});
    in.media.emplace_back();
    auto p = b.Prepare(in, 0);
    MLC_RETURN_IF_ERROR(p);
    std::vector<float> last;
    for (const mlc::PrefillChunk& c : p->plan.chunks) {
      auto e = b.ChunkEmbeddings(c, *p);
      MLC_RETURN_IF_ERROR(e);
      mlc::SequenceChunk sc{s, &c, *e};
      auto l = b.Prefill(std::span<const mlc::SequenceChunk>(&sc, 1));
      MLC_RETURN_IF_ERROR(l);
      last.assign((*l)[0].begin(), (*l)[0].end());
    }
    tokens.push_back(static_cast<int32_t>(std::max_element(last.begin(), last.end()) - last.begin()));
  }
  mlc::Sampler greedy(mlc::SamplerConfig{});  // temperature 0, as the engine samples greedily
  const auto start = Clock::now();
  const double cpu_start = CpuSeconds();
  for (int64_t step = 0; step < steps; ++step) {
    auto logits = b.Decode(ids, tokens);
    MLC_RETURN_IF_ERROR(logits);
    for (size_t s = 0; s < tokens.size(); ++s) tokens[s] = greedy.Sample((*logits)[s]);
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = CpuSeconds() - cpu_start;
  Figure f;
  f.batch = batch;
  f.tokens_per_s = static_cast<double>(batch * steps) / wall;
  f.tokens_per_cpu_s = static_cast<double>(batch * steps) / cpu;
  return f;
}

std::vector<int64_t> ParseList(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(std::atoll(item.c_str()));
  return out;
}

int Main(int argc, char** argv) {
  std::string work = std::string(MLC_BINARY_DIR) + "/bench-work/qwen2.5-0.5b-q4f16_1";
  int64_t prompt = 16, steps = 16;
  std::vector<int64_t> batches = {1, 4, 8, 16};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    bool has_value = i + 1 < argc;
    if (a == "--work" && has_value) {
      work = argv[++i];
    } else if (a == "--prompt" && has_value) {
      prompt = std::atoll(argv[++i]);
    } else if (a == "--steps" && has_value) {
      steps = std::atoll(argv[++i]);
    } else if (a == "--batches" && has_value) {
      batches = ParseList(argv[++i]);
    } else {
      std::cerr << "usage: batch_bench [--work DIR] [--prompt N] [--steps N] [--batches 1,4,8,16]\n";
      return 2;
    }
  }
  if (prompt < 1 || steps < 1 || batches.empty()) {
    std::cerr << "--prompt and --steps must be >= 1 and --batches non-empty\n";
    return 2;
  }
  mlc::FamilyModelOptions o;
  o.family = "qwen2";
  o.quantization = "q4f16_1";
  o.shape = "qwen2.5-0.5b";
  o.seed = 1;
  std::cout << "package: " << work << " (written on first use, reused after)\n";
  if (!mlc::FileExists(mlc::JoinPath(work, mlc::kChatConfigFileName))) {
    auto written = mlc::WriteFamilyModel(work, o);
    if (!written) {
      std::cerr << mlc::FormatErrors(written.errors()) << "\n";
      return 1;
    }
  }
  auto library = mlc::OpenPackageLibrary(work);
  if (!library) {
    std::cerr << mlc::FormatErrors(library.errors()) << "\n";
    return 1;
  }
  auto model = mlc::LoadModel(work, **library);
  if (!model) {
    std::cerr << mlc::FormatErrors(model.errors()) << "\n";
    return 1;
  }
  std::cout << "kernels: " << mlc::cpu::KernelIsa() << ", " << mlc::cpu::ThreadCount()
            << " threads; prompt " << prompt << " positions per sequence, " << steps
            << " decode steps; load average before: " << LoadAverage() << "\n";
  std::vector<Figure> figures;
  for (int64_t batch : batches) {
    auto f = Measure(*model, batch, prompt, steps);
    if (!f) {
      std::cerr << "batch " << batch << ": " << mlc::FormatErrors(f.errors()) << "\n";
      return 1;
    }
    figures.push_back(*f);
    std::printf("  batch %3lld: %8.2f tokens/s (%8.2f per CPU second)\n", static_cast<long long>(batch),
                f->tokens_per_s, f->tokens_per_cpu_s);
    std::fflush(stdout);
  }
  std::cout << "load average after: " << LoadAverage() << "\n";
  const Figure* one = nullptr;
  for (const Figure& f : figures) {
    if (f.batch == 1) one = &f;
  }
  if (!one) return 0;
  std::cout << "ratio to batch 1 (wall / CPU time):\n";
  for (const Figure& f : figures) {
    std::printf("  batch %3lld: %5.2fx / %5.2fx%s\n", static_cast<long long>(f.batch),
                f.tokens_per_s / one->tokens_per_s, f.tokens_per_cpu_s / one->tokens_per_cpu_s,
                f.batch == 8 ? (f.tokens_per_s >= 3 * one->tokens_per_s ? "  (target >= 3x: met)"
                                                                        : "  (target >= 3x: not met)")
                             : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::Guarded("batch_bench", [&] { return Main(argc, argv); });
}
