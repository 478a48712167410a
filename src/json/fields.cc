// FieldChecker: the shared vocabulary of document rules (exact keys, non-empty strings,
// literals, safe integers, sha256 identifiers), each failure recorded at its JSON Pointer.
#include "base/hash.h"
#include "mlc_manifest/json.h"

namespace mlc {

void FieldChecker::Fail(const std::string& path, std::string message) {
  ++failures_;
  AddError(*errors_, Invalid(path, std::move(message)));
}

bool FieldChecker::Object(const Json& v, const std::string& path) {
  if (v.is_object()) return true;
  Fail(path, "expected an object, got " + JsonTypeName(v));
  return false;
}

bool FieldChecker::Keys(const Json& obj, const std::string& path,
                        std::initializer_list<const char*> allowed,
                        std::initializer_list<const char*> required) {
  bool ok = true;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (const char* a : allowed) known = known || it.key() == a;
    if (!known) {
      std::string list;
      for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      Fail(PointerAppend(path, it.key()), "unknown field (expected one of: " + list + ")");
      ok = false;
    }
  }
  for (const char* r : required) {
    if (!obj.contains(r)) {
      Fail(PointerAppend(path, r), "missing required field");
      ok = false;
    }
  }
  return ok;
}

std::optional<std::string> FieldChecker::String(const Json& v, const std::string& path) {
  if (v.is_string() && !v.get_ref<const std::string&>().empty()) return v.get<std::string>();
  Fail(path, "expected a non-empty string, got " +
                 (v.is_string() ? std::string("an empty string") : JsonTypeName(v)));
  return std::nullopt;
}

bool FieldChecker::Literal(const Json& v, const std::string& path, const char* expected) {
  if (v.is_string() && v.get_ref<const std::string&>() == expected) return true;
  Fail(path, std::string("expected \"") + expected + "\", got " +
                 (v.is_string() ? "\"" + v.get<std::string>() + "\"" : JsonTypeName(v)));
  return false;
}

std::optional<int64_t> FieldChecker::Integer(const Json& v, const std::string& path,
                                             int64_t minimum) {
  std::optional<int64_t> i = SafeInteger(v);
  if (i && *i >= minimum) return i;
  std::string got = JsonTypeName(v);
  Fail(path, "expected an integer >= " + std::to_string(minimum) +
                 " (and at most 2^53 - 1), got " + got);
  return std::nullopt;
}

std::optional<std::string> FieldChecker::Sha256(const Json& v, const std::string& path) {
  if (v.is_string() && IsSha256Id(v.get_ref<const std::string&>())) return v.get<std::string>();
  Fail(path, "expected \"sha256:\" followed by 64 lowercase hex digits, got " +
                 (v.is_string() ? "\"" + v.get<std::string>() + "\"" : JsonTypeName(v)));
  return std::nullopt;
}

bool IsSha256Id(std::string_view s) {
  if (s.size() != 71 || s.substr(0, 7) != "sha256:") return false;
  for (char c : s.substr(7)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Result<std::string> Sha256Id(std::string_view bytes) {
  auto hex = Sha256Hex(bytes);
  MLC_RETURN_IF_ERROR(hex);
  return "sha256:" + *hex;
}

}  // namespace mlc
