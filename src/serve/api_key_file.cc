// The server's API keys as the library takes them (serve.h): a key's text checked, and a key
// file read, one key a line, every fault at its line.
#include "mlc_manifest/fs.h"
#include "mlc_manifest/serve.h"
#include "serve/api_keys.h"

namespace mlc {

bool IsApiKey(std::string_view key) { return serve::IsApiKeyText(key); }

Result<std::vector<std::string>> ParseApiKeys(std::string_view text, const std::string& document) {
  std::vector<std::string> keys;
  Errors errors;
  size_t number = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    if (!IsApiKey(line)) {
      Error e = Invalid("line " + std::to_string(number),
                        "expected one API key (visible ASCII, no spaces or control characters)");
      e.document = document;
      AddError(errors, std::move(e));
      continue;
    }
    keys.emplace_back(line);
  }
  if (!errors.empty()) return errors;
  if (keys.empty()) {
    return FileError(ErrorCode::kInvalid, document,
                     "holds no API key (one a line; blank lines and lines starting with # are skipped)");
  }
  return keys;
}

Result<std::vector<std::string>> ReadApiKeyFile(const std::string& path) {
  auto text = ReadFile(path, 1u << 20);
  MLC_RETURN_IF_ERROR(text);
  return ParseApiKeys(*text, DocumentName(path));
}

}  // namespace mlc
