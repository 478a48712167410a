// The Host allow-list, the Origin check, the API key and the POST Content-Type check (JSON, or a
// form for the audio routes; http_admission.h).
#include "serve/http_admission.h"

#include "base/ascii.h"

#include <algorithm>

namespace mlc::serve {
namespace {


// An address as it appears in a Host header: IPv6 literals in brackets.
std::string AsHostName(std::string_view name) {
  if (name.find(':') != std::string_view::npos && name.front() != '[') return "[" + std::string(name) + "]";
  return std::string(name);
}

HttpFramingError Refusal(int status, std::string message) { return HttpFramingError{status, 0, std::move(message)}; }

// The body a POST to `target` must have: OpenAI's audio routes take a form, every other route JSON.
std::string_view ExpectedMedia(std::string_view target) {
  const std::string_view path = target.substr(0, target.find('?'));
  return path == "/v1/audio/transcriptions" || path == "/v1/audio/translations" ? "multipart/form-data"
                                                                                 : "application/json";
}

}  // namespace

HostPolicy::HostPolicy(const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    if (n == "*") any_ = true;
    if (!n.empty()) names_.push_back(AsciiLowerCopy(HostOf(AsHostName(n))));
  }
}

std::vector<std::string> HostPolicy::DefaultNames(std::string_view bind_host,
                                                  const std::vector<std::string>& extra) {
  std::vector<std::string> names = {"localhost", "127.0.0.1", "[::1]"};
  if (!bind_host.empty()) names.push_back(AsHostName(bind_host));
  names.insert(names.end(), extra.begin(), extra.end());
  return names;
}

bool HostPolicy::Allows(std::string_view host) const {
  if (any_) return true;
  const std::string lower = AsciiLowerCopy(host);
  return std::find(names_.begin(), names_.end(), lower) != names_.end();
}

std::string HostOf(std::string_view h) {
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    return AsciiLowerCopy(h.substr(0, close == std::string_view::npos ? h.size() : close + 1));
  }
  return AsciiLowerCopy(h.substr(0, h.find(':')));
}

std::optional<HttpFramingError> Admit(const HttpRequestHead& head, const HostPolicy& hosts,
                                      const ApiKeyPolicy& keys) {
  if (const std::string* host = head.Find("Host"); host && !hosts.Allows(HostOf(*host))) {
    return Refusal(403, "Host " + HostOf(*host) +
                            " is not served here (serve --allowed-host names the hosts this server answers to)");
  }
  if (const std::string* origin = head.Find("Origin")) {
    // scheme "://" host [":" port]; "null" (sandboxed pages, files) names no host.
    const size_t scheme = origin->find("://");
    const std::string host = scheme == std::string::npos ? "" : HostOf(std::string_view(*origin).substr(scheme + 3));
    if (host.empty() || !hosts.Allows(host)) {
      return Refusal(403, "requests from pages of origin " + origin->substr(0, 128) +
                              " are refused (serve --allowed-host names the hosts whose pages may call)");
    }
  }
  if (keys.Needs(head.target)) {
    const std::string* authorization = head.Find("Authorization");
    if (!authorization) {
      return Refusal(401, "this server needs an API key: send the header Authorization: Bearer KEY");
    }
    if (head.Count("Authorization") != 1 || !keys.Accepts(*authorization)) {
      return Refusal(401, "the API key is not one this server takes (expected Authorization: Bearer KEY)");
    }
  }
  if (head.method == "POST") {
    const std::string* type = head.Find("Content-Type");
    std::string_view media = type ? std::string_view(*type).substr(0, type->find(';')) : std::string_view();
    while (!media.empty() && (media.back() == ' ' || media.back() == '\t')) media.remove_suffix(1);
    const std::string_view expected = ExpectedMedia(head.target);
    if (!EqualsIgnoreCase(media, expected)) {
      return Refusal(415, "Content-Type " + (type ? type->substr(0, 128) : std::string("(none)")) +
                              " is refused: this route's POST bodies must be " + std::string(expected));
    }
  }
  return std::nullopt;
}

}  // namespace mlc::serve
