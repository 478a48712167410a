// The prefix cache on the built-in CPU program (issue 39), each figure against the same engine
// with the cache off, in one run:
//  1. A conversation of --turns turns (each adds a user message and the reply before it, ~2k
//     positions by the end on the default settings), each turn's whole history submitted as a new
//     request (as a chat client does): time to first token of each turn with the cache, without it,
//     and a cold prefill of only the turn's new positions (the goal: the last turn within 5% of that,
//     >= 20x faster than without the cache).
//  2. --shared requests sharing a --system-position system prompt, submitted at once: requests per
//     second with and without the cache (goal >= 2x), in alternating pairs, medians and spread.
//  3. The same count of unique prompts: requests per second with and without (goal: at most 3%
//     slower with the cache), in alternating pairs.
//  0. One stream, prefill --prompt positions and decode --decode tokens: through a Session (a client
//     of the engine, as `run` is) against the same calls made directly on BatchModel (the loop
//     `run` had before the engine owned generation), in alternating pairs (goal: within 2%).
// With --e2b, workload 1 also on the Gemma 4 E2B shape with its audio tower and a clip in the first
// turn. Packages are random-weight q4f16_1 (`mlc-manifest reference-model`), written once under
// --work and reused.
// Usage: prefix_cache_bench [--work DIR] [--turns N] [--shared N] [--system N] [--pairs N]
//                           [--prompt N] [--decode N] [--e2b]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "bench_main.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/kernels.h"

namespace {

using Clock = std::chrono::steady_clock;

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// A request's first-token time and end, seen from its sink.
struct Timed {
  std::mutex mu;
  std::condition_variable cv;
  Clock::time_point start, first;
  bool got_first = false, done = false;
  std::vector<int32_t> tokens;
  int64_t cached = 0;
  std::string failure;
  mlc::StreamSink Sink() {
    return [this](const mlc::StreamEvent& e) {
      std::lock_guard<std::mutex> lock(mu);
      if (!got_first && (!e.tokens.empty() || e.done)) {
        first = Clock::now();
        got_first = true;
      }
      tokens.insert(tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.done) {
        done = true;
        cached = e.cached_tokens;
        if (e.finish_reason == "error") failure = mlc::FormatErrors(e.errors);
      }
      cv.notify_all();
    };
  }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  }
};

mlc::TurnInput Text(std::vector<int32_t> ids) {
  mlc::TurnInput in;
  in.pieces.push_back(mlc::PromptPiece{mlc::TextPiece{std::move(ids)}, "/0"});
  in.media.emplace_back();
  return in;
}

std::vector<int32_t> Ids(int64_t n, int64_t salt) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(10 + (i * 7919 + salt * 104729) % 20000));
  return out;
}

mlc::Result<std::unique_ptr<mlc::Engine>> Start(const mlc::LoadedModel& m, bool cache, int64_t batch,
                                                int64_t positions) {
  mlc::EngineOptions eo;
  eo.batch.max_batch_size = batch;
  eo.batch.kv_positions = positions;
  eo.prefix_cache = cache;
  return mlc::Engine::Start(m, nullptr, eo);
}

// One request, waited for: seconds to its first token.
double Ttft(mlc::Engine& e, mlc::TurnInput in, int64_t max_tokens, Timed* out) {
  mlc::GenerationRequest r;
  r.input = std::move(in);
  r.max_tokens = max_tokens;
  out->start = Clock::now();
  auto id = e.Submit(std::move(r), out->Sink());
  if (!id) {
    out->failure = mlc::FormatErrors(id.errors());
    return 0;
  }
  out->Wait();
  return Seconds(out->start, out->first);
}

// The direct loop: prefill chunk by chunk, then greedy decode, on BatchModel's calls alone.
mlc::Result<double> DirectStream(const mlc::LoadedModel& m, const mlc::TurnInput& in, int64_t decode) {
  const auto start = Clock::now();  // both sides count making their KV cache
  mlc::BatchOptions bo;
  bo.max_batch_size = 1;
  auto b = mlc::BatchModel::Create(m, bo);
  MLC_RETURN_IF_ERROR(b);
  MLC_RETURN_IF_ERROR((*b)->kv().AddSequence(0));
  auto prompt = (*b)->Prepare(in, 0);
  MLC_RETURN_IF_ERROR(prompt);
  std::vector<float> last;
  for (const mlc::PrefillChunk& c : prompt->plan.chunks) {
    auto e = (*b)->ChunkEmbeddings(c, *prompt);
    MLC_RETURN_IF_ERROR(e);
    mlc::SequenceChunk one{0, &c, *e};
    auto logits = (*b)->Prefill(std::span<const mlc::SequenceChunk>(&one, 1));
    MLC_RETURN_IF_ERROR(logits);
    last.assign((*logits)[0].begin(), (*logits)[0].end());
  }
  mlc::Sampler sampler(mlc::SamplerConfig{});
  int32_t token = sampler.Sample(last);
  const int64_t id = 0;
  for (int64_t i = 1; i < decode; ++i) {
    auto logits = (*b)->Decode(std::span<const int64_t>(&id, 1), std::span<const int32_t>(&token, 1));
    MLC_RETURN_IF_ERROR(logits);
    token = sampler.Sample((*logits)[0]);
  }
  return Seconds(start, Clock::now());
}

mlc::Result<double> SessionStream(const mlc::LoadedModel& m, const mlc::TurnInput& in, int64_t decode) {
  mlc::Session s = m.NewSession();
  mlc::GenerationOptions o;
  o.max_tokens = decode;
  const auto start = Clock::now();
  auto r = s.Generate(in, o);
  MLC_RETURN_IF_ERROR(r);
  return Seconds(start, Clock::now());
}

int OneStream(const mlc::LoadedModel& m, int64_t prompt, int64_t decode, int pairs) {
  const mlc::TurnInput in = Text(Ids(prompt, 77));
  std::vector<double> ratio;
  for (int i = 0; i < pairs; ++i) {
    double t[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const bool engine = (i + side) % 2 == 0;
      auto r = engine ? SessionStream(m, in, decode) : DirectStream(m, in, decode);
      if (!r) {
        std::cerr << mlc::FormatErrors(r.errors()) << "\n";
        return 1;
      }
      t[engine ? 0 : 1] = *r;
    }
    ratio.push_back(t[0] / t[1]);
    std::printf("  one stream pair %d: %.3f s through the engine, %.3f s direct: %.3fx\n", i + 1, t[0], t[1],
                ratio.back());
    std::fflush(stdout);
  }
  std::sort(ratio.begin(), ratio.end());
  std::printf("  one stream (prompt %lld, %lld tokens): engine / direct median %.3fx (spread %.3f-%.3fx; goal <= 1.02x)\n",
              static_cast<long long>(prompt), static_cast<long long>(decode), ratio[ratio.size() / 2], ratio.front(),
              ratio.back());
  return 0;
}

// Workload 1: a growing conversation, each turn resubmitted whole.
int Conversation(const mlc::LoadedModel& m, const std::string& name, int turns, int64_t user, int64_t reply,
                 const mlc::TurnInput& first_media) {
  auto cached = Start(m, true, 1, 0), plain = Start(m, false, 1, 0);
  if (!cached || !plain) {
    std::cerr << mlc::FormatErrors((cached ? plain : cached).errors()) << "\n";
    return 1;
  }
  std::printf("%s: %d turns of %lld user positions and a %lld-token reply; TTFT in ms\n", name.c_str(), turns,
              static_cast<long long>(user), static_cast<long long>(reply));
  std::printf("  %4s %7s %7s %10s %10s %12s %8s %8s\n", "turn", "prompt", "cached", "with", "without",
              "cold new", "speedup", "vs cold");
  mlc::TurnInput history = first_media;
  double last_with = 0, last_without = 0, last_cold = 0;
  std::vector<int32_t> last_reply;
  for (int t = 0; t < turns; ++t) {
    const std::vector<int32_t> message = Ids(user, t);
    history.pieces.push_back(mlc::PromptPiece{mlc::TextPiece{message}, "/t"});
    history.media.emplace_back();
    Timed a, b, c;
    const double with = Ttft(**cached, history, reply, &a);
    const double without = Ttft(**plain, history, reply, &b);
    // The turn's new positions alone (the last reply and this message), cold.
    std::vector<int32_t> fresh = last_reply;
    fresh.insert(fresh.end(), message.begin(), message.end());
    const double cold = Ttft(**plain, Text(fresh), reply, &c);
    for (const Timed* x : {&a, &b, &c}) {
      if (!x->failure.empty()) {
        std::cerr << "turn " << t << ": " << x->failure << "\n";
        return 1;
      }
    }
    if (a.tokens != b.tokens) std::printf("  turn %d: the cached reply differs from the uncached one\n", t);
    int64_t prompt = 0;
    for (const auto& p : history.pieces) prompt += p.MinPositions();
    std::printf("  %4d %7lld %7lld %10.1f %10.1f %12.1f %7.1fx %7.2fx\n", t + 1, static_cast<long long>(prompt),
                static_cast<long long>(a.cached), with * 1e3, without * 1e3, cold * 1e3, without / with, with / cold);
    std::fflush(stdout);
    history.pieces.push_back(mlc::PromptPiece{mlc::TextPiece{a.tokens}, "/r"});
    last_reply = a.tokens;
    history.media.emplace_back();
    last_with = with;
    last_without = without;
    last_cold = cold;
  }
  std::printf("  last turn: %.1fx faster than without the cache (goal >= 20x at 2k positions); %.2fx a cold "
              "prefill of its new positions (goal <= 1.05x)\n",
              last_without / last_with, last_with / last_cold);
  return 0;
}

// Submits every prompt at once; requests per second.
double Throughput(mlc::Engine& e, const std::vector<mlc::TurnInput>& prompts, int64_t max_tokens) {
  std::vector<std::unique_ptr<Timed>> all;
  const auto start = Clock::now();
  for (const mlc::TurnInput& in : prompts) {
    all.push_back(std::make_unique<Timed>());
    mlc::GenerationRequest r;
    r.input = in;
    r.max_tokens = max_tokens;
    if (!e.Submit(std::move(r), all.back()->Sink())) return 0;
  }
  for (auto& t : all) t->Wait();
  return static_cast<double>(prompts.size()) / Seconds(start, Clock::now());
}

// Workloads 2 and 3: alternating pairs (a fresh engine each time, so nothing is cached before).
int Pairs(const mlc::LoadedModel& m, const std::string& name, const std::vector<mlc::TurnInput>& prompts, int pairs,
          const std::string& goal) {
  std::vector<double> with, without, ratio;
  int64_t most = 0;
  for (const auto& p : prompts) {
    int64_t n = 0;
    for (const auto& piece : p.pieces) n += piece.MinPositions();
    most = std::max(most, n);
  }
  const int64_t positions = 8 * (most + 64);
  for (int i = 0; i < pairs; ++i) {
    for (int side = 0; side < 2; ++side) {
      const bool cache = (i + side) % 2 == 0;  // alternate which side goes first
      auto e = Start(m, cache, 8, positions);
      if (!e) {
        std::cerr << mlc::FormatErrors(e.errors()) << "\n";
        return 1;
      }
      (cache ? with : without).push_back(Throughput(**e, prompts, 8));
    }
    ratio.push_back(with.back() / without.back());
    std::printf("  %s pair %d: %.2f req/s with the cache, %.2f without: %.2fx\n", name.c_str(), i + 1, with.back(),
                without.back(), ratio.back());
    std::fflush(stdout);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("  %s: median %.2fx (spread %.2f-%.2fx; %s)\n", name.c_str(), median(ratio),
              *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()),
              goal.c_str());
  return 0;
}

// A package written once (random q4f16_1 weights) and loaded with its CPU library.
struct Loaded {
  std::unique_ptr<mlc::ModelLibrary> library;
  mlc::LoadedModel model;
};

mlc::Result<Loaded> Load(const std::string& dir, const std::string& family, const std::string& shape, bool audio) {
  mlc::FamilyModelOptions o;
  o.family = family;
  o.quantization = "q4f16_1";
  o.shape = shape;
  o.seed = 1;
  o.audio = audio;
  if (!mlc::FileExists(mlc::JoinPath(dir, mlc::kChatConfigFileName))) {
    std::cout << "writing " << dir << "\n";
    auto written = mlc::WriteFamilyModel(dir, o);
    MLC_RETURN_IF_ERROR(written);
  }
  auto library = mlc::OpenPackageLibrary(dir);
  MLC_RETURN_IF_ERROR(library);
  Loaded out;
  out.library = std::move(*library);
  auto model = mlc::LoadModel(dir, *out.library);
  MLC_RETURN_IF_ERROR(model);
  out.model = std::move(*model);
  return out;
}

int Main(int argc, char** argv) {
  std::string work = std::string(MLC_BINARY_DIR) + "/bench-work";
  int turns = 20, shared = 32, pairs = 3;
  int64_t system = 1024, stream_prompt = 128, stream_decode = 64;
  bool e2b = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--work" && has_value) work = argv[++i];
    else if (a == "--turns" && has_value) turns = std::atoi(argv[++i]);
    else if (a == "--shared" && has_value) shared = std::atoi(argv[++i]);
    else if (a == "--system" && has_value) system = std::atoll(argv[++i]);
    else if (a == "--pairs" && has_value) pairs = std::atoi(argv[++i]);
    else if (a == "--prompt" && has_value) stream_prompt = std::atoll(argv[++i]);
    else if (a == "--decode" && has_value) stream_decode = std::atoll(argv[++i]);
    else if (a == "--e2b") e2b = true;
    else {
      std::cerr << "usage: prefix_cache_bench [--work DIR] [--turns N] [--shared N] [--system N] [--pairs N] "
                   "[--prompt N] [--decode N] [--e2b]\n";
      return 2;
    }
  }
  if (turns < 1 || shared < 1 || system < 1 || pairs < 1 || stream_prompt < 1 || stream_decode < 1) {
    std::cerr << "prefix_cache_bench: counts must be >= 1\n";
    return 2;
  }
  auto qwen = Load(work + "/qwen2.5-0.5b-q4f16_1", "qwen2", "qwen2.5-0.5b", false);
  if (!qwen) {
    std::cerr << mlc::FormatErrors(qwen.errors()) << "\n";
    return 1;
  }
  const mlc::LoadedModel* model = &qwen->model;
  std::cout << "kernels: " << mlc::cpu::KernelIsa() << ", " << mlc::cpu::ThreadCount()
            << " threads; load average before: " << LoadAverage() << "\n";
  if (int rc = OneStream(*model, stream_prompt, stream_decode, std::max(pairs, 5)); rc) return rc;
  if (int rc = Conversation(*model, "qwen2.5-0.5b conversation", turns, 90, 10, mlc::TurnInput{}); rc) return rc;
  std::vector<mlc::TurnInput> common, unique;
  const std::vector<int32_t> prefix = Ids(system, 1000);
  for (int i = 0; i < shared; ++i) {
    std::vector<int32_t> ids = prefix;
    const std::vector<int32_t> tail = Ids(16, 2000 + i);
    ids.insert(ids.end(), tail.begin(), tail.end());
    common.push_back(Text(ids));
    unique.push_back(Text(Ids(256, 3000 + i)));
  }
  if (int rc = Pairs(*model, "shared system prompt", common, pairs, "goal >= 2x"); rc) return rc;
  if (int rc = Pairs(*model, "unique prompts", unique, pairs, "goal >= 0.97x"); rc) return rc;
  if (e2b) {
    auto e2b_model = Load(work + "/e2b-q4f16_1-audio", "gemma4", "e2b", true);
    if (!e2b_model) {
      std::cerr << mlc::FormatErrors(e2b_model.errors()) << "\n";
      return 1;
    }
    const mlc::LoadedModel* m = &e2b_model->model;
    mlc::TurnInput clip;
    clip.pieces.push_back(mlc::PromptPiece{mlc::AudioPiece(*m->bound.contract.audio, std::nullopt), "/audio"});
    mlc::NDArray pcm = mlc::NDArray::Empty({16000 * 5}, mlc::DlFloat32());
    for (int64_t i = 0; i < pcm.Elements(); ++i) pcm.data<float>()[i] = static_cast<float>(0.3 * std::sin(0.03 * i));
    clip.media.push_back(pcm);
    if (int rc = Conversation(*m, "e2b conversation with a 5 s clip in turn 1", turns, 40, 10, clip); rc) return rc;
  }
  std::cout << "load average after: " << LoadAverage() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::Guarded("prefix_cache_bench", [&] { return Main(argc, argv); });
}
