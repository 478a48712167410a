// Fields a document may leave out (or set to null), read with FieldChecker's vocabulary: a field
// of the wrong type is a failure at its JSON Pointer ("expected ..., got <type>") and an absent
// one leaves the value as it was. conv_template, tokenizer.json components and the documents of
// the contract all check their fields this one way.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/json.h"

namespace mlc {

// obj[key], or nullptr when obj is not an object or the key is absent or null.
const Json* FindField(const Json& obj, const char* key);

// When base/key is present: a string, a boolean, an array of strings, an object of strings
// (a wrong entry fails on its own and is skipped). False when it was present and wrong.
bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::string* out);
bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  bool* out);
bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::vector<std::string>* out);
bool ReadOptional(FieldChecker& check, const Json& obj, const char* key, const std::string& base,
                  std::map<std::string, std::string>* out);

// A required string field that may be empty (FieldChecker::String wants a non-empty one).
std::optional<std::string> RequiredString(FieldChecker& check, const Json& obj, const char* key,
                                          const std::string& base);
// A required array field; `what` names its entries ("components").
const Json* RequiredArray(FieldChecker& check, const Json& obj, const char* key,
                          const std::string& base, const char* what);

}  // namespace mlc
