// The seam between the library and the file system (LevelDB's Env): every file the library
// reads, maps or writes goes through an Env, so a test can put a fault-injecting one in its place.
//
// Which Env is used: the process default, DefaultEnv(). It is PosixEnv() until a caller replaces
// it with SetDefaultEnv (or a ScopedDefaultEnv, which puts the previous one back). The library
// never owns an Env: whoever installs one keeps it alive until it is replaced again, and replaces
// it only while no other thread is inside the library (tests do it between cases). The functions
// of fs.h (ReadFile, ReadFileBytes, WriteFileAtomic, FileExists) and every reader and writer of
// the library (documents, tensor cache, shards and their md5, parameter mapping, WAV and other
// audio, images, .npy, emit, the reference-model writers) use DefaultEnv().
//
// Errors: every call returns a value; an I/O failure is ErrorCode::kIo naming the file, with the
// system's reason ("No space left on device") as its message.
//
// Mappings and truncation: MapFile maps a whole file read-only and keeps it open. A file that
// shrinks while mapped is detected, not survived: CheckIntact() compares the file's size (fstat
// on the open descriptor) with the mapped size, and the library calls it after mapping and
// before it reads any mapped byte (the parameter loader does, for every shard). Touching a page
// past the new end of a file truncated after that check raises SIGBUS, as for every mmap-based
// loader; the library does not catch signals. Callers that must survive a file being truncated
// under a running session should read the file instead of mapping it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc {

// A file read front to back.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // The size the file had when it was opened.
  virtual uint64_t size() const = 0;
  // Reads up to n bytes into dst: 0 at the end of the file, fewer than n when the system gives
  // fewer (callers loop).
  virtual Result<size_t> Read(char* dst, size_t n) = 0;
};

// A file read at any offset.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  virtual uint64_t size() const = 0;  // as opened
  // Reads up to n bytes at offset: 0 at or past the end, possibly fewer than n (callers loop).
  virtual Result<size_t> ReadAt(uint64_t offset, char* dst, size_t n) = 0;
};

// A file being written (a temporary file of WriteFileAtomic). Closed when it goes away.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status Append(std::string_view bytes) = 0;  // all of bytes, or an error
  // Overwrites bytes at offset (within what was appended: a header finished last).
  virtual Status WriteAt(uint64_t offset, std::string_view bytes) = 0;
  virtual Status Sync() = 0;                          // fsync
  virtual Status Close() = 0;                         // reports a failed close
};

// A whole file mapped read-only (see "Mappings and truncation" above). Unmapped and closed when
// the last owner lets go.
class MappedFile {
 public:
  virtual ~MappedFile() = default;
  virtual const uint8_t* data() const = 0;  // nullptr for an empty file
  virtual uint64_t size() const = 0;        // as mapped
  // kIo naming the file when it no longer holds size() bytes (truncated while mapped).
  virtual Status CheckIntact() const = 0;
};

// What Stat saw at a path.
struct FileStat {
  bool exists = false;
  bool regular = false;    // a regular file (after symlinks, when followed)
  bool directory = false;
  bool symlink = false;    // only when not following symlinks
  uint64_t size = 0;
  uint32_t mode = 0;       // permission bits (0777)
};

class Env {
 public:
  virtual ~Env() = default;

  // Readers follow OpenForRead's rule (fs.h): no control characters in the name, an open that
  // never blocks, a regular file only, and when `inside` is not empty the file (symlinks
  // resolved) must lie inside that folder.
  virtual Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                                    const std::string& inside) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(
      const std::string& path, const std::string& inside) = 0;
  virtual Result<std::shared_ptr<const MappedFile>> MapFile(const std::string& path,
                                                            const std::string& inside) = 0;

  // Creates path for writing; fails when anything is there already (O_EXCL, no symlink followed).
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) = 0;
  // Moves from onto to, replacing a file at to (rename(2)).
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Gives the file at from the second name to; ErrorCode::kExists when to exists (link(2)).
  virtual Status LinkFile(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Sets a file's permission bits (0777), as chmod.
  virtual Status SetMode(const std::string& path, uint32_t mode) = 0;
  // fsync of a folder, so a rename in it is durable.
  virtual Status SyncDir(const std::string& dir) = 0;
  // Creates a folder and its missing parents (an existing folder is fine).
  virtual Status CreateDirs(const std::string& dir) = 0;
  // The names in a folder, without "." and "..".
  virtual Result<std::vector<std::string>> ListDir(const std::string& dir) = 0;
  virtual FileStat Stat(const std::string& path, bool follow_symlinks) = 0;
};

// The POSIX Env: lives for the whole process, never null, safe from any thread.
Env* PosixEnv();

// The Env the library uses (see the top of this file); never null.
Env* DefaultEnv();

// Makes env the process default (nullptr: PosixEnv()) and returns the previous one. Not owned.
Env* SetDefaultEnv(Env* env);

// Installs an Env for a scope and puts the previous one back when it ends.
class ScopedDefaultEnv {
 public:
  explicit ScopedDefaultEnv(Env* env) : previous_(SetDefaultEnv(env)) {}
  ~ScopedDefaultEnv() { SetDefaultEnv(previous_); }
  ScopedDefaultEnv(const ScopedDefaultEnv&) = delete;
  ScopedDefaultEnv& operator=(const ScopedDefaultEnv&) = delete;

 private:
  Env* previous_;
};

}  // namespace mlc
