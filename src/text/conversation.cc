// Conversation templates (SPEC 7): conv_template and message parsing, the prompt segments of
// WebLLM 0.2.86's manifest path, follow-up turns over a KV cache, token ids and stop strings.
#include "mlc_manifest/conversation.h"

#include <limits.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

constexpr const char* kFunctionPlaceholder = "{function_string}";

// ---- conv_template fields ----

void ReadString(const Json& obj, const char* key, const std::string& base, std::string* out,
                Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  if (!it->is_string()) {
    errors->push_back(Invalid(PointerAppend(base, key), "expected a string, got " + JsonTypeName(*it)));
    return;
  }
  *out = it->get<std::string>();
}

void ReadBool(const Json& obj, const char* key, const std::string& base, bool* out,
              Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  if (!it->is_boolean()) {
    errors->push_back(Invalid(PointerAppend(base, key), "expected a boolean, got " + JsonTypeName(*it)));
    return;
  }
  *out = it->get<bool>();
}

void ReadStrings(const Json& obj, const char* key, const std::string& base,
                 std::vector<std::string>* out, Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  std::string path = PointerAppend(base, key);
  if (!it->is_array()) {
    errors->push_back(Invalid(path, "expected an array of strings, got " + JsonTypeName(*it)));
    return;
  }
  for (size_t i = 0; i < it->size(); ++i) {
    if (!(*it)[i].is_string()) {
      errors->push_back(Invalid(PointerAppend(path, i), "expected a string"));
      continue;
    }
    out->push_back((*it)[i].get<std::string>());
  }
}

std::optional<std::vector<int32_t>> ReadIds(const Json& obj, const char* key,
                                            const std::string& base, Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  std::string path = PointerAppend(base, key);
  if (!it->is_array()) {
    errors->push_back(Invalid(path, "expected an array of token ids, got " + JsonTypeName(*it)));
    return std::nullopt;
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < it->size(); ++i) {
    std::optional<int64_t> v = SafeInteger((*it)[i]);
    if (!v || *v < 0 || *v > INT32_MAX) {
      errors->push_back(Invalid(PointerAppend(path, i), "expected a token id (integer 0..2^31-1)"));
      continue;
    }
    ids.push_back(static_cast<int32_t>(*v));
  }
  return ids;
}

void ReadStringMap(const Json& obj, const char* key, const std::string& base,
                   std::map<std::string, std::string>* out, Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return;
  std::string path = PointerAppend(base, key);
  if (!it->is_object()) {
    errors->push_back(Invalid(path, "expected an object of strings, got " + JsonTypeName(*it)));
    return;
  }
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) {
      errors->push_back(Invalid(PointerAppend(path, k), "expected a string"));
      continue;
    }
    (*out)[k] = v.get<std::string>();
  }
}

// ---- messages ----

Result<ContentPart> ParsePart(const Json& part, const std::string& path) {
  if (!part.is_object()) return Invalid(path, "expected a content part object");
  auto type = part.find("type");
  if (type == part.end() || !type->is_string()) {
    return Invalid(PointerAppend(path, "type"), "expected \"text\", \"image_url\" or \"input_audio\"");
  }
  ContentPart out;
  out.path = path;
  const std::string t = type->get<std::string>();
  auto string_at = [&](const Json& obj, const char* key, const std::string& at,
                       std::string* dst) -> Status {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string()) {
      return Invalid(PointerAppend(at, key), "expected a string");
    }
    *dst = it->get<std::string>();
    return Status::Ok();
  };
  auto object_at = [&](const char* key) -> Result<const Json*> {
    auto it = part.find(key);
    if (it == part.end() || !it->is_object()) {
      return Invalid(PointerAppend(path, key), "expected an object");
    }
    return &*it;
  };
  if (t == "text") {
    out.kind = PartKind::kText;
    MLC_RETURN_IF_ERROR(string_at(part, "text", path, &out.text));
  } else if (t == "image_url") {
    out.kind = PartKind::kImage;
    auto obj = object_at("image_url");
    MLC_RETURN_IF_ERROR(obj);
    if (Status s = string_at(**obj, "url", PointerAppend(path, "image_url"), &out.url); !s) {
      return s.errors();
    }
  } else if (t == "input_audio") {
    out.kind = PartKind::kAudio;
    auto obj = object_at("input_audio");
    MLC_RETURN_IF_ERROR(obj);
    std::string at = PointerAppend(path, "input_audio");
    MLC_RETURN_IF_ERROR(string_at(**obj, "data", at, &out.url));
    if ((*obj)->contains("format")) {
      MLC_RETURN_IF_ERROR(string_at(**obj, "format", at, &out.format));
    }
  } else {
    return Invalid(PointerAppend(path, "type"),
                   "unknown content part type \"" + t + "\" (expected text, image_url or input_audio)");
  }
  return out;
}

Result<ChatMessage> ParseMessage(const Json& msg, const std::string& path) {
  if (!msg.is_object()) return Invalid(path, "expected a message object {role, content}");
  ChatMessage out;
  out.path = path;
  auto role = msg.find("role");
  if (role == msg.end() || !role->is_string()) {
    return Invalid(PointerAppend(path, "role"), "expected \"system\", \"user\", \"assistant\" or \"tool\"");
  }
  out.role = role->get<std::string>();
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool") {
    return Invalid(PointerAppend(path, "role"),
                   "unknown role \"" + out.role + "\" (expected system, user, assistant or tool)");
  }
  std::string content_path = PointerAppend(path, "content");
  auto content = msg.find("content");
  if (content != msg.end() && content->is_string()) {
    out.parts.push_back(ContentPart{PartKind::kText, content->get<std::string>(), "", "", content_path});
    return out;
  }
  if (content == msg.end() || !content->is_array() || out.role == "system" || out.role == "assistant") {
    return Invalid(content_path, out.role == "system" || out.role == "assistant"
                                     ? "expected a string (" + out.role + " content)"
                                     : "expected a string or an array of content parts");
  }
  bool seen_text = false;
  for (size_t i = 0; i < content->size(); ++i) {
    auto part = ParsePart((*content)[i], PointerAppend(content_path, i));
    MLC_RETURN_IF_ERROR(part);
    if (part->kind == PartKind::kText) {
      if (seen_text) return Invalid(part->path, "more than one text part in a message");
      seen_text = true;
    }
    out.parts.push_back(std::move(*part));
  }
  return out;
}

// ---- segments ----

// A string segment of its own (the system prompt, the reply header, a follow-up separator).
void AddSeparate(std::vector<PromptSegment>* segs, std::string text, const std::string& path) {
  if (!text.empty()) segs->push_back(PromptSegment{PartKind::kText, std::move(text), {}, path});
}

std::string ReplaceFirst(std::string s, std::string_view what, std::string_view with) {
  size_t at = s.find(what);
  if (at != std::string::npos) s.replace(at, what.size(), with);
  return s;
}

std::string SystemPrompt(const ConvTemplate& t, const std::vector<ChatMessage>& messages) {
  std::string message = t.system_message;
  if (!messages.empty() && messages[0].role == "system") message = messages[0].Text();
  if (message.empty() && !t.render_empty_system_message) return "";
  return ReplaceFirst(t.system_template, "{system_message}", message);
}

// A role template cut at its message placeholder, {function_string} filled as WebLLM does: the
// first occurrence gets function_string (when function calling is on), the next one "".
struct RoleTemplate {
  std::string before, after;
  bool has_placeholder = true;
};

RoleTemplate SplitRoleTemplate(const ConvTemplate& t, const std::string& role) {
  RoleTemplate out;
  auto it = t.role_templates.find(role);
  if (it == t.role_templates.end()) return out;
  const std::string placeholder = "{" + role + "_message}";
  size_t at = it->second.find(placeholder);
  out.has_placeholder = at != std::string::npos;
  out.before = out.has_placeholder ? it->second.substr(0, at) : it->second;
  out.after = out.has_placeholder ? it->second.substr(at + placeholder.size()) : "";
  std::vector<std::string> fills;
  if (t.use_function_calling && !t.function_string.empty()) fills.push_back(t.function_string);
  fills.push_back("");
  size_t next = 0;
  for (std::string* part : {&out.before, &out.after}) {
    while (next < fills.size() && part->find(kFunctionPlaceholder) != std::string::npos) {
      *part = ReplaceFirst(*part, kFunctionPlaceholder, fills[next++]);
    }
  }
  return out;
}

Result<std::string> RoleString(const ConvTemplate& t, const ChatMessage& m) {
  auto it = t.roles.find(m.role);
  if (it == t.roles.end()) {
    return Invalid(PointerAppend(m.path, "role"),
                   "the conversation template has no roles." + m.role + " entry");
  }
  return it->second;
}

// Step 3 for message `i` (system excluded).
Status AddMessage(const ConvTemplate& t, const ChatMessage& m, size_t i, bool omit_role,
                  std::vector<PromptSegment>* segs) {
  auto role = RoleString(t, m);
  MLC_RETURN_IF_ERROR(role);
  RoleTemplate tpl = SplitRoleTemplate(t, m.role);
  // The message's text segments point at its text part (where a long message is), else at it.
  std::string text_path = m.path;
  for (const ContentPart& part : m.parts) {
    if (part.kind == PartKind::kText && tpl.has_placeholder) text_path = part.path;
  }
  // Step 5: strings merge within the message and empties drop; as in WebLLM, the system prompt,
  // each message and the reply header are encoded separately.
  size_t first = segs->size();
  const std::string tail = tpl.after + t.seps[i % t.seps.size()];
  auto add = [&](std::string_view text) {
    if (text.empty()) return;
    if (segs->size() > first && segs->back().kind == PartKind::kText) {
      // Room for the tail too: a long message is not reallocated to twice its size for it.
      std::string& s = segs->back().text;
      if (s.capacity() < s.size() + text.size()) s.reserve(s.size() + text.size() + tail.size());
      s += text;
    } else {
      segs->push_back(PromptSegment{PartKind::kText, std::string(text), {}, text_path});
    }
  };
  add((omit_role ? "" : *role + t.role_content_sep) + tpl.before);
  for (const ContentPart& part : m.parts) {
    if (part.kind == PartKind::kText) {
      if (tpl.has_placeholder) add(part.text);
    } else {
      segs->push_back(PromptSegment{part.kind, "", part, part.path});
    }
  }
  add(tail);
  return Status::Ok();
}

Status AddReplyHeader(const ConvTemplate& t, std::vector<PromptSegment>* segs) {
  auto it = t.roles.find("assistant");
  if (it == t.roles.end()) return Invalid("/roles/assistant", "the conversation template has no assistant role");
  AddSeparate(segs, it->second + t.role_empty_sep, "/conv_template/roles/assistant");
  return Status::Ok();
}

Status CheckTemplate(const ConvTemplate& t) {
  if (t.seps.empty()) return Invalid("/seps", "expected at least one separator");
  return Status::Ok();
}

// Messages [from, end) of a conversation whose non-system messages are numbered from 0.
Status AddMessages(const ConvTemplate& t, const std::vector<ChatMessage>& messages, size_t from,
                   bool system_nonempty, std::vector<PromptSegment>* segs) {
  size_t offset = !messages.empty() && messages[0].role == "system" ? 1 : 0;
  Errors errors;
  for (size_t k = std::max(from, offset); k < messages.size(); ++k) {
    size_t i = k - offset;
    bool omit = !t.add_role_after_system_message && system_nonempty && i == 0;
    if (Status s = AddMessage(t, messages[k], i, omit, segs); !s) {
      AddErrors(errors, s.errors());
    }
  }
  if (!errors.empty()) return errors;
  return Status::Ok();
}

char Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return static_cast<char>(c - 'A');
  if (c >= 'a' && c <= 'z') return static_cast<char>(c - 'a' + 26);
  if (c >= '0' && c <= '9') return static_cast<char>(c - '0' + 52);
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

std::string ChatMessage::Text() const {
  for (const ContentPart& p : parts) {
    if (p.kind == PartKind::kText) return p.text;
  }
  return "";
}

Result<ConvTemplate> ParseConvTemplate(const Json& obj, const std::string& base) {
  if (!obj.is_object()) return Invalid(base, "expected a conv_template object, got " + JsonTypeName(obj));
  ConvTemplate t;
  Errors errors;
  ReadString(obj, "name", base, &t.name, &errors);
  ReadString(obj, "system_template", base, &t.system_template, &errors);
  ReadString(obj, "system_message", base, &t.system_message, &errors);
  t.system_prefix_token_ids = ReadIds(obj, "system_prefix_token_ids", base, &errors);
  ReadBool(obj, "add_role_after_system_message", base, &t.add_role_after_system_message, &errors);
  ReadStringMap(obj, "roles", base, &t.roles, &errors);
  ReadStringMap(obj, "role_templates", base, &t.role_templates, &errors);
  ReadStrings(obj, "seps", base, &t.seps, &errors);
  ReadString(obj, "role_content_sep", base, &t.role_content_sep, &errors);
  ReadString(obj, "role_empty_sep", base, &t.role_empty_sep, &errors);
  ReadStrings(obj, "stop_str", base, &t.stop_str, &errors);
  t.stop_token_ids = ReadIds(obj, "stop_token_ids", base, &errors).value_or(std::vector<int32_t>{});
  ReadString(obj, "function_string", base, &t.function_string, &errors);
  ReadBool(obj, "use_function_calling", base, &t.use_function_calling, &errors);
  ReadBool(obj, "render_empty_system_message", base, &t.render_empty_system_message, &errors);
  if (errors.empty() && t.seps.empty()) AddError(errors, Invalid(PointerAppend(base, "seps"), "expected at least one separator"));
  if (!errors.empty()) return errors;
  return t;
}

Result<ConvTemplate> ConvTemplateFromChatConfig(const Json& chat_config) {
  if (!chat_config.is_object() || !chat_config.contains("conv_template")) {
    return Invalid("/conv_template", "the chat config has no conv_template object");
  }
  return ParseConvTemplate(chat_config["conv_template"], "/conv_template");
}

Result<std::vector<ChatMessage>> ParseMessages(const Json& doc, const std::string& base) {
  if (!doc.is_array() || doc.empty()) return Invalid(base, "expected a non-empty array of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < doc.size(); ++i) {
    auto m = ParseMessage(doc[i], PointerAppend(base, i));
    MLC_RETURN_IF_ERROR(m);
    if (m->role == "system" && i != 0) {
      return Invalid(PointerAppend(m->path, "role"), "a system message may only come first");
    }
    out.push_back(std::move(*m));
  }
  const ChatMessage& last = out.back();
  if (last.role != "user" && last.role != "tool") {
    return Invalid(PointerAppend(last.path, "role"), "the last message must be from user or tool");
  }
  return out;
}

Result<std::vector<ChatMessage>> ReadMessagesFile(const std::string& path) {
  auto doc = ReadJsonFile(path);
  MLC_RETURN_IF_ERROR(doc);
  if (doc->is_object() && doc->contains("messages")) {
    return InDocument(ParseMessages((*doc)["messages"], "/messages"), DocumentName(path));
  }
  return InDocument(ParseMessages(*doc), DocumentName(path));
}

Result<ChatPrompt> BuildChatPrompt(const ConvTemplate& tmpl,
                                   const std::vector<ChatMessage>& messages) {
  MLC_RETURN_IF_ERROR(CheckTemplate(tmpl));
  ChatPrompt prompt;
  std::string system = SystemPrompt(tmpl, messages);
  bool has_system = !system.empty();
  AddSeparate(&prompt.segments, std::move(system),
              !messages.empty() && messages[0].role == "system"
                  ? messages[0].parts.empty()
                        ? messages[0].path
                        : messages[0].parts[0].path
                  : "/conv_template/system_message");
  if (Status s = AddMessages(tmpl, messages, 0, has_system, &prompt.segments); !s) {
    return s.errors();
  }
  MLC_RETURN_IF_ERROR(AddReplyHeader(tmpl, &prompt.segments));
  return prompt;
}

Result<ChatPrompt> BuildFollowUpPrompt(const ConvTemplate& tmpl,
                                       const std::vector<ChatMessage>& previous,
                                       std::string_view reply,
                                       const std::vector<ChatMessage>& messages) {
  MLC_RETURN_IF_ERROR(CheckTemplate(tmpl));
  size_t n = previous.size();
  if (n == 0) return Invalid("", "a follow-up needs the previous messages");
  if (messages.size() < n + 2) {
    return Invalid("", "expected the previous " + std::to_string(n) +
                           " messages, the assistant reply and a new message");
  }
  for (size_t k = 0; k < n; ++k) {
    const ChatMessage& a = previous[k];
    const ChatMessage& b = messages[k];
    bool same = a.role == b.role && a.parts.size() == b.parts.size();
    for (size_t p = 0; same && p < a.parts.size(); ++p) {
      same = a.parts[p].kind == b.parts[p].kind && a.parts[p].text == b.parts[p].text &&
             a.parts[p].url == b.parts[p].url && a.parts[p].format == b.parts[p].format;
    }
    if (!same) return Invalid(b.path, "differs from the conversation in the KV cache");
  }
  const ChatMessage& answer = messages[n];
  if (answer.role != "assistant" || answer.Text() != reply) {
    return Invalid(answer.path, "expected the assistant reply held in the KV cache");
  }
  ChatPrompt prompt;
  prompt.first_round = false;
  size_t offset = messages[0].role == "system" ? 1 : 0;
  RoleTemplate tail = SplitRoleTemplate(tmpl, "assistant");
  AddSeparate(&prompt.segments, tail.after + tmpl.seps[(n - offset) % tmpl.seps.size()],
              answer.path);
  if (Status s = AddMessages(tmpl, messages, n + 1, false, &prompt.segments); !s) {
    return s.errors();
  }
  MLC_RETURN_IF_ERROR(AddReplyHeader(tmpl, &prompt.segments));
  return prompt;
}

std::string PromptText(const ChatPrompt& prompt) {
  std::string out;
  for (const PromptSegment& s : prompt.segments) {
    out += s.kind == PartKind::kText ? s.text : s.kind == PartKind::kImage ? "<image>" : "<audio>";
  }
  return out;
}

namespace {

// Standard or URL-safe base64 from `pos` on; errors give the offset in `text`.
Result<std::string> DecodeBase64(std::string_view text, size_t pos, const std::string& path) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (; pos < text.size() && text[pos] != '='; ++pos) {
    char v = Base64Value(text[pos]);
    if (v < 0) return Invalid(path, "invalid base64 character at offset " + std::to_string(pos));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  for (; pos < text.size(); ++pos) {
    if (text[pos] != '=') return Invalid(path, "base64 data after padding at offset " + std::to_string(pos));
  }
  return out;
}

// Raw base64 as OpenAI's input_audio.data carries it: base64 characters in groups of four.
bool IsRawBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t end = text.find_last_not_of('=');
  if (end == std::string_view::npos || text.size() - end - 1 > 2) return false;
  for (size_t i = 0; i <= end; ++i) {
    if (Base64Value(text[i]) < 0) return false;
  }
  return true;
}

std::string ReferencePointer(const ContentPart& part) {
  return part.kind == PartKind::kImage ? PointerAppend(PointerAppend(part.path, "image_url"), "url")
                                       : PointerAppend(PointerAppend(part.path, "input_audio"), "data");
}

std::string ResolvePath(const std::string& file, const std::string& base_dir) {
  std::filesystem::path p(file);
  return p.is_absolute() || base_dir.empty() ? file : (std::filesystem::path(base_dir) / p).string();
}

// True when text names an existing file (relative to base_dir). Never throws: a text longer than
// a file name, or with control characters, names none.
bool NamesAFile(const std::string& text, const std::string& base_dir) {
  if (text.size() > NAME_MAX || HasControlChar(text)) return false;
  struct stat st {};
  return ::stat(ResolvePath(text, base_dir).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::string> DecodeDataUrl(std::string_view url, const std::string& path) {
  size_t comma = url.find(',');
  if (url.substr(0, 5) != "data:" || comma == std::string_view::npos ||
      url.substr(0, comma).find(";base64") == std::string_view::npos) {
    return Invalid(path, "expected a base64 data: URL (data:<type>;base64,<payload>)");
  }
  return DecodeBase64(url, comma + 1, path);
}

Result<std::optional<std::string>> InlineMedia(const ContentPart& part, const std::string& base_dir) {
  const std::string at = ReferencePointer(part);
  if (part.url.empty()) return Invalid(at, "expected a file path, a data: URL or base64 audio");
  Result<std::string> bytes = Errors{};
  if (part.url.rfind("data:", 0) == 0) {
    bytes = DecodeDataUrl(part.url, at);
  } else if (part.kind == PartKind::kAudio && IsRawBase64(part.url) &&
             !NamesAFile(part.url, base_dir)) {
    bytes = DecodeBase64(part.url, 0, at);
  } else {
    return std::optional<std::string>();  // a file
  }
  MLC_RETURN_IF_ERROR(bytes);
  return std::optional<std::string>(std::move(*bytes));
}

Result<std::string> MediaFile(const ContentPart& part, const std::string& base_dir) {
  auto inline_bytes = InlineMedia(part, base_dir);
  MLC_RETURN_IF_ERROR(inline_bytes);
  if (*inline_bytes) return std::string();
  if (HasControlChar(part.url)) {
    return Invalid(ReferencePointer(part), "a file name may not hold control characters");
  }
  return ResolvePath(part.url, base_dir);
}

Result<RequestTurn> PromptTurn(const ChatPrompt& prompt, const ConvTemplate& tmpl,
                               const Tokenizer& tokenizer, const std::string& base_dir) {
  RequestTurn turn;
  // Token runs merge only under one pointer, so that a context overflow names its message.
  auto add_tokens = [&turn](std::vector<int32_t> ids, const std::string& path) {
    if (ids.empty()) return;
    if (!turn.empty() && turn.back().kind == SegmentKind::kTokens && turn.back().path == path) {
      turn.back().token_ids.insert(turn.back().token_ids.end(), ids.begin(), ids.end());
      return;
    }
    RequestSegment seg;
    seg.token_ids = std::move(ids);
    seg.path = path;
    turn.push_back(std::move(seg));
  };
  if (prompt.first_round && tmpl.system_prefix_token_ids) {
    add_tokens(*tmpl.system_prefix_token_ids, "/conv_template/system_prefix_token_ids");
  }
  Errors errors;
  for (const PromptSegment& s : prompt.segments) {
    if (s.kind == PartKind::kText) {
      add_tokens(tokenizer.Encode(s.text), s.path);
      continue;
    }
    auto inline_bytes = InlineMedia(s.media, base_dir);
    Result<std::string> file = std::string();  // a file reference when nothing is inline
    if (inline_bytes && !*inline_bytes) file = MediaFile(s.media, base_dir);
    if (!inline_bytes || !file) {
      AddErrors(errors, inline_bytes ? file.errors() : inline_bytes.errors());
      continue;
    }
    RequestSegment seg;
    seg.kind = s.kind == PartKind::kImage ? SegmentKind::kImage : SegmentKind::kAudio;
    seg.file = *file;
    if (*inline_bytes) seg.bytes = std::make_shared<const std::string>(std::move(**inline_bytes));
    seg.path = s.media.path;
    turn.push_back(std::move(seg));
  }
  if (!errors.empty()) return errors;
  return turn;
}

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  pending_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out = stopped_ ? "" : pending_;
  pending_.clear();
  return out;
}

ReplyStream::ReplyStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), matcher_(std::move(stop_strings)) {}

std::string ReplyStream::Emit(std::string piece) {
  std::string out = matcher_.Push(piece);
  text_ += out;
  return out;
}

std::string ReplyStream::Release(bool final) {
  // Decode a window that starts one released step back, so that tokenizers which drop a word's
  // leading space at the start of a decode (SentencePiece) see the same context as a full decode.
  std::span<const int32_t> all(tokens_);
  std::string before = tokenizer_.Decode(all.subspan(prefix_, read_ - prefix_));
  std::string now = tokenizer_.Decode(all.subspan(prefix_));
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: an unfinished character
  if (now.size() <= before.size() || !now.starts_with(before) ||
      (!final && now.ends_with(kReplacement))) {
    return "";
  }
  prefix_ = read_;
  read_ = tokens_.size();
  return Emit(now.substr(before.size()));
}

std::string ReplyStream::Push(int32_t token) {
  if (stopped()) return "";
  tokens_.push_back(token);
  return Release(false);
}

std::string ReplyStream::Finish() {
  // Tokens still held back (an unfinished character) are released as they decode.
  std::string out = !stopped() && read_ < tokens_.size() ? Release(true) : "";
  std::string rest = matcher_.Finish();
  text_ += rest;
  return out + rest;
}

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      escape(c);
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // a C1 control, UTF-8 encoded
      escape(c);
      escape(next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace mlc
