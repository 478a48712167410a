// `mlc-manifest prompt DIR --messages FILE`: the prompt segments and token ids a chat request
// becomes under the package's conversation template and tokenizer (SPEC 7), without a model run.
// Media parts show the input they feed and the prefix / placeholder / suffix ids they take.
#include <filesystem>
#include <iostream>
#include <string_view>

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
  return BindPackageFolder(a.dir, a.program, a.task, &legacy);
}

void WriteJsonString(std::ostream& out, std::string_view s) {
  out << '"';
  WriteJsonStringBody(out, s);
  out << '"';
}

void PrintHumanMedia(const OrderedJson& s) {
  bool image = s["media"] == "image";
  const OrderedJson& rows = s[image ? "image_rows" : "audio_rows"];
  std::cout << s["media"].get<std::string>() << " input \"" << s["input"].get<std::string>()
            << "\": prefix " << s["prefix_token_ids"].dump() << ", "
            << (rows.is_null() ? std::string("rows unknown until the adapter runs")
                               : rows.dump() + " rows")
            << " of placeholder " << s["placeholder_token_id"].dump() << ", suffix "
            << s["suffix_token_ids"].dump() << "\n";
}

// The answer is written one segment at a time, each text's ids as the tokenizer makes them:
// memory stays a small multiple of the messages however long they are (no JSON tree of every
// id, no list of them, no second copy of the prompt).
void PrintSegments(const PromptArgs& a, const ConvTemplate& tmpl, const ChatPrompt& prompt,
                   const Tokenizer& tokenizer, const std::vector<OrderedJson>& media) {
  std::ostream& out = std::cout;
  if (a.json) {
    out << "{\"ok\":true,\"template\":";
    WriteJsonString(out, tmpl.name);
    out << ",\"prompt\":\"";
    for (const PromptSegment& seg : prompt.segments) {
      WriteJsonStringBody(out, seg.kind == PartKind::kText    ? std::string_view(seg.text)
                               : seg.kind == PartKind::kImage ? "<image>"
                                                              : "<audio>");
    }
    out << "\",\"segments\":[";
  }
  bool first = true;
  auto next = [&]() {
    if (a.json && !first) out << ',';
    first = false;
  };
  if (prompt.first_round && tmpl.system_prefix_token_ids) {
    next();
    OrderedJson ids = *tmpl.system_prefix_token_ids;
    if (a.json) {
      out << "{\"system_prefix_token_ids\":" << ids.dump() << "}";
    } else {
      out << "system_prefix_token_ids " << ids.dump() << "\n";
    }
  }
  size_t m = 0;
  for (const PromptSegment& seg : prompt.segments) {
    next();
    if (seg.kind != PartKind::kText) {
      if (a.json) {
        out << media[m++].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      } else {
        PrintHumanMedia(media[m++]);
      }
      continue;
    }
    out << (a.json ? "{\"text\":" : "text ");
    WriteJsonString(out, seg.text);
    out << (a.json ? ",\"token_ids\":[" : "\n  ids:");
    bool first_id = true;
    tokenizer.EncodeEach(seg.text, [&](int32_t id) {
      if (!a.json || !first_id) out << (a.json ? ',' : ' ');
      first_id = false;
      out << id;
    });
    out << (a.json ? "]}" : "\n");
  }
  if (a.json) {
    out << "],\"stop_token_ids\":" << OrderedJson(tmpl.stop_token_ids).dump()
        << ",\"stop_str\":"
        << OrderedJson(tmpl.stop_str).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << "}\n";
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
  std::vector<ChatMessage>().swap(*messages);  // the prompt holds their text now
  std::string base_dir =
      std::filesystem::path(a.messages == "-" ? "" : a.messages).parent_path().string();
  // Media segments are resolved before anything is written, so a failure prints one error.
  std::vector<OrderedJson> media;
  for (const PromptSegment& seg : prompt->segments) {
    if (seg.kind == PartKind::kText) continue;
    auto m = PromptMediaJson(*bound, seg, base_dir);
    if (!m) return ReportFailure(m.errors(), a.json, DocumentName(a.messages));
    media.push_back(std::move(*m));
  }
  PrintSegments(a, *tmpl, *prompt, **tokenizer, media);
  return kExitOk;
}

const Registration kPrompt(605, "prompt",
                           "Show the prompt segments and token ids of chat messages",
                           [](CLI::App* cmd) {
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
