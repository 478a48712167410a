// Transcription and translation of recordings: the multipart form parser (OpenAI's client's form,
// quoted boundaries, preambles; truncated, oversized and malformed forms refused at their byte),
// the audio routes' fields, the transcript's SubRip and WebVTT forms, the context a window
// carries; and /v1/audio/transcriptions and /translations through the official openai client on a
// recording of four windows (every format, streamed and not), with plain-HTTP refusals; and
// `transcribe` on the same recording; 95 s and ten minutes of espeak-ng speech both ways.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <regex>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/transcript.h"
#include "serve/multipart.h"
#include "serve/transcription_request.h"
#include "support/sanitizer.h"
#include "support/serve_process.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using serve::FormPart;
using serve::ParseMultipart;
using serve::ParseTranscriptionRequest;

std::string Part(const std::string& boundary, const std::string& disposition, const std::string& data,
                 const std::string& extra = "") {
  return "--" + boundary + "\r\nContent-Disposition: form-data; " + disposition + "\r\n" + extra + "\r\n" + data + "\r\n";
}

TEST(Multipart, ReadsAClientsForm) {
  const std::string b = "----formdata-undici-0123456789";
  const std::string body = Part(b, R"(name="file"; filename="a.wav")", std::string("RIFF\0\r\n--x", 11),
                                "Content-Type: audio/wav\r\n") +
                           Part(b, R"(name="model")", "tiny") + "--" + b + "--\r\n";
  auto parts = ParseMultipart("multipart/form-data; boundary=" + b, body);
  ASSERT_TRUE(parts.ok()) << FormatErrors(parts.errors());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].name, "file");
  EXPECT_EQ((*parts)[0].filename, "a.wav");
  EXPECT_EQ((*parts)[0].content_type, "audio/wav");
  EXPECT_EQ((*parts)[0].data, std::string_view("RIFF\0\r\n--x", 11));  // a CRLF and "--" inside the bytes
  EXPECT_EQ((*parts)[1].name, "model");
  EXPECT_EQ((*parts)[1].data, "tiny");
  EXPECT_FALSE((*parts)[1].filename);
  // A quoted boundary and a preamble.
  const std::string preambled = "preamble\r\n" + Part("a b", R"(name="x")", "1") + "--a b--";  // the parts view it
  auto quoted = ParseMultipart(R"(Multipart/Form-Data; charset=utf-8; boundary="a b")", preambled);
  ASSERT_TRUE(quoted.ok()) << FormatErrors(quoted.errors());
  EXPECT_EQ((*quoted)[0].data, "1");
}

TEST(Multipart, RefusesWhatIsNotAWholeForm) {
  const std::string type = "multipart/form-data; boundary=B";
  auto message = [&](const std::string& content_type, const std::string& body, serve::MultipartLimits limits = {}) {
    auto r = ParseMultipart(content_type, body, limits);
    return r.ok() ? std::string("ok") : FormatErrors(r.errors());
  };
  const std::string head = "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n";
  EXPECT_NE(message(type, head + "RIFF").find("byte 56: the body ends inside part 0 (\"file\")"), std::string::npos)
      << message(type, head + "RIFF");
  EXPECT_NE(message(type, "--B\r\nContent-Disposition: form-data; name=\"file\"").find("inside part 0's headers"),
            std::string::npos);
  EXPECT_NE(message("application/json", head).find("header Content-Type: expected multipart/form-data"),
            std::string::npos);
  EXPECT_NE(message("multipart/form-data", head).find("boundary"), std::string::npos);
  EXPECT_NE(message(type, "--B\r\nContent-Type: text/plain\r\n\r\nx\r\n--B--").find("without Content-Disposition"),
            std::string::npos);
  EXPECT_NE(message(type, "--B\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\nx\r\n--B--").find("form-data"),
            std::string::npos);
  EXPECT_NE(message(type, "no boundary here").find("byte 0: expected the boundary"), std::string::npos);
  std::string many;
  for (int i = 0; i < 5; ++i) many += Part("B", "name=\"f" + std::to_string(i) + "\"", "x");
  serve::MultipartLimits small;
  small.max_parts = 4;
  EXPECT_NE(message(type, many + "--B--", small).find("more than 4 parts"), std::string::npos);
  small.max_part_headers = 40;
  EXPECT_NE(message(type, Part("B", "name=\"" + std::string(100, 'n') + "\"", "x") + "--B--", small).find("headers over 40 bytes"),
            std::string::npos);
}

std::vector<FormPart> Fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<FormPart> parts;
  for (const auto& [name, value] : fields) {
    FormPart p;
    p.name = name;
    p.data = value;
    parts.push_back(p);
  }
  return parts;
}

TEST(TranscriptionRequest, TakesOpenAisFieldsAndNamesTheWrongOne) {
  const std::vector<std::pair<std::string, std::string>> good = {
      {"file", "RIFF"}, {"model", "m"}, {"prompt", "Earlier"}, {"language", "en"}, {"temperature", "0.4"},
      {"response_format", "verbose_json"}, {"timestamp_granularities[]", "segment"}};
  auto r = ParseTranscriptionRequest(Fields(good));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->file, "RIFF");
  EXPECT_EQ(r->model, "m");
  EXPECT_EQ(r->language, "en");
  EXPECT_DOUBLE_EQ(*r->temperature, 0.4);
  EXPECT_EQ(r->format, serve::TranscriptFormat::kVerboseJson);
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> bad = {
      {{{"model", "m"}}, "/file: expected a file part"},
      {{{"file", ""}}, "/file: expected the recording's bytes"},
      {{{"file", "x"}, {"temperature", "3"}}, "/temperature: expected a number from 0 to 2"},
      {{{"file", "x"}, {"temperature", "0.5x"}}, "/temperature"},
      {{{"file", "x"}, {"language", "english"}}, "/language"},
      {{{"file", "x"}, {"response_format", "xml"}}, "/response_format"},
      {{{"file", "x"}, {"response_format", "srt"}, {"stream", "true"}}, "/stream"},
      {{{"file", "x"}, {"stream", "yes"}}, "/stream: expected true or false"},
      {{{"file", "x"}, {"file", "y"}}, "/file: given twice"},
      {{{"file", "x"}, {"voice", "alloy"}}, "/voice: not a field"},
      {{{"file", "x"}, {"prompt", std::string(5000, 'p')}}, "/prompt: longer than 4096 bytes"},
  };
  for (const auto& [fields, want] : bad) {
    auto e = ParseTranscriptionRequest(Fields(fields));
    ASSERT_FALSE(e.ok()) << want;
    EXPECT_NE(FormatErrors(e.errors()).find(want), std::string::npos) << FormatErrors(e.errors());
  }
}

TEST(Transcript, SubRipAndWebVttCueEachSegment) {
  const std::vector<TranscriptSegment> segments = {{0.0, 28.41, "Hello there."}, {28.41, 3723.5, "Second\n\npart"}, {3723.5, 3724.0, ""}};
  EXPECT_EQ(TranscriptSrt(segments),
            "1\n00:00:00,000 --> 00:00:28,410\nHello there.\n\n"
            "2\n00:00:28,410 --> 01:02:03,500\nSecond\npart\n\n"
            "3\n01:02:03,500 --> 01:02:04,000\n...\n\n");
  EXPECT_EQ(TranscriptVtt(segments),
            "WEBVTT\n\n00:00:00.000 --> 00:00:28.410\nHello there.\n\n"
            "00:00:28.410 --> 01:02:03.500\nSecond\npart\n\n"
            "01:02:03.500 --> 01:02:04.000\n...\n\n");
  EXPECT_EQ(TranscriptText(segments), "Hello there. Second\n\npart");
}

TEST(Transcript, AWindowCarriesThePromptAndTheTextBefore) {
  const std::vector<TranscriptSegment> before = {{0, 1, "one two"}, {1, 2, ""}, {2, 3, "three"}};
  EXPECT_EQ(TranscriptionContext("Names: Ada.", before), "Names: Ada. one two three");
  EXPECT_EQ(TranscriptionContext("", before, 9), "three");  // its last bytes, cut at a space
  EXPECT_EQ(TranscriptionContext("", {}), "");
  EXPECT_NE(TranscriptionInstruction(TranscriptionTask::kTranscribe, "fr").find("in French"), std::string::npos);
  EXPECT_NE(TranscriptionInstruction(TranscriptionTask::kTranslate, "").find("into English"), std::string::npos);
}

// A reference package whose audio processor takes 2 s a window, and a 6.5 s recording with pauses
// near 1.8, 3.6 and 5.4 s: four windows.
struct TranscribedPackage {
  test::TempDir dir;
  std::string wav;
  TranscribedPackage() {
    ReferenceModelOptions o;
    o.seed = 4;
    o.audio = true;
    o.max_audio_samples = 2 * 16000;
    EXPECT_TRUE(WriteReferenceModel(dir.path(), o).ok());
    wav = Wav("recording.wav", test::NoiseWithPauses(6.5, {{1.75, 1.85}, {3.55, 3.65}, {5.35, 5.45}}));
  }
  std::string Wav(const std::string& name, const std::vector<float>& pcm) {
    const std::string path = dir.File(name);
    EXPECT_TRUE(WriteFileAtomic(path, test::EncodeWav(test::WavLayout{}, std::vector<double>(pcm.begin(), pcm.end())), true).ok());
    return path;
  }
};

// "hh:mm:ss,mmm --> hh:mm:ss,mmm" cues of a SubRip or WebVTT text, as seconds.
std::vector<std::pair<double, double>> Cues(const std::string& text) {
  static const std::regex cue(R"((\d\d):(\d\d):(\d\d)[,.](\d\d\d) --> (\d\d):(\d\d):(\d\d)[,.](\d\d\d))");
  std::vector<std::pair<double, double>> out;
  for (std::sregex_iterator it(text.begin(), text.end(), cue), end; it != end; ++it) {
    auto at = [&](int k) {
      return std::stod((*it)[k]) * 3600 + std::stod((*it)[k + 1]) * 60 + std::stod((*it)[k + 2]) + std::stod((*it)[k + 3]) / 1000;
    };
    out.emplace_back(at(1), at(5));
  }
  return out;
}

TEST(ServeTranscriptions, EveryFormatThroughTheOpenAiClient) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  TranscribedPackage pkg;
  test::TempDir text_only;
  ReferenceModelOptions ro;
  ro.seed = 3;
  ASSERT_TRUE(WriteReferenceModel(text_only.path(), ro).ok());
  test::ServerProcess server(std::vector<std::string>{},
                             {"--model", "listen=" + pkg.dir.path(), "--model", "text=" + text_only.path(),
                              "--max-audio-seconds", "10"});
  ASSERT_GT(server.port(), 0) << server.log();
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai, server.url(),
                             "transcribe", "listen", pkg.wav});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  ASSERT_TRUE(doc.ok()) << r.out;
  const std::string text = (*doc)["json"]["text"];
  EXPECT_FALSE(text.empty());
  EXPECT_GT((*doc)["json"]["usage"]["input_tokens"].get<int64_t>(), 0);
  // verbose_json: one segment a window, each from the last one's end, the last at the duration,
  // the cuts in the pauses.
  const Json& verbose = (*doc)["verbose_json"];
  EXPECT_EQ(verbose["task"], "transcribe");
  EXPECT_DOUBLE_EQ(verbose["duration"].get<double>(), 6.5);
  EXPECT_EQ(verbose["text"], text);
  const Json& segments = verbose["segments"];
  ASSERT_EQ(segments.size(), 4u) << verbose.dump();
  double at = 0;
  std::string joined;
  for (size_t i = 0; i < segments.size(); ++i) {
    EXPECT_DOUBLE_EQ(segments[i]["start"].get<double>(), at);
    at = segments[i]["end"].get<double>();
    if (i + 1 < segments.size()) {
      const double pause = 1.75 + 1.8 * static_cast<double>(i);
      EXPECT_TRUE(at >= pause && at <= pause + 0.1) << at;
    }
    const std::string t = segments[i]["text"];
    if (!t.empty()) joined += (joined.empty() ? "" : " ") + t;
  }
  EXPECT_DOUBLE_EQ(at, 6.5);
  EXPECT_EQ(joined, text);
  EXPECT_EQ((*doc)["text"], text + "\n");
  // SubRip and WebVTT: four cues at the segments' times.
  for (const char* format : {"srt", "vtt"}) {
    const std::string cues = (*doc)[format];
    const auto times = Cues(cues);
    ASSERT_EQ(times.size(), 4u) << cues;
    for (size_t i = 0; i < times.size(); ++i) {
      EXPECT_NEAR(times[i].first, segments[i]["start"].get<double>(), 0.0006) << format;
      EXPECT_NEAR(times[i].second, segments[i]["end"].get<double>(), 0.0006) << format;
    }
  }
  EXPECT_EQ(std::string((*doc)["vtt"]).rfind("WEBVTT\n\n", 0), 0u);
  EXPECT_EQ(std::string((*doc)["srt"]).rfind("1\n00:00:00,000 --> ", 0), 0u);
  // Streamed: the deltas make the done event's text, the same transcript.
  std::string streamed;
  for (const auto& d : (*doc)["deltas"]) streamed += d.get<std::string>();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ((*doc)["done"]["text"], text);
  EXPECT_EQ((*doc)["done"]["type"], "transcript.text.done");
  EXPECT_TRUE((*doc)["translation"].contains("text")) << r.out;

  // Plain HTTP refusals, each a 4xx naming what is wrong.
  const std::string form_type = "Content-Type: multipart/form-data; boundary=B\r\n";
  auto post = [&](const std::string& path, const std::string& body, const std::string& type) {
    return test::Http(server.port(), "POST", path, body, type);
  };
  auto file_form = [&](const std::string& model, const std::string& bytes) {
    return Part("B", "name=\"model\"", model) + Part("B", R"(name="file"; filename="a.wav")", bytes) + "--B--\r\n";
  };
  auto bytes = ReadFile(pkg.wav);
  ASSERT_TRUE(bytes.ok());
  test::HttpReply truncated = post("/v1/audio/transcriptions", file_form("listen", *bytes).substr(0, 300), form_type);
  EXPECT_EQ(truncated.status, 400);
  EXPECT_NE(test::ErrorMessage(truncated).find("the body ends inside part 1 (\"file\")"), std::string::npos) << truncated.body;
  test::HttpReply unknown = post("/v1/audio/transcriptions", file_form("listen", "this is not a recording"), form_type);
  EXPECT_EQ(unknown.status, 400);
  EXPECT_NE(unknown.body.find("/file"), std::string::npos) << unknown.body;
  test::HttpReply no_audio = post("/v1/audio/translations", file_form("text", *bytes), form_type);
  EXPECT_EQ(no_audio.status, 400);
  EXPECT_NE(test::ErrorMessage(no_audio).find("has no audio input"), std::string::npos) << no_audio.body;
  test::HttpReply json = post("/v1/audio/transcriptions", "{\"model\": \"listen\"}", "");
  EXPECT_EQ(json.status, 415);
  EXPECT_NE(test::ErrorMessage(json).find("must be multipart/form-data"), std::string::npos) << json.body;
  const std::string eleven_seconds = pkg.Wav("long.wav", test::NoiseWithPauses(11.0, {}));
  auto long_bytes = ReadFile(eleven_seconds);
  ASSERT_TRUE(long_bytes.ok());
  test::HttpReply too_long = post("/v1/audio/transcriptions", file_form("listen", *long_bytes), form_type);
  EXPECT_EQ(too_long.status, 400);
  EXPECT_NE(test::ErrorMessage(too_long).find("longer than this server's 10 s"), std::string::npos) << too_long.body;
  // A part declared 2 GB long: refused from its head, before any of it is read.
  const int fd = test::Connect(server.port());
  ASSERT_GE(fd, 0);
  test::SendAll(fd, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + form_type +
                        "Content-Length: 2147483648\r\n\r\n--B\r\n");
  test::HttpReply huge = test::ParseReply(test::ReadAll(fd));
  close(fd);
  EXPECT_EQ(huge.status, 413);
  EXPECT_EQ(server.Stop(), 0);

  // `transcribe` on the same code: the same windows and text as the server's.
  auto cli = test::RunCli({"transcribe", pkg.dir.path(), pkg.wav, "--format", "json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.out << cli.err;
  auto transcript = ParseJson(cli.out);
  ASSERT_TRUE(transcript.ok()) << cli.out;
  EXPECT_EQ((*transcript)["text"], text);
  ASSERT_EQ((*transcript)["segments"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*transcript)["segments"][i]["end"], segments[i]["end"]);
    EXPECT_EQ((*transcript)["segments"][i]["text"], segments[i]["text"]);
  }
  const std::string srt = pkg.dir.File("out.srt");
  ASSERT_EQ(test::RunCli({"transcribe", pkg.dir.path(), pkg.wav, "--format", "srt", "-o", srt}).exit_code, 0);
  auto written = ReadFile(srt);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, std::string((*doc)["srt"]));
  auto again = test::RunCli({"transcribe", pkg.dir.path(), pkg.wav, "-o", srt});
  EXPECT_EQ(again.exit_code, 1) << again.err;
  EXPECT_NE(again.err.find("--force"), std::string::npos) << again.err;
  ASSERT_EQ(test::RunCli({"transcribe", pkg.dir.path(), pkg.wav, "-o", srt, "--force"}).exit_code, 0);
  written = ReadFile(srt);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, text + "\n");
  auto deaf = test::RunCli({"transcribe", text_only.path(), pkg.wav});
  EXPECT_EQ(deaf.exit_code, 1);
  EXPECT_NE(deaf.err.find("no audio input"), std::string::npos) << deaf.err;
}

// ---- A 95 s recording of speech (espeak-ng) and silence, at the manifest's 30 s windows ----

constexpr int64_t kRate = 16000;

// Sentences spoken by espeak-ng one after another with a second of silence between them, to
// exactly `seconds`; empty when espeak-ng is not installed.
std::vector<float> Speech(const test::TempDir& dir, double seconds) {
  static const char* const kSentences[] = {
      "The river runs through the valley at dusk.", "Seven ships sailed north before the winter came.",
      "Please write the numbers down in order.", "A quiet voice carried across the empty hall.",
      "Bring the red lamp and the long rope.", "Every morning the baker opens at six."};
  AudioDecode processor;
  processor.sample_rate_hz = kRate;
  processor.min_samples = 1;
  processor.max_samples = 60 * kRate;
  std::vector<std::vector<float>> spoken;
  for (const char* sentence : kSentences) {
    const std::string wav = dir.File("sentence" + std::to_string(spoken.size()) + ".wav");
    auto r = test::RunProgram({"espeak-ng", "-w", wav, sentence});
    if (r.exit_code != 0) return {};
    auto decoded = DecodeAudioFile(wav, processor);
    if (!decoded) return {};
    spoken.push_back(decoded->samples);
  }
  const auto total = static_cast<size_t>(seconds * kRate);
  std::vector<float> pcm;
  for (size_t i = 0; pcm.size() < total; ++i) {
    pcm.insert(pcm.end(), spoken[i % spoken.size()].begin(), spoken[i % spoken.size()].end());
    pcm.insert(pcm.end(), kRate, 0.0f);
  }
  pcm.resize(total);
  return pcm;
}

// Whether the 20 ms around sample `at` are silent.
bool InAPause(const std::vector<float>& pcm, int64_t at) {
  for (int64_t i = std::max<int64_t>(0, at - 160); i < std::min<int64_t>(static_cast<int64_t>(pcm.size()), at + 160); ++i) {
    if (std::fabs(pcm[static_cast<size_t>(i)]) > 2e-3f) return false;
  }
  return true;
}

double AdapterRuns(int port) {
  return test::Sample(test::ScrapeMetrics(port), "mlc_manifest_adapter_runs", "mlc_manifest_adapter_runs_total");
}

// A transcript's segments are windows of at most 30 s, end to end from 0 to `seconds`, each cut
// in a pause of the recording as decoded.
void ExpectWindowsInPauses(const Json& segments, const std::vector<float>& heard, double seconds) {
  double at = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    const double start = segments[i]["start"], end = segments[i]["end"];
    EXPECT_DOUBLE_EQ(start, at);
    EXPECT_GT(end, start);
    EXPECT_LE(end - start, 30.0);
    const auto cut = static_cast<int64_t>(std::llround(end * kRate));
    if (i + 1 < segments.size()) {
      EXPECT_TRUE(InAPause(heard, cut)) << "cut at " << end << " s";
    }
    at = end;
  }
  EXPECT_DOUBLE_EQ(at, seconds);
}

// Every format of the recording through the official client (serve_client.mjs transcribe),
// streamed and not, agrees with the server's verbose_json: the same text and segments, SubRip and
// WebVTT cues ending where the segments do, the streamed deltas adding up to the text. Returns
// the text.
std::string ExpectEveryFormatAgrees(const std::string& openai, const std::string& url, const std::string& wav,
                                    const Json& verbose) {
  const Json& segments = verbose["segments"];
  auto r = test::RunProgram({"node", test::SourcePath("tests/support/serve_client.mjs"), openai, url, "transcribe",
                             "reference", wav});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  auto doc = ParseJson(r.out);
  if (!doc.ok()) {
    ADD_FAILURE() << r.out;
    return "";
  }
  const std::string text = (*doc)["json"]["text"];
  EXPECT_EQ(text, verbose["text"]);
  EXPECT_EQ((*doc)["verbose_json"]["segments"], segments);
  for (const char* format : {"srt", "vtt"}) {
    const auto cues = Cues((*doc)[format]);
    EXPECT_EQ(cues.size(), segments.size()) << format;
    for (size_t i = 0; i < cues.size() && i < segments.size(); ++i) {
      EXPECT_NEAR(cues[i].second, segments[i]["end"].get<double>(), 0.0006) << format;
      if (i > 0) {
        EXPECT_EQ(cues[i].first, cues[i - 1].second) << format;
      }
    }
  }
  std::string streamed;
  for (const auto& d : (*doc)["deltas"]) streamed += d.get<std::string>();
  EXPECT_EQ(streamed, text);
  return text;
}

// A recording's verbose_json from the server (a multipart form of the file and the format).
test::HttpReply VerboseTranscript(int port, const std::string& wav_bytes) {
  return test::Http(port, "POST", "/v1/audio/transcriptions",
                    Part("B", R"(name="response_format")", "verbose_json") +
                        Part("B", R"(name="file"; filename="speech.wav")", wav_bytes) + "--B--\r\n",
                    "Content-Type: multipart/form-data; boundary=B\r\n");
}

// 95 s of speech through the endpoint (every format, streamed and not, through the openai client),
// a chat over HTTP, `run --messages` and `transcribe`: four windows of at most 30 s cut in the
// pauses, covering the recording, the tower run once a window; a context that cannot hold the
// recording answers how many seconds fit.
TEST(LongRecording, NinetyFiveSecondsOfSpeechEverywhere) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  test::TempDir dir;
  const std::vector<float> pcm = Speech(dir, 95.0);
  if (pcm.empty()) GTEST_SKIP() << "espeak-ng is not installed";
  ReferenceModelOptions o;
  o.seed = 5;
  o.audio = true;
  o.audio_frame_size = kRate;  // a row a second: 95 rows
  ASSERT_TRUE(WriteReferenceModel(dir.File("pkg"), o).ok());
  const std::string wav = dir.File("speech95.wav");
  ASSERT_TRUE(WriteFileAtomic(wav, test::EncodeWav(test::WavLayout{}, std::vector<double>(pcm.begin(), pcm.end())), true).ok());
  // The 16-bit file is what the server decodes: its samples decide where the pauses are.
  AudioDecode processor;
  processor.sample_rate_hz = kRate;
  processor.max_samples = 100 * kRate;
  auto heard = DecodeAudioFile(wav, processor);
  ASSERT_TRUE(heard.ok()) << FormatErrors(heard.errors());

  test::ServerProcess server(dir.File("pkg"));
  ASSERT_GT(server.port(), 0) << server.log();
  // One request first: the tower runs once a window.
  auto bytes = ReadFile(wav);
  ASSERT_TRUE(bytes.ok());
  const double runs_before = AdapterRuns(server.port());
  test::HttpReply first = VerboseTranscript(server.port(), *bytes);
  ASSERT_EQ(first.status, 200) << first.body;
  const Json verbose = test::BodyJson(first);
  const Json& segments = verbose["segments"];
  ASSERT_EQ(segments.size(), 4u) << first.body;
  EXPECT_EQ(AdapterRuns(server.port()) - runs_before, 4.0);
  ExpectWindowsInPauses(segments, heard->samples, 95.0);
  // Every format through the official client, streamed and not.
  const std::string text = ExpectEveryFormatAgrees(openai, server.url(), wav, verbose);

  // A chat with the recording: the prompt holds its 95 rows.
  OrderedJson message = {{"role", "user"},
                         {"content", OrderedJson::array({{{"type", "text"}, {"text", "What is said here?"}},
                                                          {{"type", "input_audio"},
                                                           {"input_audio", {{"data", test::Base64(*bytes)}, {"format", "wav"}}}}})}};
  OrderedJson body = {{"messages", OrderedJson::array({message})}, {"max_tokens", 3}, {"temperature", 0}};
  test::HttpReply chat = test::Http(server.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_GE(test::BodyJson(chat)["usage"]["prompt_tokens"].get<int64_t>(), 95);
  EXPECT_EQ(server.Stop(), 0);
  const std::string messages = dir.Write("m.json", OrderedJson{{"messages", OrderedJson::array({message})}}.dump());
  auto run = test::RunCli({"run", dir.File("pkg"), "--messages", messages, "--max-tokens", "2", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto ran = ParseJson(run.out);
  ASSERT_TRUE(ran.ok()) << run.out;
  EXPECT_GE((*ran)["turns"][0]["prompt_length"].get<int64_t>(), 95) << run.out;

  auto cli = test::RunCli({"transcribe", dir.File("pkg"), wav, "--format", "json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  auto transcript = ParseJson(cli.out);
  ASSERT_TRUE(transcript.ok()) << cli.out;
  EXPECT_EQ((*transcript)["text"], text);
  EXPECT_EQ((*transcript)["segments"].size(), 4u);

  // A context of 64 positions cannot hold 95 rows: the answer says how many seconds would fit.
  ReferenceModelOptions small = o;
  small.context_window_size = 64;
  small.prefill_chunk_size = 32;
  ASSERT_TRUE(WriteReferenceModel(dir.File("small"), small).ok());
  test::ServerProcess narrow(dir.File("small"));
  ASSERT_GT(narrow.port(), 0) << narrow.log();
  test::HttpReply refused = test::Http(narrow.port(), "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(test::ErrorMessage(refused).find("s fit"), std::string::npos) << refused.body;
  EXPECT_EQ(narrow.Stop(), 0);
}

// Ten minutes of speech, the server's longest (--max-audio-seconds 600), through the official
// client in every format, streamed and not, and through `transcribe`: windows of at most 30 s
// cut in the pauses, end to end to 600 s, the same text, segments and token counts both ways.
// Under the sanitizers (about ten times slower) 150 s take the same paths in five windows.
TEST(LongRecording, TenMinutesThroughTheOpenAiClientAndTranscribe) {
  std::string openai = test::NpmPackage("openai@4.104.0");
  ASSERT_FALSE(openai.empty());
  test::TempDir dir;
  const double seconds = test::kSanitized ? 150.0 : 600.0;
  std::vector<float> pcm = Speech(dir, seconds);
  if (pcm.empty()) GTEST_SKIP() << "espeak-ng is not installed";
  ReferenceModelOptions o;
  o.seed = 7;
  o.audio = true;
  o.audio_frame_size = kRate;
  ASSERT_TRUE(WriteReferenceModel(dir.File("pkg"), o).ok());
  const std::string wav = dir.File("speech.wav");
  ASSERT_TRUE(WriteFileAtomic(wav, test::EncodeWav(test::WavLayout{}, std::vector<double>(pcm.begin(), pcm.end())), true).ok());
  pcm = {};
  AudioDecode processor;
  processor.sample_rate_hz = kRate;
  processor.max_samples = static_cast<int64_t>(seconds) * kRate;
  auto heard = DecodeAudioFile(wav, processor);
  ASSERT_TRUE(heard.ok()) << FormatErrors(heard.errors());
  auto bytes = ReadFile(wav);
  ASSERT_TRUE(bytes.ok());

  test::ServerProcess server(dir.File("pkg"));
  ASSERT_GT(server.port(), 0) << server.log();
  test::HttpReply reply = VerboseTranscript(server.port(), *bytes);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const Json verbose = test::BodyJson(reply);
  const Json& segments = verbose["segments"];
  EXPECT_GE(segments.size(), static_cast<size_t>(seconds / 30));
  ExpectWindowsInPauses(segments, heard->samples, seconds);
  const std::string text = ExpectEveryFormatAgrees(openai, server.url(), wav, verbose);
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(server.Stop(), 0);

  auto cli = test::RunCli({"transcribe", dir.File("pkg"), wav, "--format", "json"});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  auto transcript = ParseJson(cli.out);
  ASSERT_TRUE(transcript.ok()) << cli.out;
  EXPECT_EQ((*transcript)["text"], text);
  Json served = segments;
  for (Json& segment : served) segment.erase("temperature");  // the server's sampling, per segment
  EXPECT_EQ((*transcript)["segments"], served);
  EXPECT_EQ((*transcript)["usage"], verbose["usage"]);
  EXPECT_GT((*transcript)["timings"]["adapter_ms"].get<double>(), 0.0);
  EXPECT_EQ((*transcript)["timings"]["prefill_positions"], verbose["usage"]["input_tokens"]);
}

// `transcribe` streams the recording: ten minutes take no more memory than one (holding ten
// minutes of samples would take 38 MB more, the file 19 MB).
TEST(LongRecording, TranscribeMemoryDoesNotGrowWithTheRecording) {
  test::TempDir dir;
  ReferenceModelOptions o;
  o.seed = 6;
  o.audio = true;
  o.audio_frame_size = kRate;
  ASSERT_TRUE(WriteReferenceModel(dir.File("pkg"), o).ok());
  std::vector<long> peak_kib;
  for (double seconds : {60.0, 600.0}) {
    // Made by sox: the peak RSS of a child spawned from this process starts from this process's own
    // peak (the child runs in its memory until its exec), which the recording must not raise.
    const std::string wav = dir.File(std::to_string(static_cast<int>(seconds)) + ".wav");
    auto made = test::RunProgram({"sox", "-n", "-r", "16000", "-b", "16", "-c", "1", wav, "synth",
                                  std::to_string(static_cast<int>(seconds)), "whitenoise", "vol", "0.1"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    const std::string out = dir.File(std::to_string(static_cast<int>(seconds)) + ".json");
    auto [code, kib] = test::RunCliMeasured({"transcribe", dir.File("pkg"), wav, "--max-tokens", "2", "--format", "json", "-o", out});
    ASSERT_EQ(code, 0);
    peak_kib.push_back(kib);
    auto transcript = ReadFile(out);
    ASSERT_TRUE(transcript.ok());
    auto doc = ParseJson(*transcript);
    ASSERT_TRUE(doc.ok());
    EXPECT_DOUBLE_EQ((*doc)["duration"].get<double>(), seconds);
    EXPECT_GE((*doc)["segments"].size(), static_cast<size_t>(seconds / 30));
  }
  // Under AddressSanitizer freed memory waits in its quarantine (256 MB): not the program's.
  if (test::kSanitized) GTEST_SKIP() << "peak RSS under AddressSanitizer: " << peak_kib[0] << " / " << peak_kib[1] << " KiB";
  EXPECT_LT(peak_kib[1], peak_kib[0] + 12 * 1024) << "peak RSS " << peak_kib[0] << " KiB for 60 s, " << peak_kib[1]
                                                   << " KiB for 600 s";
}

}  // namespace
}  // namespace mlc
