// Tool calling: the tools a chat request offers (OpenAI's tools, tool_choice,
// parallel_tool_calls), each family's way of writing them into the prompt and of writing a call
// and a tool's result, the grammar every call is sampled under (its name one of the tools, its
// arguments valid for that tool's parameters schema), and the reply split into text and calls,
// whole or as it streams.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/json_grammar.h"

namespace mlc {

struct ToolFunction {
  std::string name;  // [A-Za-z0-9_-]{1,64}
  std::string description;
  OrderedJson parameters;  // a JSON Schema of an object, in its key order
  OrderedJson declaration;  // the tool object as the request gave it (what the prompt shows)
  std::string path;         // JSON Pointer of the tool
};

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolSet {
  std::vector<ToolFunction> tools;
  ToolChoice choice = ToolChoice::kAuto;
  std::string named;      // kNamed: the function
  bool parallel = true;   // parallel_tool_calls
  bool Active() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// At most this many tools in one request (each a case of one choice in the call grammar).
constexpr size_t kMaxTools = 64;

// The tools, tool_choice and parallel_tool_calls of a chat request body (in key order); errors
// at their JSON Pointers. Each tool's parameters are compiled (ToolCallGrammar) so that a schema
// keyword outside the subset is refused here, at /tools/i/function/parameters/...
Result<ToolSet> ParseToolSet(const OrderedJson& body, const JsonGrammarOptions& options = {});

// How a family writes calls: a call is open + name_open + NAME + name_close + ARGUMENTS (JSON) +
// close, consecutive calls joined by `between`; a tool's result is response_open + TEXT +
// response_close in a user turn (Hermes, generic) or the TEXT of a message in the template's
// tool role (Llama 3.1).
struct ToolFormat {
  enum class Style { kGeneric, kHermes, kLlama31, kGemma4 };
  Style style = Style::kGeneric;
  std::string name;  // "hermes" (ChatML: Qwen2.5, Hermes), "llama3.1", "gemma4", "generic" (this project's)
  bool native = false;  // the family's published template has this format
  bool single_call = false;  // one call a reply (Llama 3.1's template refuses more)
  // How the arguments are written (Gemma 4: its own syntax; name_close empty, the name ends at '{').
  JsonDialect dialect = JsonDialect::kJson;
  std::string open, name_open, name_close, close, between;
  std::string calls_end;  // after the last call (Gemma 4: <|tool_response>, where it stops for results)
  std::string response_open, response_close;
  std::string instructions_head, instructions_tail;  // around the tools' JSON
};

// The marks a format writes (a call's opening and closing, the calls' end, the dialect's string
// mark): where a tokenizer has them as special tokens, the call grammar's vocabulary gives those
// their text (TokenVocabulary::FromTokenizer).
std::vector<std::string> ToolMarkers(const ToolFormat& format);

// The family's format from its conversation template: ChatML templates (roles "<|im_start|>...")
// get Hermes' (Qwen2.5's published template); Llama 3.1's (a tool role "<|start_header_id|>ipython",
// as MLC's llama-3_1; Llama 3.2 and 3.3 publish the same format) its JSON calls with "parameters",
// the tools in the first user message and results in ipython turns; Gemma 4's (assistant role
// "<|turn>model") its own: declarations in the system turn, <|tool_call>call:NAME{...}<tool_call|>
// calls in its argument syntax, results inside the model turn, which the answer continues;
// templates without a tool format get the generic one (Hermes' tags, the tools listed in the
// system message with this project's instructions).
ToolFormat ToolFormatFor(const ConvTemplate& tmpl);

// The messages with the tools written the family's way: the tool list appended to the system
// message (the template's default system message when there is none), an assistant's calls
// appended to its text, consecutive tool results one user message. Checks each tool message's
// tool_call_id against the calls before it and each call's arguments (a JSON object), errors at
// their pointers. Without tools and calls the messages come back unchanged (a tool message then
// takes the template's tool role, as in WebLLM).
Result<std::vector<ChatMessage>> WriteToolMessages(const ToolFormat& format, const ConvTemplate& tmpl,
                                                   const ToolSet& tools, std::vector<ChatMessage> messages);

// A follow-up turn's new messages (tool results first, typically) written the family's way:
// each tool message must answer one of `previous_calls`, the calls of the reply before them.
Result<std::vector<ChatMessage>> WriteToolFollowUp(const ToolFormat& format, const ConvTemplate& tmpl,
                                                   const std::vector<ToolCall>& previous_calls,
                                                   std::vector<ChatMessage> messages);

// The tool set of a file: an object with "tools" (and tool_choice, parallel_tool_calls), such as
// an OpenAI request body; errors at their pointers in the named document.
Result<ToolSet> ReadToolsFile(const std::string& path, const JsonGrammarOptions& options = {});

// A whole reply split into its text and its calls (ids id_prefix + index).
struct ToolReply {
  std::string content;
  std::vector<ToolCall> calls;
};
ToolReply SplitToolReply(const ToolFormat& format, std::string_view text, const std::string& id_prefix);

// Calls in OpenAI's shape: [{"id", "type": "function", "function": {"name", "arguments"}}].
OrderedJson ToolCallsJson(const std::vector<ToolCall>& calls);

// The grammar a reply is sampled under when tools are active: `auto` free text until the call
// opens, `required` and a named function a call from the first token; then the call's name among
// the allowed tools and its arguments valid for that tool's parameters; more calls when parallel.
Result<std::shared_ptr<const JsonGrammar>> ToolCallGrammar(const ToolFormat& format, const ToolSet& tools,
                                                           const JsonGrammarOptions& options = {});

// JSON text as Python's json.dumps writes it (", " and ": ", non-ASCII kept; with an indent, each
// member on its own line): what the published templates' tojson writes.
std::string PythonJson(const OrderedJson& value, int indent = 0);

// A reply split as it streams: its text before the first call, then each call's name (once
// known) and its arguments in fragments. Text that may open a call is held back until it does
// or cannot.
class ToolCallStream {
 public:
  struct CallDelta {
    size_t index = 0;
    std::string id, name;  // set in a call's first delta
    std::string arguments;
  };
  struct Delta {
    std::string content;
    std::vector<CallDelta> calls;
  };
  ToolCallStream(ToolFormat format, std::string id_prefix);
  Delta Push(std::string_view text);
  // What is still held back: text when no call is open.
  Delta Finish();
  // Every call seen so far, whole (a call cut short has what came of it).
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  enum class Phase { kContent, kName, kArguments, kClose, kAfter };
  void Step(Delta& out);
  size_t ScanArguments();
  ToolFormat format_;
  std::string id_prefix_;
  Phase phase_ = Phase::kContent;
  std::string buffer_;
  std::vector<ToolCall> calls_;
  // Where the arguments' JSON is: its nesting, inside a string, after a backslash.
  int depth_ = 0;
  std::string raw_;  // a Gemma 4 call's arguments as written, read into JSON at their end
  bool in_string_ = false, escaped_ = false, closed_ = false;
};

}  // namespace mlc
