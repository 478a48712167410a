// Shard integrity: containment, presence, size and md5, hashed in parallel with bounded memory
// (each worker streams its shard through one fixed block).
#include <limits.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <mutex>
#include <thread>
#include <vector>

#include "mlc_manifest/check.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "base/digest.h"

namespace mlc {
namespace {

constexpr size_t kBlock = 1 << 20;

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return "";
  return buf;
}

// The first bytes of a file (OpenForRead's rule), or "" when it cannot be read.
std::string FileHead(const std::string& path, const std::string& inside, size_t n) {
  auto file = OpenForRead(path, inside);
  if (!file) return "";
  std::string head(n, '\0');
  ssize_t got = ::pread(file->fd.get(), head.data(), n, 0);
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return head;
}

}  // namespace

const char* ShardStatusName(ShardStatus s) {
  switch (s) {
    case ShardStatus::kOk: return "ok";
    case ShardStatus::kNotVerified: return "not verified";
    case ShardStatus::kMissing: return "missing";
    case ShardStatus::kOutside: return "outside the package";
    case ShardStatus::kSizeMismatch: return "wrong size";
    case ShardStatus::kMd5Mismatch: return "md5 mismatch";
    case ShardStatus::kIoError: return "unreadable";
    case ShardStatus::kSizeOnly: return "size only";
    case ShardStatus::kLfsPointer: return "Git LFS pointer";
  }
  return "?";
}

std::string GitLfsPointerNote(std::string_view head, const std::string& what,
                              const std::string& dir) {
  static constexpr std::string_view kLfsMagic = "version https://git-lfs.github.com/spec/v1";
  if (!head.starts_with(kLfsMagic)) return "";
  return what + ": a Git LFS pointer, not the data (the repository was cloned without Git LFS); "
                "fetch the files with `git lfs pull` inside " + (dir.empty() ? "." : dir);
}

Result<std::string> Md5File(const std::string& path, const std::function<void(uint64_t)>& on_bytes,
                            const std::string& inside) {
  auto file = DefaultEnv()->NewSequentialFile(path, inside);
  MLC_RETURN_IF_ERROR(file);
  auto md5 = Digester::Start(DigestKind::kMd5);
  MLC_RETURN_IF_ERROR(md5);
  std::unique_ptr<char[]> buf(new char[kBlock]);
  for (;;) {
    auto n = (*file)->Read(buf.get(), kBlock);
    MLC_RETURN_IF_ERROR(n);
    if (*n == 0) break;
    md5->Update(buf.get(), *n);
    if (on_bytes) on_bytes(static_cast<uint64_t>(*n));
  }
  return md5->FinishHex();
}

std::vector<ShardResult> CheckShards(const std::string& dir, const TensorCache& cache,
                                     const ShardCheckOptions& options) {
  std::vector<ShardResult> results(cache.shards.size());
  std::string root = RealPath(dir);
  // Presence, containment and size first (cheap); collect what to hash.
  std::vector<size_t> to_hash;
  uint64_t total = 0;
  for (size_t i = 0; i < cache.shards.size(); ++i) {
    const TensorShard& s = cache.shards[i];
    ShardResult& r = results[i];
    r.data_path = s.data_path;
    r.expected_size = s.nbytes;
    std::string path = JoinPath(dir, s.data_path);
    if (HasControlChar(s.data_path)) {  // a NUL would cut the name and alias another shard
      r.status = ShardStatus::kIoError;
      r.message = EscapeControl(s.data_path) + ": a file name may not hold control characters";
      continue;
    }
    const FileStat st = DefaultEnv()->Stat(path, /*follow_symlinks=*/true);
    if (!st.exists) {
      r.status = ShardStatus::kMissing;
      r.message = s.data_path + ": missing (expected " + std::to_string(s.nbytes) + " bytes)";
      continue;
    }
    std::string real = RealPath(path);
    if (root.empty() || real.compare(0, root.size() + 1, root + "/") != 0) {
      r.status = ShardStatus::kOutside;
      r.message = s.data_path + ": resolves to " + real + ", outside the package folder";
      continue;
    }
    r.actual_size = st.size;
    if (!st.regular) {
      r.status = ShardStatus::kIoError;
      r.message = s.data_path + ": not a regular file";
      continue;
    }
    if (r.actual_size != s.nbytes) {
      std::string lfs = GitLfsPointerNote(FileHead(path, dir, 64), s.data_path, dir);
      if (!lfs.empty()) {
        r.status = ShardStatus::kLfsPointer;
        r.message = lfs;
        continue;
      }
      r.status = ShardStatus::kSizeMismatch;
      r.message = s.data_path + ": " + std::to_string(r.actual_size) + " bytes, expected " +
                  std::to_string(s.nbytes) + (r.actual_size < s.nbytes ? " (truncated)" : "");
      continue;
    }
    if (!options.verify_md5 || s.md5sum.empty()) {
      r.status = options.verify_md5 ? ShardStatus::kSizeOnly : ShardStatus::kNotVerified;
      r.message = s.data_path + (options.verify_md5 ? ": size only (no md5sum recorded)"
                                                    : ": size ok, md5 not verified");
      continue;
    }
    to_hash.push_back(i);
    total += s.nbytes;
  }
  // Hash in parallel: workers take the next shard; progress is serialized.
  std::atomic<size_t> next{0};
  std::atomic<uint64_t> done{0};
  std::mutex progress_mu;
  auto on_bytes = [&](uint64_t n) {
    uint64_t d = done.fetch_add(n) + n;
    if (options.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      options.progress(d, total);
    }
  };
  size_t finished = 0;
  auto shard_done = [&](const ShardResult& r) {
    if (!options.on_shard) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    options.on_shard(r, ++finished, to_hash.size());
  };
  auto worker = [&]() {
    for (size_t k; (k = next.fetch_add(1)) < to_hash.size();) {
      size_t i = to_hash[k];
      const TensorShard& s = cache.shards[i];
      ShardResult& r = results[i];
      Result<std::string> md5 = Md5File(JoinPath(dir, s.data_path), on_bytes, dir);
      if (!md5) {
        r.status = ShardStatus::kIoError;
        r.message = s.data_path + ": " + md5.error().message;
        shard_done(r);
        continue;
      }
      r.actual_md5 = *md5;
      if (*md5 != s.md5sum) {
        r.status = ShardStatus::kMd5Mismatch;
        r.message = s.data_path + ": md5 " + *md5 + ", expected " + s.md5sum;
      } else {
        r.status = ShardStatus::kOk;
        r.message = s.data_path + ": ok";
      }
      shard_done(r);
    }
  };
  int threads = options.threads > 0 ? options.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(std::max<size_t>(1, to_hash.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return results;
}

}  // namespace mlc
