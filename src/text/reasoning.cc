// A template's thinking mode: switching it on or off in the prompt (the system marker, the skip
// after the reply header) and splitting a reply's thought from its answer as the reply is shown.
#include <algorithm>

#include "mlc_manifest/conversation.h"

namespace mlc {

ConvTemplate WithThinking(const ConvTemplate& tmpl, bool on) {
  ConvTemplate t = tmpl;
  if (!t.thinking) return t;
  if (on) {
    if (!t.thinking->system_marker.empty()) {
      const std::string placeholder = "{system_message}";
      size_t at = t.system_template.find(placeholder);
      if (at == std::string::npos) {
        t.system_template += t.thinking->system_marker;
      } else {
        t.system_template.insert(at, t.thinking->system_marker);
      }
      t.render_empty_system_message = true;
    }
  } else {
    t.role_empty_sep += t.thinking->skip;  // only the reply header ends with role_empty_sep
  }
  return t;
}

ReasoningSplitter::ReasoningSplitter(const ThinkingMode& mode) : open_(mode.open), close_(mode.close) {}

void ReasoningSplitter::Emit(std::string_view text, Parts& out) {
  if (!in_thought_) {
    out.content += text;
    return;
  }
  if (thought_start_) {
    size_t first = text.find_first_not_of("\r\n");
    if (first == std::string_view::npos) return;
    text.remove_prefix(first);
    thought_start_ = false;
  }
  out.reasoning += text;
}

ReasoningSplitter::Parts ReasoningSplitter::Push(std::string_view text) {
  Parts out;
  pending_ += text;
  for (;;) {
    const std::string& marker = in_thought_ ? close_ : open_;
    size_t at = pending_.find(marker);
    if (at == std::string::npos) break;
    Emit(std::string_view(pending_).substr(0, at), out);
    pending_.erase(0, at + marker.size());
    in_thought_ = !in_thought_;
    thought_start_ = in_thought_;
  }
  // Hold back the longest tail that could begin the awaited marker.
  const std::string& marker = in_thought_ ? close_ : open_;
  size_t keep = marker.empty() ? 0 : std::min(pending_.size(), marker.size() - 1);
  while (keep > 0 && pending_.compare(pending_.size() - keep, keep, marker, 0, keep) != 0) --keep;
  Emit(std::string_view(pending_).substr(0, pending_.size() - keep), out);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::Finish() {
  Parts out;
  Emit(pending_, out);
  pending_.clear();
  return out;
}

}  // namespace mlc
