// Tool calling's request side: the tool set of a chat request, each family's tool format, the
// messages rewritten with the tools, calls and results in it, and the grammar of a call.
#include "mlc_manifest/tools.h"

#include <array>
#include <set>

#include "mlc_manifest/fs.h"
#include "text/tool_gemma4.h"

namespace mlc {
namespace {

bool ValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

Result<ToolFunction> ParseTool(const OrderedJson& tool, const std::string& at) {
  if (!tool.is_object()) return Invalid(at, "expected a tool object {type: \"function\", function}");
  if (!tool.contains("type") || tool["type"] != "function") {
    return Error{ErrorCode::kUnsupported, PointerAppend(at, "type"), "expected \"function\" (the only tool type)"};
  }
  const std::string fn_at = PointerAppend(at, "function");
  if (!tool.contains("function") || !tool["function"].is_object()) {
    return Invalid(fn_at, "expected {name, description, parameters}");
  }
  const OrderedJson& fn = tool["function"];
  ToolFunction out;
  out.path = at;
  out.declaration = tool;
  if (!fn.contains("name") || !fn["name"].is_string() || !ValidToolName(fn["name"].get<std::string>())) {
    return Invalid(PointerAppend(fn_at, "name"), "expected a name of 1 to 64 letters, digits, '_' or '-'");
  }
  out.name = fn["name"].get<std::string>();
  if (fn.contains("description") && !fn["description"].is_null()) {
    if (!fn["description"].is_string()) return Invalid(PointerAppend(fn_at, "description"), "expected a string");
    out.description = fn["description"].get<std::string>();
  }
  if (fn.contains("strict") && !fn["strict"].is_null() && !fn["strict"].is_boolean()) {
    return Invalid(PointerAppend(fn_at, "strict"), "expected true or false");
  }
  if (fn.contains("parameters") && !fn["parameters"].is_null()) {
    if (!fn["parameters"].is_object()) return Invalid(PointerAppend(fn_at, "parameters"), "expected a JSON Schema object");
    out.parameters = fn["parameters"];
  }
  return out;
}

Result<ToolChoice> ParseToolChoice(const OrderedJson& body, ToolSet& set) {
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return ToolChoice::kAuto;
  const OrderedJson& c = body["tool_choice"];
  if (c == "none") return ToolChoice::kNone;
  if (c == "auto") return ToolChoice::kAuto;
  if (c == "required") return ToolChoice::kRequired;
  if (!c.is_object()) {
    return Invalid("/tool_choice", "expected \"none\", \"auto\", \"required\" or {type: \"function\", function: {name}}");
  }
  if (!c.contains("type") || c["type"] != "function") return Invalid("/tool_choice/type", "expected \"function\"");
  if (!c.contains("function") || !c["function"].is_object() || !c["function"].contains("name") ||
      !c["function"]["name"].is_string()) {
    return Invalid("/tool_choice/function/name", "expected the name of one of the tools");
  }
  set.named = c["function"]["name"].get<std::string>();
  for (const ToolFunction& t : set.tools) {
    if (t.name == set.named) return ToolChoice::kNamed;
  }
  return Invalid("/tool_choice/function/name", "no tool is named \"" + set.named + "\"");
}

// The text of a tool's result (a string or text parts).
std::string ResultText(const ChatMessage& m) {
  std::string out;
  for (const ContentPart& p : m.parts) {
    if (p.kind == PartKind::kText) out += p.text;
  }
  return out;
}

// An assistant message's calls in the family's format after its text (Llama 3.1: the one call
// alone, as its template writes it).
Result<std::string> CallsText(const ToolFormat& f, const ChatMessage& m) {
  if (f.single_call && m.tool_calls.size() > 1) {
    return Invalid(PointerAppend(m.path, "tool_calls"),
                   "the " + f.name + " format has one call a message (its published template refuses more)");
  }
  std::string text = f.style == ToolFormat::Style::kLlama31 ? "" : m.Text();
  for (const ToolCall& call : m.tool_calls) {
    OrderedJson args = OrderedJson::parse(call.arguments, nullptr, false);
    if (args.is_discarded() || !args.is_object()) {
      return Invalid(PointerAppend(PointerAppend(call.path, "function"), "arguments"), "expected a JSON object's text");
    }
    if (!text.empty()) text += f.between;
    text += f.open + f.name_open + call.name + f.name_close + PythonJson(args) + f.close;
  }
  return text;
}

// Each tool message answers a call of the assistant message before its run of tool messages.
Status CheckToolCallIds(const std::vector<ChatMessage>& messages) {
  const ChatMessage* caller = nullptr;
  for (const ChatMessage& m : messages) {
    if (m.role == "assistant") caller = &m;
    if (m.role == "user" || m.role == "system") caller = nullptr;
    if (m.role != "tool") continue;
    if (m.tool_call_id.empty()) {
      return Invalid(PointerAppend(m.path, "tool_call_id"), "expected the id of the call this tool message answers");
    }
    bool found = false;
    for (const ToolCall& c : caller ? caller->tool_calls : std::vector<ToolCall>{}) found = found || c.id == m.tool_call_id;
    if (!found) {
      return Invalid(PointerAppend(m.path, "tool_call_id"),
                     "no assistant tool call before this message has the id \"" + m.tool_call_id + "\"");
    }
  }
  return Status::Ok();
}

std::string ToolsText(const ToolFormat& f, const ToolSet& tools) {
  const bool llama = f.style == ToolFormat::Style::kLlama31;
  std::string out = f.instructions_head;
  for (const ToolFunction& t : tools.tools) out += llama ? PythonJson(t.declaration, 4) + "\n\n" : "\n" + PythonJson(t.declaration);
  return out + f.instructions_tail;
}

ChatMessage TextMessage(std::string role, std::string text, const std::string& path) {
  ChatMessage m;
  m.role = std::move(role);
  m.path = path;
  m.parts.push_back(ContentPart{PartKind::kText, std::move(text), "", "", path});
  return m;
}

void AppendEscaped(std::string& out, const std::string& s) {
  static const char* const kHex = "0123456789abcdef";
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

// As json.dumps: indent 0 on one line (", " and ": "); else each member on its own line,
// indented by `indent` spaces a level ("," and ": "), empty containers as "{}" and "[]".
void AppendPython(std::string& out, const OrderedJson& v, int indent, int level) {
  const bool open = (v.is_object() || v.is_array()) && !v.empty();
  auto separate = [&](size_t i) {
    if (i) out += indent ? "," : ", ";
    if (indent) out += "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ');
  };
  if (v.is_object()) {
    out += '{';
    size_t i = 0;
    for (auto it = v.begin(); it != v.end(); ++it) {
      separate(i++);
      AppendEscaped(out, it.key());
      out += ": ";
      AppendPython(out, it.value(), indent, level + 1);
    }
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      separate(i);
      AppendPython(out, v[i], indent, level + 1);
    }
  } else if (v.is_string()) {
    AppendEscaped(out, v.get<std::string>());
    return;
  } else {
    out += v.dump();  // numbers, true, false, null as Python's json writes them
    return;
  }
  if (open && indent) out += "\n" + std::string(static_cast<size_t>(indent * level), ' ');
  out += v.is_object() ? '}' : ']';
}

}  // namespace

std::string PythonJson(const OrderedJson& value, int indent) {
  std::string out;
  AppendPython(out, value, indent, 0);
  return out;
}

Result<ToolSet> ParseToolSet(const OrderedJson& body, const JsonGrammarOptions& options) {
  ToolSet set;
  if (!body.is_object()) return set;
  if (body.contains("tools") && !body["tools"].is_null()) {
    const OrderedJson& tools = body["tools"];
    if (!tools.is_array()) return Invalid("/tools", "expected an array of tools");
    if (tools.size() > kMaxTools) {
      return Error{ErrorCode::kLimit, "/tools", "at most " + std::to_string(kMaxTools) + " tools in one request"};
    }
    std::set<std::string> names;
    for (size_t i = 0; i < tools.size(); ++i) {
      auto t = ParseTool(tools[i], PointerAppend("/tools", i));
      MLC_RETURN_IF_ERROR(t);
      if (!names.insert(t->name).second) {
        return Invalid(PointerAppend(PointerAppend(t->path, "function"), "name"), "two tools are named \"" + t->name + "\"");
      }
      set.tools.push_back(std::move(*t));
    }
  }
  auto choice = ParseToolChoice(body, set);
  MLC_RETURN_IF_ERROR(choice);
  set.choice = *choice;
  if ((set.choice == ToolChoice::kRequired || set.choice == ToolChoice::kNamed) && set.tools.empty()) {
    return Invalid("/tool_choice", "a required tool call needs tools");
  }
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean()) return Invalid("/parallel_tool_calls", "expected true or false");
    set.parallel = body["parallel_tool_calls"].get<bool>();
  }
  if (!set.tools.empty()) {  // every tool's parameters within the supported schema subset
    ToolSet all = set;
    all.choice = ToolChoice::kRequired;
    auto grammar = ToolCallGrammar(ToolFormatFor(ConvTemplate{}), all, options);
    MLC_RETURN_IF_ERROR(grammar);
  }
  return set;
}

std::vector<std::string> ToolMarkers(const ToolFormat& format) {
  std::vector<std::string> out;
  for (const std::string& m : {format.open, format.close, format.calls_end}) {
    if (!m.empty()) out.push_back(m);
  }
  if (format.dialect == JsonDialect::kGemma) out.emplace_back(kGemmaQuote);
  return out;
}

namespace {

// A family's own format: its name and marks (open, name_open, name_close, close); calls follow
// each other with nothing between them, and results are written the family's own way.
void SetNativeMarks(ToolFormat& f, ToolFormat::Style style, const char* name, std::array<const char*, 4> marks) {
  f.style = style;
  f.name = name;
  f.native = true;
  f.open = marks[0];
  f.name_open = marks[1];
  f.name_close = marks[2];
  f.close = marks[3];
  f.between = "";
  f.response_open = f.response_close = "";
}

}  // namespace

ToolFormat ToolFormatFor(const ConvTemplate& tmpl) {
  ToolFormat f;
  f.open = "<tool_call>";
  f.name_open = "\n{\"name\": \"";
  f.name_close = "\", \"arguments\": ";
  f.close = "}\n</tool_call>";
  f.between = "\n";
  f.response_open = "<tool_response>\n";
  f.response_close = "\n</tool_response>";
  auto user = tmpl.roles.find("user");
  if (user != tmpl.roles.end() && user->second == "<|im_start|>user") {
    f.style = ToolFormat::Style::kHermes;
    f.name = "hermes";
    f.native = true;
    f.instructions_head =
        "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided "
        "with function signatures within <tools></tools> XML tags:\n<tools>";
    f.instructions_tail =
        "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>";
    return f;
  }
  auto assistant = tmpl.roles.find("assistant");
  if (assistant != tmpl.roles.end() && assistant->second == "<|turn>model") {
    SetNativeMarks(f, ToolFormat::Style::kGemma4, "gemma4", {"<|tool_call>", "call:", "", "<tool_call|>"});
    f.dialect = JsonDialect::kGemma;
    f.calls_end = "<|tool_response>";
    return f;
  }
  auto tool = tmpl.roles.find("tool");
  if (user != tmpl.roles.end() && user->second == "<|start_header_id|>user" && tool != tmpl.roles.end() &&
      tool->second == "<|start_header_id|>ipython") {
    SetNativeMarks(f, ToolFormat::Style::kLlama31, "llama3.1", {"{\"name\": \"", "", "\", \"parameters\": ", "}"});
    f.single_call = true;
    f.instructions_head =
        "Given the following functions, please respond with a JSON for a function call with its proper "
        "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
        "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n";
    return f;
  }
  f.name = "generic";
  f.instructions_head =
      "\n\n# Tools\n\nYou can use functions to answer. Each is described by a JSON object in the <tools> list:\n"
      "<tools>";
  f.instructions_tail =
      "\n</tools>\n\nTo call a function, reply with only:\n<tool_call>\n{\"name\": <the function's name>, "
      "\"arguments\": <its arguments as a JSON object>}\n</tool_call>\nEach result comes back within "
      "<tool_response></tool_response> tags.";
  return f;
}

namespace {

// The name of the call a tool message answers, among its assistant message's calls.
std::string AnsweredName(const ChatMessage& caller, const ChatMessage& result) {
  for (const ToolCall& c : caller.tool_calls) {
    if (c.id == result.tool_call_id) return c.name;
  }
  return "unknown";
}

// Gemma 4: the declarations close the system turn; an assistant message, its calls' results and
// the assistant messages after them (tool messages between) are one model turn, each part's
// calls, results and text (thoughts left out) in the template's order, joined by what the
// template writes after each; the turn is left open after results without text (and after
// calls without results), so that the reply continues it.
Result<std::vector<ChatMessage>> WriteGemma4Messages(const ToolSet& tools, std::vector<ChatMessage> messages) {
  std::vector<ChatMessage> out;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!tools.tools.empty() || has_system) {
    std::string text = has_system ? JinjaTrim(messages[0].Text()) : "";
    for (const ToolFunction& t : tools.tools) text += "<|tool>" + Gemma4Declaration(t.declaration) + "<tool|>";
    out.push_back(TextMessage("system", std::move(text), has_system ? messages[0].path : "/tools"));
  }
  for (size_t i = has_system ? 1 : 0; i < messages.size();) {
    ChatMessage& m = messages[i];
    if (m.role != "assistant") {
      if (m.role == "user") {
        for (ContentPart& p : m.parts) {
          if (p.kind == PartKind::kText) p.text = JinjaTrim(p.text);
        }
      }
      if (m.role != "tool") out.push_back(std::move(m));  // results are written with their calls
      ++i;
      continue;
    }
    std::string text, ending;
    const std::string path = m.path;
    for (;;) {
      const ChatMessage& a = messages[i];
      std::string piece;
      for (const ToolCall& call : a.tool_calls) {
        OrderedJson args = OrderedJson::parse(call.arguments, nullptr, false);
        if (args.is_discarded() || !args.is_object()) {
          return Invalid(PointerAppend(PointerAppend(call.path, "function"), "arguments"), "expected a JSON object's text");
        }
        piece += Gemma4Call(call, args);
      }
      size_t j = i + 1;
      bool results = false;
      for (; j < messages.size() && messages[j].role == "tool"; ++j) {
        if (a.tool_calls.empty()) continue;
        piece += Gemma4Response(AnsweredName(a, messages[j]), ResultText(messages[j]));
        results = true;
      }
      const std::string content = Gemma4ModelText(a.Text());
      text += piece + content;
      ending = !a.tool_calls.empty() && !results ? "<|tool_response>" : results && content.empty() ? "" : "<turn|>\n";
      i = j;
      if (i >= messages.size() || messages[i].role != "assistant") break;
      text += ending;  // the next assistant message continues this turn
    }
    ChatMessage turn = TextMessage("assistant", ending == "<turn|>\n" ? text : text + ending, path);
    turn.open_turn = ending != "<turn|>\n";
    out.push_back(std::move(turn));
  }
  return out;
}

}  // namespace

Result<std::vector<ChatMessage>> WriteToolMessages(const ToolFormat& format, const ConvTemplate& tmpl,
                                                   const ToolSet& tools, std::vector<ChatMessage> messages) {
  bool calls = false;
  for (const ChatMessage& m : messages) calls = calls || !m.tool_calls.empty();
  if (tools.tools.empty() && !calls) return messages;  // the template's own tool role, as WebLLM
  MLC_RETURN_IF_ERROR(CheckToolCallIds(messages));
  if (format.style == ToolFormat::Style::kGemma4) return WriteGemma4Messages(tools, std::move(messages));
  std::vector<ChatMessage> out;
  const bool llama = format.style == ToolFormat::Style::kLlama31;
  const bool has_system = !messages.empty() && messages[0].role == "system";
  if (!tools.tools.empty()) {  // shown even under tool_choice "none", as the published templates do
    std::string base = has_system ? messages[0].Text() : format.native && llama ? "" : tmpl.system_message;
    std::string text = llama ? "" : ToolsText(format, tools);
    if (llama) base = "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" + JinjaTrim(base);
    if (base.empty() && !format.native) text.erase(0, text.find_first_not_of('\n'));
    out.push_back(TextMessage("system", base + text, has_system ? messages[0].path : "/tools"));
  }
  if (llama && !tools.tools.empty()) {  // the tools go first in the first user message
    const size_t first = has_system ? 1 : 0;
    if (first >= messages.size() || messages[first].role != "user") {
      return Invalid(first < messages.size() ? PointerAppend(messages[first].path, "role") : "/messages",
                     "the llama3.1 format writes the tools into the first user message: expected one here");
    }
    ChatMessage& m = messages[first];
    std::string text = ToolsText(format, tools) + JinjaTrim(m.Text());
    bool replaced = false;
    for (ContentPart& p : m.parts) {
      if (p.kind == PartKind::kText && !replaced) p.text = std::move(text), replaced = true;
    }
    if (!replaced) m.parts.insert(m.parts.begin(), ContentPart{PartKind::kText, std::move(text), "", "", m.path});
  }
  for (size_t i = 0; i < messages.size(); ++i) {
    ChatMessage& m = messages[i];
    if (m.role == "system" && !out.empty()) continue;  // written with the tools
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      auto text = CallsText(format, m);
      MLC_RETURN_IF_ERROR(text);
      out.push_back(TextMessage("assistant", std::move(*text), m.path));
      continue;
    }
    if (m.role == "tool" && llama) {  // each result its own ipython turn, as a JSON string (its tojson)
      out.push_back(TextMessage("tool", PythonJson(ResultText(m)), m.path));
      continue;
    }
    if (m.role == "tool") {
      std::string text;
      const std::string path = m.path;
      for (; i < messages.size() && messages[i].role == "tool"; ++i) {
        if (!text.empty()) text += format.between;
        text += format.response_open + ResultText(messages[i]) + format.response_close;
      }
      --i;
      out.push_back(TextMessage("user", std::move(text), path));
      continue;
    }
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// Gemma 4's follow-up: the results go on with the reply (which ended with <|tool_response>, its
// calls' end) in the same model turn, which stays open for the answer; what follows them is
// written as in a whole conversation.
Result<std::vector<ChatMessage>> WriteGemma4FollowUp(const ChatMessage& reply, std::vector<ChatMessage> messages) {
  std::string text;
  size_t i = 0;
  for (; i < messages.size() && messages[i].role == "tool"; ++i) {
    text += Gemma4Response(AnsweredName(reply, messages[i]), ResultText(messages[i]));
  }
  std::vector<ChatMessage> out;
  if (i > 0) {
    const std::string_view mark = "<|tool_response>";
    if (text.compare(0, mark.size(), mark) == 0) text.erase(0, mark.size());  // the reply wrote it
    ChatMessage results = TextMessage("assistant", std::move(text), messages[0].path);
    results.continues_turn = results.open_turn = true;
    out.push_back(std::move(results));
  }
  auto rest = WriteGemma4Messages(ToolSet{}, std::vector<ChatMessage>(messages.begin() + static_cast<ptrdiff_t>(i), messages.end()));
  MLC_RETURN_IF_ERROR(rest);
  for (ChatMessage& m : *rest) out.push_back(std::move(m));
  return out;
}

}  // namespace

Result<std::vector<ChatMessage>> WriteToolFollowUp(const ToolFormat& format, const ConvTemplate& tmpl,
                                                   const std::vector<ToolCall>& previous_calls,
                                                   std::vector<ChatMessage> messages) {
  if (format.style == ToolFormat::Style::kGemma4) {
    ChatMessage reply;
    reply.role = "assistant";
    reply.tool_calls = previous_calls;
    messages.insert(messages.begin(), reply);
    MLC_RETURN_IF_ERROR(CheckToolCallIds(messages));
    messages.erase(messages.begin());
    return WriteGemma4FollowUp(reply, std::move(messages));
  }
  // The reply before them as the assistant message the ids are checked against, then dropped.
  ChatMessage reply;
  reply.role = "assistant";
  reply.tool_calls = previous_calls;
  messages.insert(messages.begin(), std::move(reply));
  auto written = WriteToolMessages(format, tmpl, ToolSet{}, std::move(messages));
  MLC_RETURN_IF_ERROR(written);
  written->erase(written->begin());
  return written;
}

Result<ToolSet> ReadToolsFile(const std::string& path, const JsonGrammarOptions& options) {
  auto text = ReadFile(path);
  MLC_RETURN_IF_ERROR(text);
  auto checked = ParseJson(*text);  // strict: duplicate keys, depth, UTF-8
  if (!checked) return InDocument(checked.take_errors(), DocumentName(path));
  OrderedJson body = OrderedJson::parse(*text, nullptr, false);
  if (!body.is_object()) return InDocument(Errors{Invalid("", "expected an object with \"tools\"")}, DocumentName(path));
  return InDocument(ParseToolSet(body, options), DocumentName(path));
}

ToolReply SplitToolReply(const ToolFormat& format, std::string_view text, const std::string& id_prefix) {
  ToolCallStream stream(format, id_prefix);
  ToolReply out;
  out.content = stream.Push(text).content;
  out.content += stream.Finish().content;
  out.calls = stream.calls();
  return out;
}

OrderedJson ToolCallsJson(const std::vector<ToolCall>& calls) {
  OrderedJson out = OrderedJson::array();
  for (const ToolCall& c : calls) {
    out.push_back({{"id", c.id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

Result<std::shared_ptr<const JsonGrammar>> ToolCallGrammar(const ToolFormat& format, const ToolSet& tools,
                                                           const JsonGrammarOptions& given) {
  JsonGrammarOptions options = given;
  options.dialect = format.dialect;
  GrammarComposer g(options);
  std::vector<std::pair<std::string, uint32_t>> args;  // each allowed tool's name and arguments
  for (const ToolFunction& t : tools.tools) {
    if (tools.choice == ToolChoice::kNamed && t.name != tools.named) continue;
    const OrderedJson none = {{"type", "object"}, {"properties", OrderedJson::object()}, {"additionalProperties", false}};
    auto params = g.Schema(t.parameters.is_null() ? none : t.parameters);
    if (!params) {
      Errors errors = params.take_errors();
      for (Error& e : errors) e.path = t.path + "/function/parameters" + e.path;
      return errors;
    }
    args.emplace_back(format.name_open + t.name + format.name_close, *params);
  }
  const int64_t most = tools.parallel && !format.single_call ? static_cast<int64_t>(kMaxTools) : 1;
  const uint32_t close = g.Text(format.close);
  uint32_t calls = 0;
  if (format.calls_end.empty()) {  // calls until the reply stops
    std::vector<std::pair<std::string, uint32_t>> cases;
    for (const auto& [name, params] : args) cases.emplace_back(name, g.Sequence({params, close}));
    const uint32_t call = g.Switch(std::move(cases));
    const uint32_t more = g.Repeat(g.Sequence({g.Text(format.between + format.open), call}), 0, most - 1);
    calls = g.Sequence({call, more});
  } else {
    // The text after each call says whether another comes or the calls end (a switch on it, not a
    // repetition, whose choice by one byte could not tell them apart): built from the last call back.
    uint32_t after = g.Text(format.calls_end);  // after the most calls allowed
    auto call_then = [&](uint32_t next) {
      std::vector<std::pair<std::string, uint32_t>> cases;
      for (const auto& [name, params] : args) cases.emplace_back(name, g.Sequence({params, close, next}));
      return g.Switch(std::move(cases));
    };
    for (int64_t k = most - 1; k >= 1; --k) {
      after = g.Switch({{format.between + format.open, call_then(after)}, {format.calls_end, g.Repeat(close, 0, 0)}});
    }
    calls = call_then(after);
  }
  const uint32_t root = tools.choice == ToolChoice::kAuto ? g.FreeTextThen(format.open, calls)
                                                          : g.Sequence({g.Text(format.open), calls});
  return g.Finish(root);
}

}  // namespace mlc
