// Transcription and translation of recordings of any length: a recording's windows (cut at its
// pauses, DecodeWindowedAudio) each become one chat turn of the package's own template, with
// thinking off, an instruction for the task, and the text so far as context; and the transcript's
// forms (text, SubRip, WebVTT) from its segments, one a window.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/open_package.h"
#include "mlc_manifest/session.h"

namespace mlc {

enum class TranscriptionTask { kTranscribe, kTranslate };

const char* TranscriptionTaskName(TranscriptionTask task);  // "transcribe" | "translate"

// One window's text and where it lies in the recording.
struct TranscriptSegment {
  double start_s = 0;
  double end_s = 0;
  std::string text;
};

// The user message's instruction: transcribe the speech (in `language`, an ISO-639-1 code, when
// given) or translate it into English, writing only that text.
std::string TranscriptionInstruction(TranscriptionTask task, std::string_view language);
// The turn of one window for a package with an audio input, a tokenizer and a template: the
// context ("" for none: the caller's prompt, then the text of the windows before), the
// instruction, the window's samples (at the processor's rate).
Result<TurnInput> TranscriptionTurn(const OpenedPackage& package, TranscriptionTask task, std::string_view language,
                                    std::string_view context, std::span<const float> window);
// The context a window carries: the prompt and the text so far, its last max_bytes bytes (cut
// at a space).
std::string TranscriptionContext(std::string_view prompt, const std::vector<TranscriptSegment>& before,
                                 size_t max_bytes = 600);
// The windows' start and end seconds, in order.
std::vector<TranscriptSegment> TranscriptSegments(const WindowedAudio& audio);

// A window's generated text as its segment keeps it: without leading and trailing blanks.
std::string WindowText(std::string_view generated);

std::string TranscriptText(const std::vector<TranscriptSegment>& segments);  // texts joined by a space
// {"task", "language" (the code, or "unknown"), "duration", "text", "segments": [{"id", "start",
// "end", "text"}]}: OpenAI's verbose_json without usage.
OrderedJson TranscriptJson(TranscriptionTask task, std::string_view language,
                           const std::vector<TranscriptSegment>& segments);
// OpenAI's transcript usage: {"type": "tokens", "input_tokens", "output_tokens", "total_tokens"}.
OrderedJson TranscriptUsage(int64_t input_tokens, int64_t output_tokens);
std::string TranscriptSrt(const std::vector<TranscriptSegment>& segments);
std::string TranscriptVtt(const std::vector<TranscriptSegment>& segments);

}  // namespace mlc
