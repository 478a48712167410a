// The modules the library opens on demand (base/module_loader.h): a missing module is an I/O
// error naming every place tried; commands load only the libraries they use (the audio module
// for `audio`, the HTTP module for `serve`, the crypto module for ids, the SentencePiece module
// for a tokenizer.model, none for `version`), and no built binary links what the modules hold.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "base/crypto_backend.h"
#include "base/module_loader.h"
#include "media/audio_backend.h"
#include "media/image_backend.h"
#include "media/resampler_backend.h"
#include "mlc_manifest/fs.h"
#include "serve/http_backend.h"
#include "text/sp_backend.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using test::TempDir;

TEST(ModuleLoader, OneRuleNamesFileVariableAndEntry) {
  const ModuleSpec spec{"resampler", "the resampler module", 1};
  EXPECT_EQ(ModuleFile(spec), "libmlc_manifest_resampler.so");
  EXPECT_EQ(ModuleVariable(spec), "MLC_MANIFEST_RESAMPLER_MODULE");
  EXPECT_EQ(ModuleEntry(spec), "mlc_manifest_resampler_backend");
  EXPECT_EQ(ModuleVariable({"sentencepiece", "", 1}), "MLC_MANIFEST_SENTENCEPIECE_MODULE");
  // Each table's module, by its purpose.
  EXPECT_STREQ(ModuleOf<MlcImageBackend>::kSpec.purpose, "image");
  EXPECT_STREQ(ModuleOf<MlcAudioBackend>::kSpec.purpose, "audio");
  EXPECT_STREQ(ModuleOf<MlcResamplerBackend>::kSpec.purpose, "resampler");
  EXPECT_STREQ(ModuleOf<MlcHttpBackend>::kSpec.purpose, "http");
  EXPECT_STREQ(ModuleOf<MlcCryptoBackend>::kSpec.purpose, "crypto");
  EXPECT_STREQ(ModuleOf<MlcSpBackend>::kSpec.purpose, "sentencepiece");
}

TEST(ModuleLoader, MissingModuleIsAnIoErrorNamingEveryPlaceTried) {
  const ModuleSpec spec{"no_such_module", "the test module", 1};
  const std::string env = ModuleVariable(spec);
  ASSERT_EQ(env, "MLC_MANIFEST_NO_SUCH_MODULE_MODULE");
  ::unsetenv(env.c_str());
  auto missing = OpenModule(spec, &CallModuleEntry<int>);
  ASSERT_FALSE(missing.ok());
  const Error& e = missing.error();
  EXPECT_EQ(e.code, ErrorCode::kIo);
  EXPECT_NE(e.message.find("the test module cannot be loaded; tried:"), std::string::npos) << e.message;
  // The executable's folder, the build's output folder and the install folder.
  const std::string exe_dir = std::string(MLC_BINARY_DIR);
  EXPECT_NE(e.message.find("/libmlc_manifest_no_such_module.so:"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find(exe_dir + "/libmlc_manifest_no_such_module.so"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("/mlc_manifest/libmlc_manifest_no_such_module.so"), std::string::npos)
      << e.message;
  EXPECT_GE(std::count(e.message.begin(), e.message.end(), '\n'), 3) << e.message;

  // With the variable set, that file alone is tried.
  ::setenv(env.c_str(), "/nonexistent/libmlc_manifest_no_such_module.so", 1);
  auto named = OpenModule(spec, &CallModuleEntry<int>);
  ::unsetenv(env.c_str());
  ASSERT_FALSE(named.ok());
  EXPECT_EQ(named.error().code, ErrorCode::kIo);
  EXPECT_NE(named.error().message.find("tried:\n  /nonexistent/libmlc_manifest_no_such_module.so: "),
            std::string::npos) << named.error().message;
  EXPECT_EQ(std::count(named.error().message.begin(), named.error().message.end(), '\n'), 1);
}

TEST(ModuleLoader, WrongInterfaceVersionIsRefused) {
  // The audio module itself, asked for with an interface version it does not have.
  const ModuleSpec spec{"audio", "the audio module", MLC_AUDIO_BACKEND_ABI + 100};
  auto wrong = OpenModule(spec, &CallModuleEntry<MlcAudioBackend>);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.error().code, ErrorCode::kIo);
  EXPECT_NE(wrong.error().message.find("is not the audio module of this build"), std::string::npos)
      << wrong.error().message;
}

TEST(ModuleLoader, TheModulesLoad) {
  auto image = LoadModule<MlcImageBackend>();
  ASSERT_TRUE(image.ok()) << FormatErrors(image.errors());
  EXPECT_EQ((*image)->abi, MLC_IMAGE_BACKEND_ABI);
  auto audio = LoadModule<MlcAudioBackend>();
  ASSERT_TRUE(audio.ok()) << FormatErrors(audio.errors());
  EXPECT_EQ((*audio)->abi, MLC_AUDIO_BACKEND_ABI);
  auto soxr = LoadModule<MlcResamplerBackend>();
  ASSERT_TRUE(soxr.ok()) << FormatErrors(soxr.errors());
  EXPECT_EQ((*soxr)->abi, MLC_RESAMPLER_BACKEND_ABI);
  auto http = LoadModule<MlcHttpBackend>();
  ASSERT_TRUE(http.ok()) << FormatErrors(http.errors());
  EXPECT_EQ((*http)->abi, MLC_HTTP_BACKEND_ABI);
  auto crypto = LoadModule<MlcCryptoBackend>();
  ASSERT_TRUE(crypto.ok()) << FormatErrors(crypto.errors());
  EXPECT_EQ((*crypto)->abi, MLC_CRYPTO_BACKEND_ABI);
  auto sp = LoadModule<MlcSpBackend>();
  ASSERT_TRUE(sp.ok()) << FormatErrors(sp.errors());
  EXPECT_EQ((*sp)->abi, MLC_SP_BACKEND_ABI);
}

// The libraries only the modules may hold: none may be in the DT_NEEDED of the CLI, the C API
// library or the Python module; the tests (which write audio with libsndfile themselves) must
// not need libcrypto or SentencePiece either.
constexpr const char* kModuleOnlyLibraries[] = {"libcrypto", "libssl", "libsentencepiece", "libprotobuf",
                                                "libsndfile", "libsoxr", "libvips", "libcpp-httplib"};
constexpr size_t kNotInTests = 4;  // the first four

void ExpectNotNeeded(const std::string& binary, size_t count) {
  auto r = test::RunProgram({"readelf", "-d", binary});
  ASSERT_EQ(r.exit_code, 0) << binary << ": " << r.err;
  ASSERT_NE(r.out.find("(NEEDED)"), std::string::npos) << binary << ":\n" << r.out;
  for (size_t i = 0; i < count; ++i) {
    const char* lib = kModuleOnlyLibraries[i];
    EXPECT_EQ(r.out.find(std::string("[") + lib), std::string::npos) << binary << " needs " << lib << ":\n" << r.out;
  }
}

TEST(ModuleLoader, BinariesDoNotLinkWhatTheModulesHold) {
  std::vector<std::string> binaries = {MLC_CLI_PATH, std::string(MLC_BINARY_DIR) + "/libmlc_manifest.so.1"};
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(MLC_BINARY_DIR) + "/python/mlc_manifest", ec)) {
    if (entry.path().extension() == ".so" && entry.path().filename().string().starts_with("_core")) {
      binaries.push_back(entry.path().string());  // the Python module (not in sanitizer builds)
    }
  }
  for (const std::string& binary : binaries) ExpectNotNeeded(binary, std::size(kModuleOnlyLibraries));
  ExpectNotNeeded(std::filesystem::read_symlink("/proc/self/exe").string(), kNotInTests);
}

// A 0.25 s stereo 44.1 kHz tone as 16-bit WAV (read without libsndfile).
std::string ToneWav(const TempDir& dir) {
  test::WavLayout l;
  l.channels = 2;
  l.sample_rate_hz = 44100;
  return dir.Write("in.wav", test::EncodeWav(l, test::Tones({{1000, {0.5, 0.5}}}, 2, 44100, 11025)));
}

// A 0.1 s mono 16 kHz tone as float WAV (read by libsndfile, no resampling to 16 kHz).
std::string FloatWav(const TempDir& dir) {
  test::WavLayout l;
  l.format = test::WavSample::kF32;
  return dir.Write("f32.wav", test::EncodeWav(l, test::Tones({{1000, {0.5}}}, 1, 16000, 1600)));
}

// The shared objects the dynamic linker loaded for a run of the CLI (LD_DEBUG=files).
test::CliResult RunTracingLibraries(const std::vector<std::string>& args, const std::string& env = "") {
  std::vector<std::string> argv = {"env", "LD_DEBUG=files"};
  if (!env.empty()) argv.push_back(env);
  argv.push_back(MLC_CLI_PATH);
  argv.insert(argv.end(), args.begin(), args.end());
  return test::RunProgram(argv);
}

TEST(ModuleLoader, CommandsLoadOnlyTheLibrariesTheyUse) {
  auto version = RunTracingLibraries({"version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  for (const char* lib : {"libsndfile", "libsoxr", "libcpp-httplib", "libssl", "libbrotli", "libgomp",
                          "libcrypto", "libsentencepiece", "libprotobuf", "libmlc_manifest_audio",
                          "libmlc_manifest_resampler", "libmlc_manifest_http", "libmlc_manifest_crypto",
                          "libmlc_manifest_sentencepiece"}) {
    EXPECT_EQ(version.err.find(lib), std::string::npos) << lib << " loaded by `version`";
  }
  TempDir dir;
  const std::string wav = ToneWav(dir);
  // 16-bit WAV is read without libsndfile; a rate change opens the resampler module alone.
  auto audio = RunTracingLibraries({"audio", wav, "-o", dir.File("a.npy"), "--rate", "16000"});
  ASSERT_EQ(audio.exit_code, 0) << audio.err;
  EXPECT_NE(audio.err.find("libmlc_manifest_resampler.so"), std::string::npos);
  EXPECT_NE(audio.err.find("libsoxr"), std::string::npos);
  for (const char* lib : {"libsndfile", "libmlc_manifest_audio", "libcpp-httplib", "libsentencepiece"}) {
    EXPECT_EQ(audio.err.find(lib), std::string::npos) << lib << " loaded by `audio` on 16-bit WAV";
  }
  // Other sample formats go through libsndfile: float WAV at the processor's rate loads no
  // resampler.
  auto coded = RunTracingLibraries({"audio", FloatWav(dir), "-o", dir.File("f.npy"), "--rate", "16000"});
  ASSERT_EQ(coded.exit_code, 0) << coded.err;
  EXPECT_NE(coded.err.find("libmlc_manifest_audio.so"), std::string::npos);
  EXPECT_NE(coded.err.find("libsndfile"), std::string::npos);
  EXPECT_EQ(coded.err.find("libsoxr"), std::string::npos) << "soxr loaded without a rate change";

  // An id hashes (the crypto module); a tokenizer.model needs SentencePiece (even to refuse it).
  const std::string package = std::string(MLC_SOURCE_DIR) + "/examples/gemma-4-E2B-it-q4f16_1";
  auto id = RunTracingLibraries({"id", "tasks", package});
  ASSERT_EQ(id.exit_code, 0) << id.out << id.err;
  EXPECT_NE(id.err.find("libmlc_manifest_crypto.so"), std::string::npos);
  EXPECT_NE(id.err.find("libcrypto"), std::string::npos);
  EXPECT_EQ(id.err.find("libsentencepiece"), std::string::npos) << "sentencepiece loaded by `id`";
  const std::string model = dir.Write("tokenizer.model", "not a model");
  auto sp = RunTracingLibraries({"tokenize", "--tokenizer", model, "--text", "hi"});
  EXPECT_EQ(sp.exit_code, 1) << sp.out << sp.err;
  EXPECT_NE(sp.err.find("libmlc_manifest_sentencepiece.so"), std::string::npos);
  EXPECT_NE(sp.err.find("libsentencepiece"), std::string::npos);
  EXPECT_EQ(sp.err.find("libcrypto"), std::string::npos) << "libcrypto loaded by `tokenize`";
}

// Each module missing: the command that needs it fails with an I/O error (exit 3) naming the
// file tried and the module, and leaves no output behind.
TEST(ModuleLoader, AMissingModuleIsAnIoError) {
  TempDir dir;
  const std::string package = std::string(MLC_SOURCE_DIR) + "/examples/gemma-4-E2B-it-q4f16_1";
  const std::string model = dir.Write("tokenizer.model", "not a model");
  struct Case {
    std::vector<std::string> args;
    const char* env;   // the variable naming the module's file
    const char* file;  // the module's file name
    const char* what;  // how the error names the module
  };
  const Case cases[] = {
      {{"audio", FloatWav(dir), "-o", dir.File("b.npy"), "--rate", "16000"}, "MLC_MANIFEST_AUDIO_MODULE",
       "libmlc_manifest_audio.so", "the audio module (libsndfile)"},
      {{"audio", ToneWav(dir), "-o", dir.File("b.npy"), "--rate", "16000"}, "MLC_MANIFEST_RESAMPLER_MODULE",
       "libmlc_manifest_resampler.so", "the resampler module (soxr)"},
      {{"id", "tasks", package}, "MLC_MANIFEST_CRYPTO_MODULE", "libmlc_manifest_crypto.so",
       "the crypto module (libcrypto)"},
      {{"tokenize", "--tokenizer", model, "--text", "hi"}, "MLC_MANIFEST_SENTENCEPIECE_MODULE",
       "libmlc_manifest_sentencepiece.so", "the SentencePiece module (libsentencepiece)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    std::vector<std::string> args = c.args;
    args.push_back("--json");
    const std::string tried = std::string("/nonexistent/") + c.file;
    auto missing = RunTracingLibraries(args, std::string(c.env) + "=" + tried);
    EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
    EXPECT_NE(missing.out.find(tried), std::string::npos) << missing.out;
    EXPECT_NE(missing.out.find(std::string(c.what) + " cannot be loaded"), std::string::npos) << missing.out;
    EXPECT_FALSE(FileExists(dir.File("b.npy")));
  }
}

}  // namespace
}  // namespace mlc
