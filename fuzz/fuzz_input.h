// The fuzz input as a JSON document for the targets that start from one: the strict reader with
// a size bound, after `skip` leading bytes that a target reads as knobs of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "mlc_manifest/json.h"

namespace mlc::fuzz {

inline std::optional<Json> JsonInput(const uint8_t* data, size_t size, size_t skip,
                                     uint64_t max_bytes) {
  if (size < skip) return std::nullopt;
  JsonLimits limits;
  limits.max_bytes = max_bytes;
  auto doc = ParseJson(std::string_view(reinterpret_cast<const char*>(data) + skip, size - skip), limits);
  if (!doc.ok()) return std::nullopt;
  return std::move(*doc);
}

}  // namespace mlc::fuzz
