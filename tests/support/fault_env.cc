// The fault-injecting Env of the tests (fault_env.h): wrappers around the base Env's files that
// fail, dribble or end early, and a mapping whose file is truncated under it.
#include "support/fault_env.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace mlc::test {
namespace {

Error SystemError(const std::string& path, int e) { return IoError(path, std::strerror(e)); }

class FaultySequentialFile final : public SequentialFile {
 public:
  FaultySequentialFile(FaultEnv* env, std::string path, std::unique_ptr<SequentialFile> base,
                       Fault fault)
      : env_(env), path_(std::move(path)), base_(std::move(base)), fault_(fault) {}
  uint64_t size() const override { return base_->size(); }
  Result<size_t> Read(char* dst, size_t n) override {
    switch (fault_) {
      case Fault::kReadIo:
        if (pos_ > 0) {
          env_->Hit();
          return SystemError(path_, EIO);
        }
        n = std::min<size_t>(n, 16);  // the first bytes arrive, then the disk fails
        break;
      case Fault::kShortReads:
        env_->Hit();
        n = std::min<size_t>(n, 3);
        break;
      case Fault::kShrinkWhileRead:
        if (pos_ >= base_->size() / 2) {
          env_->Hit();
          return size_t{0};
        }
        n = std::min<size_t>(n, base_->size() / 2 - pos_);
        break;
      default:
        break;
    }
    auto got = base_->Read(dst, n);
    if (got) pos_ += *got;
    return got;
  }

 private:
  FaultEnv* env_;
  std::string path_;
  std::unique_ptr<SequentialFile> base_;
  Fault fault_;
  uint64_t pos_ = 0;
};

class FaultyRandomAccessFile final : public RandomAccessFile {
 public:
  FaultyRandomAccessFile(FaultEnv* env, std::string path, std::unique_ptr<RandomAccessFile> base,
                         Fault fault)
      : env_(env), path_(std::move(path)), base_(std::move(base)), fault_(fault) {}
  uint64_t size() const override { return base_->size(); }
  Result<size_t> ReadAt(uint64_t offset, char* dst, size_t n) override {
    const uint64_t half = base_->size() / 2;
    switch (fault_) {
      case Fault::kReadIo:
        if (reads_++ > 0) {
          env_->Hit();
          return SystemError(path_, EIO);
        }
        break;
      case Fault::kShortReads:
        env_->Hit();
        n = std::min<size_t>(n, 3);
        break;
      case Fault::kShrinkWhileRead:
        if (offset >= half) {
          env_->Hit();
          return size_t{0};
        }
        n = static_cast<size_t>(std::min<uint64_t>(n, half - offset));
        break;
      default:
        break;
    }
    return base_->ReadAt(offset, dst, n);
  }

 private:
  FaultEnv* env_;
  std::string path_;
  std::unique_ptr<RandomAccessFile> base_;
  Fault fault_;
  int reads_ = 0;
};

class FaultyWritableFile final : public WritableFile {
 public:
  FaultyWritableFile(FaultEnv* env, std::string path, std::unique_ptr<WritableFile> base,
                     Fault fault)
      : env_(env), path_(std::move(path)), base_(std::move(base)), fault_(fault) {}
  Status Append(std::string_view bytes) override {
    if (fault_ == Fault::kWriteNoSpace || fault_ == Fault::kWriteIo) {
      env_->Hit();
      // Part of the bytes reach the file (a real partial write), then the device refuses.
      MLC_RETURN_IF_ERROR(base_->Append(bytes.substr(0, bytes.size() / 2)));
      return SystemError(path_, fault_ == Fault::kWriteNoSpace ? ENOSPC : EIO);
    }
    return base_->Append(bytes);
  }
  Status WriteAt(uint64_t offset, std::string_view bytes) override {
    if (fault_ == Fault::kWriteNoSpace || fault_ == Fault::kWriteIo) {
      env_->Hit();
      return SystemError(path_, fault_ == Fault::kWriteNoSpace ? ENOSPC : EIO);
    }
    return base_->WriteAt(offset, bytes);
  }
  Status Sync() override {
    if (fault_ == Fault::kSyncIo || fault_ == Fault::kSyncNoSpace) {
      env_->Hit();
      return SystemError(path_, fault_ == Fault::kSyncNoSpace ? ENOSPC : EIO);
    }
    return base_->Sync();
  }
  Status Close() override { return base_->Close(); }

 private:
  FaultEnv* env_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
  Fault fault_;
};

}  // namespace

const char* FaultName(Fault fault) {
  switch (fault) {
    case Fault::kNone: return "none";
    case Fault::kWriteNoSpace: return "write_enospc";
    case Fault::kWriteIo: return "write_eio";
    case Fault::kSyncIo: return "fsync_eio";
    case Fault::kSyncNoSpace: return "fsync_enospc";
    case Fault::kRename: return "rename";
    case Fault::kReadIo: return "read_eio";
    case Fault::kShortReads: return "short_reads";
    case Fault::kShrinkWhileRead: return "shrink_while_read";
    case Fault::kTruncateMapped: return "truncate_mapped";
  }
  return "?";
}

void FaultEnv::Inject(Fault fault, const std::string& match) {
  std::lock_guard<std::mutex> lock(mu_);
  fault_ = fault;
  match_ = match;
  hits_ = 0;
}

Fault FaultEnv::FaultFor(const std::string& path) const {
  std::lock_guard<std::mutex> lock(mu_);
  return path.find(match_) != std::string::npos ? fault_ : Fault::kNone;
}

Result<std::unique_ptr<SequentialFile>> FaultEnv::NewSequentialFile(const std::string& path,
                                                                    const std::string& inside) {
  auto file = base_->NewSequentialFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  return std::unique_ptr<SequentialFile>(
      new FaultySequentialFile(this, path, std::move(*file), FaultFor(path)));
}

Result<std::unique_ptr<RandomAccessFile>> FaultEnv::NewRandomAccessFile(const std::string& path,
                                                                        const std::string& inside) {
  auto file = base_->NewRandomAccessFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  return std::unique_ptr<RandomAccessFile>(
      new FaultyRandomAccessFile(this, path, std::move(*file), FaultFor(path)));
}

Result<std::shared_ptr<const MappedFile>> FaultEnv::MapFile(const std::string& path,
                                                            const std::string& inside) {
  const Fault fault = FaultFor(path);
  if (fault == Fault::kReadIo) {
    Hit();
    return IoError(path, std::string("cannot map: ") + std::strerror(EIO));
  }
  auto file = base_->MapFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  if (fault == Fault::kTruncateMapped) {
    Hit();  // another program cuts the file while the mapping is held
    if (::truncate(path.c_str(), static_cast<off_t>((*file)->size() / 2)) != 0) {
      return SystemError(path, errno);
    }
  }
  return file;
}

Result<std::unique_ptr<WritableFile>> FaultEnv::NewWritableFile(const std::string& path) {
  auto file = base_->NewWritableFile(path);
  MLC_RETURN_IF_ERROR(file);
  return std::unique_ptr<WritableFile>(
      new FaultyWritableFile(this, path, std::move(*file), FaultFor(path)));
}

Status FaultEnv::RenameFile(const std::string& from, const std::string& to) {
  if (FaultFor(to) == Fault::kRename) {
    Hit();
    return SystemError(to, EIO);
  }
  return base_->RenameFile(from, to);
}

Status FaultEnv::LinkFile(const std::string& from, const std::string& to) {
  if (FaultFor(to) == Fault::kRename) {
    Hit();
    return SystemError(to, EIO);
  }
  return base_->LinkFile(from, to);
}

}  // namespace mlc::test
