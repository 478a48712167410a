// Byte sizes as people write and read them: "8GiB" / "1.5GB" in, "1.50 GiB" out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc {

// A byte count: digits with an optional fraction and unit, B, KB/MB/GB/TB (powers of 1000),
// KiB/MiB/GiB/TiB or K/M/G/T (powers of 1024), case-insensitive: "8GiB", "512MiB", "1.5GB",
// "4096". Not over 2^63 - 1; kUsage (a value the caller gave) otherwise.
Result<int64_t> ParseByteSize(std::string_view text);

// A byte count for people: "512 B", "1.50 KiB", "3.25 GiB", "120 MiB" (three significant digits).
std::string HumanBytes(uint64_t bytes);

}  // namespace mlc
