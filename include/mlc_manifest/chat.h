// Chat over one KV cache (SPEC 7, turn after turn): the request turn of each round of a
// conversation (the first a whole conversation, each later one the messages that follow the
// reply before it) and the sampling settings a chat takes from mlc-chat-config.json.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/sampler.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc {

// The request turns of one conversation. Owns its template and the messages prefilled so far;
// the tokenizer is borrowed and must outlive this object. Media parts keep their bytes in memory
// (RequestSegment.bytes): nothing is written to disk.
class ChatTurns {
 public:
  ChatTurns(ConvTemplate tmpl, const Tokenizer& tokenizer);

  // The next turn. The first call takes the conversation (SPEC 7 from the first round); each
  // later call takes the messages that follow `last_reply`, the text generated for the turn
  // before (without its stop string), and continues it as a follow-up turn. Media files are
  // resolved against base_dir; without allow_files media must be inline (PromptTurn). On an
  // error the conversation is unchanged.
  Result<RequestTurn> Next(const std::vector<ChatMessage>& messages, std::string_view last_reply,
                           const std::string& base_dir, bool allow_files = true);
  // The same from a messages file (ReadMessagesFile); media relative to the file's folder.
  Result<RequestTurn> NextFromFile(const std::string& file, std::string_view last_reply);

  const ConvTemplate& tmpl() const { return tmpl_; }
  // The messages prefilled so far, replies included.
  const std::vector<ChatMessage>& history() const { return history_; }

 private:
  ConvTemplate tmpl_;
  const Tokenizer& tokenizer_;
  std::vector<ChatMessage> history_;
};

// How ChatSamplerConfig takes the chat config's sampling fields.
struct ChatSamplingOptions {
  // The fields the caller was given explicitly ("temperature", "top_p", ...): kept as given.
  std::set<std::string> keep;
  // Leave out a value the sampler would refuse (CheckSamplerConfig), keeping the given one, as
  // defaults for requests do; otherwise every value is taken and the caller checks the result.
  bool skip_refused = false;
};

// The chat config's sampling fields (ChatConfig::Sampling: temperature, top_p,
// repetition_penalty, presence_penalty, frequency_penalty) that are set, over `given`.
SamplerConfig ChatSamplerConfig(const SamplerConfig& given, const ChatConfig::Sampling& config,
                                const ChatSamplingOptions& options = {});

}  // namespace mlc
