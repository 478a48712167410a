// Recordings longer than the processor's max_samples: the windows' cuts fall in the pauses near
// each window's end, cover every sample once and respect max_samples and min_samples; a turn with
// such a recording becomes one audio piece per window, the adapter runs once per window and the
// reply comes; a recording the context cannot hold is refused naming what fits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/mlc_manifest.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "support/batch_util.h"
#include "support/serve_process.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

constexpr int64_t kRate = 16000;

std::vector<float> Recording(double seconds, const std::vector<std::pair<double, double>>& gaps) {
  return test::NoiseWithPauses(seconds, gaps, kRate);
}

AudioDecode Processor(int64_t max_samples, int64_t min_samples = 1600) {
  AudioDecode p;
  p.sample_rate_hz = kRate;
  p.min_samples = min_samples;
  p.max_samples = max_samples;
  return p;
}

TEST(AudioWindows, CutsFallInThePausesAndCoverEverySampleOnce) {
  // 2 s windows: each window's last half second is searched; a pause sits in each.
  const std::vector<std::pair<double, double>> gaps = {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}};
  const std::vector<float> pcm = Recording(6.5, gaps);
  const std::vector<int64_t> ends = AudioWindowEnds(pcm, Processor(2 * kRate));
  ASSERT_EQ(ends.size(), 4u);
  EXPECT_EQ(ends.back(), static_cast<int64_t>(pcm.size()));
  int64_t start = 0;
  for (size_t w = 0; w < ends.size(); ++w) {
    EXPECT_GT(ends[w], start);
    EXPECT_LE(ends[w] - start, 2 * kRate) << "window " << w;
    if (w + 1 < ends.size()) {
      const double cut = static_cast<double>(ends[w]) / kRate;
      EXPECT_GE(cut, gaps[w].first) << "cut " << w;
      EXPECT_LE(cut, gaps[w].second) << "cut " << w;
      // The 20 ms around the cut are silent: no sound is cut.
      for (int64_t i = ends[w] - kRate / 100; i < ends[w] + kRate / 100; ++i) EXPECT_EQ(pcm[static_cast<size_t>(i)], 0.0f);
    }
    start = ends[w];
  }
}

TEST(AudioWindows, WithoutPausesEachWindowIsLongAndTheLastKeepsMinSamples) {
  const std::vector<float> pcm = Recording(9.3, {});
  const AudioDecode p = Processor(2 * kRate, kRate / 2);
  const std::vector<int64_t> ends = AudioWindowEnds(pcm, p);
  int64_t start = 0;
  for (int64_t end : ends) {
    EXPECT_LE(end - start, p.max_samples);
    EXPECT_GE(end - start, p.min_samples);
    if (end != ends.back()) {
      EXPECT_GE(end - start, p.max_samples * 3 / 4);  // cut within the last quarter
    }
    start = end;
  }
  EXPECT_EQ(start, static_cast<int64_t>(pcm.size()));
  // Just over one window: the cut leaves min_samples after it.
  const std::vector<float> over(static_cast<size_t>(p.max_samples + 100), 0.1f);
  const std::vector<int64_t> two = AudioWindowEnds(over, p);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_GE(two[1] - two[0], p.min_samples);
  // One that fits is one window.
  EXPECT_EQ(AudioWindowEnds(std::vector<float>(100, 0.0f), p), std::vector<int64_t>{100});
}

// Streamed in blocks of any size, the windower hands on exactly AudioWindowEnds' windows, each
// while holding about a window of samples.
TEST(AudioWindows, AStreamIsCutWhereTheWholeRecordingIs) {
  const AudioDecode p = Processor(2 * kRate, 1600);
  for (double seconds : {1.0, 2.0, 2.05, 2.1, 6.5, 19.37}) {
    const std::vector<float> pcm = Recording(seconds, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}, {9.1, 9.3}});
    const std::vector<int64_t> want = AudioWindowEnds(pcm, p);
    for (size_t block : {size_t{1} << 20, size_t{4096}, size_t{777}, size_t{1}}) {
      if (block == 1 && seconds > 3) continue;  // sample by sample: a short recording suffices
      std::vector<int64_t> got;
      size_t samples = 0;
      AudioWindower windower(p, [&](std::span<const float> window, int64_t start) -> Status {
        EXPECT_EQ(start, got.empty() ? 0 : got.back());
        EXPECT_EQ(0, std::memcmp(window.data(), pcm.data() + start, window.size() * sizeof(float)));
        samples += window.size();
        got.push_back(start + static_cast<int64_t>(window.size()));
        return Status::Ok();
      });
      for (size_t i = 0; i < pcm.size(); i += block) {
        ASSERT_TRUE(windower.Write(std::span<const float>(pcm).subspan(i, std::min(block, pcm.size() - i))).ok());
      }
      ASSERT_TRUE(windower.Finish().ok());
      EXPECT_EQ(got, want) << seconds << " s in blocks of " << block;
      EXPECT_EQ(samples, pcm.size());
    }
  }
}

// A reference package whose audio processor takes 2 s a window.
struct LongAudioModel : test::LoadedPackage {
  explicit LongAudioModel(int64_t context = 2048) {
    ReferenceModelOptions o;
    o.seed = 4;
    o.audio = true;
    o.max_audio_samples = 2 * kRate;
    o.context_window_size = context;
    auto w = WriteReferenceModel(dir.path(), o);
    EXPECT_TRUE(w.ok()) << (w.ok() ? "" : FormatErrors(w.errors()));
    test::LoadInto(*this, OpenReferenceLibrary(dir.path()));
  }
  std::string Wav(const std::vector<float>& pcm) {
    std::vector<double> values(pcm.begin(), pcm.end());
    const std::string path = dir.File("long.wav");
    EXPECT_TRUE(WriteFileAtomic(path, test::EncodeWav(test::WavLayout{}, values), true).ok());
    return path;
  }
};

RequestTurn AudioTurn(const std::string& wav) {
  RequestSegment text;
  text.kind = SegmentKind::kTokens;
  text.token_ids = {1, 5, 6};
  text.path = "/0";
  RequestSegment audio;
  audio.kind = SegmentKind::kAudio;
  audio.file = wav;
  audio.path = "/1";
  return {text, audio};
}

TEST(LongAudio, EachWindowIsAnAudioPieceAndReachesTheAdapter) {
  LongAudioModel m;
  ASSERT_TRUE(m.library);
  const std::vector<float> pcm = Recording(6.5, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}});
  const RequestTurn turn = AudioTurn(m.Wav(pcm));
  auto input = PrepareTurn(m.loaded.bound.contract, turn, m.loaded.limits, 0);
  ASSERT_TRUE(input.ok()) << FormatErrors(input.errors());
  ASSERT_EQ(input->pieces.size(), 5u);  // the text, then four windows
  int64_t samples = 0;
  for (size_t i = 1; i < input->pieces.size(); ++i) {
    const auto* media = std::get_if<MediaPiece>(&input->pieces[i].value);
    ASSERT_NE(media, nullptr);
    EXPECT_EQ(media->kind, MediaKind::kAudio);
    EXPECT_LE(input->media[i].Elements(), 2 * kRate);
    samples += input->media[i].Elements();
  }
  EXPECT_EQ(samples, static_cast<int64_t>(pcm.size()));

  Session s = m.loaded.NewSession();
  GenerationOptions o;
  o.max_tokens = 3;
  auto r = s.Generate(*input, o);
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(s.adapter_calls(), 4);
  EXPECT_FALSE(r->tokens.empty());
  // Without limits (the two-argument PrepareTurn), a recording over max_samples is refused.
  EXPECT_FALSE(PrepareTurn(m.loaded.bound.contract, turn).ok());
}

// Beyond what even its least positions could fit: refused before the adapter, naming the windows
// that fit. Within that but over the context once its rows are known: refused naming the seconds.
TEST(LongAudio, ARecordingTheContextCannotHoldSaysWhatFits) {
  LongAudioModel small(/*context=*/16);
  ASSERT_TRUE(small.library);
  auto input = PrepareTurn(small.loaded.bound.contract, AudioTurn(small.Wav(Recording(60.0, {}))),
                           small.loaded.limits, 0);
  ASSERT_FALSE(input.ok());
  std::string message = FormatErrors(input.errors());
  EXPECT_NE(message.find("recording too long"), std::string::npos) << message;
  EXPECT_NE(message.find("fit the context window"), std::string::npos) << message;

  LongAudioModel m(/*context=*/64);
  ASSERT_TRUE(m.library);
  auto twelve = PrepareTurn(m.loaded.bound.contract, AudioTurn(m.Wav(Recording(12.0, {}))), m.loaded.limits, 0);
  ASSERT_TRUE(twelve.ok()) << FormatErrors(twelve.errors());
  Session s = m.loaded.NewSession();
  auto r = s.Generate(*twelve, GenerationOptions{});
  ASSERT_FALSE(r.ok());
  message = FormatErrors(r.errors());
  EXPECT_NE(message.find("s of audio take"), std::string::npos) << message;
  EXPECT_NE(message.find("s fit"), std::string::npos) << message;
}

// `run --messages` and `serve` take the long recording in a chat message: four windows' rows in
// the prompt (prompt_tokens: one turn of four audio inputs), a reply.
TEST(LongAudio, RunAndServeTakeALongRecordingInAChat) {
  LongAudioModel m;
  ASSERT_TRUE(m.library);
  const std::vector<float> pcm = Recording(6.5, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}});
  const std::string wav = m.Wav(pcm);
  auto bytes = ReadFile(wav);
  ASSERT_TRUE(bytes.ok());
  OrderedJson message = {{"role", "user"},
                         {"content", OrderedJson::array({{{"type", "text"}, {"text", "Transcribe this"}},
                                                          {{"type", "input_audio"},
                                                           {"input_audio", {{"data", test::Base64(*bytes)}, {"format", "wav"}}}}})}};
  const std::string messages = m.dir.Write("m.json", OrderedJson{{"messages", OrderedJson::array({message})}}.dump());
  auto r = test::RunCli({"run", m.dir.path(), "--messages", messages, "--max-tokens", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto run = ParseJson(r.out);
  ASSERT_TRUE(run.ok()) << r.out;

  test::ServerProcess server(m.dir.path());
  ASSERT_GT(server.port(), 0) << server.log();
  OrderedJson body = {{"messages", OrderedJson::array({message})}, {"max_tokens", 3}, {"temperature", 0}};
  test::HttpReply reply = test::Http(server.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(reply.status, 200) << reply.body;
  // The prompt holds every window's rows: more than one window's worth (2 s) could give.
  const Json usage = test::BodyJson(reply)["usage"];
  const int64_t one_window_rows = 2 * kRate / 640;
  EXPECT_GT(usage["prompt_tokens"].get<int64_t>(), 3 * one_window_rows) << reply.body;
  EXPECT_EQ(server.Stop(), 0);
}

// The C API takes the long recording too: the KV cache holds every window's rows.
TEST(LongAudio, TheCApiTakesALongRecording) {
  LongAudioModel m;
  ASSERT_TRUE(m.library);
  m.Wav(Recording(6.5, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}}));
  c::Session s;
  mlc_session_params params = mlc_session_params_default();
  params.max_tokens = 2;
  ASSERT_EQ(mlc_session_open(s, m.dir.path().c_str(), &params), MLC_OK);
  const std::string request = R"([{"tokens": [1, 5, 6]}, {"audio": "long.wav"}])";
  ASSERT_EQ(mlc_session_generate(s, request.data(), request.size(), m.dir.path().c_str(), nullptr, nullptr), MLC_OK);
  const int64_t one_window_rows = 2 * kRate / 640;
  EXPECT_GT(mlc_session_kv_length(s), 3 * one_window_rows);
}

// `plan` shows where the recording is cut: four windows, each from the last one's end, covering
// the recording, each ending in a pause (or at the end).
TEST(LongAudio, PlanShowsTheWindows) {
  LongAudioModel m;
  ASSERT_TRUE(m.library);
  const std::vector<float> pcm = Recording(6.5, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}});
  m.Wav(pcm);
  const std::string request = m.dir.Write("request.json", R"([{"tokens": [1, 5, 6]}, {"audio": "long.wav"}])");
  const std::string program = m.dir.File(kReferenceProgramFile);
  auto r = test::RunCli({"plan", m.dir.path(), "--program", program, "--request", request, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto out = ParseJson(r.out);
  ASSERT_TRUE(out.ok()) << r.out;
  const Json& inputs = (*out)["audio_windows"];
  ASSERT_EQ(inputs.size(), 1u) << r.out;
  EXPECT_EQ(inputs[0]["path"], "/1");
  const Json& windows = inputs[0]["windows"];
  ASSERT_EQ(windows.size(), 4u) << r.out;
  double start = 0.0;
  int64_t samples = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    EXPECT_DOUBLE_EQ(windows[i]["start_s"].get<double>(), start);
    start = windows[i]["end_s"].get<double>();
    samples += windows[i]["samples"].get<int64_t>();
    const double pause_start = 1.75 + 1.8 * static_cast<double>(i);
    if (i + 1 < windows.size()) {
      EXPECT_TRUE(start >= pause_start && start <= pause_start + 0.1) << start;
    }
  }
  EXPECT_DOUBLE_EQ(start, 6.5);
  EXPECT_EQ(samples, static_cast<int64_t>(pcm.size()));

  auto human = test::RunCli({"plan", m.dir.path(), "--program", program, "--request", request});
  ASSERT_EQ(human.exit_code, 0) << human.out << human.err;
  EXPECT_NE(human.out.find("audio /1: 4 windows"), std::string::npos) << human.out;
}

}  // namespace
}  // namespace mlc
