// A bounded non-integer number as a ByteDfa over its JSON text (sign, whole digits, fraction; no
// exponent): each state is where the text is in the number grammar and how its digits so far
// compare with each bound's, digit by digit; states that can no longer end within the bounds are
// trimmed, so a byte is refused exactly when no continuation can end in range.
#include <algorithm>
#include <map>

#include "text/byte_dfa.h"

namespace mlc {
namespace {

enum Phase : uint8_t { kStart, kMinus, kZero, kWhole, kDot, kFraction };
enum Cmp : uint8_t { kLess, kEqual, kGreater };
// Digit counters saturate one past the bounds' longest part (nothing compares further).
uint8_t Cap(const DecimalBound* bounds[2], bool whole) {
  size_t n = 0;
  for (int i = 0; i < 2; ++i) {
    if (bounds[i]) n = std::max(n, (whole ? bounds[i]->whole : bounds[i]->fraction).size());
  }
  return static_cast<uint8_t>(n + 1);
}

struct Key {
  uint8_t phase = kStart, negative = 0, nonzero = 0, digits = 0;
  Cmp cmp[2] = {kEqual, kEqual};
  auto operator<=>(const Key&) const = default;
};

Cmp Compare(uint8_t a, uint8_t b) { return a < b ? kLess : a > b ? kGreater : kEqual; }

// The whole part against the bound's: by the digits' count, then the digits.
Cmp Whole(const Key& k, const DecimalBound& b, int i) {
  const size_t n = b.whole.size();
  return k.digits != n ? (k.digits < n ? kLess : kGreater) : k.cmp[i];
}

// Magnitude so far against a bound's: in the whole part by the digits seen and their count.
Cmp Magnitude(const Key& k, const DecimalBound& b, int i) {
  if (k.phase == kZero || k.phase == kWhole) {
    const size_t n = b.whole.size();
    if (k.digits != n) return k.digits < n ? kLess : kGreater;
    return k.cmp[i] == kEqual && !b.fraction.empty() ? kLess : k.cmp[i];  // the bound's fraction is nonzero
  }
  if (k.cmp[i] == kEqual && k.digits < b.fraction.size()) return kLess;  // the bound's rest is nonzero
  return k.cmp[i];
}

// The value against the bound (signs included; -0 is 0).
Cmp Signed(const Key& k, const DecimalBound& b, int i) {
  const bool below_zero = k.negative && k.nonzero;
  const bool bound_below_zero = b.negative;
  if (below_zero != bound_below_zero) return below_zero ? kLess : kGreater;
  const Cmp m = Magnitude(k, b, i);
  if (!below_zero) return m;
  return m == kLess ? kGreater : m == kGreater ? kLess : kEqual;
}

bool Accepting(const Key& k, const DecimalBound* low, const DecimalBound* high) {
  if (k.phase != kZero && k.phase != kWhole && k.phase != kFraction) return false;
  if (low) {
    const Cmp c = Signed(k, *low, 0);
    if (c == kLess || (c == kEqual && low->exclusive)) return false;
  }
  if (high) {
    const Cmp c = Signed(k, *high, 1);
    if (c == kGreater || (c == kEqual && high->exclusive)) return false;
  }
  return true;
}

// The next key over byte c, or false when the number grammar refuses it.
bool Advance(Key k, uint8_t c, const DecimalBound* bounds[2], Key& out) {
  const bool digit = c >= '0' && c <= '9';
  auto whole_digit = [&](Phase phase) {
    for (int i = 0; i < 2; ++i) {
      if (bounds[i] && k.cmp[i] == kEqual && k.digits < bounds[i]->whole.size()) {
        k.cmp[i] = Compare(c, static_cast<uint8_t>(bounds[i]->whole[k.digits]));
      }
    }
    k.digits = std::min<uint8_t>(static_cast<uint8_t>(k.digits + 1), Cap(bounds, true));
    k.nonzero = k.nonzero || c != '0';
    k.phase = phase;
    out = k;
    return true;
  };
  switch (k.phase) {
    case kStart:
      if (c == '-') {
        k.negative = 1;
        k.phase = kMinus;
        out = k;
        return true;
      }
      [[fallthrough]];
    case kMinus:
      if (!digit) return false;
      return whole_digit(c == '0' ? kZero : kWhole);
    case kWhole:
      if (digit) return whole_digit(kWhole);
      [[fallthrough]];
    case kZero:
      if (c != '.') return false;
      for (int i = 0; i < 2; ++i) {
        if (bounds[i]) k.cmp[i] = Whole(k, *bounds[i], i);
      }
      k.digits = 0;
      k.phase = kDot;
      out = k;
      return true;
    case kDot:
    case kFraction:
      if (!digit) return false;
      for (int i = 0; i < 2; ++i) {
        if (bounds[i] && k.cmp[i] == kEqual) {
          const std::string& f = bounds[i]->fraction;
          k.cmp[i] = Compare(c, k.digits < f.size() ? static_cast<uint8_t>(f[k.digits]) : uint8_t{'0'});
        }
      }
      k.digits = std::min<uint8_t>(static_cast<uint8_t>(k.digits + 1), Cap(bounds, false));
      if ((!bounds[0] || k.cmp[0] != kEqual) && (!bounds[1] || k.cmp[1] != kEqual)) k.digits = 0;
      k.nonzero = k.nonzero || c != '0';
      k.phase = kFraction;
      out = k;
      return true;
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const ByteDfa>> NumberRangeDfa(const DecimalBound* low, const DecimalBound* high,
                                                      const std::string& at) {
  const DecimalBound* bounds[2] = {low, high};
  ByteDfa dfa;
  // Columns: other bytes, '-', '.', then the ten digits.
  std::vector<uint8_t> column_byte = {0, '-', '.'};
  for (char d = '0'; d <= '9'; ++d) column_byte.push_back(static_cast<uint8_t>(d));
  dfa.byte_class.fill(0);
  for (size_t c = 1; c < column_byte.size(); ++c) dfa.byte_class[column_byte[c]] = static_cast<uint16_t>(c);
  dfa.classes = static_cast<uint16_t>(column_byte.size());
  std::map<Key, int32_t> ids;
  std::vector<Key> keys;
  auto id_of = [&](const Key& k) {
    auto [it, added] = ids.emplace(k, static_cast<int32_t>(keys.size()));
    if (added) {
      keys.push_back(k);
      dfa.accepting.push_back(Accepting(k, low, high) ? 1 : 0);
      dfa.next.resize(dfa.next.size() + dfa.classes, -1);
    }
    return it->second;
  };
  dfa.start = id_of(Key{});
  for (size_t s = 0; s < keys.size(); ++s) {
    for (size_t c = 1; c < column_byte.size(); ++c) {
      Key next;
      if (Advance(keys[s], column_byte[c], bounds, next)) {
        const int32_t to = id_of(next);
        dfa.next[s * dfa.classes + c] = to;
      }
    }
  }
  if (!TrimDfa(dfa)) return Invalid(at, "no number lies within the schema's bounds");
  return std::make_shared<const ByteDfa>(std::move(dfa));
}

}  // namespace mlc
