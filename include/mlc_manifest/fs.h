// File access used by every part: bounded reads and atomic, no-clobber writes.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc {

// Reads a whole file; refuses one larger than max_bytes (ErrorCode::kLimit) and reports
// unreadable files as ErrorCode::kIo with the file name as the path.
Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes = 64ull << 20);

// A whole file's bytes in one buffer whose pages are mapped up front (one call, instead of a page
// fault per 4 KiB as a growing string takes): for large inputs such as photos. Move-only.
class FileBytes {
 public:
  FileBytes() = default;
  ~FileBytes();
  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  std::string_view view() const { return {static_cast<const char*>(data_), size_}; }

 private:
  friend Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes);
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;  // bytes mapped
};

// ReadFile into a FileBytes; the same limits and errors. Falls back to ReadFile for files that
// are not regular (pipes, devices).
Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes = 64ull << 20);

// Writes bytes to path atomically: a temporary file beside it, fsync, rename, fsync of the folder.
// Without overwrite an existing path is left alone and the call fails (ErrorCode::kExists).
Status WriteFileAtomic(const std::string& path, std::string_view bytes, bool overwrite);
// The same for a file made of several pieces, written one after the other (no joined copy).
Status WriteFileAtomicParts(const std::string& path, std::initializer_list<std::string_view> parts,
                            bool overwrite);

bool FileExists(const std::string& path);

// "dir/name", without doubling the separator.
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace mlc
