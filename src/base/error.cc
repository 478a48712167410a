// Formatting of Error values for people.
#include "mlc_manifest/error.h"

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
  if (path.empty()) return message;
  return path + ": " + message;
}

Error Invalid(std::string path, std::string message) {
  return Error{ErrorCode::kInvalid, std::move(path), std::move(message)};
}

Error IoError(std::string path, std::string message) {
  return Error{ErrorCode::kIo, std::move(path), std::move(message)};
}

std::string FormatErrors(const Errors& errors) {
  std::string out;
  for (const Error& e : errors) {
    if (!out.empty()) out += '\n';
    out += e.ToString();
  }
  return out;
}

}  // namespace mlc
