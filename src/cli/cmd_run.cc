// `mlc-manifest run DIR --request FILE`: binds a reference package to the reference runtime and
// generates: adapters, chunked prefill, sampled decode, per-phase timings; turns share one KV cache.
// With --messages FILE instead, chat messages become the prompt through the package's
// conversation template and tokenizer (SPEC 7), and the reply text is printed, cut at stop strings.
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/runtime.h"

namespace mlc::cli {
namespace {

struct RunArgs {
  std::string dir;
  std::string program;
  std::string request;
  std::string messages;
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

// Chat messages as a one-turn request: template, tokenizer, media data: URLs written to media_dir.
Result<Request> MessagesRequest(const RunArgs& a, const LoadedModel& model, const Tokenizer& tokenizer,
                                const std::string& media_dir) {
  auto messages = ReadMessagesFile(a.messages);
  if (!messages) return messages.take_errors();
  auto tmpl = ConvTemplateFromChatConfig(model.config.raw);
  if (!tmpl) return tmpl.take_errors();
  auto prompt = BuildChatPrompt(*tmpl, *messages);
  if (!prompt) return prompt.take_errors();
  std::string base_dir = std::filesystem::path(a.messages).parent_path().string();
  auto turn = PromptTurn(*prompt, *tmpl, tokenizer, base_dir, media_dir);
  if (!turn) return turn.take_errors();
  return Request{{std::move(*turn)}};
}

// The reply text cut at the first stop string; sets *stopped when one was found.
std::string ReplyText(const Tokenizer& tokenizer, const ChatConfig& config,
                      const std::vector<int32_t>& tokens, bool* stopped) {
  auto tmpl = ConvTemplateFromChatConfig(config.raw);
  StopMatcher matcher(tmpl ? tmpl->stop_str : std::vector<std::string>{});
  std::string text = matcher.Push(tokenizer.Decode(tokens));
  *stopped = matcher.stopped();
  return text + matcher.Finish();
}

int Run(const RunArgs& a) {
  if (a.request.empty() == a.messages.empty()) {
    return ReportFailure({Error{ErrorCode::kUsage, "--request", "give exactly one of --request or --messages"}},
                         a.json);
  }
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
  std::unique_ptr<Tokenizer> tokenizer;
  if (auto t = Tokenizer::FromDirectory(a.dir); t) {
    tokenizer = std::move(*t);
  } else if (!a.messages.empty()) {
    return ReportFailure(t.errors(), a.json);
  }
  std::string media_dir = (std::filesystem::temp_directory_path() / "mlc-run-XXXXXX").string();
  if (!a.messages.empty() && mkdtemp(media_dir.data()) == nullptr) {
    return ReportFailure({IoError(media_dir, "cannot create a folder for data: URL media")}, a.json);
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() { if (!dir.empty()) { std::error_code ec; std::filesystem::remove_all(dir, ec); } }
  } cleanup{a.messages.empty() ? "" : media_dir};
  auto request = a.messages.empty() ? ReadRequestFile(a.request)
                                    : MessagesRequest(a, *model, *tokenizer, media_dir);
  const std::string& input_file = a.messages.empty() ? a.request : a.messages;
  if (!request) return ReportFailure(request.errors(), a.json, input_file);
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
    if (!input) return ReportFailure(input.errors(), a.json, input_file);
    auto result = session.Generate(*input, options);
    if (!result) return ReportFailure(result.errors(), a.json, input_file);
    std::optional<std::string> text;
    if (tokenizer) {
      bool stopped = false;
      text = ReplyText(*tokenizer, model->config, result->tokens, &stopped);
      if (stopped) result->stop_reason = "stop_str";
      if (!a.json) std::cout << "text: " << OrderedJson(*text).dump() << "\n";
    }
    prompt_total += result->plan.prompt_length;
    for (int32_t t : result->tokens) all_tokens.push_back(t);
    if (!a.json) PrintHumanTurn(i, request->turns.size(), *result, session.KvLength());
    turns.push_back({{"prompt_length", result->plan.prompt_length},
                     {"kv_length_before", result->plan.kv_length},
                     {"chunks", result->plan.chunks.size()},
                     {"tokens", result->tokens},
                     {"stop_reason", result->stop_reason},
                     {"text", text ? OrderedJson(*text) : OrderedJson()},
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
  cmd->add_option("--request", a->request, "Request JSON (segments or {\"turns\": [...]})");
  cmd->add_option("--messages", a->messages, "Chat messages JSON (instead of --request)");
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
