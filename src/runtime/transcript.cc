// Transcripts: one chat turn a window (the package's template with thinking off, an instruction,
// the text so far as context, the window's samples) and the transcript's text, SubRip and WebVTT
// forms.
#include "mlc_manifest/transcript.h"

#include <cmath>
#include <cstdio>

#include "mlc_manifest/chat.h"

namespace mlc {
namespace {

// English names of common ISO-639-1 codes; another code is named as given.
std::string LanguageName(std::string_view code) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"ar", "Arabic"}, {"de", "German"}, {"en", "English"}, {"es", "Spanish"}, {"fr", "French"},
      {"hi", "Hindi"},  {"it", "Italian"}, {"ja", "Japanese"}, {"ko", "Korean"}, {"nl", "Dutch"},
      {"pl", "Polish"}, {"pt", "Portuguese"}, {"ru", "Russian"}, {"tr", "Turkish"}, {"uk", "Ukrainian"},
      {"zh", "Chinese"}};
  for (const auto& [c, name] : kNames) {
    if (c == code) return std::string(name);
  }
  return std::string(code);
}

// hh:mm:ss with the millisecond separator `sep` ("," for SubRip, "." for WebVTT).
std::string Timestamp(double seconds, char sep) {
  const auto ms = static_cast<int64_t>(std::llround(std::max(0.0, seconds) * 1000.0));
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), sep,
                static_cast<long long>(ms % 1000));
  return buf;
}

// A cue's text: no empty line inside (it would end the cue), never empty.
std::string CueText(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '\r') continue;
    if (c == '\n' && (out.empty() || out.back() == '\n')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.empty() ? "..." : out;
}

std::string Cues(const std::vector<TranscriptSegment>& segments, char sep, bool numbered) {
  std::string out;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (numbered) out += std::to_string(i + 1) + "\n";
    out += Timestamp(segments[i].start_s, sep) + " --> " + Timestamp(segments[i].end_s, sep) + "\n";
    out += CueText(segments[i].text) + "\n\n";
  }
  return out;
}

}  // namespace

const char* TranscriptionTaskName(TranscriptionTask task) {
  return task == TranscriptionTask::kTranslate ? "translate" : "transcribe";
}

std::string TranscriptionInstruction(TranscriptionTask task, std::string_view language) {
  if (task == TranscriptionTask::kTranslate) {
    return "Translate the following speech segment into English text. Write only the translation.";
  }
  const std::string in = language.empty() ? "" : " in " + LanguageName(language);
  return "Transcribe the following speech segment" + in + " into text. Write only the transcription.";
}

std::string TranscriptionContext(std::string_view prompt, const std::vector<TranscriptSegment>& before,
                                 size_t max_bytes) {
  std::string text(prompt);
  for (const TranscriptSegment& s : before) {
    if (s.text.empty()) continue;
    if (!text.empty()) text += ' ';
    text += s.text;
  }
  if (text.size() <= max_bytes) return text;
  size_t cut = text.size() - max_bytes;
  const size_t space = text.find(' ', cut);
  if (space != std::string::npos) cut = space + 1;
  while (cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) ++cut;  // a whole UTF-8 character
  return text.substr(cut);
}

Result<TurnInput> TranscriptionTurn(const OpenedPackage& package, TranscriptionTask task, std::string_view language,
                                    std::string_view context, std::span<const float> window) {
  if (!package.model.bound.contract.audio) {
    return Error{ErrorCode::kUnsupported, "/file", "this model has no audio input"};
  }
  if (!package.tokenizer || !package.tmpl) {
    return Error{ErrorCode::kUnsupported, "/file", "transcription needs the package's tokenizer and conversation template"};
  }
  ChatMessage user;
  user.role = "user";
  user.path = "/messages/0";
  std::string text = context.empty() ? "" : "The recording so far: " + std::string(context) + "\n\n";
  text += TranscriptionInstruction(task, language);
  ContentPart instruction;
  instruction.text = std::move(text);
  instruction.path = "/messages/0/content/0";
  // The audio part's bytes are the window's samples, set on its segment below.
  ContentPart audio;
  audio.kind = PartKind::kAudio;
  audio.url = "data:audio/wav;base64,";
  audio.path = "/messages/0/content/1";
  user.parts = {instruction, audio};
  ChatTurns turns(WithThinking(*package.tmpl, false), *package.tokenizer);
  auto turn = turns.Next({user}, "", "", /*allow_files=*/false);
  MLC_RETURN_IF_ERROR(turn);
  auto samples = std::make_shared<const std::vector<float>>(window.begin(), window.end());
  for (RequestSegment& seg : *turn) {
    if (seg.kind == SegmentKind::kAudio) seg.samples = samples;
  }
  return PrepareTurn(package.model.bound.contract, *turn, package.model.limits, 0);
}

std::vector<TranscriptSegment> TranscriptSegments(const WindowedAudio& audio) {
  std::vector<TranscriptSegment> out;
  int64_t start = 0;
  const auto rate = static_cast<double>(audio.sample_rate_hz);
  for (int64_t end : audio.ends) {
    out.push_back({static_cast<double>(start) / rate, static_cast<double>(end) / rate, ""});
    start = end;
  }
  return out;
}

std::string WindowText(std::string_view generated) {
  const size_t a = generated.find_first_not_of(" \t\r\n");
  if (a == std::string_view::npos) return "";
  return std::string(generated.substr(a, generated.find_last_not_of(" \t\r\n") - a + 1));
}

OrderedJson TranscriptJson(TranscriptionTask task, std::string_view language,
                           const std::vector<TranscriptSegment>& segments) {
  OrderedJson list = OrderedJson::array();
  for (size_t i = 0; i < segments.size(); ++i) {
    list.push_back({{"id", i}, {"start", segments[i].start_s}, {"end", segments[i].end_s}, {"text", segments[i].text}});
  }
  return {{"task", TranscriptionTaskName(task)},
          {"language", language.empty() ? std::string("unknown") : std::string(language)},
          {"duration", segments.empty() ? 0.0 : segments.back().end_s},
          {"text", TranscriptText(segments)},
          {"segments", std::move(list)}};
}

OrderedJson TranscriptUsage(int64_t input_tokens, int64_t output_tokens) {
  return {{"type", "tokens"},
          {"input_tokens", input_tokens},
          {"output_tokens", output_tokens},
          {"total_tokens", input_tokens + output_tokens}};
}

std::string TranscriptText(const std::vector<TranscriptSegment>& segments) {
  std::string out;
  for (const TranscriptSegment& s : segments) {
    if (s.text.empty()) continue;
    if (!out.empty()) out += ' ';
    out += s.text;
  }
  return out;
}

std::string TranscriptSrt(const std::vector<TranscriptSegment>& segments) { return Cues(segments, ',', true); }

std::string TranscriptVtt(const std::vector<TranscriptSegment>& segments) {
  return "WEBVTT\n\n" + Cues(segments, '.', false);
}

}  // namespace mlc
