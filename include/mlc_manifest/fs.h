// File access used by every part: bounded reads and atomic, no-clobber writes. Everything here
// but OpenForRead goes through the process's Env (env.h: DefaultEnv()), so tests can inject faults.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"

namespace mlc {

// An open file descriptor, closed when its owner goes away. Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(Fd&& other) noexcept;
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release();  // hands the descriptor over (the Fd no longer closes it)

 private:
  int fd_ = -1;
};

struct OpenedFile {
  Fd fd;
  uint64_t size = 0;
};

// The one rule for every file this project reads (documents, package files, shards, media):
// the name holds no control characters (kInvalid); the open never blocks (O_NONBLOCK, so a FIFO
// cannot hang it); what it opens must be a regular file (fstat; kIo otherwise); and when `inside`
// is not empty the file, symlinks resolved, must lie inside that folder (kInvalid otherwise).
Result<OpenedFile> OpenForRead(const std::string& path, const std::string& inside = "");

// True when s holds a byte below 0x20 or 0x7f (NUL included): such a string is never a path.
bool HasControlChar(std::string_view s);

// The name errors give a file read by ReadFile: "<stdin>" for "-", else path itself.
std::string DocumentName(const std::string& path);

// Reads a whole file (OpenForRead's rule); refuses one larger than max_bytes (ErrorCode::kLimit)
// and reports unreadable files, and files that shrink while being read, as ErrorCode::kIo with
// the file name as the document. "-" (when `inside` is empty) is standard input, read to its end
// ("<stdin>" in errors).
Result<std::string> ReadFile(const std::string& path, uint64_t max_bytes = 64ull << 20,
                             const std::string& inside = "");

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
  friend Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes,
                                         const std::string& inside);
  void* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;  // bytes mapped
};

// ReadFile into a FileBytes; the same rule, limits and errors.
Result<FileBytes> ReadFileBytes(const std::string& path, uint64_t max_bytes = 64ull << 20,
                                const std::string& inside = "");

// Writes bytes to path atomically: a temporary file beside it, fsync, rename, fsync of the folder.
// When a write, fsync, close or rename fails the temporary file is removed and whatever was at
// path before is left as it was (kIo naming path, with the system's reason).
// Without overwrite an existing path is left alone and the call fails (ErrorCode::kExists); a
// file replaced keeps its permission bits (a 0600 file stays 0600).
// Whatever is at path must be a regular file: a symlink, device, pipe or folder is refused (kIo),
// never replaced. Temporary files "<path>.tmp-PID-RAND" of a writer that was killed (PID no longer
// running) are removed first. The path "-" means standard output (written through, not replaced).
Status WriteFileAtomic(const std::string& path, std::string_view bytes, bool overwrite);
// The same for a file made of several pieces, written one after the other (no joined copy).
Status WriteFileAtomicParts(const std::string& path, std::initializer_list<std::string_view> parts,
                            bool overwrite);

class Env;
class WritableFile;

// A file written in pieces and put in place by the rules of WriteFileAtomic: Create checks the
// target and makes the temporary file beside it, Append and WriteAt fill it, Commit makes it
// durable and moves it into place. A failed write, or dropping the writer before Commit, removes
// the temporary file and leaves whatever was at path as it was. Not for "-".
class AtomicFileWriter {
 public:
  static Result<std::unique_ptr<AtomicFileWriter>> Create(const std::string& path, bool overwrite);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  const std::string& path() const { return path_; }
  Status Append(std::string_view bytes);
  // Overwrites bytes written earlier (a header finished last).
  Status WriteAt(uint64_t offset, std::string_view bytes);
  Status Commit();

 private:
  AtomicFileWriter(Env& env, std::string path, std::string tmp, std::unique_ptr<WritableFile> file,
                   bool overwrite);
  void Abandon();
  Status Failed(const char* what, const Status& st);

  Env& env_;
  std::string path_;
  std::string tmp_;
  std::unique_ptr<WritableFile> file_;  // null once committed or abandoned
  bool overwrite_;
};

bool FileExists(const std::string& path);

// Ok when dir names a folder that can be listed; else kIo naming it (missing, a file, no access).
Status CheckFolder(const std::string& dir);

// The folder a path names a file in ("." for a bare name): the `inside` of a package document.
std::string FolderOf(const std::string& path);

// "dir/name", without doubling the separator; an absolute name, or an empty dir, gives name as
// it is (a file named relative to a folder: the one way paths in documents are resolved).
std::string JoinPath(const std::string& dir, const std::string& name);

}  // namespace mlc
