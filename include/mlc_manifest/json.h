// Strict JSON: a reader that rejects what JSON.parse and Python would silently accept
// (duplicate keys), bounds depth and size, and reports faults as JSON Pointers; the canonical
// writer behind the identifiers; the Python-style pretty writer behind the files MLC writes;
// and small field-checking helpers shared by every document parser.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mlc_manifest/error.h"

namespace mlc {

using Json = nlohmann::json;                // parsed documents (keys kept sorted)
using OrderedJson = nlohmann::ordered_json;  // documents we write (keys in producer order)

struct JsonLimits {
  uint64_t max_bytes = 64ull << 20;  // input size
  int max_depth = 64;                // nesting of arrays and objects
  uint64_t max_values = 0;           // values of every kind, containers included; 0: no limit
};

// The largest integer a JavaScript consumer holds exactly: 2^53 - 1.
inline constexpr int64_t kMaxSafeInteger = (int64_t{1} << 53) - 1;

// Parses one JSON text (RFC 8259, valid UTF-8). Duplicate keys, excess depth or size, trailing
// data and malformed text are errors whose path is the JSON Pointer of the fault and whose
// message gives the byte offset and what was expected.
Result<Json> ParseJson(std::string_view text, const JsonLimits& limits = {});

// ReadFile + ParseJson ("-": standard input). Every error names the file as its document.
Result<Json> ReadJsonFile(const std::string& path, const JsonLimits& limits = {},
                          const std::string& inside = "");

// RFC 6901: base + "/" + token with "~" -> "~0" and "/" -> "~1".
// [{"code", "document", "path", "message"}, ...] for errors cut to kMaxErrors (code: its
// ErrorCodeName): the one shape errors take in every JSON report.
OrderedJson ErrorsJson(const Errors& errors);

std::string PointerAppend(const std::string& base, std::string_view token);
std::string PointerAppend(const std::string& base, size_t index);

// A JSON number with an integral value within +-(2^53 - 1) (SPEC 1.3), else nullopt.
std::optional<int64_t> SafeInteger(const Json& value);

// "object", "array", "string", "integer", "number", "boolean", "null" for messages.
std::string JsonTypeName(const Json& value);

// Canonical JSON (SPEC 2): no whitespace, keys sorted by UTF-16 code units, strings escaped
// as JSON.stringify does, integral numbers in plain decimal.
std::string CanonicalJson(const Json& value);
std::string CanonicalJson(const OrderedJson& value);

// Python's json.dumps(value, indent=2) (ensure_ascii, ", " / ": " separators) with keys in the
// order the document holds them, plus a final newline.
std::string PythonIndentJson(const OrderedJson& value, int indent = 2);

// Writes s (valid UTF-8) to out as the body of a JSON string, without the quotes, escaped as
// CanonicalJson escapes strings (JSON.stringify's rule), a block at a time: a long text is
// written without a second copy of it.
void WriteJsonStringBody(std::ostream& out, std::string_view s);

// "sha256:" + lowercase hex SHA-256 of bytes (an I/O error when the crypto module is missing).
Result<std::string> Sha256Id(std::string_view bytes);

// Field checks for document parsers. Each appends an Error at the value's pointer and returns
// false / nullopt when the value is not what the rule expects.
class FieldChecker {
 public:
  explicit FieldChecker(Errors* errors) : errors_(errors) {}

  void Fail(const std::string& path, std::string message);
  bool Object(const Json& v, const std::string& path);
  // Unknown keys and missing required keys of an object.
  bool Keys(const Json& obj, const std::string& path, std::initializer_list<const char*> allowed,
            std::initializer_list<const char*> required);
  std::optional<std::string> String(const Json& v, const std::string& path);  // non-empty
  bool Literal(const Json& v, const std::string& path, const char* expected);
  std::optional<int64_t> Integer(const Json& v, const std::string& path, int64_t minimum);
  std::optional<std::string> Sha256(const Json& v, const std::string& path);

  bool failed() const { return !errors_->empty(); }
  size_t count() const { return failures_; }  // failures so far (errors_ keeps kMaxErrors of them)

 private:
  Errors* errors_;
  size_t failures_ = 0;
};

// True for "sha256:" + 64 lowercase hex digits.
bool IsSha256Id(std::string_view s);

}  // namespace mlc
