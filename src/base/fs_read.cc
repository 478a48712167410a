// Bounded whole-file reads (into a string or mapped pages) over the process's Env (env.h), and
// "-" read as standard input.
#include "mlc_manifest/fs.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "base/fs_internal.h"
#include "mlc_manifest/env.h"

namespace mlc {
namespace {

// read(2), retried when a signal interrupts it.
ssize_t ReadSome(int fd, char* dst, size_t n) {
  for (;;) {
    ssize_t r = ::read(fd, dst, n);
    if (r >= 0 || errno != EINTR) return r;
  }
}

// The error of both readers for a file over max_bytes.
Error OverLimit(const std::string& path, int64_t size, uint64_t max_bytes) {
  return FileError(ErrorCode::kLimit, path,
               "file is " + std::to_string(size) + " bytes, over the limit of " +
                   std::to_string(max_bytes));
}

// An anonymous buffer of n bytes (n >= 1) whose pages are mapped up front; nullptr when memory
// is short.
void* MapBuffer(size_t n) {
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// A file that ended before the size it had when opened: it shrank while being read.
Error EndedEarly(const std::string& path, uint64_t got, uint64_t size) {
  return IoError(path, "ended at byte " + std::to_string(got) + " of " + std::to_string(size) +
                           " (the file shrank while being read)");
}

// The document name of "-" read as an input.
constexpr const char* kStdinName = "<stdin>";

// "-" as an input: standard input read to its end, refused past max_bytes.
Result<std::string> ReadStdin(uint64_t max_bytes) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ReadSome(STDIN_FILENO, buf, sizeof buf);
    if (n < 0) return IoError(kStdinName, "read failed: " + ErrnoText());
    if (n == 0) return out;
    if (out.size() + static_cast<size_t>(n) > max_bytes) {
      return FileError(ErrorCode::kLimit, kStdinName,
                       "input is over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace

std::string DocumentName(const std::string& path) { return path == "-" ? kStdinName : path; }

Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes, const std::string& inside) {
  if (path == "-" && inside.empty()) return ReadStdin(max_bytes);
  auto file = DefaultEnv()->NewSequentialFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  const uint64_t size = (*file)->size();
  if (size > max_bytes) return OverLimit(path, static_cast<int64_t>(size), max_bytes);
  std::string out;
  out.reserve(static_cast<size_t>(size));
  char buf[1 << 16];
  for (;;) {
    auto n = (*file)->Read(buf, sizeof buf);
    MLC_RETURN_IF_ERROR(n);
    if (*n == 0) break;
    if (out.size() + *n > max_bytes) {
      return FileError(ErrorCode::kLimit, path,
                       "file is over the limit of " + std::to_string(max_bytes) + " bytes");
    }
    out.append(buf, *n);
  }
  // A file that grows while it is read is taken as read; one that shrinks is an error.
  if (out.size() < size) return EndedEarly(path, out.size(), size);
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

Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes,
                                const std::string& inside) {
  FileBytes out;
  if (path == "-" && inside.empty()) {
    auto text = ReadStdin(max_bytes);
    MLC_RETURN_IF_ERROR(text);
    out.capacity_ = std::max<size_t>(text->size(), 1);
    out.data_ = MapBuffer(out.capacity_);
    if (!out.data_) return IoError(kStdinName, "out of memory for " + std::to_string(out.capacity_) + " bytes");
    std::memcpy(out.data_, text->data(), text->size());
    out.size_ = text->size();
    return out;
  }
  auto file = DefaultEnv()->NewSequentialFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  const uint64_t size = (*file)->size();
  if (size > max_bytes) return OverLimit(path, static_cast<int64_t>(size), max_bytes);
  out.capacity_ = std::max<size_t>(static_cast<size_t>(size), 1);
  out.data_ = MapBuffer(out.capacity_);
  if (!out.data_) return IoError(path, "out of memory for " + std::to_string(out.capacity_) + " bytes");
  char* dst = static_cast<char*>(out.data_);
  // A file that grows while it is read is cut at the size seen; one that shrinks is an error.
  while (out.size_ < size) {
    auto n = (*file)->Read(dst + out.size_, static_cast<size_t>(size) - out.size_);
    MLC_RETURN_IF_ERROR(n);
    if (*n == 0) return EndedEarly(path, out.size_, size);
    out.size_ += *n;
  }
  return out;
}

}  // namespace mlc
