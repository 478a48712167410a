// Tests of the file layer: bounded reads (ReadFile and the pre-mapped ReadFileBytes agree on
// bytes, limits and errors, also for empty files and pipes) and atomic, no-clobber writes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <thread>

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
  EXPECT_EQ(missing.errors()[0].path, dir.File("nope"));
  auto folder = ReadFileBytes(dir.path());
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.errors()[0].code, ErrorCode::kIo);
}

TEST(ReadFileBytes, ReadsAPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string data = Pattern(200000);
  std::thread writer([&] {
    size_t off = 0;
    while (off < data.size()) {
      ssize_t n = ::write(fds[1], data.data() + off, data.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  auto got = ReadFileBytes("/dev/fd/" + std::to_string(fds[0]));
  writer.join();
  ::close(fds[0]);
  ASSERT_TRUE(got.ok()) << FormatErrors(got.errors());
  EXPECT_EQ(got->view(), data);
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

}  // namespace
}  // namespace mlc
