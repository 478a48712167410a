// Digests through the crypto module (base/digest.h, mlc_manifest/hash.h): known vectors, a
// stream fed in uneven pieces giving the one-shot digest, and a context finished only once.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "base/digest.h"
#include "base/hash.h"

namespace mlc {
namespace {

TEST(Digest, KnownVectors) {
  // RFC 1321 and FIPS 180-2 examples.
  EXPECT_EQ(*Md5Hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(*Md5Hex("abc"), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(*Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(*Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Digest, StreamedPiecesGiveTheOneShotDigest) {
  std::string bytes(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  for (DigestKind kind : {DigestKind::kMd5, DigestKind::kSha256}) {
    auto d = Digester::Start(kind);
    ASSERT_TRUE(d.ok()) << FormatErrors(d.errors());
    size_t at = 0;
    for (size_t piece = 1; at < bytes.size(); piece = piece * 3 + 1) {
      const size_t n = std::min(piece, bytes.size() - at);
      d->Update(bytes.data() + at, n);
      at += n;
    }
    auto streamed = d->FinishHex();
    ASSERT_TRUE(streamed.ok()) << FormatErrors(streamed.errors());
    EXPECT_EQ(*streamed, kind == DigestKind::kMd5 ? *Md5Hex(bytes) : *Sha256Hex(bytes));
  }
}

TEST(Digest, FinishedOnceAndMovable) {
  auto d = Digester::Start(DigestKind::kMd5);
  ASSERT_TRUE(d.ok()) << FormatErrors(d.errors());
  d->Update("abc");
  Digester moved = std::move(*d);
  EXPECT_FALSE(d->FinishHex().ok());  // the moved-from context holds nothing
  auto first = moved.FinishHex();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "900150983cd24fb0d6963f7d28e17f72");
  auto again = moved.FinishHex();
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kIo);
}

}  // namespace
}  // namespace mlc
