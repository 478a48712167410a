// OpenAI's audio transcription and translation form: each field checked and converted, each
// error at "/<field>" with what was expected.
#include "serve/transcription_request.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

namespace mlc::serve {
namespace {

Result<double> Temperature(std::string_view text) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || ptr != end || !(v >= 0.0 && v <= 2.0)) {
    return Invalid("/temperature", "expected a number from 0 to 2");
  }
  return v;
}

Result<TranscriptFormat> Format(std::string_view text) {
  static constexpr TranscriptFormat kAll[] = {TranscriptFormat::kJson, TranscriptFormat::kText, TranscriptFormat::kSrt,
                                              TranscriptFormat::kVtt, TranscriptFormat::kVerboseJson};
  for (TranscriptFormat f : kAll) {
    if (text == TranscriptFormatName(f)) return f;
  }
  return Invalid("/response_format", "expected json, text, srt, vtt or verbose_json");
}

}  // namespace

const char* TranscriptFormatName(TranscriptFormat f) {
  switch (f) {
    case TranscriptFormat::kJson: return "json";
    case TranscriptFormat::kText: return "text";
    case TranscriptFormat::kSrt: return "srt";
    case TranscriptFormat::kVtt: return "vtt";
    case TranscriptFormat::kVerboseJson: return "verbose_json";
  }
  return "json";
}

Result<TranscriptionRequest> ParseTranscriptionRequest(const std::vector<FormPart>& parts, size_t max_prompt_bytes) {
  TranscriptionRequest r;
  std::set<std::string> seen;
  bool has_file = false;
  for (const FormPart& p : parts) {
    const std::string at = "/" + p.name;
    // OpenAI's array fields (include[], timestamp_granularities[]) come once per value.
    const bool array = p.name.size() > 2 && p.name.compare(p.name.size() - 2, 2, "[]") == 0;
    if (!array && !seen.insert(p.name).second) return Invalid(at, "given twice");
    const std::string_view v = p.data;
    if (p.name == "file") {
      if (v.empty()) return Invalid(at, "expected the recording's bytes (an empty file)");
      r.file = v;
      r.filename = p.filename.value_or("");
      has_file = true;
    } else if (p.name == "model") {
      r.model = std::string(v);
    } else if (p.name == "prompt") {
      if (v.size() > max_prompt_bytes) {
        return Error{ErrorCode::kLimit, at, "longer than " + std::to_string(max_prompt_bytes) + " bytes"};
      }
      r.prompt = std::string(v);
    } else if (p.name == "language") {
      const bool letters = v.size() >= 2 && v.size() <= 3 &&
                           std::all_of(v.begin(), v.end(), [](unsigned char c) { return std::isalpha(c); });
      if (!letters) return Invalid(at, "expected an ISO-639-1 language code such as \"en\"");
      r.language = std::string(v);
    } else if (p.name == "temperature") {
      auto t = Temperature(v);
      MLC_RETURN_IF_ERROR(t);
      r.temperature = *t;
    } else if (p.name == "response_format") {
      auto f = Format(v);
      MLC_RETURN_IF_ERROR(f);
      r.format = *f;
    } else if (p.name == "stream") {
      if (v != "true" && v != "false") return Invalid(at, "expected true or false");
      r.stream = v == "true";
    } else if (p.name == "timestamp_granularities[]") {
      if (v != "segment") return Invalid(at, "only \"segment\" timestamps are given (one segment a window)");
    } else if (p.name == "chunking_strategy") {
      if (v != "auto") return Invalid(at, "expected \"auto\" (windows cut at the recording's pauses)");
    } else {
      return Invalid(at, "not a field of this request (file, model, prompt, language, temperature, "
                         "response_format, stream, timestamp_granularities[], chunking_strategy)");
    }
  }
  if (!has_file) return Invalid("/file", "expected a file part with the recording");
  if (r.stream && r.format != TranscriptFormat::kJson && r.format != TranscriptFormat::kText) {
    return Invalid("/stream", "a streamed transcript is text: response_format json or text");
  }
  return r;
}

}  // namespace mlc::serve
