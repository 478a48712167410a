// libFuzzer target: arbitrary bytes as {"conv_template": ..., "messages": [...], "reply": "...",
// "next": [...]} through the strict JSON reader, the template and message parsers, the first-round
// and follow-up prompt builders and data: URL decoding; then the prompt text is streamed through
// a StopMatcher in pieces, which must give exactly the text before the first stop string.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/conversation.h"

namespace {

// The stop matcher fed `text` in pieces of `step` bytes must agree with one search.
void CheckStops(const std::vector<std::string>& stops, const std::string& text, size_t step) {
  mlc::StopMatcher matcher(stops);
  std::string out;
  for (size_t i = 0; i < text.size(); i += step) out += matcher.Push(std::string_view(text).substr(i, step));
  out += matcher.Finish();
  size_t first = std::string::npos;
  for (const std::string& s : stops) {
    if (!s.empty()) first = std::min(first, text.find(s));
  }
  std::string expected = first == std::string::npos ? text : text.substr(0, first);
  if (out != expected || matcher.stopped() != (first != std::string::npos)) std::abort();
}

void DecodeMedia(const mlc::ChatPrompt& prompt) {
  for (const mlc::PromptSegment& s : prompt.segments) {
    if (s.kind != mlc::PartKind::kText && s.media.url.rfind("data:", 0) == 0) {
      (void)mlc::DecodeDataUrl(s.media.url, s.media.path);
    }
    // Inline or file: raw base64 longer than a file name must be data, never an exception.
    if (s.kind != mlc::PartKind::kText) (void)mlc::InlineMedia(s.media, "");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = mlc::fuzz::JsonInput(data, size, 1, 1 << 16);
  if (!doc || !doc->is_object()) return 0;
  auto tmpl = mlc::ConvTemplateFromChatConfig(*doc);
  if (!tmpl.ok() || !doc->contains("messages")) return 0;
  auto messages = mlc::ParseMessages((*doc)["messages"], "/messages");
  if (!messages.ok()) return 0;
  auto prompt = mlc::BuildChatPrompt(*tmpl, *messages);
  if (!prompt.ok()) return 0;
  DecodeMedia(*prompt);
  std::string prompt_text = mlc::PromptText(*prompt);
  CheckStops(tmpl->stop_str, prompt_text, 1 + data[0] % 7);
  if (!doc->contains("next") || !(*doc)["reply"].is_string()) return 0;
  auto next = mlc::ParseMessages((*doc)["next"], "/next");
  if (!next.ok()) return 0;
  std::string reply = (*doc)["reply"].get<std::string>();
  std::vector<mlc::ChatMessage> all = *messages;
  all.push_back(mlc::ChatMessage{"assistant", {mlc::ContentPart{mlc::PartKind::kText, reply, "", "", ""}}, ""});
  all.insert(all.end(), next->begin(), next->end());
  auto follow = mlc::BuildFollowUpPrompt(*tmpl, *messages, reply, all);
  if (follow.ok()) {
    DecodeMedia(*follow);
    CheckStops(tmpl->stop_str, mlc::PromptText(*follow), 1 + data[0] % 5);
  }
  return 0;
}
