// Conversation templates (SPEC 7): the `conv_template` of mlc-chat-config.json, OpenAI-style chat
// messages, the prompt segments WebLLM 0.2.86's manifest path builds from them (text strings and
// media parts in content order), their token ids as request segments the planner and `run`
// consume, follow-up turns that continue a KV cache, and the stop conditions of a reply.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc {

// A template's thinking mode: how a prompt switches the model's reasoning on or off and how the
// reply marks its thought. From conv_template's "thinking" object (this project's field; WebLLM
// ignores it), or Gemma 4's when the assistant role is "<|turn>model" (its published template:
// "<|think|>" opens the system turn to switch thinking on; off, the reply header is followed by an
// empty thought channel; a thought is "<|channel>thought" ... "<channel|>"; off by default).
struct ThinkingMode {
  std::string system_marker;  // put before the system message to switch thinking on
  std::string skip;           // put after the reply header to switch it off
  std::string open, close;    // around a thought in the reply
  bool default_on = false;
};

// The fields of conv_template that shape a prompt (unknown fields are ignored).
struct ConvTemplate {
  std::string name;
  std::string system_template = "{system_message}";
  std::string system_message;
  std::optional<std::vector<int32_t>> system_prefix_token_ids;  // null / absent: none
  bool add_role_after_system_message = true;
  std::map<std::string, std::string> roles;           // "user", "assistant", "tool"
  std::map<std::string, std::string> role_templates;  // absent role: "{<role>_message}"
  std::vector<std::string> seps;                      // at least one
  std::string role_content_sep = ": ";
  std::string role_empty_sep = ": ";
  std::vector<std::string> stop_str;
  std::vector<int32_t> stop_token_ids;
  std::string function_string;
  bool use_function_calling = false;
  // WebLLM's switch (not in SPEC 7's list, honoured as WebLLM 0.2.86 does): false leaves the
  // system prompt out when the system message is empty, whatever the template around it.
  bool render_empty_system_message = true;
  std::optional<ThinkingMode> thinking;  // none: the model has no thinking mode
};

// The template with its thinking mode switched on or off (unchanged without one): on, the system
// prompt is rendered with the marker before the system message, even when that is empty; off,
// the reply header ends with the skip string.
ConvTemplate WithThinking(const ConvTemplate& tmpl, bool on);

// Parses a conv_template object; type errors are reported at their JSON Pointer under `base`.
Result<ConvTemplate> ParseConvTemplate(const Json& obj, const std::string& base = "");
// The conv_template of a chat config document (at "/conv_template").
Result<ConvTemplate> ConvTemplateFromChatConfig(const Json& chat_config);

// ---- Messages ----

enum class PartKind { kText, kImage, kAudio };

struct ContentPart {
  PartKind kind = PartKind::kText;
  std::string text;   // kText
  std::string url;    // kImage: image_url.url; kAudio: input_audio.data
  std::string format; // kAudio: input_audio.format ("" when absent)
  std::string path;   // JSON Pointer of the part
};

// A function call an assistant message made (OpenAI's tool_calls[i]).
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text of an object
  std::string path;       // JSON Pointer of the call ("" for one generated here)
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool"
  std::vector<ContentPart> parts;  // a string content is one text part
  std::string path;  // JSON Pointer of the message
  std::vector<ToolCall> tool_calls;  // assistant: the calls it made (content may then be null)
  std::string tool_call_id;          // tool: the call it answers
  // assistant: the turn goes on after this text (no separator after it, and when it is the last
  // message, no reply header: the reply continues it). Gemma 4's calls and their results.
  bool open_turn = false;
  // assistant, in a follow-up turn: goes on with the reply before it (no separator after the
  // reply, no header): Gemma 4's results written after its calls.
  bool continues_turn = false;

  // The text part, or "" (a message has at most one).
  std::string Text() const;
};

// Parses an array of {role, content}: roles system|user|assistant|tool, content a string or a
// list of text / image_url / input_audio parts; system and assistant content must be strings;
// an assistant's tool_calls (content then may be null) and a tool message's tool_call_id
// (checked against the calls by WriteToolMessages).
// Enforces SPEC 7 step 1 (system only first, at most one text part, last message user or tool).
Result<std::vector<ChatMessage>> ParseMessages(const Json& doc, const std::string& base = "");
// A messages file: the array, or an object with a "messages" array (OpenAI request style).
Result<std::vector<ChatMessage>> ReadMessagesFile(const std::string& path);

// ---- Prompt segments ----

struct PromptSegment {
  PartKind kind = PartKind::kText;
  std::string text;  // kText: the string to encode
  ContentPart media;  // media segments: the part it came from
  // kText: JSON Pointer of what the text carries -- the message's text part, the message (no
  // text), or the template field (the system prompt, the reply header). Errors about the
  // segment's tokens (a context overflow) point here.
  std::string path;
};

struct ChatPrompt {
  bool first_round = true;  // system_prefix_token_ids go first
  std::vector<PromptSegment> segments;
};

// SPEC 7 steps 1-5 for a fresh conversation (first round).
Result<ChatPrompt> BuildChatPrompt(const ConvTemplate& tmpl,
                                   const std::vector<ChatMessage>& messages);

// A follow-up turn: `messages` must begin with `previous` (the messages already prefilled, whose
// system message, if any, is kept), then an assistant message whose text equals `reply` (what was
// generated, without the stop token), then the new messages. The prompt is the separator that
// follows the reply (the assistant template's tail + seps[i % len] for its index i), the new
// messages and the reply header; no system prompt, no prefix ids.
Result<ChatPrompt> BuildFollowUpPrompt(const ConvTemplate& tmpl,
                                       const std::vector<ChatMessage>& previous,
                                       std::string_view reply,
                                       const std::vector<ChatMessage>& messages);

// The concatenated text of a prompt with media shown as "<image>" / "<audio>" (for humans/tests).
std::string PromptText(const ChatPrompt& prompt);

// ---- Token ids ----

// The bytes a media part carries inline: a base64 data: URL, or for input_audio raw base64 (as
// OpenAI and WebLLM send it) unless files are allowed and a file of that name exists (without
// allow_files no file is ever looked at); none when the reference is a file path (a native
// extension). Errors at the pointer of the url / data field.
Result<std::optional<std::string>> InlineMedia(const ContentPart& part, const std::string& base_dir,
                                               bool allow_files = true);
// The file a media part names (relative to base_dir), or "" when it carries its bytes inline
// (InlineMedia). Errors at the part's pointer (a path with control characters is one).
Result<std::string> MediaFile(const ContentPart& part, const std::string& base_dir);
// The bytes of a base64 data: URL ("data:<type>;base64,<payload>").
Result<std::string> DecodeDataUrl(std::string_view url, const std::string& path);

// The request turn of a prompt: prefix ids first on the first round, each string segment
// encoded on its own, each media segment an audio / image segment that names its file
// (MediaFile) or carries its inline bytes in memory (nothing is written to disk). Without
// allow_files a media part must carry its bytes inline (a file reference is an error).
Result<RequestTurn> PromptTurn(const ChatPrompt& prompt, const ConvTemplate& tmpl,
                               const Tokenizer& tokenizer, const std::string& base_dir,
                               bool allow_files = true);

// A media segment of a prompt under a bound contract: the input it feeds, where its bytes are
// (`file`, or `inline_bytes` for a data: URL), its prefix / placeholder / suffix ids and row
// count (null for audio: its adapter decides).
Result<OrderedJson> PromptMediaJson(const BoundContract& bound, const PromptSegment& seg,
                                    const std::string& base_dir);

// The report of a prompt: {"template", "prompt" (PromptText), "segments", "stop_token_ids",
// "stop_str"}. Segments: {"system_prefix_token_ids"} first on a first round when the template has
// them, {"text", "token_ids"} per text segment, {"media", "part", ...} per media segment. With a
// bound contract a media segment also names its "input", where its bytes are ("inline_bytes" or
// "file", relative to base_dir) and the ids it takes ("prefix_token_ids",
// "placeholder_token_id", "image_rows" / "audio_rows" (null: the adapter decides),
// "suffix_token_ids"); a media part the contract has no input for is an error at the part.
Result<OrderedJson> PromptReportJson(const ChatPrompt& prompt, const ConvTemplate& tmpl,
                                     const Tokenizer& tokenizer, const BoundContract* bound,
                                     const std::string& base_dir);

// ---- Stopping ----

// Finds stop strings in streamed text: Push returns the text that is safe to emit (a tail that
// could begin a stop string is held back); once a stop string is seen, the text before it is
// returned, stopped() is true and further input is ignored. Finish returns what is held back.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stop_strings);
  std::string Push(std::string_view text);
  std::string Finish();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

// A reply as it is generated: detokenizes one token at a time (text is released only once the
// tokens so far decode to whole characters, so a character split over several byte tokens comes
// out whole) and cuts it at the first stop string. Push returns the text that is safe to show
// now; Finish, at the end of the reply, what was held back. text() is all of it so far.
class ReplyStream {
 public:
  ReplyStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings);
  std::string Push(int32_t token);
  std::string Finish();
  bool stopped() const { return matcher_.stopped(); }
  const std::string& text() const { return text_; }
  // How many leading tokens have text in text(): the others are still held back (an unfinished
  // character, a possible stop string) or, once stopped, were cut by the stop string.
  size_t TokensShown() const;

 private:
  // The text of the tokens not yet released, or "" while it ends in an unfinished character
  // (unless final) or does not yet extend what was released.
  std::string Release(bool final);
  std::string Emit(std::string piece);

  const Tokenizer& tokenizer_;
  StopMatcher matcher_;
  std::vector<int32_t> tokens_;
  size_t prefix_ = 0;  // tokens_[prefix_, read_) decode to the text already released
  size_t read_ = 0;
  std::string text_;
  std::vector<size_t> starts_;  // per released token: where its text starts in the decoded text
  size_t decoded_ = 0;          // bytes of decoded text given to the stop matcher
};

// Splits a reply as it is shown into its thought and its answer: text between a thinking mode's
// open and close markers (anywhere, the markers dropped, the newlines that begin a thought too) is
// reasoning, the rest content. A tail that could begin the marker awaited is held back until the
// next Push shows whether it is one; Finish gives it to the part it was in.
class ReasoningSplitter {
 public:
  struct Parts {
    std::string reasoning, content;
  };
  explicit ReasoningSplitter(const ThinkingMode& mode);
  Parts Push(std::string_view text);
  Parts Finish();

 private:
  void Emit(std::string_view text, Parts& out);

  std::string open_, close_;
  std::string pending_;
  bool in_thought_ = false;
  bool thought_start_ = false;  // no text of the current thought emitted yet
};

// Generated text as a terminal may show it: control bytes other than newline and tab (C0, DEL,
// and C1 controls U+0080..U+009F, such as the CSI that starts a terminal command) become \xNN
// escapes, so a reply cannot move the cursor, retitle the window or clear the screen.
std::string EscapeForTerminal(std::string_view text);

}  // namespace mlc
