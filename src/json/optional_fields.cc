// Optional (and a few required) fields checked with FieldChecker's vocabulary.
#include "json/optional_fields.h"

namespace mlc {
namespace {

// The value at base/key when present and of the type `is` accepts; else nullptr (a failure
// saying `expected` when present).
const Json* Typed(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  bool (*is)(const Json&), const char* expected) {
  const Json* v = FindField(obj, key);
  if (!v) return nullptr;
  if (is(*v)) return v;
  check.Fail(PointerAppend(base, key), std::string("expected ") + expected + ", got " + JsonTypeName(*v));
  return nullptr;
}

bool Present(const Json& obj, const char* key) { return FindField(obj, key) != nullptr; }

}  // namespace

const Json* FindField(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::string* out) {
  const Json* v = Typed(check, obj, key, base, [](const Json& j) { return j.is_string(); }, "a string");
  if (v) *out = v->get<std::string>();
  return v || !Present(obj, key);
}

bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  bool* out) {
  const Json* v = Typed(check, obj, key, base, [](const Json& j) { return j.is_boolean(); }, "true or false");
  if (v) *out = v->get<bool>();
  return v || !Present(obj, key);
}

bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::vector<std::string>* out) {
  const Json* v = Typed(check, obj, key, base, [](const Json& j) { return j.is_array(); },
                        "an array of strings");
  if (!v) return !Present(obj, key);
  const std::string path = PointerAppend(base, key);
  bool ok = true;
  for (size_t i = 0; i < v->size(); ++i) {
    if ((*v)[i].is_string()) {
      out->push_back((*v)[i].get<std::string>());
    } else {
      check.Fail(PointerAppend(path, i), "expected a string, got " + JsonTypeName((*v)[i]));
      ok = false;
    }
  }
  return ok;
}

bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::map<std::string, std::string>* out) {
  const Json* v = Typed(check, obj, key, base, [](const Json& j) { return j.is_object(); },
                        "an object of strings");
  if (!v) return !Present(obj, key);
  const std::string path = PointerAppend(base, key);
  bool ok = true;
  for (const auto& [k, value] : v->items()) {
    if (value.is_string()) {
      (*out)[k] = value.get<std::string>();
    } else {
      check.Fail(PointerAppend(path, k), "expected a string, got " + JsonTypeName(value));
      ok = false;
    }
  }
  return ok;
}

std::optional<std::string> RequiredString(FieldChecker& check, const Json& obj, const char* key,
                                          const std::string& base) {
  const Json* v = FindField(obj, key);
  if (v && v->is_string()) return v->get<std::string>();
  check.Fail(PointerAppend(base, key), "expected a string, got " + (v ? JsonTypeName(*v) : "nothing"));
  return std::nullopt;
}

const Json* RequiredArray(FieldChecker& check, const Json& obj, const char* key,
                          const std::string& base, const char* what) {
  const Json* v = FindField(obj, key);
  if (v && v->is_array()) return v;
  check.Fail(PointerAppend(base, key),
             std::string("expected an array of ") + what + ", got " + (v ? JsonTypeName(*v) : "nothing"));
  return nullptr;
}

}  // namespace mlc
