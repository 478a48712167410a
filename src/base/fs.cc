// Bounded whole-file reads and atomic writes (temporary file + fsync + rename).
#include "mlc_manifest/fs.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <random>
#include <utility>

namespace mlc {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

std::string DirName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

bool WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// read(2), retried when a signal interrupts it.
ssize_t ReadSome(int fd, char* dst, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, dst, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

// The error of both readers for a file over max_bytes.
Error OverLimit(const std::string& path, int64_t size, uint64_t max_bytes) {
  return Error{ErrorCode::kLimit, path,
               "file is " + std::to_string(size) + " bytes, over the limit of " +
                   std::to_string(max_bytes)};
}

// An anonymous buffer of n bytes (n >= 1) whose pages are mapped up front; nullptr when memory
// is short.
void* MapBuffer(size_t n) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// Closes fd and reports the failed read of path (errno still set by the read).
Error ReadError(int fd, const std::string& path) {
  std::string msg = "read failed: " + ErrnoText();
  ::close(fd);
  return IoError(path, msg);
}

}  // namespace

Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path, "cannot open: " + ErrnoText());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    return IoError(path, "cannot stat: " + ErrnoText());
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    return IoError(path, "is a directory, expected a file");
  }
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return OverLimit(path, st.st_size, max_bytes);
  }
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ReadSome(fd, buf, sizeof buf);
    if (n < 0) return ReadError(fd, path);
    if (n == 0) break;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      ::close(fd);
      return Error{ErrorCode::kLimit, path,
                   "file is over the limit of " + std::to_string(max_bytes) + " bytes"};
    }
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

FileBytes::~FileBytes() {
  if (data_) ::munmap(data_, capacity_);
}

FileBytes::FileBytes(FileBytes&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    if (data_) ::munmap(data_, capacity_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  const bool regular = ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
  std::optional<std::string> text;  // the ordinary read, for what is not a non-empty regular file
  if (!regular) {
    auto read = ReadFile(path, max_bytes);
    if (!read) return read.take_errors();
    text = std::move(*read);
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    return OverLimit(path, st.st_size, max_bytes);
  }
  FileBytes out;
  out.capacity_ = std::max<size_t>(text ? text->size() : static_cast<size_t>(st.st_size), 1);
  out.data_ = MapBuffer(out.capacity_);
  if (!out.data_) return IoError(path, "out of memory for " + std::to_string(out.capacity_) + " bytes");
  if (text) {
    std::memcpy(out.data_, text->data(), text->size());
    out.size_ = text->size();
    return out;
  }
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path, "cannot open: " + ErrnoText());
  char* dst = static_cast<char*>(out.data_);
  // A file that shrinks while it is read ends early; one that grows is cut at the size seen.
  while (out.size_ < out.capacity_) {
    ssize_t n = ReadSome(fd, dst + out.size_, out.capacity_ - out.size_);
    if (n < 0) return ReadError(fd, path);
    if (n == 0) break;
    out.size_ += static_cast<size_t>(n);
  }
  ::close(fd);
  return out;
}

Status WriteFileAtomic(const std::string& path, std::string_view bytes, bool overwrite) {
  return WriteFileAtomicParts(path, {bytes}, overwrite);
}

Status WriteFileAtomicParts(const std::string& path, std::initializer_list<std::string_view> parts,
                            bool overwrite) {
  if (!overwrite && FileExists(path)) {
    return Error{ErrorCode::kExists, path, "already exists; pass --force to overwrite"};
  }
  std::random_device rd;
  std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(path, "cannot create temporary file: " + ErrnoText());
  bool written = true;
  for (std::string_view part : parts) written = written && WriteAll(fd, part);
  if (!written || ::fsync(fd) != 0) {
    std::string msg = "write failed: " + ErrnoText();
    ::close(fd);
    ::unlink(tmp.c_str());
    return IoError(path, msg);
  }
  ::close(fd);
  if (!overwrite) {
    // link() fails if the target appeared meanwhile: no clobbering even under a race.
    if (::link(tmp.c_str(), path.c_str()) != 0) {
      std::string msg = errno == EEXIST ? "already exists; pass --force to overwrite"
                                        : "cannot create: " + ErrnoText();
      ErrorCode code = errno == EEXIST ? ErrorCode::kExists : ErrorCode::kIo;
      ::unlink(tmp.c_str());
      return Error{code, path, msg};
    }
    ::unlink(tmp.c_str());
  } else if (::rename(tmp.c_str(), path.c_str()) != 0) {
    std::string msg = "cannot rename into place: " + ErrnoText();
    ::unlink(tmp.c_str());
    return IoError(path, msg);
  }
  int dfd = ::open(DirName(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return Status::Ok();
}

bool FileExists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (!name.empty() && name.front() == '/') return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace mlc
