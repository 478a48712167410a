// File access used by every part: bounded reads and atomic, no-clobber writes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc {

// Reads a whole file; refuses one larger than max_bytes (ErrorCode::kLimit) and reports
// unreadable files as ErrorCode::kIo with the file name as the path.
Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes = 64ull << 20);

// Writes bytes to path atomically: a temporary file beside it, fsync, rename, fsync of the folder.
// Without overwrite an existing path is left alone and the call fails (ErrorCode::kExists).
Status WriteFileAtomic(const std::string& path, std::string_view bytes, bool overwrite);

bool FileExists(const std::string& path);

// "dir/name", without doubling the separator.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace mlc
