// The C API over prompts (SPEC 7: chat messages to prompt segments and token ids) and prefill
// planning (SPEC 6: a request's segments to the chunks prefill is fed with), without a runtime.
#include <optional>
#include <string>
#include <string_view>

#include "capi/capi_internal.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/tools.h"

using mlc::capi::CStr;
using mlc::capi::Fail;
using mlc::capi::FailWith;
using mlc::capi::Guard;

struct mlc_prompt {
  mlc_errors errors;
  std::string text;
  std::string json;
};

struct mlc_plan {
  mlc_errors errors;
  std::string json;
  int64_t prompt_length = 0;
  size_t chunks = 0;
};

namespace {

constexpr const char* kMemoryDocument = "<memory>";

// The messages of an array, or of an object's "messages".
mlc::Result<std::vector<mlc::ChatMessage>> Messages(const mlc::Json& doc) {
  if (doc.is_object() && doc.contains("messages")) return mlc::ParseMessages(doc["messages"], "/messages");
  return mlc::ParseMessages(doc);
}

int BuildPrompt(mlc_prompt* h, const std::string& dir, std::string_view messages_text) {
  auto doc = mlc::ParseJson(messages_text);
  if (!doc) return Fail(h->errors, doc.take_errors(), kMemoryDocument);
  auto messages = Messages(*doc);
  if (!messages) return Fail(h->errors, messages.take_errors(), kMemoryDocument);
  std::string config_path = mlc::JoinPath(dir, mlc::kChatConfigFileName);
  auto config = mlc::ReadJsonFile(config_path);
  if (!config) return Fail(h->errors, config.take_errors(), config_path);
  auto tmpl = mlc::ConvTemplateFromChatConfig(*config);
  if (!tmpl) return Fail(h->errors, tmpl.take_errors(), config_path);
  auto tokenizer = mlc::Tokenizer::FromDirectory(dir);
  if (!tokenizer) return Fail(h->errors, tokenizer.take_errors(), dir);
  // Tools beside the messages ({"messages", "tools", "tool_choice", ...}): written the family's way.
  if (doc->is_object() && doc->contains("tools")) {
    auto tools = mlc::ParseToolSet(mlc::OrderedJson::parse(messages_text));
    if (!tools) return Fail(h->errors, tools.take_errors(), kMemoryDocument);
    auto written = mlc::WriteToolMessages(mlc::ToolFormatFor(*tmpl), *tmpl, *tools, std::move(*messages));
    if (!written) return Fail(h->errors, written.take_errors(), kMemoryDocument);
    messages = std::move(written);
  }
  auto prompt = mlc::BuildChatPrompt(*tmpl, *messages);
  if (!prompt) return Fail(h->errors, prompt.take_errors(), kMemoryDocument);
  auto report = mlc::PromptReportJson(*prompt, *tmpl, **tokenizer, nullptr, "");
  if (!report) return Fail(h->errors, report.take_errors(), kMemoryDocument);
  h->text = mlc::PromptText(*prompt);
  h->json = report->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return MLC_OK;
}

int ComputePlan(mlc_plan* h, const std::string& dir, std::string_view request_text,
                const mlc_plan_params& p) {
  bool legacy = false;
  auto bound = mlc::BindPackageFolder(dir, mlc::capi::Str(p.program_path),
                                      p.task ? p.task : "chat.completions", &legacy);
  if (!bound) return Fail(h->errors, bound.take_errors());
  std::string config_path = mlc::JoinPath(dir, mlc::kChatConfigFileName);
  auto config = mlc::ReadChatConfig(config_path);
  if (!config) return Fail(h->errors, config.take_errors(), config_path);
  auto limits = mlc::PlanLimitsFromChatConfig(*config);
  if (!limits) return Fail(h->errors, limits.take_errors(), config_path);
  auto doc = mlc::ParseJson(request_text);
  if (!doc) return Fail(h->errors, doc.take_errors(), kMemoryDocument);
  auto request = mlc::ParseRequest(*doc, mlc::capi::Str(p.base_dir));
  if (!request) return Fail(h->errors, request.take_errors(), kMemoryDocument);
  auto plans = mlc::PlanRequest(*bound, *limits, p.kv_length, *request);
  if (!plans) return Fail(h->errors, plans.take_errors(), kMemoryDocument);
  mlc::OrderedJson report = mlc::RequestPlanJson(*plans, *limits, p.kv_length);
  h->prompt_length = report["prompt_length"].get<int64_t>();
  h->chunks = report["chunks"].size();
  h->json = report.dump();
  return MLC_OK;
}

}  // namespace

extern "C" {

MLC_CAPI_HANDLE(prompt)
MLC_CAPI_HANDLE(plan)

int mlc_prompt_build(mlc_prompt* h, const char* package_dir, const char* messages_json,
                     size_t length) {
  if (!h || !package_dir || (!messages_json && length)) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->text.clear();
    h->json.clear();
    return BuildPrompt(h, package_dir, std::string_view(messages_json ? messages_json : "", length));
  });
}

const char* mlc_prompt_text(const mlc_prompt* h) { return h && !h->json.empty() ? h->text.c_str() : nullptr; }
const char* mlc_prompt_json(const mlc_prompt* h) { return h ? CStr(h->json) : nullptr; }

mlc_plan_params mlc_plan_params_default(void) {
  return mlc_plan_params{nullptr, "chat.completions", nullptr, 0};
}

int mlc_plan_compute(mlc_plan* h, const char* package_dir, const char* request_json, size_t length,
                     const mlc_plan_params* params) {
  if (!h || !package_dir || (!request_json && length)) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->json.clear();
    h->prompt_length = 0;
    h->chunks = 0;
    mlc_plan_params p = params ? *params : mlc_plan_params_default();
    if (p.kv_length < 0) return FailWith(h->errors, MLC_ERR_ARGUMENT, "", "kv_length must be >= 0");
    return ComputePlan(h, package_dir, std::string_view(request_json ? request_json : "", length), p);
  });
}

const char* mlc_plan_json(const mlc_plan* h) { return h ? CStr(h->json) : nullptr; }
int64_t mlc_plan_prompt_length(const mlc_plan* h) { return h ? h->prompt_length : 0; }
size_t mlc_plan_chunk_count(const mlc_plan* h) { return h ? h->chunks : 0; }

}  // extern "C"
