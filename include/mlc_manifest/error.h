// Errors as values: every failure from untrusted input is an Error with a code, the document it
// is about (a file name), a location in it (a JSON Pointer or a position such as "byte 12") and a
// message that says what was expected there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mlc {

// What kind of failure; the CLI maps these to exit codes (invalid -> 1, usage -> 2, io -> 3).
enum class ErrorCode {
  kInvalid = 1,      // the input breaks a rule (malformed, mismatched, out of range)
  kUsage = 2,        // the caller asked for something that cannot be done as asked
  kIo = 3,           // a file could not be read or written
  kUnsupported = 4,  // well-formed, but outside what this implementation handles
  kLimit = 5,        // over a configured limit (size, depth, pixels, samples)
  kExists = 6,       // a write refused because the target exists (no --force)
};

// The stable name of a code, as --json and the C API give it: "invalid", "usage", "io",
// "unsupported", "limit", "exists".
const char* ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInvalid;
  // Where in the document: a JSON Pointer ("" is the whole document) or a position in a binary
  // file ("byte 123", "frame 4", "sample 9"). Never a file name, a function or an option name.
  std::string path;
  std::string message;  // what was expected / what went wrong
  std::string document{};  // the file or document `path` points into, when known ("" otherwise)

  // "document: path: message", leaving out the parts that are empty.
  std::string ToString() const;
};

// Convenience constructors.
Error Invalid(std::string path, std::string message);
// An I/O failure on a file or folder: `document` names it, the path is "" (the whole of it).
Error IoError(std::string document, std::string message);
// A failure of `code` about the whole of a file or folder named by `document`.
Error FileError(ErrorCode code, std::string document, std::string message);

// One or more errors (never empty when it stands for a failure).
using Errors = std::vector<Error>;

// An expected-like result: a value, or the errors that prevented it.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT(implicit)
  Result(Error error) : v_(Errors{std::move(error)}) {}      // NOLINT(implicit)
  Result(Errors errors) : v_(std::move(errors)) {}           // NOLINT(implicit)

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const Errors& errors() const { return std::get<1>(v_); }
  Errors&& take_errors() { return std::get<1>(std::move(v_)); }
  const Error& error() const { return errors().front(); }

 private:
  std::variant<T, Errors> v_;
};

// A result without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : errors_{std::move(error)} {}          // NOLINT(implicit)
  Status(Errors errors) : errors_(std::move(errors)) {}       // NOLINT(implicit)
  static Status Ok() { return Status(); }

  bool ok() const { return errors_.empty(); }
  explicit operator bool() const { return ok(); }
  const Errors& errors() const { return errors_; }
  const Error& error() const { return errors_.front(); }

 private:
  Errors errors_;
};

// The errors of a failed Result (moved out) or Status, to return them to the caller.
template <class T>
Errors&& TakeErrors(Result<T>& r) { return r.take_errors(); }
inline const Errors& TakeErrors(const Status& s) { return s.errors(); }

// Evaluates expr (a Result or a Status) once; when it failed, returns its errors from the
// enclosing function (which returns a Status or a Result).
#define MLC_RETURN_IF_ERROR(expr)                                       \
  do {                                                                  \
    auto&& mlc_checked_ = (expr);                                       \
    if (!mlc_checked_) return ::mlc::TakeErrors(mlc_checked_);          \
  } while (false)

// At most this many errors are kept for one document: past it, one last entry counts the rest
// ("and N more errors"), so a hostile document cannot grow an error list without bound.
inline constexpr size_t kMaxErrors = 100;

// Appends e to errors under the kMaxErrors bound.
void AddError(Errors& errors, Error e);
// AddError for each of more, in order.
void AddErrors(Errors& errors, const Errors& more);
// errors cut to the kMaxErrors bound (a longer list ends in one "and N more errors" entry).
Errors CapErrors(Errors errors);

// errors with `document` set on each that names none (a reader stamps the file it parsed).
Errors InDocument(Errors errors, const std::string& document);
template <class T>
Result<T> InDocument(Result<T> r, const std::string& document) {
  if (r) return r;
  return InDocument(r.take_errors(), document);
}

// All messages joined by newlines, for human output.
std::string FormatErrors(const Errors& errors);

// s with every control character (below 0x20, and 0x7f) shown as \xNN: safe to print on a
// terminal, and a NUL no longer cuts the text.
std::string EscapeControl(std::string_view s);

}  // namespace mlc
