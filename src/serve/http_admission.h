// Which requests this server takes at all, decided from the head alone (before any body byte):
// the Host must be an allowed name (loopback names and the bind address by default, more with
// `serve --allowed-host`, or any with "*") so that a DNS-rebound name cannot reach a server on
// localhost; a browser's Origin must name an allowed host too, so that another site's page cannot
// post to it; and a POST body must be application/json, the one type a page cannot send
// cross-origin without asking first (text/plain and forms are the CSRF route); and when the
// server has API keys, a path that is not left open needs one (401, serve/api_keys.h). Standard
// library only: the HTTP module carries its own copy.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/api_keys.h"
#include "serve/http_framing.h"

namespace mlc::serve {

class HostPolicy {
 public:
  // Names as given ("localhost", "10.0.0.2", "[::1]", "*"); compared without port and case.
  explicit HostPolicy(const std::vector<std::string>& names);
  // localhost, 127.0.0.1 and [::1], the bind address, and the extra names.
  static std::vector<std::string> DefaultNames(std::string_view bind_host, const std::vector<std::string>& extra);

  bool Allows(std::string_view host_without_port) const;

 private:
  bool any_ = false;
  std::vector<std::string> names_;  // lowercase
};

// The host of a Host header value ("Example.com:8000" -> "example.com", "[::1]:80" -> "[::1]").
std::string HostOf(std::string_view host_header);

// nullopt when the request may go on; else a 403 (Host or Origin), a 401 (no key, or not one of
// the keys, where keys are needed) or a 415 (Content-Type), in that order.
std::optional<HttpFramingError> Admit(const HttpRequestHead& head, const HostPolicy& hosts,
                                      const ApiKeyPolicy& keys = ApiKeyPolicy());

}  // namespace mlc::serve
