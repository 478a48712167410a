// Formatting of Error values for people.
#include "mlc_manifest/error.h"

#include <cstdio>
#include <cstdlib>
#include <iterator>

namespace mlc {

const char* ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalid: return "invalid";
    case ErrorCode::kUsage: return "usage";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kLimit: return "limit";
    case ErrorCode::kExists: return "exists";
  }
  return "invalid";
}

std::string Error::ToString() const {
  std::string out = document.empty() ? "" : document + ": ";
  if (!path.empty()) out += path + ": ";
  return out + message;
}

Error Invalid(std::string path, std::string message) {
  return Error{ErrorCode::kInvalid, std::move(path), std::move(message)};
}

Error IoError(std::string document, std::string message) {
  return FileError(ErrorCode::kIo, std::move(document), std::move(message));
}

Error FileError(ErrorCode code, std::string document, std::string message) {
  return Error{code, "", std::move(message), std::move(document)};
}

Errors InDocument(Errors errors, const std::string& document) {
  for (Error& e : errors) {
    if (e.document.empty()) e.document = document;
  }
  return errors;
}

std::string FormatErrors(const Errors& errors) {
  std::string out;
  for (const Error& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.ToString();
  }
  return out;
}

namespace {

std::string MoreText(uint64_t n) {
  return "and " + std::to_string(n) + " more error" + (n == 1 ? "" : "s");
}

// The count an "and N more errors" entry stands for.
uint64_t MoreCount(const Error& summary) {
  return std::strtoull(summary.message.c_str() + 4, nullptr, 10);
}

}  // namespace

void AddError(Errors& errors, Error e) {
  if (errors.size() < kMaxErrors) {
    errors.push_back(std::move(e));
  } else if (errors.size() == kMaxErrors) {
    errors.push_back(Error{e.code, "", MoreText(1)});
  } else {
    Error& summary = errors.back();
    summary.message = MoreText(MoreCount(summary) + 1);
    if (e.code == ErrorCode::kIo) summary.code = e.code;  // keeps the exit code an I/O fault earns
  }
}

void AddErrors(Errors& errors, const Errors& more) {
  for (const Error& e : more) AddError(errors, e);
}

Errors CapErrors(Errors errors) {
  if (errors.size() <= kMaxErrors + 1) return errors;
  Errors out(std::make_move_iterator(errors.begin()),
             std::make_move_iterator(errors.begin() + kMaxErrors));
  for (size_t i = kMaxErrors; i < errors.size(); ++i) AddError(out, std::move(errors[i]));
  return out;
}

std::string EscapeControl(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace mlc
