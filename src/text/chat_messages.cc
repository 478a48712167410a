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
