// The POSIX Env (include/mlc_manifest/env.h) and the process default: files read through
// OpenForRead's rule, mappings that keep their descriptor to notice truncation, and the
// creating, renaming, linking and syncing that atomic replacement is made of.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <filesystem>

#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

std::string ErrnoText(int e) { return std::strerror(e); }

// read(2) / pread(2), retried when a signal interrupts them.
Result<size_t> ReadRetrying(int fd, const std::string& path, char* dst, size_t n, int64_t at) {
  for (;;) {
    ssize_t r = at < 0 ? ::read(fd, dst, n) : ::pread(fd, dst, n, static_cast<off_t>(at));
    if (r >= 0) return static_cast<size_t>(r);
    if (errno != EINTR) return IoError(path, "read failed: " + ErrnoText(errno));
  }
}

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, OpenedFile file)
      : path_(std::move(path)), file_(std::move(file)) {
    ::posix_fadvise(file_.fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  }
  uint64_t size() const override { return file_.size; }
  Result<size_t> Read(char* dst, size_t n) override {
    return ReadRetrying(file_.fd.get(), path_, dst, n, -1);
  }

 private:
  std::string path_;
  OpenedFile file_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, OpenedFile file)
      : path_(std::move(path)), file_(std::move(file)) {}
  uint64_t size() const override { return file_.size; }
  Result<size_t> ReadAt(uint64_t offset, char* dst, size_t n) override {
    if (offset > static_cast<uint64_t>(INT64_MAX)) return size_t{0};
    return ReadRetrying(file_.fd.get(), path_, dst, n, static_cast<int64_t>(offset));
  }

 private:
  std::string path_;
  OpenedFile file_;
};

class PosixMappedFile final : public MappedFile {
 public:
  PosixMappedFile(std::string path, Fd fd, void* data, uint64_t size)
      : path_(std::move(path)), fd_(std::move(fd)), data_(data), size_(size) {}
  ~PosixMappedFile() override {
    if (data_) ::munmap(data_, static_cast<size_t>(size_));
  }
  PosixMappedFile(const PosixMappedFile&) = delete;
  PosixMappedFile& operator=(const PosixMappedFile&) = delete;
  const uint8_t* data() const override { return static_cast<const uint8_t*>(data_); }
  uint64_t size() const override { return size_; }
  Status CheckIntact() const override {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) return IoError(path_, "cannot stat: " + ErrnoText(errno));
    if (static_cast<uint64_t>(st.st_size) < size_) {
      return IoError(path_, "shrank from " + std::to_string(size_) + " to " +
                                std::to_string(st.st_size) +
                                " bytes while mapped (another program truncated it)");
    }
    return Status::Ok();
  }

 private:
  std::string path_;
  Fd fd_;
  void* data_;
  uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, Fd fd) : path_(std::move(path)), fd_(std::move(fd)) {}
  Status Append(std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t n = ::write(fd_.get(), bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError(path_, ErrnoText(errno));
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }
  Status WriteAt(uint64_t offset, std::string_view bytes) override {
    while (!bytes.empty()) {
      ssize_t n = ::pwrite(fd_.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
      if (n < 0) {
        if (errno == EINTR) continue;
        return IoError(path_, ErrnoText(errno));
      }
      bytes.remove_prefix(static_cast<size_t>(n));
      offset += static_cast<uint64_t>(n);
    }
    return Status::Ok();
  }
  Status Sync() override {
    if (::fsync(fd_.get()) != 0) return IoError(path_, ErrnoText(errno));
    return Status::Ok();
  }
  Status Close() override {
    if (::close(fd_.release()) != 0) return IoError(path_, ErrnoText(errno));
    return Status::Ok();
  }

 private:
  std::string path_;
  Fd fd_;
};

class PosixEnvImpl final : public Env {
 public:
  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                            const std::string& inside) override {
    auto file = OpenForRead(path, inside);
    MLC_RETURN_IF_ERROR(file);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, std::move(*file)));
  }

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                const std::string& inside) override {
    auto file = OpenForRead(path, inside);
    MLC_RETURN_IF_ERROR(file);
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, std::move(*file)));
  }

  Result<std::shared_ptr<const MappedFile>> MapFile(const std::string& path,
                                                    const std::string& inside) override {
    auto file = OpenForRead(path, inside);
    MLC_RETURN_IF_ERROR(file);
    void* data = nullptr;
    if (file->size > 0) {
      data = ::mmap(nullptr, static_cast<size_t>(file->size), PROT_READ, MAP_PRIVATE,
                    file->fd.get(), 0);
      if (data == MAP_FAILED) return IoError(path, "cannot map: " + ErrnoText(errno));
    }
    return std::shared_ptr<const MappedFile>(
        new PosixMappedFile(path, std::move(file->fd), data, file->size));
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (fd.get() < 0) return IoError(path, ErrnoText(errno));
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, std::move(fd)));
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return IoError(to, ErrnoText(errno));
    return Status::Ok();
  }

  Status LinkFile(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) {
      const int e = errno;
      return FileError(e == EEXIST ? ErrorCode::kExists : ErrorCode::kIo, to, ErrnoText(e));
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return IoError(path, ErrnoText(errno));
    return Status::Ok();
  }

  Status SetMode(const std::string& path, uint32_t mode) override {
    if (::chmod(path.c_str(), static_cast<mode_t>(mode & 0777)) != 0) return IoError(path, ErrnoText(errno));
    return Status::Ok();
  }

  Status SyncDir(const std::string& dir) override {
    Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (fd.get() < 0) return IoError(dir, ErrnoText(errno));
    if (::fsync(fd.get()) != 0) return IoError(dir, ErrnoText(errno));
    return Status::Ok();
  }

  Status CreateDirs(const std::string& dir) override {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError(dir, ec.message());
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (!d) return IoError(dir, ErrnoText(errno));
    std::vector<std::string> names;
    while (const dirent* e = ::readdir(d)) {
      std::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    ::closedir(d);
    return names;
  }

  FileStat Stat(const std::string& path, bool follow_symlinks) override {
    struct stat st {};
    FileStat out;
    if ((follow_symlinks ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) return out;
    out.exists = true;
    out.regular = S_ISREG(st.st_mode);
    out.directory = S_ISDIR(st.st_mode);
    out.symlink = S_ISLNK(st.st_mode);
    out.size = static_cast<uint64_t>(st.st_size);
    out.mode = static_cast<uint32_t>(st.st_mode & 0777);
    return out;
  }
};

std::atomic<Env*> g_default{nullptr};

}  // namespace

Env* PosixEnv() {
  static PosixEnvImpl env;
  return &env;
}

Env* DefaultEnv() {
  Env* env = g_default.load(std::memory_order_acquire);
  return env ? env : PosixEnv();
}

Env* SetDefaultEnv(Env* env) {
  Env* previous = g_default.exchange(env, std::memory_order_acq_rel);
  return previous ? previous : PosixEnv();
}

}  // namespace mlc
