// A fault-injecting Env for tests (include/mlc_manifest/env.h): forwards every call to a base Env
// (the POSIX one) and, for files whose path contains a chosen text, makes the chosen operation
// fail the way a disk does (ENOSPC, EIO), read in dribbles, end early, or shrink while mapped.
// Install it with ScopedDefaultEnv for the duration of a test.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "mlc_manifest/env.h"

namespace mlc::test {

enum class Fault {
  kNone,
  kWriteNoSpace,    // a write stores part of its bytes, then fails with ENOSPC
  kWriteIo,         // the same with EIO
  kSyncIo,          // fsync fails with EIO (the data never reached the disk)
  kSyncNoSpace,     // fsync fails with ENOSPC (delayed allocation)
  kRename,          // moving the temporary file into place fails (rename and link: EIO)
  kReadIo,          // reads fail with EIO after the first bytes; MapFile fails with EIO
  kShortReads,      // every read returns at most 3 bytes (a correct reader gets the same result)
  kShrinkWhileRead, // the file ends at half its size while being read
  kTruncateMapped,  // MapFile maps the file, then truncates it on disk to half its size
};

const char* FaultName(Fault fault);

class FaultEnv final : public Env {
 public:
  explicit FaultEnv(Env* base = PosixEnv()) : base_(base) {}

  // Arms fault for files whose path contains match ("" = every file); replaces the last one.
  void Inject(Fault fault, const std::string& match = "");
  // How many operations the armed fault changed so far (a test checks the fault was reached).
  int hits() const { return hits_.load(); }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path,
                                                            const std::string& inside) override;
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path,
                                                                const std::string& inside) override;
  Result<std::shared_ptr<const MappedFile>> MapFile(const std::string& path,
                                                    const std::string& inside) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status LinkFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override { return base_->RemoveFile(path); }
  Status SetMode(const std::string& path, uint32_t mode) override { return base_->SetMode(path, mode); }
  Status SyncDir(const std::string& dir) override { return base_->SyncDir(dir); }
  Status CreateDirs(const std::string& dir) override { return base_->CreateDirs(dir); }
  Result<std::vector<std::string>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  FileStat Stat(const std::string& path, bool follow_symlinks) override {
    return base_->Stat(path, follow_symlinks);
  }

  // The armed fault when path matches, else kNone.
  Fault FaultFor(const std::string& path) const;
  void Hit() { ++hits_; }

 private:
  Env* base_;
  mutable std::mutex mu_;
  Fault fault_ = Fault::kNone;
  std::string match_;
  std::atomic<int> hits_{0};
};

}  // namespace mlc::test
