// `mlc-manifest prompt DIR --messages FILE`: the prompt segments and token ids a chat request
// becomes under the package's conversation template and tokenizer (SPEC 7), without a model run.
// Media parts show the input they feed and the prefix / placeholder / suffix ids they take.
#include <filesystem>
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/runtime.h"

namespace mlc::cli {
namespace {

struct PromptArgs {
  std::string dir;
  std::string messages;
  std::string program;
  std::string task = "chat.completions";
  bool json = false;
};

// The bound contract when the package has a manifest (then --program is needed), else legacy.
Result<BoundContract> ContractFor(const PromptArgs& a) {
  bool legacy = false;
  return WithProgramHint(BindPackageFolder(a.dir, a.program, a.task, &legacy), a.program);
}

void PrintHuman(const OrderedJson& segments) {
  for (const OrderedJson& s : segments) {
    if (s.contains("text")) {
      std::cout << "text " << OrderedJson(s["text"]).dump() << "\n  ids:";
      for (const auto& id : s["token_ids"]) std::cout << " " << id.get<int64_t>();
      std::cout << "\n";
      continue;
    }
    if (s.contains("system_prefix_token_ids")) {
      std::cout << "system_prefix_token_ids " << s["system_prefix_token_ids"].dump() << "\n";
      continue;
    }
    bool image = s["media"] == "image";
    const OrderedJson& rows = s[image ? "image_rows" : "audio_rows"];
    std::cout << s["media"].get<std::string>() << " input \"" << s["input"].get<std::string>()
              << "\": prefix " << s["prefix_token_ids"].dump() << ", "
              << (rows.is_null() ? std::string("rows unknown until the adapter runs")
                                 : rows.dump() + " rows")
              << " of placeholder " << s["placeholder_token_id"].dump() << ", suffix "
              << s["suffix_token_ids"].dump() << "\n";
  }
}

int Run(const PromptArgs& a) {
  if (Status s = CheckFolder(a.dir); !s) return ReportFailure(s.errors(), a.json);
  auto messages = ReadMessagesFile(a.messages);
  if (!messages) return ReportFailure(messages.errors(), a.json, DocumentName(a.messages));
  std::string config_path = JoinPath(a.dir, "mlc-chat-config.json");
  auto config = ReadJsonFile(config_path, {}, a.dir);
  if (!config) return ReportFailure(config.errors(), a.json, config_path);
  auto tmpl = ConvTemplateFromChatConfig(*config);
  if (!tmpl) return ReportFailure(tmpl.errors(), a.json, config_path);
  auto tokenizer = Tokenizer::FromDirectory(a.dir);
  if (!tokenizer) return ReportFailure(tokenizer.errors(), a.json);
  auto bound = ContractFor(a);
  if (!bound) return ReportFailure(bound.errors(), a.json);
  auto prompt = BuildChatPrompt(*tmpl, *messages);
  if (!prompt) return ReportFailure(prompt.errors(), a.json, DocumentName(a.messages));
  std::string base_dir = std::filesystem::path(a.messages == "-" ? "" : a.messages).parent_path().string();
  auto report = PromptReportJson(*prompt, *tmpl, **tokenizer, &*bound, base_dir);
  if (!report) return ReportFailure(report.errors(), a.json, DocumentName(a.messages));
  if (!a.json) {
    PrintHuman((*report)["segments"]);
    return kExitOk;
  }
  OrderedJson out = {{"ok", true}};
  for (auto it = report->begin(); it != report->end(); ++it) out[it.key()] = it.value();
  PrintJson(out);
  return kExitOk;
}

const Registration kPrompt(605, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("prompt", "Show the prompt segments and token ids of chat messages");
  auto a = std::make_shared<PromptArgs>();
  cmd->add_option("DIR", a->dir, "A package folder (mlc-chat-config.json, tokenizer)")->required();
  cmd->add_option("--messages", a->messages, "Messages JSON (OpenAI-style array; \"-\": stdin)")->required();
  cmd->add_option("--program", a->program, "The compiled-program document (packages with a manifest)");
  cmd->add_option("--task", a->task, "The task whose inputs media parts feed");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
