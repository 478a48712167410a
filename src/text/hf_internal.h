// What the parsers of hf_components.h share: reading a component's fields (with the one field
// checker, json/optional_fields.h), its patterns, Metaspace's prepend scheme, and the list and
// result helpers of Sequence components.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/hf_components.h"
#include "text/regex.h"

namespace mlc::text::hf {

Error Unsupported(const std::string& path, const std::string& message);
// The component's "type" string, or an error.
Result<std::string> TypeOf(const Json& j, const std::string& path);
// j[key], or nullptr when absent or null.
const Json* Field(const Json& j, const char* key);
bool BoolField(const Json& j, const char* key, bool fallback, const std::string& path,
               Errors* errors);
std::optional<std::string> StringField(const Json& j, const char* key, const std::string& path,
                                       Errors* errors);
// A string holding exactly one character (Metaspace's replacement, Strip's content).
std::optional<std::string> CharField(const Json& j, const char* key, const std::string& path,
                                     Errors* errors);
size_t CountField(const Json& j, const char* key, const std::string& path, Errors* errors);
const Json* ArrayField(const Json& j, const char* key, const std::string& path, Errors* errors);
// {"String": s} or {"Regex": r} -> a compiled regex (a string is matched literally).
Result<std::shared_ptr<const Regex>> PatternField(const Json& j, const std::string& path);
std::string ReplaceAll(const Regex& regex, std::string_view s, const std::string& content);

enum class PrependScheme { kAlways, kFirst, kNever };
// Metaspace's prepend scheme: "always" / "first" / "never", or the older add_prefix_space.
std::optional<PrependScheme> ParsePrependScheme(const Json& j, const std::string& path,
                                                Errors* errors);

template <class T, class ParseOne>
Result<std::vector<std::unique_ptr<T>>> ParseList(const Json& j, const char* key,
                                                  const std::string& path, ParseOne parse_one) {
  Errors errors;
  const Json* list = ArrayField(j, key, path, &errors);
  if (!list) return errors;
  std::vector<std::unique_ptr<T>> parts;
  for (size_t k = 0; k < list->size(); ++k) {
    auto part = parse_one((*list)[k], PointerAppend(PointerAppend(path, key), k));
    if (!part.ok()) {
      for (const Error& e : part.errors()) AddError(errors, e);
      continue;
    }
    if (*part) parts.push_back(std::move(*part));
  }
  if (!errors.empty()) return errors;
  return parts;
}

template <class T>
Result<std::unique_ptr<T>> Done(std::unique_ptr<T> value, const Errors& errors) {
  if (!errors.empty()) return errors;
  return value;
}

}  // namespace mlc::text::hf
