// The API key check of a request's head (api_keys.h).
#include "serve/api_keys.h"

#include <algorithm>

namespace mlc::serve {

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  // The lengths differ, or some byte does: the differences are or'ed together over all of b.
  // Past a's end, b is compared with a's bytes again (any value would do; none is skipped).
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  unsigned char acc = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const unsigned char x = a.empty() ? 0 : static_cast<unsigned char>(a[i % a.size()]);
    acc |= static_cast<unsigned char>(x ^ static_cast<unsigned char>(b[i]));
  }
  diff = static_cast<unsigned char>(diff | acc);
  return diff == 0;
}

bool IsApiKeyText(std::string_view key) {
  return !key.empty() && std::all_of(key.begin(), key.end(), [](char c) { return c > 0x20 && c < 0x7f; });
}

ApiKeyPolicy::ApiKeyPolicy(std::vector<std::string> keys, std::vector<std::string> open_paths)
    : keys_(std::move(keys)), open_paths_(std::move(open_paths)) {}

bool ApiKeyPolicy::Needs(std::string_view target) const {
  if (keys_.empty()) return false;
  const std::string_view path = target.substr(0, target.find('?'));
  return std::find(open_paths_.begin(), open_paths_.end(), path) == open_paths_.end();
}

bool ApiKeyPolicy::Accepts(std::string_view authorization) const {
  constexpr std::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size()) return false;
  for (size_t i = 0; i < kScheme.size(); ++i) {
    char c = authorization[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != kScheme[i]) return false;
  }
  std::string_view credential = authorization.substr(kScheme.size());
  if (credential.front() != ' ' && credential.front() != '\t') return false;
  while (!credential.empty() && (credential.front() == ' ' || credential.front() == '\t')) credential.remove_prefix(1);
  while (!credential.empty() && (credential.back() == ' ' || credential.back() == '\t')) credential.remove_suffix(1);
  bool found = false;
  for (const std::string& key : keys_) found = ConstantTimeEquals(key, credential) | found;
  return found && !credential.empty();
}

}  // namespace mlc::serve
