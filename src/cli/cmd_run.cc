// `mlc-manifest run DIR --request FILE`: binds a reference package to the reference runtime and
// generates: adapters, chunked prefill, sampled decode, per-phase timings; turns share one KV cache.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/runtime.h"

namespace mlc::cli {
namespace {

struct RunArgs {
  std::string dir;
  std::string program;
  std::string request;
  int64_t max_tokens = 16;
  SamplerConfig sampler;
  bool json = false;
};

void PrintHumanTurn(size_t index, size_t count, const TurnResult& r, int64_t kv_after) {
  if (count > 1) std::cout << "turn " << index << ": ";
  std::cout << "prompt " << r.plan.prompt_length << " positions in " << r.plan.chunks.size()
            << " chunks (KV " << r.plan.kv_length << " -> " << kv_after << "), "
            << r.tokens.size() << " tokens (" << r.stop_reason << ")\n  tokens:";
  for (int32_t t : r.tokens) std::cout << " " << t;
  const PhaseTimings& t = r.timings;
  std::cout << "\n  timings: create_kv " << t.create_kv_ms << " ms, embed " << t.embed_ms
            << " ms, adapters " << t.adapter_ms << " ms, prefill " << t.prefill_ms << " ms ("
            << t.prefill_calls << " calls), decode " << t.decode_ms << " ms (" << t.decode_steps
            << " steps)\n";
}

int Run(const RunArgs& a) {
  if (Status s = CheckSamplerConfig(a.sampler); !s) return ReportFailure(s.errors(), a.json);
  if (a.max_tokens < 0) {
    return ReportFailure({Error{ErrorCode::kUsage, "--max-tokens", "expected >= 0"}}, a.json);
  }
  std::optional<CompiledProgram> program;
  if (!a.program.empty()) {
    auto p = ReadCompiledProgram(a.program);
    if (!p) return ReportFailure(p.errors(), a.json, a.program);
    program = std::move(*p);
  }
  auto library = OpenReferenceLibrary(a.dir);
  if (!library) return ReportFailure(library.errors(), a.json);
  auto model = LoadModel(a.dir, **library, program);
  if (!model) return ReportFailure(model.errors(), a.json);
  auto request = ReadRequestFile(a.request);
  if (!request) return ReportFailure(request.errors(), a.json, a.request);
  GenerationOptions options;
  options.max_tokens = a.max_tokens;
  options.sampler = a.sampler;
  options.stop_token_ids = StopTokenIds(model->config);
  Session session = model->NewSession();
  if (!a.json) std::cout << model->bound.note << "\n";
  OrderedJson turns = OrderedJson::array(), all_tokens = OrderedJson::array();
  int64_t prompt_total = 0;
  for (size_t i = 0; i < request->turns.size(); ++i) {
    auto input = PrepareTurn(model->bound.contract, request->turns[i]);
    if (!input) return ReportFailure(input.errors(), a.json, a.request);
    auto result = session.Generate(*input, options);
    if (!result) return ReportFailure(result.errors(), a.json, a.request);
    prompt_total += result->plan.prompt_length;
    for (int32_t t : result->tokens) all_tokens.push_back(t);
    if (!a.json) PrintHumanTurn(i, request->turns.size(), *result, session.KvLength());
    turns.push_back({{"prompt_length", result->plan.prompt_length},
                     {"kv_length_before", result->plan.kv_length},
                     {"chunks", result->plan.chunks.size()},
                     {"tokens", result->tokens},
                     {"stop_reason", result->stop_reason},
                     {"timings", PhaseTimingsJson(result->timings)}});
  }
  if (!a.json) {
    std::cout << "load " << model->load_ms << " ms; KV cache holds " << session.KvLength()
              << " positions\n";
    return kExitOk;
  }
  PrintJson({{"ok", true},
             {"tokens", all_tokens},
             {"prompt_length", prompt_total},
             {"kv_length", session.KvLength()},
             {"pair", GenerationPairName(model->bound.contract.pair)},
             {"legacy", model->bound.legacy},
             {"binding", model->bound.note},
             {"load_ms", model->load_ms},
             {"timings", PhaseTimingsJson(session.timings())},
             {"turns", turns}});
  return kExitOk;
}

const Registration kRun(610, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Generate with the reference runtime on a package");
  auto a = std::make_shared<RunArgs>();
  cmd->add_option("DIR", a->dir, "A reference-model package folder")->required();
  cmd->add_option("--program", a->program,
                  "The compiled-program document (default: the library's _metadata.artifact)");
  cmd->add_option("--request", a->request, "Request JSON (segments or {\"turns\": [...]})")
      ->required();
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate per turn");
  cmd->add_option("--temperature", a->sampler.temperature, "0: greedy");
  cmd->add_option("--top-p", a->sampler.top_p, "Nucleus mass in (0, 1]");
  cmd->add_option("--top-k", a->sampler.top_k, "0: all tokens");
  cmd->add_option("--seed", a->sampler.seed, "Sampler seed");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
