// Who may call a server that has API keys: a request must carry "Authorization: Bearer KEY" with
// one of the keys, except on the paths left open (the health check, the chat page, and the
// metrics unless they need a key too). Decided from the request's head, before any body byte is
// read. Each key is compared whole, in time that does not depend on where the bytes differ.
// Standard library only: the HTTP module carries its own copy.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mlc::serve {

// True when a and b hold the same bytes. Every byte of b is read (no exit at the first byte that
// differs), so the time depends only on b's length.
bool ConstantTimeEquals(std::string_view a, std::string_view b);

// A key a Bearer header can carry: visible ASCII (0x21..0x7e), at least one byte.
bool IsApiKeyText(std::string_view key);

class ApiKeyPolicy {
 public:
  ApiKeyPolicy() = default;  // no keys: every request may go on
  // open_paths: exact paths (the target without its query) that need no key.
  ApiKeyPolicy(std::vector<std::string> keys, std::vector<std::string> open_paths);

  bool enabled() const { return !keys_.empty(); }
  // Whether a request for this target ("/v1/models?x=1") must present a key.
  bool Needs(std::string_view target) const;
  // Whether an Authorization header value ("Bearer KEY"; the scheme in any case) names one of
  // the keys. Every key is compared, whichever matched.
  bool Accepts(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
  std::vector<std::string> open_paths_;
};

}  // namespace mlc::serve
