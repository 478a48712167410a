// The prompt segments of WebLLM 0.2.86's manifest path (SPEC 7 steps 1-5), for a fresh
// conversation and for a follow-up turn that continues a KV cache.
#include "mlc_manifest/conversation.h"

namespace mlc {
namespace {

constexpr const char* kFunctionPlaceholder = "{function_string}";

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
  const std::string tail = m.open_turn ? std::string() : tpl.after + t.seps[i % t.seps.size()];
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
  add((omit_role || m.continues_turn ? "" : *role + t.role_content_sep) + tpl.before);
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

}  // namespace

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
  if (messages.empty() || !messages.back().open_turn) {  // else the reply continues the open turn
    MLC_RETURN_IF_ERROR(AddReplyHeader(tmpl, &prompt.segments));
  }
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
  if (!messages[n + 1].continues_turn) {
    AddSeparate(&prompt.segments, tail.after + tmpl.seps[(n - offset) % tmpl.seps.size()], answer.path);
  }
  if (Status s = AddMessages(tmpl, messages, n + 1, false, &prompt.segments); !s) {
    return s.errors();
  }
  if (!messages.back().open_turn) {  // else the reply continues the open turn
    MLC_RETURN_IF_ERROR(AddReplyHeader(tmpl, &prompt.segments));
  }
  return prompt;
}

std::string PromptText(const ChatPrompt& prompt) {
  std::string out;
  for (const PromptSegment& s : prompt.segments) {
    out += s.kind == PartKind::kText ? s.text : s.kind == PartKind::kImage ? "<image>" : "<audio>";
  }
  return out;
}

}  // namespace mlc
