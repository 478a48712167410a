// The field readers, patterns and ByteLevel tables shared by the parsers of Hugging Face
// tokenizer components (hf_internal.h, hf_components.h).
#include <array>

#include "json/optional_fields.h"
#include "text/hf_internal.h"
#include "text/unicode.h"

namespace mlc::text {
namespace hf {

Error Unsupported(const std::string& path, const std::string& message) {
  return Error{ErrorCode::kUnsupported, path, message};
}

// The component's "type" string, or an error.
Result<std::string> TypeOf(const Json& j, const std::string& path) {
  if (!j.is_object()) return Invalid(path, "expected an object with a \"type\"");
  auto it = j.find("type");
  if (it == j.end() || !it->is_string()) {
    return Invalid(PointerAppend(path, "type"), "expected the component's type as a string");
  }
  return it->get<std::string>();
}

const Json* Field(const Json& j, const char* key) { return FindField(j, key); }

bool BoolField(const Json& j, const char* key, bool fallback, const std::string& path,
               Errors* errors) {
  FieldChecker check(errors);
  bool value = fallback;
  ReadOptional(check, j, key, path, &value);
  return value;
}

std::optional<std::string> StringField(const Json& j, const char* key, const std::string& path,
                                       Errors* errors) {
  FieldChecker check(errors);
  return RequiredString(check, j, key, path);
}

// A string holding exactly one character (Metaspace's replacement, Strip's content).
std::optional<std::string> CharField(const Json& j, const char* key, const std::string& path,
                                     Errors* errors) {
  std::optional<std::string> s = StringField(j, key, path, errors);
  if (s && CountCodePoints(*s) != 1) {
    FieldChecker(errors).Fail(PointerAppend(path, key), "expected exactly one character");
    return std::nullopt;
  }
  return s;
}

size_t CountField(const Json& j, const char* key, const std::string& path, Errors* errors) {
  FieldChecker check(errors);
  const Json* v = Field(j, key);
  std::optional<int64_t> n = check.Integer(v ? *v : Json(), PointerAppend(path, key), 0);
  return n ? static_cast<size_t>(*n) : 0;
}

const Json* ArrayField(const Json& j, const char* key, const std::string& path, Errors* errors) {
  FieldChecker check(errors);
  return RequiredArray(check, j, key, path, "components");
}

// {"String": s} or {"Regex": r} -> a compiled regex (a string is matched literally).
Result<std::shared_ptr<const Regex>> PatternField(const Json& j, const std::string& path) {
  std::string at = PointerAppend(path, "pattern");
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object() || it->size() != 1) {
    return Invalid(at, "expected {\"String\": ...} or {\"Regex\": ...}");
  }
  if (auto s = it->find("String"); s != it->end() && s->is_string()) {
    return Regex::Compile(Regex::Escape(s->get<std::string>()), PointerAppend(at, "String"));
  }
  if (auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    return Regex::Compile(r->get<std::string>(), PointerAppend(at, "Regex"));
  }
  return Invalid(at, "expected {\"String\": ...} or {\"Regex\": ...}");
}

std::string ReplaceAll(const Regex& regex, std::string_view s, const std::string& content) {
  std::vector<std::pair<size_t, size_t>> matches = regex.FindAll(s);
  if (matches.empty()) return std::string(s);
  std::string out;
  out.reserve(s.size());
  size_t prev = 0;
  for (auto [b, e] : matches) {
    out.append(s.substr(prev, b - prev));
    out += content;
    prev = e;
  }
  out.append(s.substr(prev));
  return out;
}

// Metaspace's prepend scheme: "always" / "first" / "never", or the older add_prefix_space.
std::optional<PrependScheme> ParsePrependScheme(const Json& j, const std::string& path,
                                                Errors* errors) {
  if (const Json* v = Field(j, "prepend_scheme")) {
    std::string s = v->is_string() ? v->get<std::string>() : "";
    if (s == "always") return PrependScheme::kAlways;
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    FieldChecker(errors).Fail(PointerAppend(path, "prepend_scheme"),
                              "expected \"always\", \"first\" or \"never\"");
    return std::nullopt;
  }
  return BoolField(j, "add_prefix_space", true, path, errors) ? PrependScheme::kAlways
                                                               : PrependScheme::kNever;
}

}  // namespace hf

namespace {

struct ByteTables {
  std::array<std::string, 256> to_char;
  std::array<int, 324> to_byte;  // code points 0..323 cover the whole table
  ByteTables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool visible = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = visible ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      AppendUtf8(cp, &to_char[b]);
      to_byte[cp] = b;
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

const std::string& ByteToChar(unsigned char b) { return Tables().to_char[b]; }

int CharToByte(char32_t cp) { return cp < 324 ? Tables().to_byte[cp] : -1; }

}  // namespace mlc::text
