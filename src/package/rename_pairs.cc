// Pairing of renamed parameters (rename_pairs.h). A shape is a list of dimensions that are either
// resolved (an integer) or not (a name); a resolved and an unresolved one always match. So the
// parameters of b are grouped by dtype and which dimensions are resolved (their pattern); for a
// parameter of a and one such group, only the dimensions both resolve (or both do not) must be
// equal, and the group is indexed by exactly those: one lookup per group instead of a scan.
#include "package/rename_pairs.h"

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

namespace mlc {
namespace {

struct Shape {
  std::string dtype;
  std::string pattern;             // per dimension: 'r' resolved, 'n' not
  std::vector<std::string> dims;   // each as "#123" or "$name"
};

Shape ShapeOf(const ParamSpec& p, const ChatConfig* config) {
  Shape s;
  s.dtype = p.dtype;
  for (const auto& d : p.shape) {
    std::optional<int64_t> v;
    if (std::holds_alternative<int64_t>(d)) {
      v = std::get<int64_t>(d);
    } else if (config) {
      v = config->Dimension(std::get<std::string>(d));
    }
    s.pattern.push_back(v ? 'r' : 'n');
    s.dims.push_back(v ? "#" + std::to_string(*v) : "$" + std::get<std::string>(d));
  }
  return s;
}

// The dimensions of s where its pattern equals `other` (the ones that must match), as one key.
std::string Projection(const Shape& s, const std::string& other) {
  std::string key = s.dtype + '\n';
  for (size_t i = 0; i < s.dims.size(); ++i) {
    if (s.pattern[i] != other[i]) continue;
    key += std::to_string(i) + ':' + std::to_string(s.dims[i].size()) + ':' + s.dims[i];
  }
  return key;
}

// The parameters of b with one dtype and pattern, indexed (on first use) by their projection
// onto each pattern of a met so far; queues in name order, taken ones dropped as met.
struct Group {
  std::string pattern;
  std::vector<size_t> members;  // indices into b, in name order
  std::map<std::string, std::unordered_map<std::string, std::deque<size_t>>> by_a_pattern;

  std::unordered_map<std::string, std::deque<size_t>>& Index(const std::string& a_pattern,
                                                            const std::vector<Shape>& shapes) {
    auto [it, fresh] = by_a_pattern.try_emplace(a_pattern);
    if (fresh) {
      for (size_t j : members) it->second[Projection(shapes[j], a_pattern)].push_back(j);
    }
    return it->second;
  }
};

}  // namespace

std::vector<std::pair<size_t, size_t>> PairRenames(const std::vector<ParamSpec>& a,
                                                   const std::vector<ParamSpec>& b,
                                                   const ChatConfig* config) {
  std::vector<Shape> b_shapes;
  b_shapes.reserve(b.size());
  // Groups by dtype and rank, then by pattern.
  std::map<std::pair<std::string, size_t>, std::map<std::string, Group>> groups;
  for (size_t j = 0; j < b.size(); ++j) {
    b_shapes.push_back(ShapeOf(b[j], config));
    const Shape& s = b_shapes.back();
    Group& g = groups[{s.dtype, s.dims.size()}][s.pattern];
    g.pattern = s.pattern;
    g.members.push_back(j);
  }
  std::vector<bool> taken(b.size(), false);
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t i = 0; i < a.size(); ++i) {
    const Shape s = ShapeOf(a[i], config);
    auto same_rank = groups.find({s.dtype, s.dims.size()});
    if (same_rank == groups.end()) continue;
    std::deque<size_t>* best = nullptr;
    for (auto& [pattern, group] : same_rank->second) {
      auto& index = group.Index(s.pattern, b_shapes);
      auto it = index.find(Projection(s, pattern));
      if (it == index.end()) continue;
      std::deque<size_t>& queue = it->second;
      while (!queue.empty() && taken[queue.front()]) queue.pop_front();
      if (!queue.empty() && (!best || queue.front() < best->front())) best = &queue;
    }
    if (!best) continue;
    taken[best->front()] = true;
    pairs.emplace_back(i, best->front());
    best->pop_front();
  }
  return pairs;
}

}  // namespace mlc
