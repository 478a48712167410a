// libFuzzer target: arbitrary bytes as a multipart/form-data request (the first line its
// Content-Type value, the rest its body) through the form parser and the audio routes' field
// parser. Nothing may crash; what parses must hold at most max_parts parts, each with a name and
// its bytes inside the body; every error must name where and render as the server sends it.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mlc_manifest/serve.h"
#include "serve/multipart.h"
#include "serve/transcription_request.h"

namespace {

// As the server writes an error (serve/openai_wire.cc Dump): a form's bytes need not be UTF-8.
void Render(const mlc::Errors& errors) {
  (void)mlc::OpenAiError(errors).dump(-1, ' ', false, mlc::OrderedJson::error_handler_t::replace);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == std::string_view::npos) return 0;
  const std::string_view content_type = input.substr(0, eol);
  const std::string_view body = input.substr(eol + 1);
  mlc::serve::MultipartLimits limits;
  limits.max_parts = 8;
  limits.max_part_headers = 512;
  auto parts = mlc::serve::ParseMultipart(content_type, body, limits);
  if (!parts) {
    if (parts.errors().empty() || parts.errors().front().path.empty()) std::abort();
    Render(parts.errors());
    return 0;
  }
  if (parts->size() > limits.max_parts) std::abort();
  for (const mlc::serve::FormPart& p : *parts) {
    if (p.name.empty()) std::abort();
    if (p.data.data() < body.data() || p.data.data() + p.data.size() > body.data() + body.size()) std::abort();
  }
  auto form = mlc::serve::ParseTranscriptionRequest(*parts, 64);
  if (!form) {
    if (form.errors().empty()) std::abort();
    Render(form.errors());
    return 0;
  }
  if (form->file.empty() || form->prompt.size() > 64) std::abort();
  if (form->temperature && (*form->temperature < 0 || *form->temperature > 2)) std::abort();
  return 0;
}
