// Byte sizes as people write and read them (see units.h).
#include "base/units.h"

#include "base/ascii.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>

namespace mlc {
namespace {

struct Unit {
  const char* name;
  double factor;
};

// Longest names first, so "kib" is not read as "k" + "ib".
constexpr Unit kUnits[] = {
    {"kib", 1024.0}, {"mib", 1048576.0}, {"gib", 1073741824.0}, {"tib", 1099511627776.0},
    {"kb", 1e3},     {"mb", 1e6},        {"gb", 1e9},           {"tb", 1e12},
    {"k", 1024.0},   {"m", 1048576.0},   {"g", 1073741824.0},   {"t", 1099511627776.0},
    {"b", 1.0},      {"", 1.0},
};


Error TooLarge(std::string_view text) {
  return Error{ErrorCode::kUsage, "", "\"" + std::string(text) + "\" is over the largest size (2^63 - 1 bytes)"};
}

}  // namespace

Result<int64_t> ParseByteSize(std::string_view text) {
  auto bad = [&] {
    return Error{ErrorCode::kUsage, "",
                 "\"" + std::string(text) +
                     "\" is not a byte size: expected a number with an optional unit "
                     "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 8GiB or 1.5GB"};
  };
  size_t i = 0;
  while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
  std::string_view number = text.substr(0, i);
  if (number.empty() || std::count(number.begin(), number.end(), '.') > 1 || number == ".") return bad();
  std::string unit = AsciiLowerCopy(text.substr(i));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  const Unit* found = nullptr;
  for (const Unit& u : kUnits) {
    if (unit == u.name) {
      found = &u;
      break;
    }
  }
  if (!found) return bad();
  if (number.find('.') == std::string_view::npos && found->factor == 1.0) {
    // Plain integers exactly, without a detour through double.
    uint64_t v = 0;
    for (char c : number) {
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (v > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - digit) / 10) {
        return TooLarge(text);
      }
      v = v * 10 + digit;
    }
    return static_cast<int64_t>(v);
  }
  const double value = std::strtod(std::string(number).c_str(), nullptr) * found->factor;
  if (!(value < 9.2e18)) {
    return TooLarge(text);
  }
  return static_cast<int64_t>(std::llround(value));
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kNames[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  size_t unit = 0;
  while (v >= 1024 && unit + 1 < std::size(kNames)) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f %s" : v >= 10 ? "%.1f %s" : "%.2f %s", v, kNames[unit]);
  return buf;
}

}  // namespace mlc
