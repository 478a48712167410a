// Bounded whole-file reads and atomic writes (temporary file + fsync + rename), over the
// process's Env (env.h); OpenForRead is the POSIX rule the default Env opens files by.
#include "mlc_manifest/fs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <utility>

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

constexpr const char* kTmpInfix = ".tmp-";

// The document name of "-" read as an input.
constexpr const char* kStdinName = "<stdin>";

// A write refused because the target exists and replacing it was not asked for.
constexpr const char* kExistsText = "already exists; not replaced (overwrite not requested)";

// The process id of a temporary name "<target>.tmp-PID-RAND" of target, or 0 if name is not one.
pid_t TemporaryOwner(std::string_view name, std::string_view target) {
  if (name.substr(0, target.size()) != target) return 0;
  name.remove_prefix(target.size());
  std::string_view infix = kTmpInfix;
  if (name.substr(0, infix.size()) != infix) return 0;
  name.remove_prefix(infix.size());
  size_t dash = name.find('-');
  if (dash == 0 || dash == std::string_view::npos || dash + 1 == name.size() || dash > 9) return 0;
  auto digits = [](std::string_view d) {
    return std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(name.substr(0, dash)) || !digits(name.substr(dash + 1))) return 0;
  return static_cast<pid_t>(std::stol(std::string(name.substr(0, dash))));
}

// Removes the temporary files a killed writer of target left beside it: regular files named
// "<target>.tmp-PID-RAND" whose PID is no longer a running process.
void RemoveStaleTemporaries(Env& env, const std::string& target) {
  std::string dir = DirName(target);
  std::string base = target.substr(target.rfind('/') == std::string::npos ? 0 : target.rfind('/') + 1);
  auto names = env.ListDir(dir);
  if (!names) return;
  for (const std::string& name : *names) {
    pid_t owner = TemporaryOwner(name, base);
    if (owner <= 0 || (::kill(owner, 0) == 0 || errno == EPERM)) continue;
    const std::string path = JoinPath(dir, name);
    if (env.Stat(path, /*follow_symlinks=*/false).regular) (void)env.RemoveFile(path);
  }
}

// "-" as an output: the parts written to standard output.
Status WriteToStdout(std::initializer_list<std::string_view> parts) {
  std::fflush(stdout);
  for (std::string_view part : parts) {
    if (!WriteAll(STDOUT_FILENO, part)) return IoError("<stdout>", "cannot write to standard output: " + ErrnoText());
  }
  return Status::Ok();
}

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

Status WriteFileAtomic(const std::string& path, std::string_view bytes, bool overwrite) {
  return WriteFileAtomicParts(path, {bytes}, overwrite);
}

AtomicFileWriter::AtomicFileWriter(Env& env, std::string path, std::string tmp,
                                   std::unique_ptr<WritableFile> file, bool overwrite)
    : env_(env), path_(std::move(path)), tmp_(std::move(tmp)), file_(std::move(file)), overwrite_(overwrite) {}

AtomicFileWriter::~AtomicFileWriter() { Abandon(); }

void AtomicFileWriter::Abandon() {
  if (!file_) return;
  (void)file_->Close();
  file_.reset();
  (void)env_.RemoveFile(tmp_);
}

Result<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(const std::string& path, bool overwrite) {
  if (path == "-") return IoError("<stdout>", "standard output cannot be written as a file put in place");
  if (HasControlChar(path)) {
    return FileError(ErrorCode::kInvalid, EscapeControl(path), "a file name may not hold control characters");
  }
  Env& env = *DefaultEnv();
  const FileStat st = env.Stat(path, /*follow_symlinks=*/false);
  if (st.exists) {
    if (!st.regular) {
      return IoError(path, "is not a regular file (a symlink, device, pipe or folder); refusing to "
                           "replace it");
    }
    if (!overwrite) return FileError(ErrorCode::kExists, path, kExistsText);
  }
  RemoveStaleTemporaries(env, path);
  std::random_device rd;
  std::string tmp = path + kTmpInfix + std::to_string(::getpid()) + "-" + std::to_string(rd());
  auto file = env.NewWritableFile(tmp);
  if (!file) return IoError(path, "cannot create temporary file: " + file.error().message);
  return std::unique_ptr<AtomicFileWriter>(new AtomicFileWriter(env, path, std::move(tmp), std::move(*file), overwrite));
}

Status AtomicFileWriter::Failed(const char* what, const Status& st) {
  Abandon();
  return IoError(path_, what + st.error().message);
}

Status AtomicFileWriter::Append(std::string_view bytes) {
  if (!file_) return IoError(path_, "write failed: the file was abandoned");
  Status st = file_->Append(bytes);
  return st ? st : Failed("write failed: ", st);
}

Status AtomicFileWriter::WriteAt(uint64_t offset, std::string_view bytes) {
  if (!file_) return IoError(path_, "write failed: the file was abandoned");
  Status st = file_->WriteAt(offset, bytes);
  return st ? st : Failed("write failed: ", st);
}

Status AtomicFileWriter::Commit() {
  if (!file_) return IoError(path_, "write failed: the file was abandoned");
  Status synced = file_->Sync();
  if (!synced) return Failed("cannot flush to disk (fsync): ", synced);
  Status closed = file_->Close();
  file_.reset();
  if (!closed) {
    (void)env_.RemoveFile(tmp_);
    return IoError(path_, "cannot close: " + closed.error().message);
  }
  if (!overwrite_) {
    // link() fails if the target appeared meanwhile: no clobbering even under a race.
    Status linked = env_.LinkFile(tmp_, path_);
    (void)env_.RemoveFile(tmp_);
    if (!linked) {
      if (linked.error().code == ErrorCode::kExists) return FileError(ErrorCode::kExists, path_, kExistsText);
      return IoError(path_, "cannot create: " + linked.error().message);
    }
  } else if (Status moved = env_.RenameFile(tmp_, path_); !moved) {
    (void)env_.RemoveFile(tmp_);
    return IoError(path_, "cannot rename into place: " + moved.error().message);
  }
  (void)env_.SyncDir(DirName(path_));
  return Status::Ok();
}

Status WriteFileAtomicParts(const std::string& path, std::initializer_list<std::string_view> parts,
                            bool overwrite) {
  if (path == "-") return WriteToStdout(parts);
  auto writer = AtomicFileWriter::Create(path, overwrite);
  MLC_RETURN_IF_ERROR(writer);
  for (std::string_view part : parts) {
    Status wrote = (*writer)->Append(part);
    MLC_RETURN_IF_ERROR(wrote);
  }
  return (*writer)->Commit();
}

std::string FolderOf(const std::string& path) { return DirName(path); }

bool FileExists(const std::string& path) {
  return DefaultEnv()->Stat(path, /*follow_symlinks=*/false).exists;
}

Status CheckFolder(const std::string& dir) {
  if (HasControlChar(dir)) {
    return FileError(ErrorCode::kInvalid, EscapeControl(dir), "a folder name may not hold control characters");
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return IoError(dir, "cannot open the folder: " + ErrnoText());
  if (!S_ISDIR(st.st_mode)) return IoError(dir, "is not a folder; expected a package folder");
  DIR* d = ::opendir(dir.c_str());
  if (!d) return IoError(dir, "cannot list the folder: " + ErrnoText());
  ::closedir(d);
  return Status::Ok();
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (!name.empty() && name.front() == '/') return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace mlc
