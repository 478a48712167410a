// `mlc-manifest run DIR --request FILE`: binds a package to its library (the reference runtime
// for a reference package, else the built-in CPU program chosen by model_type) and generates
// through a Session, a client of the engine: adapters, chunked prefill, sampled decode, per-phase
// timings; turns continue one sequence. With --messages FILE instead, chat messages become the
// prompt through the package's conversation template and tokenizer (SPEC 7); the reply is streamed
// to stdout and generation stops at stop ids and stop strings; the sampling defaults come from
// mlc-chat-config.json unless given as flags. More --messages files continue the conversation.
// --response-format and --logprobs work as the server's fields of the same names; --tools (or a
// first messages file with tools) as its tools: each reply's calls are constrained and reported, and
// a later messages file answers them with tool messages.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "mlc_manifest/chat.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/serve.h"
#include "mlc_manifest/tools.h"

namespace mlc::cli {
namespace {

struct RunArgs {
  std::string dir;
  std::string program;
  std::string request;
  std::vector<std::string> messages;  // the conversation, then follow-up messages
  int64_t max_tokens = 16;
  SamplerConfig sampler;
  std::string response_format;  // a file holding an OpenAI response_format object
  std::string tools;            // a file holding tools (and tool_choice, parallel_tool_calls)
  int logprobs = -1;
  bool prefix_cache = true;
  bool json = false;
  std::map<std::string, CLI::Option*> sampling_flags;  // chat-config field -> its flag
};

// Chat sampling: each of the chat config's sampling fields the command line did not give.
SamplerConfig ChatSampler(const RunArgs& a, const ChatConfig& config) {
  ChatSamplingOptions options;
  for (const auto& [key, flag] : a.sampling_flags) {
    if (flag->count() > 0) options.keep.insert(key);
  }
  return ChatSamplerConfig(a.sampler, config.sampling, options);
}

double PerSecond(int64_t n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; }

// Milliseconds to the microsecond ("1.440 ms"), rates to 0.1 per second, for human output.
std::string Ms(double ms) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f ms", ms);
  return buf;
}
std::string Rate(double per_second) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f tokens/s", per_second);
  return buf;
}

void PrintHumanTurn(std::ostream& out, size_t index, size_t count, const TurnResult& r,
                    int64_t kv_after) {
  if (count > 1) out << "turn " << index << ": ";
  out << "prompt " << r.plan.prompt_length << " positions in " << r.plan.chunks.size()
            << " chunks (KV " << r.plan.kv_length << " -> " << kv_after << "), "
            << r.tokens.size() << " tokens (" << r.stop_reason << ")\n  tokens:";
  for (int32_t t : r.tokens) out << " " << t;
  const PhaseTimings& t = r.timings;
  out << "\n  timings: create_kv " << Ms(t.create_kv_ms) << ", embed " << Ms(t.embed_ms)
      << ", adapters " << Ms(t.adapter_ms) << ", prefill " << Ms(t.prefill_ms) << " ("
      << t.prefill_calls << " calls), decode " << Ms(t.decode_ms) << " (" << t.decode_steps
      << " steps)\n  speed: prefill " << Rate(PerSecond(t.prefill_positions, t.prefill_ms))
      << ", decode " << Rate(PerSecond(t.decode_steps, t.decode_ms)) << "\n";
}

// The grammar of a response_format file ({"type": "json_schema", "json_schema": {...}} or
// {"type": "json_object"}), over the package's vocabulary.
Result<std::shared_ptr<const JsonConstraint>> ReadResponseFormat(const std::string& path,
                                                                 const Tokenizer* tokenizer) {
  if (!tokenizer) return Error{ErrorCode::kUsage, "", "--response-format needs the package's tokenizer"};
  auto text = ReadFile(path);
  MLC_RETURN_IF_ERROR(text);
  auto checked = ParseJson(*text);  // strict: duplicate keys, depth, UTF-8
  if (!checked) return checked.take_errors();
  OrderedJson body = {{"response_format", OrderedJson::parse(*text)}};
  auto grammar = ParseResponseFormat(body, JsonGrammarOptions{});
  MLC_RETURN_IF_ERROR(grammar);
  if (!*grammar) return std::shared_ptr<const JsonConstraint>();
  return std::make_shared<const JsonConstraint>(JsonConstraint{*grammar, TokenVocabulary::FromTokenizer(*tokenizer)});
}

// Whether a messages file is a request with tools (read again as tools by ReadToolsFile).
bool FileHasTools(const std::string& path) {
  auto doc = ReadJsonFile(path);
  return doc && doc->is_object() && doc->contains("tools");
}

// A chat turn of `run --messages`: the file's messages with the tools, calls and results written
// the family's way (the first turn's with the tool list, a follow-up's results checked against
// the last reply's calls).
Result<RequestTurn> ChatTurn(ChatTurns& turns, const ToolFormat& format, const ToolSet& tools,
                             const std::vector<ToolCall>& calls, const std::string& file, const std::string& reply) {
  auto messages = ReadMessagesFile(file);
  MLC_RETURN_IF_ERROR(messages);
  const bool first = turns.history().empty();
  auto written = first ? WriteToolMessages(format, turns.tmpl(), tools, std::move(*messages))
                       : tools.tools.empty() && calls.empty() ? std::move(messages)
                                       : WriteToolFollowUp(format, turns.tmpl(), calls, std::move(*messages));
  if (!written) return InDocument(written.take_errors(), DocumentName(file));
  return turns.Next(*written, reply, std::filesystem::path(file).parent_path().string());
}

OrderedJson LogprobsJson(const std::vector<TokenLogprobs>& all) {
  OrderedJson out = OrderedJson::array();
  for (const TokenLogprobs& t : all) {
    OrderedJson top = OrderedJson::array();
    for (const auto& [id, lp] : t.top) top.push_back({{"token", id}, {"logprob", lp}});
    out.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top_logprobs", top}});
  }
  return out;
}

int Run(const RunArgs& a) {
  if (a.request.empty() == a.messages.empty()) {
    return ReportFailure({UsageError("give exactly one of --request or --messages")}, a.json);
  }
  if (a.max_tokens < 0) {
    return ReportFailure({UsageError("--max-tokens: expected >= 0")}, a.json);
  }
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  const bool chat = !a.messages.empty();
  OpenOptions open;
  open.chat = chat;
  if (!a.program.empty()) {
    auto p = ReadCompiledProgram(a.program);
    if (!p) return ReportFailure(p.errors(), a.json, a.program);
    open.program = std::move(*p);
  }
  auto package = OpenPackage(a.dir, open);
  if (!package) return ReportFailure(package.errors(), a.json);
  const LoadedModel* model = &package->model;
  const SamplerConfig sampler = chat ? ChatSampler(a, model->config) : a.sampler;
  if (Status s = CheckSamplerConfig(sampler); !s) return ReportFailure(s.errors(), a.json);
  const Tokenizer* tokenizer = package->tokenizer.get();
  std::optional<ChatTurns> chat_turns;
  std::optional<Request> request;
  if (chat) {
    chat_turns.emplace(*package->tmpl, *tokenizer);
  } else {
    auto r = ReadRequestFile(a.request);
    if (!r) return ReportFailure(r.errors(), a.json, a.request);
    request = std::move(*r);
  }
  const size_t turn_count = chat ? a.messages.size() : request->turns.size();
  // Chat replies go to stdout as they are generated (flushed on a terminal); the report of each
  // turn then goes to stderr, so that stdout holds just the text. On a terminal, control bytes in
  // the reply are escaped (a reply cannot drive the terminal); to a pipe or file it goes raw.
  const bool stream = chat && !a.json;
  const bool terminal = stream && isatty(STDOUT_FILENO);
  auto show = [terminal](const std::string& text) {
    return terminal ? EscapeForTerminal(text) : text;
  };
  std::ostream& report = stream ? std::cerr : std::cout;
  if (a.logprobs < -1 || a.logprobs > 20) {
    return ReportFailure({UsageError("--logprobs: expected 0..20")}, a.json);
  }
  GenerationOptions options;
  options.max_tokens = a.max_tokens;
  options.sampler = sampler;
  options.stop_token_ids = package->stop_ids;
  options.stop_strings = package->stop_strings;
  options.top_logprobs = a.logprobs;
  if (!a.response_format.empty()) {
    auto json = ReadResponseFormat(a.response_format, tokenizer);
    if (!json) return ReportFailure(json.errors(), a.json, a.response_format);
    options.json = *json;
  }
  // Tools: from --tools, else from the first messages file when it is a request with "tools".
  ToolSet tools;
  const std::string tools_file = !a.tools.empty() ? a.tools : chat && FileHasTools(a.messages[0]) ? a.messages[0] : "";
  if (!tools_file.empty()) {
    if (!chat) return ReportFailure({UsageError("--tools needs --messages")}, a.json);
    auto read = ReadToolsFile(tools_file);
    if (!read) return ReportFailure(read.errors(), a.json, tools_file);
    tools = std::move(*read);
  }
  const ToolFormat tool_format = chat ? ToolFormatFor(*package->tmpl) : ToolFormat{};
  if (tools.Active()) {
    if (options.json) return ReportFailure({UsageError("--response-format with active tools")}, a.json);
    auto grammar = ToolCallGrammar(tool_format, tools);
    if (!grammar) return ReportFailure(grammar.errors(), a.json, tools_file);
    options.json = std::make_shared<const JsonConstraint>(
        JsonConstraint{*grammar, TokenVocabulary::FromTokenizer(*tokenizer, ToolMarkers(tool_format))});
  }
  std::vector<ToolCall> calls;  // the last reply's
  if (stream) options.on_text = [&](const std::string& piece) {
    std::cout << show(piece);
    if (terminal) std::cout.flush();
  };
  SessionOptions session_options;
  session_options.tokenizer = tokenizer;
  session_options.prefix_cache = a.prefix_cache;
  Session session = model->NewSession(session_options);
  if (!a.json) report << model->bound.note << "\n";
  OrderedJson turns = OrderedJson::array(), all_tokens = OrderedJson::array();
  int64_t prompt_total = 0;
  std::string reply;
  for (size_t i = 0; i < turn_count; ++i) {
    const std::string& input_file = chat ? a.messages[i] : a.request;
    auto turn = chat ? ChatTurn(*chat_turns, tool_format, tools, calls, input_file, reply)
                     : Result<RequestTurn>(request->turns[i]);
    if (!turn) return ReportFailure(turn.errors(), a.json, input_file);
    auto input = PrepareTurn(model->bound.contract, *turn, model->limits, session.KvLength());
    if (!input) return ReportFailure(input.errors(), a.json, input_file);
    if (CpuPhaseClockOn()) ResetCpuPhases();
    auto result = session.Generate(*input, options);
    if (!result) return ReportFailure(result.errors(), a.json, input_file);
    ToolReply split;
    if (tokenizer) {
      if (stream) std::cout << std::endl;
      if (!chat && !a.json) std::cout << "text: " << OrderedJson(result->text).dump() << "\n";
      reply = result->text;
      if (!tools.tools.empty()) split = SplitToolReply(tool_format, reply, "call_" + std::to_string(i) + "_");
      calls = split.calls;
      if (!a.json) {
        for (const ToolCall& c : calls) report << "tool call " << c.id << ": " << c.name << " " << c.arguments << "\n";
      }
    }
    prompt_total += result->plan.prompt_length;
    for (int32_t t : result->tokens) all_tokens.push_back(t);
    if (!a.json) PrintHumanTurn(report, i, turn_count, *result, session.KvLength());
    turns.push_back({{"prompt_length", result->plan.prompt_length},
                     {"kv_length_before", result->plan.kv_length},
                     {"chunks", result->plan.chunks.size()},
                     {"tokens", result->tokens},
                     {"stop_reason", result->stop_reason},
                     {"text", tokenizer ? OrderedJson(result->text) : OrderedJson()},
                     {"cached_tokens", result->cached_tokens},
                     {"timings", PhaseTimingsJson(result->timings)}});
    if (a.logprobs >= 0) turns.back()["logprobs"] = LogprobsJson(result->logprobs);
    if (!tools.tools.empty()) {
      turns.back()["content"] = split.content;
      turns.back()["tool_calls"] = ToolCallsJson(calls);
    }
    // MLC_CPU_PHASES=1: where the CPU program's time went in this turn (cpu_model_bench reads it).
    if (CpuPhaseClockOn()) turns.back()["cpu_phases"] = CpuPhasesJson();
  }
  if (!a.json) {
    report << "load " << Ms(model->load_ms) << "; KV cache holds " << session.KvLength()
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
             {"load_ms", RoundToMicroseconds(model->load_ms)},
             {"timings", PhaseTimingsJson(session.timings())},
             {"turns", turns}});
  return kExitOk;
}

const Registration kRun(610, "run",
                        "Generate on a package: the reference runtime, or the built-in CPU program of "
                        "its model_type",
                        [](CLI::App* cmd) {
  auto a = std::make_shared<RunArgs>();
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  cmd->footer("Built-in CPU programs (model_type): " + join(CpuModelTypes()) +
              "; quantizations: " + join(CpuQuantizations()) + ".");
  cmd->add_option("DIR", a->dir, "A converted package folder")->required();
  cmd->add_option("--program", a->program,
                  "The compiled-program document (default: the library's _metadata.artifact)");
  cmd->add_option("--request", a->request, "Request JSON (segments or {\"turns\": [...]})");
  cmd->add_option("--messages", a->messages,
                  "Chat messages JSON (instead of --request); again for each follow-up turn, "
                  "holding the messages after the previous reply")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate per turn");
  const char* chat_default = " (--messages: default from mlc-chat-config.json)";
  a->sampling_flags["temperature"] =
      cmd->add_option("--temperature", a->sampler.temperature, std::string("0: greedy") + chat_default);
  a->sampling_flags["top_p"] = cmd->add_option("--top-p", a->sampler.top_p,
                                               std::string("Nucleus mass in (0, 1]") + chat_default);
  a->sampling_flags["repetition_penalty"] = cmd->add_option(
      "--repetition-penalty", a->sampler.repetition_penalty, std::string("> 0, 1: none") + chat_default);
  a->sampling_flags["presence_penalty"] = cmd->add_option(
      "--presence-penalty", a->sampler.presence_penalty, std::string("In [-2, 2]") + chat_default);
  a->sampling_flags["frequency_penalty"] = cmd->add_option(
      "--frequency-penalty", a->sampler.frequency_penalty, std::string("In [-2, 2]") + chat_default);
  cmd->add_option("--top-k", a->sampler.top_k, "0: all tokens");
  cmd->add_option("--seed", a->sampler.seed, "Sampler seed");
  cmd->add_option("--response-format", a->response_format,
                  "Structured output: a file holding an OpenAI response_format object "
                  "({\"type\": \"json_schema\", \"json_schema\": {\"name\", \"schema\"}} or "
                  "{\"type\": \"json_object\"})");
  cmd->add_option("--tools", a->tools,
                  "Tool calling (--messages): a file holding OpenAI's tools, tool_choice and "
                  "parallel_tool_calls (default: the first messages file's, when it has tools); "
                  "each reply's calls follow the tools' schemas, and a later messages file answers "
                  "them with tool messages (tool_call_id call_TURN_INDEX)");
  cmd->add_option("--logprobs", a->logprobs,
                  "Each generated token's log-probability with this many alternatives (0..20; --json)");
  cmd->add_flag("--no-prefix-cache{false}", a->prefix_cache,
                "Prefill every turn whole instead of reusing cached KV pages");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
