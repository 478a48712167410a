// Chat over one KV cache: request turns for a conversation and its follow-ups, and the sampling
// settings a chat takes from the chat config.
#include "mlc_manifest/chat.h"

#include <filesystem>
#include <map>

namespace mlc {

ChatTurns::ChatTurns(ConvTemplate tmpl, const Tokenizer& tokenizer)
    : tmpl_(std::move(tmpl)), tokenizer_(tokenizer) {}

Result<RequestTurn> ChatTurns::Next(const std::vector<ChatMessage>& messages,
                                    std::string_view last_reply, const std::string& base_dir) {
  Result<ChatPrompt> prompt = Errors{};
  std::vector<ChatMessage> all;
  if (history_.empty()) {
    prompt = BuildChatPrompt(tmpl_, messages);
    all = messages;
  } else {
    all = history_;
    all.push_back(ChatMessage{
        "assistant", {ContentPart{PartKind::kText, std::string(last_reply), "", "", ""}}, ""});
    all.insert(all.end(), messages.begin(), messages.end());
    prompt = BuildFollowUpPrompt(tmpl_, history_, last_reply, all);
  }
  MLC_RETURN_IF_ERROR(prompt);
  auto turn = PromptTurn(*prompt, tmpl_, tokenizer_, base_dir);
  MLC_RETURN_IF_ERROR(turn);
  history_ = std::move(all);
  return turn;
}

Result<RequestTurn> ChatTurns::NextFromFile(const std::string& file, std::string_view last_reply) {
  auto messages = ReadMessagesFile(file);
  MLC_RETURN_IF_ERROR(messages);
  return Next(*messages, last_reply, std::filesystem::path(file).parent_path().string());
}

SamplerConfig ChatSamplerConfig(const SamplerConfig& given, const ChatConfig& config,
                                const std::set<std::string>& keep) {
  SamplerConfig s = given;
  const std::map<std::string, double*> fields = {{"temperature", &s.temperature},
                                                 {"top_p", &s.top_p},
                                                 {"repetition_penalty", &s.repetition_penalty},
                                                 {"presence_penalty", &s.presence_penalty},
                                                 {"frequency_penalty", &s.frequency_penalty}};
  for (const auto& [key, field] : fields) {
    if (keep.count(key)) continue;
    if (config.raw.is_object() && config.raw.contains(key) && config.raw[key].is_number()) {
      *field = config.raw[key].get<double>();
    }
  }
  return s;
}

}  // namespace mlc
