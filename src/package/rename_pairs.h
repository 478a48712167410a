// The renames between two parameter lists: each parameter found on one side only paired with one
// of the other side's of the same dtype and shape, in O(n log n).
#pragma once

#include <utility>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/package.h"

namespace mlc {

// a and b sorted by name. Each of a, in order, takes the first (by name) untaken parameter of b
// with its dtype and shape: a dimension resolved from config (may be null) must equal the other's
// resolved one, two unresolved ones must have the same text, and a resolved one matches any
// unresolved one. Returns the pairs as indices (into a, into b).
std::vector<std::pair<size_t, size_t>> PairRenames(const std::vector<ParamSpec>& a,
                                                   const std::vector<ParamSpec>& b,
                                                   const ChatConfig* config);

}  // namespace mlc
