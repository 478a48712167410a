// Tests of the file layer: bounded reads (ReadFile and the pre-mapped ReadFileBytes agree on
// bytes, limits and errors), the one open rule (regular files only, never blocking, no control
// characters, containment), atomic no-clobber writes that refuse non-files, and the error bound.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "mlc_manifest/fs.h"
#include "support/test_util.h"

namespace mlc {
namespace {

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 2654435761u) >> 13);
  return s;
}

TEST(ReadFileBytes, SameBytesAsReadFile) {
  test::TempDir dir;
  for (size_t n : {size_t{0}, size_t{1}, size_t{4095}, size_t{4096}, size_t{3 << 20}}) {
    std::string path = dir.Write("f" + std::to_string(n), Pattern(n));
    auto a = ReadFile(path);
    auto b = ReadFileBytes(path);
    ASSERT_TRUE(a.ok() && b.ok()) << n;
    EXPECT_EQ(b->view(), *a) << n;
    FileBytes moved = std::move(*b);
    EXPECT_EQ(moved.view().size(), n);
  }
}

TEST(ReadFileBytes, LimitsAndErrors) {
  test::TempDir dir;
  std::string path = dir.Write("big", Pattern(10000));
  auto over = ReadFileBytes(path, 9999);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.errors()[0].code, ErrorCode::kLimit);
  EXPECT_NE(over.errors()[0].message.find("10000"), std::string::npos);
  auto missing = ReadFileBytes(dir.File("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.errors()[0].code, ErrorCode::kIo);
  EXPECT_EQ(missing.errors()[0].document, dir.File("nope"));  // the file is the document
  EXPECT_EQ(missing.errors()[0].path, "");
  auto folder = ReadFileBytes(dir.path());
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.errors()[0].code, ErrorCode::kIo);
}

// The one open rule: a FIFO (as a package file or --program) is refused at once instead of
// blocking the open forever; so is a pipe.
TEST(OpenForRead, RefusesFifosAndPipesWithoutBlocking) {
  test::TempDir dir;
  std::string fifo = dir.File("tokenizer.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (auto read : {+[](const std::string& p) { return ReadFile(p).ok(); },
                    +[](const std::string& p) { return ReadFileBytes(p).ok(); }}) {
    EXPECT_FALSE(read(fifo));
  }
  auto opened = OpenForRead(fifo);
  ASSERT_FALSE(opened.ok());
  EXPECT_EQ(opened.errors()[0].code, ErrorCode::kIo);
  EXPECT_NE(opened.errors()[0].message.find("not a regular file"), std::string::npos);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  EXPECT_FALSE(ReadFile("/dev/fd/" + std::to_string(fds[0])).ok());
  ::close(fds[0]);
  ::close(fds[1]);
}

// A NUL or other control character never reaches open(2), where it would cut the name.
TEST(OpenForRead, RefusesControlCharacters) {
  test::TempDir dir;
  dir.Write("a.bin", "x");
  auto nul = ReadFile(dir.File(std::string("a.bin\0x", 7)));
  ASSERT_FALSE(nul.ok());
  EXPECT_EQ(nul.errors()[0].code, ErrorCode::kInvalid);
  EXPECT_NE(nul.errors()[0].document.find("\\x00"), std::string::npos);  // escaped, not cut
  EXPECT_FALSE(ReadFile(dir.File("a.bin\n")).ok());
}

// Inside a package folder: a symlink that resolves outside it is refused; one inside is fine.
TEST(OpenForRead, ContainmentThroughSymlinks) {
  test::TempDir pkg;
  test::TempDir outside;
  std::string secret = outside.Write("secret.json", "{\"x\": 1}");
  ASSERT_EQ(::symlink(secret.c_str(), pkg.File("mlc-chat-config.json").c_str()), 0);
  pkg.Write("real.json", "{}");
  ASSERT_EQ(::symlink("real.json", pkg.File("inner.json").c_str()), 0);
  auto out = ReadFile(pkg.File("mlc-chat-config.json"), 1 << 20, pkg.path());
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.errors()[0].message.find("outside"), std::string::npos);
  EXPECT_TRUE(ReadFile(pkg.File("inner.json"), 1 << 20, pkg.path()).ok());
  EXPECT_TRUE(ReadFile(pkg.File("mlc-chat-config.json")).ok());  // no folder given: no containment
}

// Output targets that are not regular files are refused, never replaced, even with overwrite.
TEST(WriteFileAtomic, RefusesSymlinksAndDevices) {
  test::TempDir dir;
  std::string target = dir.Write("target.txt", "keep");
  std::string link = dir.File("link.txt");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  Status via_link = WriteFileAtomic(link, "new", true);
  ASSERT_FALSE(via_link.ok());
  EXPECT_EQ(via_link.errors()[0].code, ErrorCode::kIo);
  EXPECT_EQ(*ReadFile(target), "keep");
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_FALSE(WriteFileAtomic("/dev/null", "x", true).ok());
  ASSERT_EQ(::lstat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(WriteFileAtomic(fifo, "x", true).ok());
}

// A killed writer's "<target>.tmp-PID-RAND" is removed by the next write to the same target;
// a live writer's temporary and unrelated files are left alone.
TEST(WriteFileAtomic, RemovesStaleTemporariesOfDeadWriters) {
  test::TempDir dir;
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);  // a process id that no longer runs
  std::string stale = dir.Write("out.npy.tmp-" + std::to_string(child) + "-12345", "partial");
  std::string live = dir.Write("out.npy.tmp-" + std::to_string(::getpid()) + "-1", "partial");
  std::string other = dir.Write("other.npy.tmp-" + std::to_string(child) + "-1", "partial");
  std::string lookalike = dir.Write("out.npy.tmp-" + std::to_string(child) + "-x", "keep");
  ASSERT_TRUE(WriteFileAtomic(dir.File("out.npy"), "done", false).ok());
  EXPECT_FALSE(FileExists(stale));
  EXPECT_TRUE(FileExists(live));
  EXPECT_TRUE(FileExists(other));
  EXPECT_TRUE(FileExists(lookalike));
  EXPECT_EQ(*ReadFile(dir.File("out.npy")), "done");
}

// At most kMaxErrors errors are kept; the rest are counted in one last entry.
TEST(Errors, KeptUnderTheBound) {
  Errors errors;
  for (int i = 0; i < 100000; ++i) AddError(errors, Invalid("/" + std::to_string(i), "bad"));
  ASSERT_EQ(errors.size(), kMaxErrors + 1);
  EXPECT_EQ(errors.back().message, "and 99900 more errors");
  Errors plain(250, Invalid("", "x"));
  Errors capped = CapErrors(plain);
  ASSERT_EQ(capped.size(), kMaxErrors + 1);
  EXPECT_EQ(capped.back().message, "and 150 more errors");
}

TEST(EscapeControl, ShowsControlBytes) {
  EXPECT_EQ(EscapeControl(std::string("a\0b\x1b[2Jc\x7f", 9)), "a\\x00b\\x1b[2Jc\\x7f");
  EXPECT_EQ(EscapeControl("plain"), "plain");
}

TEST(WriteFileAtomic, NoClobberUnlessAsked) {
  test::TempDir dir;
  std::string path = dir.File("out.txt");
  ASSERT_TRUE(WriteFileAtomic(path, "one", false).ok());
  Status again = WriteFileAtomic(path, "two", false);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.errors()[0].code, ErrorCode::kExists);
  EXPECT_EQ(*ReadFile(path), "one");
  ASSERT_TRUE(WriteFileAtomic(path, "three", true).ok());
  EXPECT_EQ(*ReadFile(path), "three");
  Status nowhere = WriteFileAtomic(dir.File("no/such/folder/x"), "x", false);
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.errors()[0].code, ErrorCode::kIo);
}

// A replaced file keeps its permission bits: a 0600 file stays 0600 (and 0640 stays 0640).
TEST(WriteFileAtomic, ReplacingKeepsTheFileMode) {
  test::TempDir dir;
  std::string path = dir.File("secret.json");
  for (mode_t mode : {mode_t{0600}, mode_t{0640}, mode_t{0755}}) {
    ASSERT_TRUE(WriteFileAtomic(path, "old", true).ok());
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    ASSERT_TRUE(WriteFileAtomic(path, "new", true).ok());
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, mode);
    EXPECT_EQ(*ReadFile(path), "new");
  }
}

// The names in a folder that are temporary files of a writer ("<target>.tmp-PID-RAND").
int Temporaries(const test::TempDir& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    n += e.path().filename().string().find(".tmp-") != std::string::npos;
  }
  return n;
}

TEST(AtomicFileWriter, DroppedBeforeCommitLeavesTheOldFile) {
  test::TempDir dir;
  const std::string path = dir.Write("out.bin", "old");
  {
    auto w = AtomicFileWriter::Create(path, /*overwrite=*/true);
    ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
    ASSERT_TRUE((*w)->Append("new bytes").ok());
    EXPECT_EQ(Temporaries(dir), 1);
  }
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(Temporaries(dir), 0);
}

// A writer of a new file with its first bytes appended.
std::unique_ptr<AtomicFileWriter> Started(const std::string& path, std::string_view first) {
  auto w = AtomicFileWriter::Create(path, /*overwrite=*/false);
  EXPECT_TRUE(w.ok()) << FormatErrors(w.errors());
  if (!w.ok()) return nullptr;
  EXPECT_TRUE((*w)->Append(first).ok());
  return std::move(*w);
}

TEST(AtomicFileWriter, WriteAtFinishesAHeaderBeforeCommit) {
  test::TempDir dir;
  const std::string path = dir.File("out.bin");
  auto w = Started(path, "....");
  ASSERT_TRUE(w);
  ASSERT_TRUE(w->Append(Pattern(100000)).ok());
  EXPECT_FALSE(FileExists(path)) << "in place before Commit";
  ASSERT_TRUE(w->WriteAt(0, "HEAD").ok());
  ASSERT_TRUE(w->Commit().ok());
  EXPECT_EQ(*ReadFile(path), "HEAD" + Pattern(100000));
  EXPECT_EQ(Temporaries(dir), 0);
  EXPECT_FALSE(w->Append("more").ok()) << "a committed writer takes no more bytes";
}

TEST(AtomicFileWriter, NoClobberHoldsAgainstAFileMadeMeanwhile) {
  test::TempDir dir;
  const std::string path = dir.File("out.bin");
  auto w = Started(path, "mine");
  ASSERT_TRUE(w);
  dir.Write("out.bin", "theirs");  // another writer got there first
  Status st = w->Commit();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.errors()[0].code, ErrorCode::kExists);
  EXPECT_EQ(*ReadFile(path), "theirs");
  EXPECT_EQ(Temporaries(dir), 0);
  // The checks of WriteFileAtomic: an existing file without overwrite, "-", a non-file.
  EXPECT_EQ(AtomicFileWriter::Create(path, false).errors()[0].code, ErrorCode::kExists);
  EXPECT_FALSE(AtomicFileWriter::Create("-", true).ok());
  EXPECT_EQ(AtomicFileWriter::Create(dir.path(), true).errors()[0].code, ErrorCode::kIo);
}

}  // namespace
}  // namespace mlc
