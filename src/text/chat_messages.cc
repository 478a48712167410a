// OpenAI-style chat messages (SPEC 7 step 1): roles, string content and content parts.
#include "mlc_manifest/conversation.h"

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

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

// An assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}], the
// arguments a JSON object's text (as OpenAI sends them).
Status ParseToolCalls(const Json& msg, const std::string& path, std::vector<ToolCall>& out) {
  auto calls = msg.find("tool_calls");
  if (calls == msg.end() || calls->is_null()) return Status::Ok();
  const std::string at = PointerAppend(path, "tool_calls");
  if (!calls->is_array()) return Invalid(at, "expected an array of tool calls");
  for (size_t i = 0; i < calls->size(); ++i) {
    const Json& c = (*calls)[i];
    const std::string call_at = PointerAppend(at, i);
    if (!c.is_object()) return Invalid(call_at, "expected a tool call object");
    ToolCall call;
    call.path = call_at;
    if (!c.contains("id") || !c["id"].is_string() || c["id"].get<std::string>().empty()) {
      return Invalid(PointerAppend(call_at, "id"), "expected the call's id");
    }
    call.id = c["id"].get<std::string>();
    if (c.contains("type") && c["type"] != "function") {
      return Invalid(PointerAppend(call_at, "type"), "expected \"function\"");
    }
    const std::string fn_at = PointerAppend(call_at, "function");
    if (!c.contains("function") || !c["function"].is_object()) return Invalid(fn_at, "expected {name, arguments}");
    const Json& fn = c["function"];
    if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty()) {
      return Invalid(PointerAppend(fn_at, "name"), "expected the function's name");
    }
    call.name = fn["name"].get<std::string>();
    if (!fn.contains("arguments") || !fn["arguments"].is_string()) {
      return Invalid(PointerAppend(fn_at, "arguments"), "expected the arguments as a JSON string");
    }
    call.arguments = fn["arguments"].get<std::string>();
    out.push_back(std::move(call));
  }
  return Status::Ok();
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
  if (out.role == "assistant") MLC_RETURN_IF_ERROR(ParseToolCalls(msg, path, out.tool_calls));
  if (out.role == "tool") {
    auto id = msg.find("tool_call_id");
    if (id != msg.end() && !id->is_null()) {
      if (!id->is_string()) return Invalid(PointerAppend(path, "tool_call_id"), "expected a string");
      out.tool_call_id = id->get<std::string>();
    }
  }
  std::string content_path = PointerAppend(path, "content");
  auto content = msg.find("content");
  if (!out.tool_calls.empty() && (content == msg.end() || content->is_null())) return out;
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

}  // namespace

std::string ChatMessage::Text() const {
  for (const ContentPart& p : parts) {
    if (p.kind == PartKind::kText) return p.text;
  }
  return "";
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

}  // namespace mlc
