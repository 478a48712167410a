// I/O faults, injected through the Env seam (include/mlc_manifest/env.h, tests/support/fault_env.h)
// and, for the command line, through a real file-size limit: every writer reports an io error
// naming the file, leaves the previous file as it was and no temporary file behind; every reader
// reports an io error naming the file, and reads in dribbles change nothing.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/npy.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "support/fault_env.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using test::Fault;
using test::FaultEnv;
using test::TempDir;

// The names in a folder, sorted.
std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void ExpectNoTemporaries(const std::string& dir) {
  for (const std::string& name : Names(dir)) {
    EXPECT_EQ(name.find(".tmp-"), std::string::npos) << "left behind: " << dir << "/" << name;
  }
}

// The system's reason for a write fault, as the error message must carry it.
std::string Reason(Fault fault) {
  switch (fault) {
    case Fault::kWriteNoSpace:
    case Fault::kSyncNoSpace: return std::strerror(ENOSPC);
    default: return std::strerror(EIO);
  }
}

// An io error that names `file` (in its path or its document) and carries `reason`.
void ExpectIoError(const Errors& errors, const std::string& file, const std::string& reason = "") {
  ASSERT_FALSE(errors.empty());
  const Error& e = errors.front();
  EXPECT_EQ(e.code, ErrorCode::kIo) << e.ToString();
  EXPECT_TRUE(e.path.find(file) != std::string::npos || e.document.find(file) != std::string::npos)
      << "the error does not name " << file << ": " << e.ToString();
  if (!reason.empty()) {
    EXPECT_NE(e.message.find(reason), std::string::npos) << e.ToString();
  }
}

// ---------------------------------------------------------------- writers (library)

class WriteFaults : public ::testing::TestWithParam<Fault> {
 protected:
  FaultEnv env_;
  ScopedDefaultEnv scoped_{&env_};
  TempDir dir_;
};

TEST_P(WriteFaults, ReplacingKeepsThePreviousFileAndLeavesNoTemporary) {
  const std::string path = dir_.Write("doc.json", "previous contents\n");
  env_.Inject(GetParam(), "doc.json");
  Status st = WriteFileAtomic(path, std::string(100000, 'x'), /*overwrite=*/true);
  ASSERT_FALSE(st.ok());
  EXPECT_GT(env_.hits(), 0);
  ExpectIoError(st.errors(), path, Reason(GetParam()));
  EXPECT_EQ(test::ReadText(path), "previous contents\n");
  EXPECT_EQ(Names(dir_.path()), std::vector<std::string>{"doc.json"});
}

TEST_P(WriteFaults, CreatingLeavesNothing) {
  const std::string path = dir_.File("new.bin");
  env_.Inject(GetParam(), "new.bin");
  Status st = WriteFileAtomicParts(path, {"head", std::string(5000, 'y')}, /*overwrite=*/false);
  ASSERT_FALSE(st.ok());
  ExpectIoError(st.errors(), path, Reason(GetParam()));
  EXPECT_TRUE(Names(dir_.path()).empty());
}

// The .npy writer behind `image -o` and `audio -o`.
TEST_P(WriteFaults, NpyOutput) {
  const std::string path = dir_.File("pixels.npy");
  NpyArray old{"|u1", {1, 2, 2, 3}, std::string(12, '\1')};
  ASSERT_TRUE(WriteNpy(path, old, false).ok());
  const std::string before = test::ReadText(path);
  env_.Inject(GetParam(), "pixels.npy");
  NpyArray next{"|u1", {1, 32, 32, 3}, std::string(32 * 32 * 3, '\7')};
  Status st = WriteNpy(path, next, /*overwrite=*/true);
  ASSERT_FALSE(st.ok());
  ExpectIoError(st.errors(), path, Reason(GetParam()));
  EXPECT_EQ(test::ReadText(path), before);
  EXPECT_EQ(Names(dir_.path()), std::vector<std::string>{"pixels.npy"});
}

// The reference-model writer: the file that failed keeps its previous bytes, no temporary stays.
TEST_P(WriteFaults, ReferenceModelWriter) {
  ReferenceModelOptions o;
  ASSERT_TRUE(WriteReferenceModel(dir_.path(), o).ok());
  const std::string cache = JoinPath(dir_.path(), kTensorCacheFileName);
  const std::string before = test::ReadText(cache);
  const std::vector<std::string> names = Names(dir_.path());
  env_.Inject(GetParam(), kTensorCacheFileName);
  o.force = true;
  o.seed = 9;
  auto written = WriteReferenceModel(dir_.path(), o);
  ASSERT_FALSE(written.ok());
  ExpectIoError(written.errors(), cache, Reason(GetParam()));
  EXPECT_EQ(test::ReadText(cache), before);
  EXPECT_EQ(Names(dir_.path()), names);
}

INSTANTIATE_TEST_SUITE_P(Env, WriteFaults,
                         ::testing::Values(Fault::kWriteNoSpace, Fault::kWriteIo, Fault::kSyncIo,
                                           Fault::kSyncNoSpace, Fault::kRename),
                         [](const ::testing::TestParamInfo<Fault>& p) {
                           return std::string(test::FaultName(p.param));
                         });

// A temporary file of a writer that was killed is removed by the next write of that file.
TEST(WriteStale, TemporaryOfAKilledWriterIsRemoved) {
  TempDir dir;
  const std::string path = dir.File("out.json");
  dir.Write("out.json.tmp-999999999-12345", "half");  // no such process
  ASSERT_TRUE(WriteFileAtomic(path, "whole", false).ok());
  EXPECT_EQ(Names(dir.path()), std::vector<std::string>{"out.json"});
}

// ---------------------------------------------------------------- writers (command line)

// Runs the CLI under a real file-size limit (RLIMIT_FSIZE of 512 bytes, SIGXFSZ ignored): a write
// past it fails with EFBIG as on a full quota, in the real process and its real file system calls.
test::CliResult RunCliLimited(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/bin/sh", "-c", "trap '' XFSZ; ulimit -f 1; exec \"$@\"", "sh",
                                MLC_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return test::RunProgram(argv);
}

// Runs `args` once to make the previous file, then again with --force under the limit: exit 3
// naming the file, the previous bytes kept, nothing left beside it.
void ExpectCliWriteFault(const std::vector<std::string>& args, const std::string& out) {
  SCOPED_TRACE(args.front());
  auto first = test::RunCli(args);
  ASSERT_EQ(first.exit_code, 0) << first.err << first.out;
  const std::string before = test::ReadText(out);
  ASSERT_GT(before.size(), 512u) << "the output must be larger than the limit";
  const std::vector<std::string> names = Names(FolderOf(out));
  std::vector<std::string> again = args;
  again.push_back("--force");
  auto r = RunCliLimited(again);
  EXPECT_EQ(r.exit_code, 3) << r.err << r.out;
  EXPECT_NE(r.err.find(out), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::strerror(EFBIG)), std::string::npos) << r.err;
  EXPECT_EQ(test::ReadText(out), before);
  EXPECT_EQ(Names(FolderOf(out)), names);
  ExpectNoTemporaries(FolderOf(out));
  // With --json the failure is one JSON object on stdout.
  again.push_back("--json");
  auto j = RunCliLimited(again);
  EXPECT_EQ(j.exit_code, 3) << j.err << j.out;
  EXPECT_NE(j.out.find(out), std::string::npos) << j.out;
  EXPECT_EQ(test::ReadText(out), before);
  ExpectNoTemporaries(FolderOf(out));
}

std::string TestPng(const TempDir& dir, const std::string& name) {
  RgbImage rgb;
  rgb.width = 120;
  rgb.height = 80;
  for (int y = 0; y < 80; ++y) {
    for (int x = 0; x < 120; ++x) {
      rgb.pixels.push_back(static_cast<uint8_t>(x * 2));
      rgb.pixels.push_back(static_cast<uint8_t>(y * 3));
      rgb.pixels.push_back(static_cast<uint8_t>((x * y) % 256));
    }
  }
  auto png = EncodePng(rgb);
  EXPECT_TRUE(png.ok());
  return dir.Write(name, png.ok() ? *png : std::string());
}

std::vector<double> Sine(int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = 0.5 * std::sin(0.05 * static_cast<double>(i));
  return out;
}

TEST(CliWriteFaults, ImageOutputAndPreview) {
  TempDir dir;
  const std::string in = TestPng(dir, "in.png");
  TempDir out_dir;
  const std::string out = out_dir.File("px.npy");
  ExpectCliWriteFault({"image", in, "-o", out, "--mode", "stretch", "--height", "32", "--width", "32"},
                      out);
  // The PNG preview: the tensor goes to standard output ("-o -", sent to /dev/null, which no
  // file-size limit touches), so the preview is the file that hits the limit.
  TempDir preview_dir;
  const std::string preview = preview_dir.File("preview.png");
  const std::vector<std::string> args{"image", in, "-o", "-", "--mode", "stretch", "--height", "64",
                                      "--width", "64", "--preview", preview};
  auto to_null = [&](const std::string& limit) {
    std::vector<std::string> argv{"/bin/sh", "-c", limit + "exec \"$@\" >/dev/null", "sh",
                                  MLC_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back("--force");
    return test::RunProgram(argv);
  };
  auto first = to_null("");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string before = test::ReadText(preview);
  ASSERT_GT(before.size(), 512u);
  auto r = to_null("trap '' XFSZ; ulimit -f 1; ");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find(preview), std::string::npos) << r.err;
  EXPECT_EQ(test::ReadText(preview), before);
  EXPECT_EQ(Names(preview_dir.path()), std::vector<std::string>{"preview.png"});
}

TEST(CliWriteFaults, AudioOutput) {
  TempDir dir;
  test::WavLayout layout;
  const std::string in = dir.Write("in.wav", test::EncodeWav(layout, Sine(16000)));
  TempDir out_dir;
  const std::string out = out_dir.File("a.npy");
  ExpectCliWriteFault({"audio", in, "-o", out, "--rate", "16000"}, out);
}

TEST(CliWriteFaults, EmitPackageAndReferenceModel) {
  TempDir dir;
  const std::string pkg = dir.File("pkg");
  auto made = test::RunCli({"reference-model", pkg});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  TempDir out_dir;
  const std::string manifest = out_dir.File("mlc-model-manifest.json");
  ExpectCliWriteFault({"emit", "package", pkg, "--preset", "llava-1.5", "-o", manifest}, manifest);
  // reference-model writes its shards first: the first shard is the file that hits the limit.
  TempDir ref;
  ExpectCliWriteFault({"reference-model", ref.path()}, JoinPath(ref.path(), "params_shard_0.bin"));
}

// ---------------------------------------------------------------- readers

class ReadFaults : public ::testing::Test {
 protected:
  FaultEnv env_;
  ScopedDefaultEnv scoped_{&env_};
  TempDir dir_;
};

TEST_F(ReadFaults, Documents) {
  Json doc = {{"schema", "mlc.model-package"}, {"list", Json::array()}};
  for (int i = 0; i < 200; ++i) doc["list"].push_back(i);
  const std::string path = dir_.Write("doc.json", doc.dump());
  env_.Inject(Fault::kShortReads, "doc.json");
  auto dribbled = ReadJsonFile(path);
  ASSERT_TRUE(dribbled.ok()) << FormatErrors(dribbled.errors());
  EXPECT_GT(env_.hits(), 100);
  EXPECT_EQ(*dribbled, doc);
  env_.Inject(Fault::kReadIo, "doc.json");
  auto failed = ReadJsonFile(path);
  ASSERT_FALSE(failed.ok());
  ExpectIoError(failed.errors(), path, std::strerror(EIO));
  env_.Inject(Fault::kShrinkWhileRead, "doc.json");
  auto shrunk = ReadJsonFile(path);
  ASSERT_FALSE(shrunk.ok());
  ExpectIoError(shrunk.errors(), path, "shrank");
}

TEST_F(ReadFaults, TensorCacheShardsAndTheirMd5) {
  ASSERT_TRUE(WriteReferenceModel(dir_.path(), ReferenceModelOptions{}).ok());
  env_.Inject(Fault::kReadIo, kTensorCacheFileName);
  auto cache_failed = ReadTensorCache(dir_.path());
  ASSERT_FALSE(cache_failed.ok());
  ExpectIoError(cache_failed.errors(), kTensorCacheFileName, std::strerror(EIO));

  env_.Inject(Fault::kNone);
  auto cache = ReadTensorCache(dir_.path());
  ASSERT_TRUE(cache.ok());
  ASSERT_FALSE(cache->shards.empty());
  const std::string shard = cache->shards[0].data_path;
  ShardCheckOptions so;
  so.verify_md5 = true;
  env_.Inject(Fault::kShortReads, shard);
  for (const ShardResult& r : CheckShards(dir_.path(), *cache, so)) {
    EXPECT_EQ(r.status, ShardStatus::kOk) << r.message;
  }
  EXPECT_GT(env_.hits(), 0);
  env_.Inject(Fault::kReadIo, shard);
  auto results = CheckShards(dir_.path(), *cache, so);
  EXPECT_EQ(results[0].status, ShardStatus::kIoError);
  EXPECT_NE(results[0].message.find(shard), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find(std::strerror(EIO)), std::string::npos) << results[0].message;
  for (size_t i = 1; i < results.size(); ++i) EXPECT_EQ(results[i].status, ShardStatus::kOk);
  auto md5 = Md5File(JoinPath(dir_.path(), shard));
  ASSERT_FALSE(md5.ok());
  ExpectIoError(md5.errors(), shard, std::strerror(EIO));
}

TEST_F(ReadFaults, ShardMappingAndTruncationWhileMapped) {
  ASSERT_TRUE(WriteReferenceModel(dir_.path(), ReferenceModelOptions{}).ok());
  auto lib = OpenReferenceLibrary(dir_.path());
  ASSERT_TRUE(lib.ok()) << FormatErrors(lib.errors());
  const auto& order = (*lib)->Metadata().params;
  auto cache = ReadTensorCache(dir_.path());
  ASSERT_TRUE(cache.ok());
  const std::string shard = cache->shards[0].data_path;
  const std::string shard_path = JoinPath(dir_.path(), shard);
  ASSERT_TRUE(LoadParameters(dir_.path(), order).ok());

  env_.Inject(Fault::kReadIo, shard);
  auto unmappable = LoadParameters(dir_.path(), order);
  ASSERT_FALSE(unmappable.ok());
  ExpectIoError(unmappable.errors(), shard_path, std::strerror(EIO));

  // Another program truncates the shard right after it is mapped: reported before any byte of
  // it is read (reading past the new end would raise SIGBUS and end this test).
  const uint64_t size = std::filesystem::file_size(shard_path);
  env_.Inject(Fault::kTruncateMapped, shard);
  auto truncated = LoadParameters(dir_.path(), order);
  EXPECT_GE(env_.hits(), 1);
  ASSERT_FALSE(truncated.ok());
  ExpectIoError(truncated.errors(), shard_path, "shrank");
  EXPECT_NE(truncated.error().message.find(std::to_string(size)), std::string::npos)
      << truncated.error().message;
}

TEST_F(ReadFaults, WavDirectAndThroughLibsndfile) {
  AudioDecode processor;
  for (test::WavSample format : {test::WavSample::kS16, test::WavSample::kF32}) {
    SCOPED_TRACE(test::WavSampleName(format));
    test::WavLayout layout;
    layout.format = format;
    layout.channels = 2;
    const std::string path =
        dir_.Write(std::string("in_") + test::WavSampleName(format) + ".wav",
                   test::EncodeWav(layout, Sine(2 * 8000)));
    env_.Inject(Fault::kNone);
    auto plain = DecodeAudioFile(path, processor);
    ASSERT_TRUE(plain.ok()) << FormatErrors(plain.errors());
    env_.Inject(Fault::kShortReads, ".wav");
    auto dribbled = DecodeAudioFile(path, processor);
    ASSERT_TRUE(dribbled.ok()) << FormatErrors(dribbled.errors());
    EXPECT_GT(env_.hits(), 0);
    EXPECT_EQ(dribbled->samples, plain->samples);
    env_.Inject(Fault::kReadIo, ".wav");
    auto failed = DecodeAudioFile(path, processor);
    ASSERT_FALSE(failed.ok());
    ExpectIoError(failed.errors(), path, std::strerror(EIO));
  }
}

TEST_F(ReadFaults, Images) {
  const std::string path = TestPng(dir_, "in.png");
  ImageDecode processor;
  processor.height = 24;
  processor.width = 32;
  auto plain = PrepareImageFile(path, processor);
  ASSERT_TRUE(plain.ok()) << FormatErrors(plain.errors());
  env_.Inject(Fault::kShortReads, "in.png");
  auto dribbled = PrepareImageFile(path, processor);
  ASSERT_TRUE(dribbled.ok()) << FormatErrors(dribbled.errors());
  EXPECT_GT(env_.hits(), 0);
  EXPECT_EQ(dribbled->rgb.pixels, plain->rgb.pixels);
  for (Fault f : {Fault::kReadIo, Fault::kShrinkWhileRead}) {
    env_.Inject(f, "in.png");
    auto failed = PrepareImageFile(path, processor);
    ASSERT_FALSE(failed.ok());
    ExpectIoError(failed.errors(), path, f == Fault::kReadIo ? std::strerror(EIO) : "shrank");
    auto decoded = DecodeImageFile(path);
    ASSERT_FALSE(decoded.ok());
    ExpectIoError(decoded.errors(), path);
  }
}

// The process default is the POSIX Env unless replaced, and a scope puts the previous one back.
TEST(DefaultEnv, ScopedReplacement) {
  EXPECT_EQ(DefaultEnv(), PosixEnv());
  {
    FaultEnv outer;
    ScopedDefaultEnv a(&outer);
    EXPECT_EQ(DefaultEnv(), &outer);
    {
      FaultEnv inner;
      ScopedDefaultEnv b(&inner);
      EXPECT_EQ(DefaultEnv(), &inner);
    }
    EXPECT_EQ(DefaultEnv(), &outer);
  }
  EXPECT_EQ(DefaultEnv(), PosixEnv());
}

}  // namespace
}  // namespace mlc
