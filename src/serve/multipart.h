// multipart/form-data bodies (RFC 7578), as OpenAI's audio routes take them: the boundary from the
// Content-Type header, then each part's headers (Content-Disposition's name and filename, its
// Content-Type) and its bytes, viewed in the body (nothing is copied). Strict and bounded: CRLF
// line ends, at most max_parts parts of at most max_part_headers header bytes each, every error
// naming the byte offset and what was expected.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc::serve {

struct FormPart {
  std::string name;                     // Content-Disposition's name (not empty)
  std::optional<std::string> filename;  // Content-Disposition's filename, when given
  std::string content_type;             // the part's Content-Type ("" when absent)
  std::string_view data;                // its bytes, a view into the body
};

struct MultipartLimits {
  size_t max_parts = 32;
  size_t max_part_headers = 8192;  // bytes of one part's header block
};

// The boundary of a Content-Type value "multipart/form-data; boundary=..." (token or quoted,
// 1 to 70 characters).
Result<std::string> MultipartBoundary(std::string_view content_type);
// The parts of a multipart/form-data body with that Content-Type, in order.
Result<std::vector<FormPart>> ParseMultipart(std::string_view content_type, std::string_view body,
                                             const MultipartLimits& limits = {});

}  // namespace mlc::serve
