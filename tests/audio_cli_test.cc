// `mlc-manifest audio`: output formats (.npy, .f32), processor from a model package or from
// flags, exit codes, no-clobber, --json, and bounded memory on a 2 GB recording.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <filesystem>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/npy.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

extern char** environ;

namespace mlc {
namespace {

using test::RunCli;
using test::RunCliMeasured;
using test::TempDir;
using test::WavLayout;
using test::WavSample;

// A 0.5 s stereo 44.1 kHz 1 kHz tone.
std::string ToneWav(const TempDir& dir, const std::string& name) {
  WavLayout l;
  l.channels = 2;
  l.sample_rate_hz = 44100;
  return dir.Write(name, test::EncodeWav(l, test::Tones({{1000, {0.5, 0.5}}}, 2, 44100, 22050)));
}

std::vector<float> LibraryDecode(const std::string& path, int64_t rate, int64_t max = 480000) {
  AudioDecode p;
  p.sample_rate_hz = rate;
  p.max_samples = max;
  auto r = DecodeAudioFile(path, p);
  EXPECT_TRUE(r.ok()) << FormatErrors(r.errors());
  return r.ok() ? r->samples : std::vector<float>{};
}

std::vector<float> Floats(std::string_view bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

Json ParseOut(const test::CliResult& r) {
  auto j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << r.out;
  return j.ok() ? *j : Json();
}

TEST(AudioCli, WritesNpyIdenticalToTheLibrary) {
  TempDir dir;
  std::string in = ToneWav(dir, "tone.wav"), out = dir.File("pcm.npy");
  auto r = RunCli({"audio", in, "-o", out, "--rate", "16000", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  Json j = ParseOut(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["format"], "WAV");
  EXPECT_EQ(j["sample_format"], "pcm_s16");
  EXPECT_EQ(j["sample_rate_hz"], 44100);
  EXPECT_EQ(j["channels"], 2);
  EXPECT_EQ(j["frames"], 22050);
  EXPECT_DOUBLE_EQ(j["duration_s"].get<double>(), 0.5);
  EXPECT_EQ(j["output"]["samples"], 8000);
  EXPECT_EQ(j["output"]["sample_rate_hz"], 16000);
  auto npy = DecodeNpy(test::ReadText(out));
  ASSERT_TRUE(npy.ok());
  EXPECT_EQ(npy->descr, "<f4");
  EXPECT_EQ(npy->shape, (std::vector<int64_t>{8000}));
  EXPECT_EQ(Floats(npy->data), LibraryDecode(in, 16000));
}

TEST(AudioCli, WritesRawFloat32AndHumanSummary) {
  TempDir dir;
  std::string in = ToneWav(dir, "tone.wav"), out = dir.File("pcm.f32");
  auto r = RunCli({"audio", in, "-o", out, "--rate", "22050", "--quality", "very-high"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("44100 Hz, 2 channels"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("11025 samples"), std::string::npos) << r.out;
  std::string bytes = test::ReadText(out);
  ASSERT_EQ(bytes.size(), 11025u * 4);
  AudioDecode p;
  p.sample_rate_hz = 22050;
  AudioOptions vhq;
  vhq.quality = ResampleQuality::kVeryHigh;
  auto lib = DecodeAudioFile(in, p, vhq);
  ASSERT_TRUE(lib.ok());
  EXPECT_EQ(Floats(bytes), lib->samples);
}

TEST(AudioCli, NeverOverwritesWithoutForce) {
  TempDir dir;
  std::string in = ToneWav(dir, "tone.wav");
  std::string out = dir.Write("pcm.npy", "keep me");
  auto r = RunCli({"audio", in, "-o", out, "--rate", "16000", "--json"});
  EXPECT_EQ(r.exit_code, 1);  // as README says: would overwrite is a problem found (exit 1)
  EXPECT_EQ(ParseOut(r)["ok"], false);
  EXPECT_EQ(test::ReadText(out), "keep me");
  // A sample rate that overflows is an error, never INT64_MAX.
  EXPECT_EQ(RunCli({"audio", in, "-o", dir.File("x.npy"), "--rate", "99999999999999999999"}).exit_code, 2);
  r = RunCli({"audio", in, "-o", out, "--rate", "16000", "--force"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(DecodeNpy(test::ReadText(out)).ok());
}

TEST(AudioCli, UsageErrors) {
  TempDir dir;
  std::string in = ToneWav(dir, "tone.wav");
  const std::vector<std::vector<std::string>> cases = {
      {"audio", in, "-o", dir.File("x.wav"), "--rate", "16000"},        // bad extension
      {"audio", in, "-o", dir.File("x.npy")},                           // no processor
      {"audio", in, "-o", dir.File("x.npy"), "--rate", "16000", "--model", dir.path()},
      {"audio", in, "-o", dir.File("x.npy"), "--rate", "0"},
      {"audio", in, "-o", dir.File("x.npy"), "--rate", "16000", "--min", "10", "--max", "5"},
      {"audio", in, "-o", dir.File("x.npy"), "--rate", "16000", "--quality", "best"},
      {"audio", in, "-o", dir.File("x.npy"), "--rate", "16000", "--task", "t"},
      {"audio", in, "-o", dir.File("x.npy"), "--min", "3"},
  };
  for (const auto& args : cases) {
    auto r = RunCli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << ": " << r.err;
  }
}

TEST(AudioCli, ExitCodesForBadInputs) {
  TempDir dir;
  auto missing = RunCli({"audio", dir.File("none.wav"), "-o", dir.File("a.npy"), "--rate", "16000"});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  std::string text = dir.Write("text.wav", "hello, not audio\n");
  auto not_audio = RunCli({"audio", text, "-o", dir.File("b.npy"), "--rate", "16000", "--json"});
  EXPECT_EQ(not_audio.exit_code, 1);
  Json j = ParseOut(not_audio);
  EXPECT_EQ(j["ok"], false);
  EXPECT_NE(j["errors"][0]["message"].get<std::string>().find("not a recognized audio file"),
            std::string::npos);
  // Issue 12.5: an M4A (an MP4 container) names the formats taken and the ffmpeg conversion.
  std::string m4a = dir.Write("voice.m4a", std::string("\0\0\0\x20" "ftypM4A \0\0\0\0M4A isom", 24) +
                                               std::string(200, '\x11'));
  auto mp4 = RunCli({"audio", m4a, "-o", dir.File("m.npy"), "--rate", "16000", "--json"});
  EXPECT_EQ(mp4.exit_code, 1) << mp4.out;
  const std::string msg = ParseOut(mp4)["errors"][0]["message"].get<std::string>();
  EXPECT_NE(msg.find("(an MP4/M4A (AAC) container)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WAV, FLAC, Ogg (Vorbis, Opus) or MP3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("`ffmpeg -i " + m4a + " -ar 16000 out.wav`"), std::string::npos) << msg;
  std::string in = ToneWav(dir, "tone.wav");  // 8000 samples at 16 kHz
  auto too_long = RunCli({"audio", in, "-o", dir.File("c.npy"), "--rate", "16000", "--max", "7999"});
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("too long"), std::string::npos) << too_long.err;
  auto too_short = RunCli({"audio", in, "-o", dir.File("d.npy"), "--rate", "16000", "--min", "8001"});
  EXPECT_EQ(too_short.exit_code, 1);
  auto exact = RunCli({"audio", in, "-o", dir.File("e.npy"), "--rate", "16000", "--min", "8000",
                       "--max", "8000"});
  EXPECT_EQ(exact.exit_code, 0) << exact.err;
  EXPECT_FALSE(std::filesystem::exists(dir.File("c.npy")));
}

// A package with a chat task taking text and audio at 24 kHz, at most 20000 samples.
std::string WriteAudioPackage(const TempDir& dir) {
  AudioDecode audio;
  audio.sample_rate_hz = 24000;
  audio.min_samples = 100;
  audio.max_samples = 20000;
  TaskInput audio_input;
  audio_input.processor = audio;
  audio_input.adapter = "audio_encoder";
  audio_input.prompt = PromptInsertion{{1, 2}, 7, {3}};
  TaskInput text_input;
  text_input.processor = std::string("tokenizer");
  Task task;
  task.executor = "llm";
  task.inputs = {{"audio", audio_input}, {"text", text_input}};
  task.output = "text";
  ModelPackage pkg;
  pkg.tasks = {{"chat.completions", task}, {"transcribe", task}};
  pkg.interface_id = *ComputeInterfaceId(pkg.tasks);
  pkg.parameter_schema_id = "sha256:" + std::string(64, '0');
  dir.Write("model/" + std::string(kManifestFileName), WriteModelPackage(pkg));
  return dir.File("model");
}

TEST(AudioCli, ProcessorFromModelPackage) {
  TempDir dir;
  std::string model = WriteAudioPackage(dir);
  std::string in = ToneWav(dir, "tone.wav"), out = dir.File("pcm.npy");
  auto r = RunCli({"audio", in, "-o", out, "--model", model, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  Json j = ParseOut(r);
  EXPECT_EQ(j["processor_from"], "model");
  EXPECT_EQ(j["output"]["sample_rate_hz"], 24000);
  EXPECT_EQ(j["output"]["samples"], 12000);
  EXPECT_EQ(j["output"]["max_samples"], 20000);
  auto npy = DecodeNpy(test::ReadText(out));
  ASSERT_TRUE(npy.ok());
  EXPECT_EQ(Floats(npy->data), LibraryDecode(in, 24000, 20000));
  auto named = RunCli({"audio", in, "-o", dir.File("p2.npy"), "--model", model, "--task",
                       "transcribe", "--input", "audio"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  auto no_task = RunCli({"audio", in, "-o", dir.File("p3.npy"), "--model", model, "--task", "x"});
  EXPECT_EQ(no_task.exit_code, 2);
  auto text_input = RunCli({"audio", in, "-o", dir.File("p4.npy"), "--model", model, "--input",
                            "text"});
  EXPECT_EQ(text_input.exit_code, 2);
  auto no_pkg = RunCli({"audio", in, "-o", dir.File("p5.npy"), "--model", dir.File("nowhere")});
  EXPECT_EQ(no_pkg.exit_code, 3);
}

// Runs the CLI and returns its exit code and peak resident memory in KiB.
TEST(ArrayFileWriter, NpyHeaderIsFinishedOnCommit) {
  TempDir dir;
  const std::vector<float> x{0.5f, -1.0f, 0.25f, 3.0f, 7.5f};
  const std::string_view bytes(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  // Reserved for up to 10^15 elements, five written in two pieces: the same bytes as EncodeNpy.
  auto w = ArrayFileWriter::Create(dir.File("a.npy"), "<f4", 1'000'000'000'000'000, true, false);
  ASSERT_TRUE(w.ok()) << FormatErrors(w.errors());
  ASSERT_TRUE((*w)->Append(bytes.substr(0, 8)).ok());
  ASSERT_TRUE((*w)->Append(bytes.substr(8)).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(*ReadFile(dir.File("a.npy")), EncodeNpy({"<f4", {5}, std::string(bytes)}));
  // A header reserved longer than the final one needs pads out to it and still parses.
  auto wide = ArrayFileWriter::Create(dir.File("w.npy"), "<f4", INT64_MAX, true, false);
  ASSERT_TRUE(wide.ok());
  ASSERT_TRUE((*wide)->Append(bytes).ok());
  ASSERT_TRUE((*wide)->Commit().ok());
  auto back = DecodeNpy(*ReadFile(dir.File("w.npy")));
  ASSERT_TRUE(back.ok()) << FormatErrors(back.errors());
  EXPECT_EQ(back->shape, std::vector<int64_t>{5});
  EXPECT_EQ(back->data, std::string(bytes));
  // Raw: the bare bytes.
  auto raw = ArrayFileWriter::Create(dir.File("a.f32"), "<f4", 5, false, false);
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE((*raw)->Append(bytes).ok());
  ASSERT_TRUE((*raw)->Commit().ok());
  EXPECT_EQ(*ReadFile(dir.File("a.f32")), std::string(bytes));
}

TEST(AudioCli, AFailureLateInTheRecordingLeavesNoFile) {
  // The samples stream into the output as they are made; a NaN near the end fails the decode,
  // and neither the output nor a temporary file is left behind.
  TempDir dir;
  WavLayout l;
  l.format = WavSample::kF32;
  l.sample_rate_hz = 44100;
  std::vector<double> x(200000, 0.25);
  x[199990] = std::numeric_limits<double>::quiet_NaN();
  const std::string in = dir.Write("nan.wav", test::EncodeWav(l, x));
  for (const char* name : {"out.npy", "out.f32"}) {
    auto r = RunCli({"audio", in, "-o", dir.File(name), "--rate", "16000", "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_EQ(ParseOut(r)["errors"][0]["path"], "frame 199990") << r.out;
  }
  // Over an existing file (with --force) the old content stays.
  const std::string old = dir.Write("old.npy", "old");
  EXPECT_EQ(RunCli({"audio", in, "-o", old, "--rate", "16000", "--force"}).exit_code, 1);
  EXPECT_EQ(*ReadFile(old), "old");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"nan.wav", "old.npy"}));
}

TEST(AudioCli, StreamsATwoGigabyteRecordingInBoundedMemory) {
  // 64 channels of float32 at 384 kHz, 8.4 M frames: 2.15 GB of (sparse) samples, 21.9 s.
  TempDir dir;
  WavLayout l;
  l.format = WavSample::kF32;
  l.channels = 64;
  l.sample_rate_hz = 384000;
  l.extensible = true;
  const int64_t frames = 8'400'000, bytes = frames * 64 * 4;
  std::string header = test::WavFile(l, "", bytes);
  std::string in = dir.Write("big.wav", header);
  std::filesystem::resize_file(in, header.size() + static_cast<uintmax_t>(bytes));
  std::string out = dir.File("big.f32");
  auto [code, max_rss_kib] = RunCliMeasured({"audio", in, "-o", out, "--rate", "16000", "--max",
                                             "400000"});
  ASSERT_EQ(code, 0);
  EXPECT_EQ(std::filesystem::file_size(out), 350000u * 4);
  // Holding the source would take > 2 GB; the output is 1.4 MB.
  EXPECT_LT(max_rss_kib, 256 * 1024) << "peak RSS " << max_rss_kib << " KiB";
}

}  // namespace
}  // namespace mlc
