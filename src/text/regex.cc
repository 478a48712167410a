// Oniguruma wrapper for the tokenizers (see regex.h).
#include "text/regex.h"

#include <mutex>

#include <oniguruma.h>

#include "text/unicode.h"

namespace mlc::text {
namespace {

void InitializeOniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[1] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// Frees an OnigRegion when it goes out of scope.
struct RegionGuard {
  OnigRegion* region = onig_region_new();
  ~RegionGuard() { onig_region_free(region, 1); }
};

}  // namespace

Result<std::shared_ptr<const Regex>> Regex::Compile(const std::string& pattern,
                                                    const std::string& path) {
  InitializeOniguruma();
  regex_t* reg = nullptr;
  OnigErrorInfo info;
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern.data());
  int r = onig_new(&reg, begin, begin + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                   ONIG_SYNTAX_DEFAULT, &info);
  if (r != ONIG_NORMAL) {
    OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(message, r, &info);
    return Invalid(path, "expected an Oniguruma regular expression: " +
                             std::string(reinterpret_cast<const char*>(message)));
  }
  return std::shared_ptr<const Regex>(new Regex(reg));
}

std::string Regex::Escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    unsigned char b = static_cast<unsigned char>(c);
    bool plain = b >= 0x80 || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') ||
                 (b >= 'A' && b <= 'Z') || b == '_';
    if (b == '\n') {
      out += "\\n";
    } else if (b == '\t') {
      out += "\\t";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b < 0x20 || b == 0x7F) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(kHex[b >> 4]);
      out.push_back(kHex[b & 15]);
    } else {
      if (!plain) out.push_back('\\');
      out.push_back(c);
    }
  }
  return out;
}

Regex::~Regex() { onig_free(static_cast<regex_t*>(handle_)); }

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  ForEachMatch(text, [&matches](size_t b, size_t e) { matches.emplace_back(b, e); });
  return matches;
}

void Regex::ForEachMatch(std::string_view text,
                         const std::function<void(size_t, size_t)>& on_match) const {
  auto* reg = static_cast<regex_t*>(handle_);
  RegionGuard guard;
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const OnigUChar* end = str + text.size();
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    onig_region_clear(guard.region);
    int r = onig_search(reg, str, end, str + last_end, end, guard.region, ONIG_OPTION_NONE);
    if (r < 0) break;  // no match (or a matcher limit): no further matches
    size_t s = static_cast<size_t>(guard.region->beg[0]);
    size_t e = static_cast<size_t>(guard.region->end[0]);
    if (s == e && have_last && last_match_end == e) {
      last_end += e < text.size() ? Utf8Length(static_cast<unsigned char>(text[e])) : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    on_match(s, e);
  }
}

}  // namespace mlc::text
