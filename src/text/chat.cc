// Chat over one KV cache: request turns for a conversation and its follow-ups, and the sampling
// settings a chat takes from the chat config.
#include "mlc_manifest/chat.h"

#include <filesystem>

namespace mlc {

ChatTurns::ChatTurns(ConvTemplate tmpl, const Tokenizer& tokenizer)
    : tmpl_(std::move(tmpl)), tokenizer_(tokenizer) {}

Result<RequestTurn> ChatTurns::Next(const std::vector<ChatMessage>& messages,
                                    std::string_view last_reply, const std::string& base_dir,
                                    bool allow_files) {
  Result<ChatPrompt> prompt = Errors{};
  std::vector<ChatMessage> all;
  if (history_.empty()) {
    prompt = BuildChatPrompt(tmpl_, messages);
    all = messages;
  } else {
    all = history_;
    all.push_back(ChatMessage{
        "assistant", {ContentPart{PartKind::kText, std::string(last_reply), "", "", ""}}, "", {}, "", false, false});
    all.insert(all.end(), messages.begin(), messages.end());
    prompt = BuildFollowUpPrompt(tmpl_, history_, last_reply, all);
  }
  MLC_RETURN_IF_ERROR(prompt);
  auto turn = PromptTurn(*prompt, tmpl_, tokenizer_, base_dir, allow_files);
  MLC_RETURN_IF_ERROR(turn);
  history_ = std::move(all);
  return turn;
}

Result<RequestTurn> ChatTurns::NextFromFile(const std::string& file, std::string_view last_reply) {
  auto messages = ReadMessagesFile(file);
  MLC_RETURN_IF_ERROR(messages);
  return Next(*messages, last_reply, std::filesystem::path(file).parent_path().string());
}

SamplerConfig ChatSamplerConfig(const SamplerConfig& given, const ChatConfig::Sampling& config,
                                const ChatSamplingOptions& options) {
  SamplerConfig s = given;
  auto take = [&](const char* key, double SamplerConfig::*field, const std::optional<double>& value) {
    if (!value || options.keep.count(key)) return;
    SamplerConfig candidate = s;
    candidate.*field = *value;
    if (!options.skip_refused || CheckSamplerConfig(candidate)) s = candidate;
  };
  take("temperature", &SamplerConfig::temperature, config.temperature);
  take("top_p", &SamplerConfig::top_p, config.top_p);
  take("repetition_penalty", &SamplerConfig::repetition_penalty, config.repetition_penalty);
  take("presence_penalty", &SamplerConfig::presence_penalty, config.presence_penalty);
  take("frequency_penalty", &SamplerConfig::frequency_penalty, config.frequency_penalty);
  return s;
}

}  // namespace mlc
