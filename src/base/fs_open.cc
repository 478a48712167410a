// Opening files to read: Fd, and OpenForRead, the POSIX rule the default Env opens files by
// (a regular file, no control characters in its name, optionally inside a folder).
#include "mlc_manifest/fs.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "base/fs_internal.h"

namespace mlc {
namespace {

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return "";
  return buf;
}

// The real path of an open descriptor (from /proc, so no race with a renamed link), else of path.
std::string OpenedPath(int fd, const std::string& path) {
  char buf[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  if (n > 0 && buf[0] == '/') return std::string(buf, static_cast<size_t>(n));
  return RealPath(path);
}

bool IsInside(const std::string& real, const std::string& root) {
  if (root == "/") return true;
  return real.size() > root.size() && real.compare(0, root.size(), root) == 0 &&
         real[root.size()] == '/';
}

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

Fd::Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

int Fd::release() { return std::exchange(fd_, -1); }

bool HasControlChar(std::string_view s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

Result<OpenedFile> OpenForRead(const std::string& path, const std::string& inside) {
  if (HasControlChar(path)) {
    return FileError(ErrorCode::kInvalid, EscapeControl(path),
                     "a file name may not hold control characters");
  }
  // O_NONBLOCK: opening a FIFO with no writer would otherwise wait forever.
  OpenedFile out{Fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)), 0};
  if (out.fd.get() < 0) return IoError(path, "cannot open: " + ErrnoText());
  struct stat st {};
  if (::fstat(out.fd.get(), &st) != 0) return IoError(path, "cannot stat: " + ErrnoText());
  if (S_ISDIR(st.st_mode)) return IoError(path, "is a directory, expected a file");
  if (!S_ISREG(st.st_mode)) {
    return IoError(path, "is not a regular file (a pipe, socket or device); expected a file");
  }
  int flags = ::fcntl(out.fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(out.fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  if (!inside.empty()) {
    std::string root = RealPath(inside);
    std::string real = OpenedPath(out.fd.get(), path);
    if (root.empty() || real.empty()) return IoError(path, "cannot resolve its real path");
    if (!IsInside(real, root)) {
      return FileError(ErrorCode::kInvalid, path,
                       "resolves outside the package folder " + inside +
                           " (through a symlink); refusing to read it");
    }
  }
  out.size = static_cast<uint64_t>(st.st_size);
  return out;
}

}  // namespace mlc
