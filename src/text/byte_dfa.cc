// Thompson NFA over byte ranges -> DFA by the subset construction (bytes grouped into classes
// that no edge tells apart), then trimmed to the states that can still accept (see byte_dfa.h).
#include "text/byte_dfa.h"

#include <algorithm>
#include <deque>
#include <map>

namespace mlc {

int ByteNfa::NewState() {
  states_.emplace_back();
  return static_cast<int>(states_.size() - 1);
}

void ByteNfa::Epsilon(int from, int to) { states_[static_cast<size_t>(from)].epsilon.push_back(to); }

void ByteNfa::Range(int from, int to, uint8_t lo, uint8_t hi) {
  states_[static_cast<size_t>(from)].edges.push_back(Edge{lo, hi, to});
}

namespace {

// Sorted, unique NFA states reachable from `set` over epsilon edges.
template <class States>
std::vector<int> Closure(const States& states, std::vector<int> set) {
  std::vector<char> seen(states.size(), 0);
  std::vector<int> todo = set;
  for (int s : set) seen[static_cast<size_t>(s)] = 1;
  while (!todo.empty()) {
    int s = todo.back();
    todo.pop_back();
    for (int t : states[static_cast<size_t>(s)].epsilon) {
      if (!seen[static_cast<size_t>(t)]) {
        seen[static_cast<size_t>(t)] = 1;
        set.push_back(t);
        todo.push_back(t);
      }
    }
  }
  std::sort(set.begin(), set.end());
  return set;
}

}  // namespace

Result<ByteDfa> ByteNfa::Determinize(int start, int accept, size_t max_states, const std::string& at) const {
  ByteDfa dfa;
  // Byte classes: a boundary wherever an edge starts or ends, and at the UTF-8 lead/continuation
  // borders (min_chars counts lead bytes).
  std::array<bool, 257> cut{};
  cut[0] = cut[0x80] = cut[0xc0] = true;
  for (const State& s : states_) {
    for (const Edge& e : s.edges) cut[e.lo] = cut[static_cast<size_t>(e.hi) + 1] = true;
  }
  std::vector<uint8_t> representative;
  for (int b = 0, cls = -1; b < 256; ++b) {
    if (cut[static_cast<size_t>(b)]) {
      ++cls;
      representative.push_back(static_cast<uint8_t>(b));
    }
    dfa.byte_class[static_cast<size_t>(b)] = static_cast<uint16_t>(cls);
  }
  dfa.classes = static_cast<uint16_t>(representative.size());
  std::map<std::vector<int>, int32_t> ids;
  std::deque<std::vector<int>> todo;
  auto id_of = [&](std::vector<int> set) -> int32_t {
    if (set.empty()) return -1;
    auto [it, added] = ids.emplace(set, static_cast<int32_t>(ids.size()));
    if (added) {
      dfa.accepting.push_back(std::binary_search(set.begin(), set.end(), accept) ? 1 : 0);
      dfa.next.resize(dfa.next.size() + dfa.classes, -1);
      todo.push_back(std::move(set));
    }
    return it->second;
  };
  dfa.start = id_of(Closure(states_, {start}));
  while (!todo.empty()) {
    if (ids.size() > max_states) {
      return Error{ErrorCode::kLimit, at,
                   "the pattern compiles to more than " + std::to_string(max_states) +
                       " automaton states (the max_pattern_states limit)"};
    }
    std::vector<int> set = std::move(todo.front());
    todo.pop_front();
    const int32_t from = ids.at(set);
    for (size_t c = 0; c < representative.size(); ++c) {
      const uint8_t b = representative[c];
      std::vector<int> moved;
      for (int s : set) {
        for (const Edge& e : states_[static_cast<size_t>(s)].edges) {
          if (b >= e.lo && b <= e.hi) moved.push_back(e.to);
        }
      }
      std::sort(moved.begin(), moved.end());
      moved.erase(std::unique(moved.begin(), moved.end()), moved.end());
      const int32_t to = moved.empty() ? -1 : id_of(Closure(states_, std::move(moved)));
      dfa.next[static_cast<size_t>(from) * dfa.classes + c] = to;
    }
  }
  return dfa;
}

bool TrimDfa(ByteDfa& dfa) {
  const size_t n = dfa.states();
  const size_t k = dfa.classes;
  std::vector<bool> continuation(k, false);  // columns of UTF-8 continuation bytes cost no character
  for (int b = 0x80; b < 0xc0; ++b) continuation[dfa.byte_class[static_cast<size_t>(b)]] = true;
  // Backwards 0-1 BFS from the accepting states: the fewest characters to accept.
  std::vector<std::vector<std::pair<int32_t, bool>>> into(n);
  for (size_t s = 0; s < n; ++s) {
    for (size_t c = 0; c < k; ++c) {
      const int32_t t = dfa.next[s * k + c];
      if (t >= 0) into[static_cast<size_t>(t)].push_back({static_cast<int32_t>(s), !continuation[c]});
    }
  }
  std::vector<int32_t> dist(n, -1);
  std::deque<int32_t> todo;
  for (size_t s = 0; s < n; ++s) {
    if (dfa.accepting[s]) {
      dist[s] = 0;
      todo.push_back(static_cast<int32_t>(s));
    }
  }
  while (!todo.empty()) {
    const int32_t t = todo.front();
    todo.pop_front();
    for (auto [s, cost] : into[static_cast<size_t>(t)]) {
      const int32_t d = dist[static_cast<size_t>(t)] + (cost ? 1 : 0);
      if (dist[static_cast<size_t>(s)] < 0 || d < dist[static_cast<size_t>(s)]) {
        dist[static_cast<size_t>(s)] = d;
        cost ? todo.push_back(s) : todo.push_front(s);
      }
    }
  }
  if (dfa.start < 0 || dist[static_cast<size_t>(dfa.start)] < 0) return false;
  // Renumber the live states.
  std::vector<int32_t> id(n, -1);
  int32_t live = 0;
  for (size_t s = 0; s < n; ++s) {
    if (dist[s] >= 0) id[s] = live++;
  }
  ByteDfa out;
  out.byte_class = dfa.byte_class;
  out.classes = dfa.classes;
  out.next.assign(static_cast<size_t>(live) * k, -1);
  for (size_t s = 0; s < n; ++s) {
    if (id[s] < 0) continue;
    out.accepting.push_back(dfa.accepting[s]);
    out.min_chars.push_back(dist[s]);
    for (size_t c = 0; c < k; ++c) {
      const int32_t t = dfa.next[s * k + c];
      out.next[static_cast<size_t>(id[s]) * k + c] = t >= 0 ? id[static_cast<size_t>(t)] : -1;
    }
  }
  out.start = id[static_cast<size_t>(dfa.start)];
  dfa = std::move(out);
  return true;
}

Result<std::shared_ptr<const ByteDfa>> IntersectDfa(const ByteDfa& a, const ByteDfa& b, size_t max_states,
                                                    const std::string& at) {
  ByteDfa out;
  // A column per pair of columns the bytes fall in.
  std::map<std::pair<uint16_t, uint16_t>, uint16_t> column;
  std::vector<std::pair<uint16_t, uint16_t>> pairs;
  for (size_t byte = 0; byte < 256; ++byte) {
    const auto key = std::make_pair(a.byte_class[byte], b.byte_class[byte]);
    auto [it, added] = column.emplace(key, static_cast<uint16_t>(pairs.size()));
    if (added) pairs.push_back(key);
    out.byte_class[byte] = it->second;
  }
  out.classes = static_cast<uint16_t>(pairs.size());
  // The pairs of states reachable from the two starts, breadth first.
  std::map<std::pair<int32_t, int32_t>, int32_t> id;
  std::vector<std::pair<int32_t, int32_t>> states;
  auto id_of = [&](int32_t x, int32_t y) {
    auto [it, added] = id.emplace(std::make_pair(x, y), static_cast<int32_t>(states.size()));
    if (added) states.emplace_back(x, y);
    return it->second;
  };
  out.start = id_of(a.start, b.start);
  for (size_t i = 0; i < states.size(); ++i) {
    if (states.size() > max_states) {
      return Error{ErrorCode::kLimit, at, "the pattern and the format together need more than " +
                                              std::to_string(max_states) + " automaton states"};
    }
    const auto [x, y] = states[i];
    out.accepting.push_back(a.accepting[static_cast<size_t>(x)] && b.accepting[static_cast<size_t>(y)]);
    for (size_t c = 0; c < pairs.size(); ++c) {
      const int32_t nx = a.next[static_cast<size_t>(x) * a.classes + pairs[c].first];
      const int32_t ny = b.next[static_cast<size_t>(y) * b.classes + pairs[c].second];
      out.next.push_back(nx < 0 || ny < 0 ? -1 : id_of(nx, ny));
    }
  }
  if (!TrimDfa(out)) return Invalid(at, "no string matches both the pattern and the format");
  return std::shared_ptr<const ByteDfa>(std::make_shared<ByteDfa>(std::move(out)));
}

}  // namespace mlc
