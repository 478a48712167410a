// Atomic writes over the process's Env (env.h): a temporary file beside the target, fsync, then
// rename (or link, when replacing is not asked for; a replaced file's permission bits are kept); temporaries a killed writer left are
// removed; "-" written to standard output.
#include "mlc_manifest/fs.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <random>
#include <utility>

#include "base/fs_internal.h"
#include "mlc_manifest/env.h"

namespace mlc {
namespace {

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

constexpr const char* kTmpInfix = ".tmp-";

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
  std::string dir = FolderOf(target);
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

}  // namespace

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
  } else {
    // The replacement keeps the replaced file's permissions (a 0600 file stays 0600).
    if (const FileStat old = env_.Stat(path_, /*follow_symlinks=*/false); old.exists && old.regular) {
      if (Status kept = env_.SetMode(tmp_, old.mode); !kept) {
        (void)env_.RemoveFile(tmp_);
        return IoError(path_, "cannot keep the file's permissions: " + kept.error().message);
      }
    }
    if (Status moved = env_.RenameFile(tmp_, path_); !moved) {
      (void)env_.RemoveFile(tmp_);
      return IoError(path_, "cannot rename into place: " + moved.error().message);
    }
  }
  (void)env_.SyncDir(FolderOf(path_));
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

}  // namespace mlc
