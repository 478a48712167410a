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
  return BindPackageFolder(a.dir, a.program, a.task, &legacy);
}

// A media segment: its input, insertion ids and row count (null for audio: its adapter decides).
Result<OrderedJson> MediaJson(const BoundContract& bound, const PromptSegment& seg,
                              const std::string& base_dir) {
  bool image = seg.kind == PartKind::kImage;
  if (image ? !bound.image : !bound.audio) {
    return Invalid(seg.media.path, std::string("the package declares no ") +
                                       (image ? "image" : "audio") + " input");
  }
  MediaPiece piece = image ? ImagePiece(*bound.image) : AudioPiece(*bound.audio, std::nullopt);
  OrderedJson out = {{"media", MediaKindName(piece.kind)}, {"input", piece.input},
                     {"part", seg.media.path}};
  auto inline_bytes = InlineMedia(seg.media, base_dir);
  MLC_RETURN_IF_ERROR(inline_bytes);
  if (*inline_bytes) {
    out["inline_bytes"] = (*inline_bytes)->size();
  } else {
    auto file = MediaFile(seg.media, base_dir);
    MLC_RETURN_IF_ERROR(file);
    out["file"] = *file;
  }
  out["prefix_token_ids"] = piece.prompt.prefix_token_ids;
  out["placeholder_token_id"] = piece.prompt.placeholder_token_id;
  out[image ? "image_rows" : "audio_rows"] = piece.rows ? OrderedJson(*piece.rows) : OrderedJson();
  out["suffix_token_ids"] = piece.prompt.suffix_token_ids;
  return out;
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
  auto messages = ReadMessagesFile(a.messages);
  if (!messages) return ReportFailure(messages.errors(), a.json, a.messages);
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
  if (!prompt) return ReportFailure(prompt.errors(), a.json, a.messages);
  std::string base_dir = std::filesystem::path(a.messages).parent_path().string();
  OrderedJson segments = OrderedJson::array();
  if (tmpl->system_prefix_token_ids) {
    segments.push_back({{"system_prefix_token_ids", *tmpl->system_prefix_token_ids}});
  }
  for (const PromptSegment& seg : prompt->segments) {
    if (seg.kind == PartKind::kText) {
      segments.push_back({{"text", seg.text}, {"token_ids", (*tokenizer)->Encode(seg.text)}});
      continue;
    }
    auto media = MediaJson(*bound, seg, base_dir);
    if (!media) return ReportFailure(media.errors(), a.json, a.messages);
    segments.push_back(std::move(*media));
  }
  if (!a.json) {
    PrintHuman(segments);
    return kExitOk;
  }
  PrintJson({{"ok", true},
             {"template", tmpl->name},
             {"prompt", PromptText(*prompt)},
             {"segments", segments},
             {"stop_token_ids", tmpl->stop_token_ids},
             {"stop_str", tmpl->stop_str}});
  return kExitOk;
}

const Registration kPrompt(605, [](CLI::App& app) {
  auto* cmd = app.add_subcommand("prompt", "Show the prompt segments and token ids of chat messages");
  auto a = std::make_shared<PromptArgs>();
  cmd->add_option("DIR", a->dir, "A package folder (mlc-chat-config.json, tokenizer)")->required();
  cmd->add_option("--messages", a->messages, "Messages JSON (OpenAI-style array)")->required();
  cmd->add_option("--program", a->program, "The compiled-program document (packages with a manifest)");
  cmd->add_option("--task", a->task, "The task whose inputs media parts feed");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
