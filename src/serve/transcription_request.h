// The form of POST /v1/audio/transcriptions and /v1/audio/translations, parsed before any work
// (serve/transcription_request.cc): its `file` part and OpenAI's fields, each error naming the
// form field.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"
#include "serve/multipart.h"

namespace mlc::serve {

enum class TranscriptFormat { kJson, kText, kSrt, kVtt, kVerboseJson };

struct TranscriptionRequest {
  std::string_view file;  // the recording's bytes (a view into the body)
  std::string filename;
  std::string model;      // "" when absent
  std::string prompt;
  std::string language;   // ISO-639-1 as sent, or ""
  std::optional<double> temperature;
  TranscriptFormat format = TranscriptFormat::kJson;
  bool stream = false;
};

// OpenAI's fields: file (required, not empty), model, prompt (at most max_prompt_bytes),
// language (2 to 3 letters), temperature (0 to 2), response_format (json | text | srt | vtt |
// verbose_json), stream (true | false; json and text only). A field given twice, or one OpenAI
// does not have, is refused. Errors at "/<field>".
Result<TranscriptionRequest> ParseTranscriptionRequest(const std::vector<FormPart>& parts,
                                                       size_t max_prompt_bytes = 4096);

const char* TranscriptFormatName(TranscriptFormat f);

}  // namespace mlc::serve
