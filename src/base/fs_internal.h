// What the parts of fs.h's implementation (src/base/fs_*.cc) share.
#pragma once

#include <cerrno>
#include <cstring>
#include <string>

namespace mlc {

// The text of errno, for an error message.
inline std::string ErrnoText() { return std::strerror(errno); }

}  // namespace mlc
