// multipart/form-data (RFC 7578 over RFC 2046's framing): the boundary from Content-Type, then the
// parts between its delimiters, each a header block ended by an empty line and its bytes up to
// the next CRLF-delimiter. Bounded by the part count and each header block's size; errors name
// the byte offset in the body.
#include "serve/multipart.h"

#include <algorithm>
#include <cctype>

namespace mlc::serve {
namespace {

constexpr std::string_view kCrlf = "\r\n";

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string At(size_t offset) { return "multipart body, byte " + std::to_string(offset); }

// The parameters of a header value after its first ';': name=token or name="quoted", names
// lower-cased. nullopt when one is malformed.
std::optional<std::vector<std::pair<std::string, std::string>>> Parameters(std::string_view value) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t i = value.find(';');
  while (i != std::string_view::npos && i < value.size()) {
    ++i;  // past ';'
    while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
    if (i == value.size()) break;
    const size_t eq = value.find('=', i);
    if (eq == std::string_view::npos) return std::nullopt;
    std::string name = Lower(Trim(value.substr(i, eq - i)));
    if (name.empty()) return std::nullopt;
    i = eq + 1;
    std::string text;
    if (i < value.size() && value[i] == '"') {
      ++i;
      bool closed = false;
      while (i < value.size()) {
        char c = value[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < value.size()) c = value[i++];
        text.push_back(c);
      }
      if (!closed) return std::nullopt;
      while (i < value.size() && (value[i] == ' ' || value[i] == '\t')) ++i;
      if (i < value.size() && value[i] != ';') return std::nullopt;
    } else {
      const size_t end = std::min(value.find(';', i), value.size());
      text = std::string(Trim(value.substr(i, end - i)));
      i = end;
    }
    out.emplace_back(std::move(name), std::move(text));
    i = value.find(';', i);
  }
  return out;
}

// One part's header block (without its final empty line) into part; offset: where it starts.
Status ReadHeaders(std::string_view block, size_t offset, FormPart& part) {
  bool disposition = false;
  size_t pos = 0;
  while (pos < block.size()) {
    size_t end = block.find(kCrlf, pos);
    if (end == std::string_view::npos) end = block.size();
    const std::string_view line = block.substr(pos, end - pos);
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      return Invalid(At(offset + pos), "expected a part header \"Name: value\"");
    }
    const std::string name = Lower(Trim(line.substr(0, colon)));
    const std::string_view value = Trim(line.substr(colon + 1));
    if (name == "content-disposition") {
      if (disposition) return Invalid(At(offset + pos), "a second Content-Disposition in one part");
      disposition = true;
      if (Lower(Trim(value.substr(0, value.find(';')))) != "form-data") {
        return Invalid(At(offset + pos), "expected Content-Disposition: form-data");
      }
      auto params = Parameters(value);
      if (!params) return Invalid(At(offset + pos), "a malformed Content-Disposition parameter");
      for (auto& [key, text] : *params) {
        if (key == "name") part.name = std::move(text);
        if (key == "filename") part.filename = std::move(text);
      }
      if (part.name.empty()) return Invalid(At(offset + pos), "expected Content-Disposition's name=\"...\"");
    } else if (name == "content-type") {
      part.content_type = std::string(value);
    }
    pos = end + kCrlf.size();
  }
  if (!disposition) return Invalid(At(offset), "a part without Content-Disposition: form-data");
  return Status::Ok();
}

}  // namespace

Result<std::string> MultipartBoundary(std::string_view content_type) {
  const std::string where = "header Content-Type";
  if (Lower(Trim(content_type.substr(0, content_type.find(';')))) != "multipart/form-data") {
    return Invalid(where, "expected multipart/form-data");
  }
  auto params = Parameters(content_type);
  if (!params) return Invalid(where, "a malformed parameter");
  for (const auto& [key, text] : *params) {
    if (key != "boundary") continue;
    if (text.empty() || text.size() > 70) return Invalid(where, "expected a boundary of 1 to 70 characters");
    return text;
  }
  return Invalid(where, "expected a boundary=... parameter");
}

Result<std::vector<FormPart>> ParseMultipart(std::string_view content_type, std::string_view body,
                                             const MultipartLimits& limits) {
  auto boundary = MultipartBoundary(content_type);
  MLC_RETURN_IF_ERROR(boundary);
  const std::string first = "--" + *boundary;
  const std::string delimiter = "\r\n--" + *boundary;
  // The first delimiter: at the start, or after a preamble ending in CRLF.
  size_t pos = 0;
  if (body.substr(0, first.size()) != first) {
    const size_t found = body.find(delimiter);
    if (found == std::string_view::npos) return Invalid(At(0), "expected the boundary \"" + first + "\"");
    pos = found + kCrlf.size();
  }
  pos += first.size();
  std::vector<FormPart> parts;
  for (;;) {
    // After a delimiter: "--" ends the body; else optional whitespace and CRLF start a part.
    if (body.substr(pos, 2) == "--") return parts;
    while (pos < body.size() && (body[pos] == ' ' || body[pos] == '\t')) ++pos;
    if (body.substr(pos, 2) != kCrlf) {
      return Invalid(At(pos), pos >= body.size() ? "the body ends after a boundary: expected CRLF or \"--\""
                                                 : "expected CRLF or \"--\" after the boundary");
    }
    pos += 2;
    if (parts.size() == limits.max_parts) {
      return Error{ErrorCode::kLimit, At(pos), "more than " + std::to_string(limits.max_parts) + " parts"};
    }
    // The header block, up to the empty line (a part without headers starts with it).
    FormPart part;
    size_t headers_end;
    if (body.substr(pos, 2) == kCrlf) {
      headers_end = pos;
    } else {
      const size_t blank = body.find("\r\n\r\n", pos);
      if (blank == std::string_view::npos || blank - pos > limits.max_part_headers) {
        if (blank == std::string_view::npos && body.size() - pos <= limits.max_part_headers) {
          return Invalid(At(body.size()), "the body ends inside part " + std::to_string(parts.size()) +
                                              "'s headers: expected an empty line");
        }
        return Error{ErrorCode::kLimit, At(pos), "a part's headers over " + std::to_string(limits.max_part_headers) + " bytes"};
      }
      headers_end = blank + 2;
    }
    MLC_RETURN_IF_ERROR(ReadHeaders(body.substr(pos, headers_end - pos), pos, part));
    const size_t data_start = headers_end + 2;
    const size_t data_end = body.find(delimiter, data_start);
    if (data_end == std::string_view::npos) {
      return Invalid(At(body.size()), "the body ends inside part " + std::to_string(parts.size()) + " (\"" + part.name +
                                          "\"): expected the closing boundary \"" + first + "--\"");
    }
    part.data = body.substr(data_start, data_end - data_start);
    parts.push_back(std::move(part));
    pos = data_end + delimiter.size();
  }
}

}  // namespace mlc::serve
