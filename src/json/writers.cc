// The two JSON writers: canonical (identifiers, SPEC 2) and Python-indent (files, SPEC 4).
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "mlc_manifest/json.h"

namespace mlc {
namespace {

// Decodes one code point of valid UTF-8 at s[i], advancing i.
uint32_t NextCodePoint(std::string_view s, size_t& i) {
  unsigned char c = static_cast<unsigned char>(s[i++]);
  if (c < 0x80) return c;
  int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
  uint32_t cp = c & (0x3F >> extra);
  for (int k = 0; k < extra && i < s.size(); ++k) {
    cp = (cp << 6) | (static_cast<unsigned char>(s[i++]) & 0x3F);
  }
  return cp;
}

std::u16string ToUtf16(std::string_view s) {
  std::u16string out;
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = NextCodePoint(s, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (cp >> 10));
      out += static_cast<char16_t>(0xDC00 + (cp & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

void AppendHex4(std::string& out, uint32_t unit) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", unit);
  out += buf;
}

// JSON.stringify's escaping of a string's body (no quotes): short escapes, other controls as
// \u00xx, everything else raw. With ascii_only (Python's ensure_ascii) every code point outside
// 0x20..0x7E is \uXXXX.
void AppendStringBody(std::string& out, std::string_view s, bool ascii_only) {
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    uint32_t cp = NextCodePoint(s, i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      AppendHex4(out, cp);
    } else if (ascii_only && cp > 0x7E) {
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        AppendHex4(out, 0xD800 + (v >> 10));
        AppendHex4(out, 0xDC00 + (v & 0x3FF));
      } else {
        AppendHex4(out, cp);
      }
    } else {
      out.append(s.substr(start, i - start));
    }
  }
}

void AppendString(std::string& out, std::string_view s, bool ascii_only) {
  out += '"';
  AppendStringBody(out, s, ascii_only);
  out += '"';
}

// Canonical form (ascii_only false) writes integral numbers as integers, as JavaScript does;
// the Python form keeps a float a float ("868547584.0"), as json.dump does.
template <class J>
void AppendScalar(std::string& out, const J& v, bool ascii_only) {
  if (v.is_string()) {
    AppendString(out, v.template get_ref<const std::string&>(), ascii_only);
  } else if (v.is_number_float() && !ascii_only) {
    std::optional<int64_t> i = SafeInteger(Json(v.template get<double>()));
    out += i ? std::to_string(*i) : v.dump();
  } else {
    out += v.dump();  // integers, booleans, null
  }
}

template <class J>
void AppendCanonical(std::string& out, const J& v) {
  if (v.is_object()) {
    std::vector<std::pair<std::u16string, typename J::const_iterator>> keys;
    for (auto it = v.begin(); it != v.end(); ++it) keys.emplace_back(ToUtf16(it.key()), it);
    std::sort(keys.begin(), keys.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    out += '{';
    bool first = true;
    for (const auto& [k16, it] : keys) {
      if (!first) out += ',';
      first = false;
      AppendString(out, it.key(), false);
      out += ':';
      AppendCanonical(out, it.value());
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) out += ',';
      AppendCanonical(out, v[i]);
    }
    out += ']';
  } else {
    AppendScalar(out, v, false);
  }
}

void AppendIndented(std::string& out, const OrderedJson& v, int indent, int level) {
  bool is_obj = v.is_object();
  if (!is_obj && !v.is_array()) {
    AppendScalar(out, v, true);
    return;
  }
  if (v.empty()) {
    out += is_obj ? "{}" : "[]";
    return;
  }
  std::string inner(static_cast<size_t>(indent * (level + 1)), ' ');
  out += is_obj ? '{' : '[';
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += first ? "\n" : ",\n";
    first = false;
    out += inner;
    if (is_obj) {
      AppendString(out, it.key(), true);
      out += ": ";
    }
    AppendIndented(out, it.value(), indent, level + 1);
  }
  out += '\n';
  out.append(static_cast<size_t>(indent * level), ' ');
  out += is_obj ? '}' : ']';
}

}  // namespace

std::string CanonicalJson(const Json& value) {
  std::string out;
  AppendCanonical(out, value);
  return out;
}

std::string CanonicalJson(const OrderedJson& value) {
  std::string out;
  AppendCanonical(out, value);
  return out;
}

std::string PythonIndentJson(const OrderedJson& value, int indent) {
  std::string out;
  AppendIndented(out, value, indent, 0);
  out += '\n';
  return out;
}

void WriteJsonStringBody(std::ostream& out, std::string_view s) {
  constexpr size_t kBlock = size_t{1} << 16;
  std::string escaped;
  while (!s.empty()) {
    size_t n = std::min(kBlock, s.size());
    // Blocks end between code points (a continuation byte is 10xxxxxx).
    while (n > 0 && n < s.size() && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    if (n == 0) n = std::min(kBlock, s.size());
    escaped.clear();
    AppendStringBody(escaped, s.substr(0, n), /*ascii_only=*/false);
    out.write(escaped.data(), static_cast<std::streamsize>(escaped.size()));
    s.remove_prefix(n);
  }
}

}  // namespace mlc
