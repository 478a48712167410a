// The audio frontend (SPEC 6.1): canonical lengths, exact sample scaling, every WAV sample format
// and header variant, channel averaging, resampling quality against analytic tones, rejection
// rules, libsndfile's other containers and a real (synthesized) speech recording.
#include <gtest/gtest.h>
#include <sndfile.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>

#include "mlc_manifest/audio.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

using test::EncodeWav;
using test::Tone;
using test::Tones;
using test::WavLayout;
using test::WavSample;

constexpr WavSample kFormats[] = {WavSample::kU8,  WavSample::kS16, WavSample::kS24,
                                  WavSample::kS32, WavSample::kF32, WavSample::kF64};
constexpr int64_t kRates[] = {8000, 11025, 16000, 22050, 44100, 48000, 96000};

AudioDecode Processor(int64_t rate, int64_t max = 480000, int64_t min = 1) {
  AudioDecode p;
  p.sample_rate_hz = rate;
  p.min_samples = min;
  p.max_samples = max;
  return p;
}

// Samples this far from either end are outside the resampler's start/end transient.
constexpr size_t kEdge = 400;

// ---- Canonical length ----

TEST(AudioLength, FollowsSpecExamples) {
  EXPECT_EQ(CanonicalAudioLength(12345, 16000, 16000), 12345);
  EXPECT_EQ(CanonicalAudioLength(48000, 48000, 16000), 16000);
  EXPECT_EQ(CanonicalAudioLength(44100, 44100, 16000), 16000);
  EXPECT_EQ(CanonicalAudioLength(1, 48000, 16000), 1);   // 1/3 rounds to 0, max(1, .)
  EXPECT_EQ(CanonicalAudioLength(1, 32000, 16000), 1);   // 0.5 rounds half up
  EXPECT_EQ(CanonicalAudioLength(3, 32000, 16000), 2);   // 1.5 -> 2
  EXPECT_EQ(CanonicalAudioLength(5, 32000, 16000), 3);   // 2.5 -> 3
  EXPECT_EQ(CanonicalAudioLength(4, 48000, 16000), 1);   // 1.33 -> 1
  EXPECT_EQ(CanonicalAudioLength(5, 48000, 16000), 2);   // 1.67 -> 2
  EXPECT_EQ(CanonicalAudioLength(3, 8000, 16000), 6);
  EXPECT_EQ(CanonicalAudioLength(1, 44100, 48000), 1);
  EXPECT_EQ(CanonicalAudioLength(0, 44100, 16000), 0);
}

TEST(AudioLength, ExactForHugeCounts) {
  // 2^53 frames at 3 Hz to 2 Hz: 2^54 / 3 = 6004799503160661.33 -> ...661.
  EXPECT_EQ(CanonicalAudioLength(int64_t{1} << 53, 3, 2), 6004799503160661);
  EXPECT_EQ(CanonicalAudioLength(std::numeric_limits<int64_t>::max(), 1, 16000),
            std::numeric_limits<int64_t>::max());
}

TEST(AudioLength, IsRoundHalfUpOfTheExactRatio) {
  // r is round_half_up(n t / s) iff (2r - 1) s <= 2 n t < (2r + 1) s.
  __extension__ typedef __int128 i128;
  const int64_t rates[] = {1, 7, 8000, 11025, 16000, 22050, 44100, 48000, 96000, 192000};
  for (int64_t s : rates) {
    for (int64_t t : rates) {
      for (int64_t n = 1; n < 2000; n += 7) {
        int64_t r = CanonicalAudioLength(n, s, t);
        if (s == t) {
          EXPECT_EQ(r, n);
          continue;
        }
        i128 lhs = i128(2 * r - 1) * s, mid = i128(2) * n * t, rhs = i128(2 * r + 1) * s;
        if (r > 1) EXPECT_TRUE(lhs <= mid && mid < rhs) << n << " " << s << " " << t;
        else EXPECT_TRUE(mid < rhs) << n << " " << s << " " << t;
      }
    }
  }
}

// ---- Exact scaling of integer PCM (same rate: passed through untouched) ----

std::vector<float> DecodeSameRate(const WavLayout& layout, const std::string& sample_bytes) {
  auto r = DecodeAudioMemory(test::WavFile(layout, sample_bytes), Processor(layout.sample_rate_hz));
  EXPECT_TRUE(r.ok()) << FormatErrors(r.errors());
  return r.ok() ? r->samples : std::vector<float>{};
}

TEST(AudioScaling, IntegerPcmIsScaledByPowerOfTwo) {
  WavLayout l;
  l.format = WavSample::kS16;
  std::string s16("\x00\x40\x00\x80\xff\x7f\x00\x00\x00\xc0", 10);  // 16384, -32768, 32767, 0, -16384
  EXPECT_EQ(DecodeSameRate(l, s16),
            (std::vector<float>{0.5f, -1.0f, 32767.0f / 32768.0f, 0.0f, -0.5f}));

  l.format = WavSample::kU8;
  std::string u8("\x80\x00\xff\xc0\x40", 5);  // 128, 0, 255, 192, 64
  EXPECT_EQ(DecodeSameRate(l, u8), (std::vector<float>{0.0f, -1.0f, 127.0f / 128.0f, 0.5f, -0.5f}));

  l.format = WavSample::kS24;
  std::string s24("\x00\x00\x40\x00\x00\x80\x01\x00\x00", 9);  // 4194304, -8388608, 1
  EXPECT_EQ(DecodeSameRate(l, s24), (std::vector<float>{0.5f, -1.0f, std::ldexp(1.0f, -23)}));

  l.format = WavSample::kS32;
  std::string s32("\x00\x00\x00\x40\x00\x00\x00\x80\x00\x01\x00\x00", 12);  // 2^30, -2^31, 256
  EXPECT_EQ(DecodeSameRate(l, s32), (std::vector<float>{0.5f, -1.0f, std::ldexp(1.0f, -23)}));
}

TEST(AudioScaling, FloatSamplesPassUnscaled) {
  WavLayout l;
  l.format = WavSample::kF32;
  std::vector<double> v{0.25, -1.5, 3.0, 1e-30, -0.0};
  auto out = DecodeSameRate(l, test::EncodeSamples(v, l.format));
  ASSERT_EQ(out.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(v[i]));
  l.format = WavSample::kF64;
  v = {0.1, 1.0 / 3.0, 2.5};
  out = DecodeSameRate(l, test::EncodeSamples(v, l.format));
  ASSERT_EQ(out.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(out[i], static_cast<float>(v[i]));
}

TEST(AudioScaling, ChannelsAreAveraged) {
  WavLayout l;
  l.format = WavSample::kS16;
  l.channels = 3;
  // frame 0: 0.5, 0.25, -0.75 -> 0; frame 1: 0.5, 0.5, 0.5 -> 0.5
  std::vector<double> v{0.5, 0.25, -0.75, 0.5, 0.5, 0.5};
  EXPECT_EQ(DecodeSameRate(l, test::EncodeSamples(v, l.format)), (std::vector<float>{0.0f, 0.5f}));
}

// ---- Every rate x sample format x channel count, resampled to 16 kHz ----

// Channel c carries a[c] sin(1 kHz) and +-0.2 sin(2.5 kHz) in opposite signs on channel pairs, so
// the average is mean(a) sin(1 kHz) exactly when the channels are really averaged.
struct MixedSignal {
  std::vector<double> interleaved;
  double mean_amp;
};

MixedSignal MakeMixed(int64_t channels, int64_t rate, int64_t frames) {
  std::vector<double> a(static_cast<size_t>(channels)), b(static_cast<size_t>(channels), 0.0);
  double sum = 0;
  for (int64_t c = 0; c < channels; ++c) {
    a[size_t(c)] = 0.55 + 0.04 * (static_cast<double>(c) - static_cast<double>(channels - 1) / 2);
    sum += a[size_t(c)];
  }
  for (int64_t c = 0; c + 1 < channels; c += 2) {
    b[size_t(c)] = 0.2;
    b[size_t(c + 1)] = -0.2;
  }
  return {Tones({Tone{1000, a}, Tone{2500, b}}, channels, rate, frames), sum / double(channels)};
}

double MinSnrFor(WavSample f) {
  switch (f) {
    case WavSample::kU8: return 35;
    case WavSample::kS16: return 85;
    default: return 90;
  }
}

TEST(AudioMatrix, EveryRateFormatAndChannelCount) {
  for (int64_t rate : kRates) {
    for (WavSample format : kFormats) {
      for (int64_t channels : {1, 2, 6}) {
        SCOPED_TRACE(std::to_string(rate) + " Hz " + test::WavSampleName(format) + " x" +
                     std::to_string(channels));
        const int64_t frames = rate / 4;  // 0.25 s
        MixedSignal sig = MakeMixed(channels, rate, frames);
        WavLayout l;
        l.format = format;
        l.channels = channels;
        l.sample_rate_hz = rate;
        l.extensible = channels > 2 || format == WavSample::kS24;
        auto r = DecodeAudioMemory(EncodeWav(l, sig.interleaved), Processor(16000));
        ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
        EXPECT_EQ(r->source.sample_format, test::WavSampleName(format));
        EXPECT_EQ(r->source.channels, channels);
        EXPECT_EQ(r->source.sample_rate_hz, rate);
        EXPECT_EQ(r->source.frames, frames);
        EXPECT_EQ(r->sample_rate_hz, 16000);
        ASSERT_EQ(static_cast<int64_t>(r->samples.size()), CanonicalAudioLength(frames, rate, 16000));
        double snr = test::ToneSnrDb(r->samples, sig.mean_amp, 1000, 16000, kEdge,
                                     r->samples.size() - kEdge);
        EXPECT_GE(snr, MinSnrFor(format));
      }
    }
  }
}

// ---- Resampling quality against analytic references (float sources) ----

std::vector<float> ResampleTone(double freq, int64_t rate, int64_t target, ResampleQuality q,
                                double amp = 0.5) {
  const int64_t frames = rate / 5;  // 0.2 s
  std::vector<double> x = Tones({Tone{freq, {amp}}}, 1, rate, frames);
  std::vector<float> xf(x.begin(), x.end());
  AudioOptions options;
  options.quality = q;
  auto r = DecodeAudioSamples(xf, 1, rate, Processor(target), options);
  EXPECT_TRUE(r.ok()) << FormatErrors(r.errors());
  return r.ok() ? r->samples : std::vector<float>{};
}

TEST(AudioQuality, PassbandTonesKeep90DbSnrWithDefaultQuality) {
  for (int64_t rate : kRates) {
    for (double f : {50.0, 440.0, 1000.0, 3000.0, 5000.0, 6000.0, 7000.0}) {
      if (f > 0.9 * std::min<double>(rate, 16000) / 2) continue;
      for (ResampleQuality q : {ResampleQuality::kHigh, ResampleQuality::kVeryHigh}) {
        std::vector<float> y = ResampleTone(f, rate, 16000, q);
        ASSERT_GT(y.size(), 2 * kEdge);
        double snr = test::ToneSnrDb(y, 0.5, f, 16000, kEdge, y.size() - kEdge);
        EXPECT_GE(snr, 90) << rate << " Hz source, " << f << " Hz tone, "
                           << ResampleQualityName(q);
      }
    }
  }
}

TEST(AudioQuality, TonesAboveTargetNyquistAreAttenuated90Db) {
  for (int64_t rate : kRates) {
    for (double f : {8000.0, 8010.0, 8500.0, 10000.0, 15000.0, 20000.0, 30000.0, 45000.0}) {
      if (f > 0.95 * static_cast<double>(rate) / 2) continue;
      for (ResampleQuality q : {ResampleQuality::kHigh, ResampleQuality::kVeryHigh}) {
        std::vector<float> y = ResampleTone(f, rate, 16000, q);
        ASSERT_GT(y.size(), 2 * kEdge);
        double level = test::LevelDb(y, kEdge, y.size() - kEdge, 0.5 / std::numbers::sqrt2);
        EXPECT_LE(level, -90) << rate << " Hz source, " << f << " Hz tone, "
                              << ResampleQualityName(q);
      }
    }
  }
}

TEST(AudioQuality, SameRatePassesThroughUntouched) {
  std::vector<float> x{0.1f, -0.2f, 0.3f, 0.123456789f};
  auto r = DecodeAudioSamples(x, 1, 24000, Processor(24000));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->samples, x);
}

TEST(AudioQuality, FileAndSamplePathsAgreeAcrossBlocks) {
  // Long enough for many decode blocks; the streamed file gives the same samples as one span.
  const int64_t rate = 44100, frames = 100000;
  std::vector<double> x = Tones({Tone{1234, {0.3, 0.6}}}, 2, rate, frames);
  WavLayout l;
  l.format = WavSample::kF32;
  l.channels = 2;
  l.sample_rate_hz = rate;
  auto from_wav = DecodeAudioMemory(EncodeWav(l, x), Processor(16000));
  std::vector<float> xf(x.begin(), x.end());
  auto from_span = DecodeAudioSamples(xf, 2, rate, Processor(16000));
  ASSERT_TRUE(from_wav.ok() && from_span.ok());
  EXPECT_EQ(from_wav->samples, from_span->samples);
  EXPECT_GE(test::ToneSnrDb(from_wav->samples, 0.45, 1234, 16000, kEdge,
                            from_wav->samples.size() - kEdge), 90);
}

// Keeps what a streamed decode hands over, block by block; fails after `fail_after` samples.
class RecordingSink final : public AudioSink {
 public:
  explicit RecordingSink(int64_t fail_after = -1) : fail_after_(fail_after) {}
  void Expect(int64_t n) override { expected = n; }
  Status Write(std::span<const float> s) override {
    if (fail_after_ >= 0 && static_cast<int64_t>(samples.size() + s.size()) > fail_after_) {
      return Error{ErrorCode::kIo, "", "the sink is full"};
    }
    samples.insert(samples.end(), s.begin(), s.end());
    ++blocks;
    return Status::Ok();
  }
  std::vector<float> samples;
  int64_t expected = -1;
  int blocks = 0;

 private:
  int64_t fail_after_;
};

TEST(AudioStream, SinkGetsTheSamplesOfTheWholeDecode) {
  test::TempDir dir;
  // 16-bit WAV (read directly) and float WAV (libsndfile), resampled and not.
  for (WavSample format : {WavSample::kS16, WavSample::kF32}) {
    for (int64_t target : {16000, 44100}) {
      WavLayout l;
      l.format = format;
      l.channels = 2;
      l.sample_rate_hz = 44100;
      const std::string path = dir.Write("in.wav", EncodeWav(l, Tones({Tone{997, {0.4, 0.3}}}, 2, 44100, 123457)));
      auto whole = DecodeAudioFile(path, Processor(target));
      ASSERT_TRUE(whole.ok()) << FormatErrors(whole.errors());
      RecordingSink sink;
      auto streamed = StreamAudioFile(path, Processor(target), sink);
      ASSERT_TRUE(streamed.ok()) << FormatErrors(streamed.errors());
      EXPECT_EQ(sink.samples, whole->samples) << test::WavSampleName(format) << " to " << target;
      EXPECT_EQ(streamed->samples, static_cast<int64_t>(whole->samples.size()));
      EXPECT_EQ(sink.expected, streamed->samples) << "the header's length is announced";
      EXPECT_GT(sink.blocks, 1) << "handed over as made, not at the end";
      EXPECT_EQ(streamed->source.frames, 123457);
    }
  }
}

TEST(AudioStream, PaddingReachesTheCanonicalLength) {
  // 3 frames at 8 kHz make round_half_up(3 * 44100 / 8000) = 17 samples, whatever soxr gives for
  // so short a recording (what it does not give are zeros).
  test::TempDir dir;
  WavLayout l;
  l.sample_rate_hz = 8000;
  const std::string path = dir.Write("short.wav", EncodeWav(l, {0.5, 0.5, 0.5}));
  RecordingSink sink;
  auto streamed = StreamAudioFile(path, Processor(44100), sink);
  ASSERT_TRUE(streamed.ok()) << FormatErrors(streamed.errors());
  EXPECT_EQ(streamed->samples, 17);
  EXPECT_EQ(sink.samples.size(), 17u);
  auto whole = DecodeAudioFile(path, Processor(44100));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(sink.samples, whole->samples);
}

TEST(AudioStream, ASinkErrorStopsTheDecode) {
  test::TempDir dir;
  WavLayout l;
  const std::string path = dir.Write("in.wav", EncodeWav(l, std::vector<double>(100000, 0.1)));
  RecordingSink sink(/*fail_after=*/50000);
  auto streamed = StreamAudioFile(path, Processor(16000), sink);
  ASSERT_FALSE(streamed.ok());
  EXPECT_EQ(streamed.error().code, ErrorCode::kIo);
  EXPECT_EQ(streamed.error().message, "the sink is full");
  EXPECT_LE(sink.samples.size(), 50000u);
}

// ---- Length bounds ----

Result<DecodedAudio> DecodeZeros(int64_t frames, int64_t rate, const AudioDecode& p) {
  WavLayout l;
  l.sample_rate_hz = rate;
  return DecodeAudioMemory(EncodeWav(l, std::vector<double>(size_t(frames), 0.0)), p);
}

TEST(AudioBounds, MaxSamplesIsInclusiveWithRoundHalfUp) {
  const int64_t max = 1000;
  // 48 kHz -> 16 kHz: 3 max + 1 frames make max + 1/3 -> max (ok); 3 max + 2 -> max + 1.
  auto ok = DecodeZeros(3 * max + 1, 48000, Processor(16000, max));
  ASSERT_TRUE(ok.ok()) << FormatErrors(ok.errors());
  EXPECT_EQ(ok->samples.size(), size_t(max));
  auto over = DecodeZeros(3 * max + 2, 48000, Processor(16000, max));
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.error().message.find("too long"), std::string::npos) << over.error().message;
  // 32 kHz -> 16 kHz: 2 max - 1 frames make max - 0.5 -> max (ok); 2 max + 1 -> max + 0.5 -> over.
  auto half_ok = DecodeZeros(2 * max - 1, 32000, Processor(16000, max));
  ASSERT_TRUE(half_ok.ok());
  EXPECT_EQ(half_ok->samples.size(), size_t(max));
  EXPECT_FALSE(DecodeZeros(2 * max + 1, 32000, Processor(16000, max)).ok());
  // Same rate: exactly max frames.
  EXPECT_TRUE(DecodeZeros(max, 16000, Processor(16000, max)).ok());
  EXPECT_FALSE(DecodeZeros(max + 1, 16000, Processor(16000, max)).ok());
}

TEST(AudioBounds, MinSamplesIsInclusive) {
  // 32 kHz -> 16 kHz, min 10: 19 frames make 9.5 -> 10 (ok); 18 frames make 9 (too short).
  auto ok = DecodeZeros(19, 32000, Processor(16000, 100, 10));
  ASSERT_TRUE(ok.ok()) << FormatErrors(ok.errors());
  EXPECT_EQ(ok->samples.size(), 10u);
  auto under = DecodeZeros(18, 32000, Processor(16000, 100, 10));
  ASSERT_FALSE(under.ok());
  EXPECT_NE(under.error().message.find("too short"), std::string::npos);
  // A single frame becomes one sample whatever the ratio (max(1, .)).
  auto one = DecodeZeros(1, 96000, Processor(8000));
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->samples.size(), 1u);
}

TEST(AudioBounds, RejectsBadProcessor) {
  AudioDecode p = Processor(16000, 10, 20);
  auto r = DecodeAudioSamples(std::vector<float>{0.f}, 1, 16000, p);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kUsage);
  p = Processor(16000);
  p.channels = 2;
  EXPECT_FALSE(DecodeAudioSamples(std::vector<float>{0.f}, 1, 16000, p).ok());
}

// ---- Header variants ----

std::vector<double> ShortTone(int64_t channels, int64_t rate) {
  std::vector<double> amps(size_t(channels), 0.5);
  return Tones({Tone{1000, amps}}, channels, rate, rate / 10);
}

void ExpectToneDecodes(const std::string& bytes, int64_t rate, int64_t frames,
                       const char* container) {
  auto r = DecodeAudioMemory(bytes, Processor(16000));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->source.container, container);
  EXPECT_EQ(r->source.frames, frames);
  ASSERT_EQ(int64_t(r->samples.size()), CanonicalAudioLength(frames, rate, 16000));
  EXPECT_GE(test::ToneSnrDb(r->samples, 0.5, 1000, 16000, kEdge, r->samples.size() - kEdge), 85);
}

TEST(AudioHeaders, ExtensibleFormats) {
  for (WavSample f : kFormats) {
    SCOPED_TRACE(test::WavSampleName(f));
    WavLayout l;
    l.format = f;
    l.extensible = true;
    l.channels = 2;
    l.sample_rate_hz = 48000;
    if (f == WavSample::kU8) continue;  // 8-bit cannot reach the 85 dB used here
    ExpectToneDecodes(EncodeWav(l, ShortTone(2, 48000)), 48000, 4800, "WAVEX");
  }
}

TEST(AudioHeaders, OddSizedAndUnknownChunks) {
  WavLayout l;
  l.sample_rate_hz = 22050;
  l.before_fmt = {{"JUNK", std::string(7, 'j')}};
  l.before_data = {{"zzzz", std::string(13, 'z')}, {"LIST", std::string("INFOISFT\x03\0\0\0ab\0", 15)}};
  l.after_data = {{"odd!", std::string(3, 'o')}};
  ExpectToneDecodes(EncodeWav(l, ShortTone(1, 22050)), 22050, 2205, "WAV");
  // An odd number of data bytes in a 16-bit file: the trailing half frame is dropped.
  std::string bytes = test::EncodeSamples(ShortTone(1, 22050), WavSample::kS16) + "x";
  WavLayout plain;
  plain.sample_rate_hz = 22050;
  ExpectToneDecodes(test::WavFile(plain, bytes), 22050, 2205, "WAV");
}

// Plain 16-bit PCM WAV is read without libsndfile; the same samples in a WAVE_FORMAT_EXTENSIBLE
// header still go through libsndfile. Both give the same output bit for bit, for 1, 2 and 3
// channels, with full-scale values, over several blocks, from a file and from memory.
TEST(AudioHeaders, DirectPcm16ReaderEqualsLibsndfile) {
  for (int64_t channels : {1, 2, 3}) {
    SCOPED_TRACE(channels);
    std::vector<double> interleaved = test::Tones({{440, std::vector<double>(channels, 0.5)},
                                                   {9000, std::vector<double>(channels, 0.3)}},
                                                  channels, 48000, 70001);
    for (size_t i = 0; i < interleaved.size(); i += 997) interleaved[i] = (i / 997) % 2 ? 1.0 : -1.0;
    WavLayout plain;
    plain.channels = channels;
    plain.sample_rate_hz = 48000;
    WavLayout wavex = plain;
    wavex.extensible = true;
    const std::string a = EncodeWav(plain, interleaved), b = EncodeWav(wavex, interleaved);
    AudioDecode p;
    p.sample_rate_hz = 16000;
    p.max_samples = 1 << 20;
    auto direct = DecodeAudioMemory(a, p);
    auto sndfile = DecodeAudioMemory(b, p);
    ASSERT_TRUE(direct.ok()) << FormatErrors(direct.errors());
    ASSERT_TRUE(sndfile.ok());
    EXPECT_EQ(direct->source.container, "WAV");
    EXPECT_EQ(direct->source.sample_format, "pcm_s16");
    EXPECT_EQ(direct->source.frames, sndfile->source.frames);
    EXPECT_EQ(direct->source.channels, channels);
    EXPECT_TRUE(direct->samples == sndfile->samples);
    test::TempDir d;
    std::ofstream(d.File("a.wav"), std::ios::binary) << a;
    auto from_file = DecodeAudioFile(d.File("a.wav"), p);
    ASSERT_TRUE(from_file.ok());
    EXPECT_TRUE(from_file->samples == sndfile->samples);
    p.sample_rate_hz = 48000;  // no resampling: the downmix alone
    auto same_rate = DecodeAudioMemory(a, p);
    auto same_rate_sf = DecodeAudioMemory(b, p);
    ASSERT_TRUE(same_rate.ok() && same_rate_sf.ok());
    EXPECT_TRUE(same_rate->samples == same_rate_sf->samples);
  }
}

TEST(AudioHeaders, Rf64) {
  WavLayout l;
  l.rf64 = true;
  l.format = WavSample::kS24;
  l.sample_rate_hz = 96000;
  ExpectToneDecodes(EncodeWav(l, ShortTone(1, 96000)), 96000, 9600, "RF64");
}

TEST(AudioHeaders, TruncatedDataKeepsTheWholeFramesPresent) {
  // The data chunk claims 4800 frames; the file holds 3000 and a half.
  WavLayout l;
  l.channels = 2;
  l.sample_rate_hz = 48000;
  std::string samples = test::EncodeSamples(ShortTone(2, 48000), WavSample::kS16);
  std::string truncated = test::WavFile(l, samples.substr(0, 3000 * 4 + 2), int64_t(samples.size()));
  ExpectToneDecodes(truncated, 48000, 3000, "WAV");
}

TEST(AudioHeaders, TruncatedHeaderIsNotAudio) {
  WavLayout l;
  std::string wav = EncodeWav(l, ShortTone(1, 16000));
  for (size_t cut : {size_t(0), size_t(3), size_t(12), size_t(20), size_t(30)}) {
    auto r = DecodeAudioMemory(wav.substr(0, cut), Processor(16000));
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.error().code, ErrorCode::kInvalid);
  }
}

// ---- Rejections ----

TEST(AudioReject, NonFiniteSamplesNameTheFrame) {
  WavLayout l;
  l.format = WavSample::kF32;
  l.channels = 2;
  std::vector<double> x(2 * 50000, 0.25);
  x[2 * 40000 + 1] = std::numeric_limits<double>::quiet_NaN();
  auto r = DecodeAudioMemory(EncodeWav(l, x), Processor(16000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().path, "frame 40000");
  EXPECT_NE(r.error().message.find("NaN"), std::string::npos);
  EXPECT_NE(r.error().message.find("channel 1"), std::string::npos);
  x[2 * 40000 + 1] = 0;
  x[7] = -std::numeric_limits<double>::infinity();
  l.format = WavSample::kF64;
  r = DecodeAudioMemory(EncodeWav(l, x), Processor(8000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().path, "frame 3");
  EXPECT_NE(r.error().message.find("infinity"), std::string::npos);
  // Finite in float64 but outside float32 once averaged.
  x[7] = 1e300;
  r = DecodeAudioMemory(EncodeWav(l, x), Processor(16000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("float32 range"), std::string::npos);
}

// Finite float samples near FLT_MAX (a float WAV of garbage): an error at the frame, never NaN
// mel rows; at the processor's rate and resampled, mono and stereo; the limit is configurable.
TEST(AudioReject, HugeFiniteSamplesNameTheFrame) {
  const double huge = 3.0e38;  // finite in float32
  for (int64_t channels : {1, 2}) {
    for (int64_t rate : {16000, 44100}) {
      WavLayout l;
      l.format = WavSample::kF32;
      l.channels = channels;
      l.sample_rate_hz = rate;
      std::vector<double> x(static_cast<size_t>(channels * 30000), 0.25);
      x[static_cast<size_t>(channels * 12345)] = huge;
      if (channels == 2) x[static_cast<size_t>(channels * 12345 + 1)] = huge;
      auto r = DecodeAudioMemory(EncodeWav(l, x), Processor(16000));
      ASSERT_FALSE(r.ok()) << channels << " " << rate;
      EXPECT_EQ(r.error().code, ErrorCode::kLimit);
      EXPECT_EQ(r.error().path, "frame 12345") << r.error().message;
      EXPECT_NE(r.error().message.find("max_sample_magnitude"), std::string::npos) << r.error().message;
    }
  }
  // Through raw samples too; a looser limit lets a loud (but sane) recording through.
  std::vector<float> loud(20000, 2.0f);
  loud[777] = 20000.0f;
  auto raw = DecodeAudioSamples(loud, 1, 16000, Processor(16000));
  ASSERT_FALSE(raw.ok());
  EXPECT_EQ(raw.error().path, "frame 777");
  AudioOptions looser;
  looser.max_sample_magnitude = 1e5;
  auto allowed = DecodeAudioSamples(loud, 1, 16000, Processor(16000), looser);
  ASSERT_TRUE(allowed.ok()) << FormatErrors(allowed.errors());
  for (float v : allowed->samples) ASSERT_TRUE(std::isfinite(v));
}

TEST(AudioReject, ZeroFrames) {
  WavLayout l;
  auto r = DecodeAudioMemory(EncodeWav(l, {}), Processor(16000));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("zero frames"), std::string::npos) << r.error().message;
  auto s = DecodeAudioSamples({}, 1, 16000, Processor(8000));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("zero frames"), std::string::npos);
}

TEST(AudioReject, NotAudio) {
  for (std::string bytes : {std::string("{\"schema\": \"mlc.model-package\"}"), std::string(),
                            std::string(1000, '\0'), std::string("RIFF\x10\0\0\0WAVEfmt ", 16)}) {
    auto r = DecodeAudioMemory(bytes, Processor(16000));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, ErrorCode::kInvalid);
    EXPECT_NE(r.error().message.find("not a recognized audio file"), std::string::npos)
        << r.error().message;
    // Issue 12.5: the formats taken and how to convert (at the processor's rate).
    EXPECT_NE(r.error().message.find("WAV, FLAC, Ogg (Vorbis, Opus) or MP3"), std::string::npos)
        << r.error().message;
    EXPECT_NE(r.error().message.find("ffmpeg -i in.m4a -ar 16000 out.wav"), std::string::npos)
        << r.error().message;
  }
}

TEST(AudioReject, FileErrorsAreIo) {
  test::TempDir dir;
  auto missing = DecodeAudioFile(dir.File("missing.wav"), Processor(16000));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kIo);
  auto folder = DecodeAudioFile(dir.path(), Processor(16000));
  ASSERT_FALSE(folder.ok());
  EXPECT_EQ(folder.error().code, ErrorCode::kIo);
  auto text = DecodeAudioFile(dir.Write("notes.wav", "just some text, not a recording\n"),
                              Processor(16000));
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code, ErrorCode::kInvalid);
}

TEST(AudioReject, HeaderClaimingHoursIsRejectedBeforeDecoding) {
  // A sparse file: a real header and 2 hours of 48 kHz stereo 16-bit silence that takes no disk.
  test::TempDir dir;
  const int64_t frames = int64_t{48000} * 7200;
  WavLayout l;
  l.channels = 2;
  l.sample_rate_hz = 48000;
  std::string header = test::WavFile(l, "", frames * 4);
  std::string path = dir.Write("hours.wav", header);
  std::filesystem::resize_file(path, header.size() + static_cast<uintmax_t>(frames * 4));
  auto r = DecodeAudioFile(path, Processor(16000));
  ASSERT_FALSE(r.ok());
  // "recording too long: N frames ..." without "at least": decided from the header alone.
  EXPECT_NE(r.error().message.find("recording too long: " + std::to_string(frames) + " frames"),
            std::string::npos)
      << r.error().message;
}

TEST(AudioReject, LimitsFromOptions) {
  AudioOptions options;
  options.max_channels = 4;
  auto r = DecodeAudioSamples(std::vector<float>(12, 0.f), 6, 16000, Processor(16000), options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
  auto ratio = DecodeAudioSamples(std::vector<float>(12, 0.f), 1, 1, Processor(16000));
  ASSERT_FALSE(ratio.ok());
  EXPECT_EQ(ratio.error().code, ErrorCode::kLimit);
}

// ---- Other containers, written by libsndfile ----

// Writes interleaved doubles with libsndfile in the given format; false if unsupported here.
bool WriteWithSndfile(const std::string& path, int format, int64_t channels, int64_t rate,
                      const std::vector<double>& x) {
  SF_INFO info{};
  info.format = format;
  info.channels = static_cast<int>(channels);
  info.samplerate = static_cast<int>(rate);
  if (!sf_format_check(&info)) return false;
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!f) return false;
  sf_count_t frames = static_cast<sf_count_t>(x.size()) / channels;
  bool ok;
  if ((format & SF_FORMAT_SUBMASK) == SF_FORMAT_PCM_16) {
    // libsndfile scales doubles by 32767 when writing; write our own 1/2^15 quantization.
    std::vector<short> q(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      q[i] = static_cast<short>(std::ldexp(test::Quantize(x[i], WavSample::kS16), 15));
    }
    ok = sf_writef_short(f, q.data(), frames) == frames;
  } else {
    ok = sf_writef_double(f, x.data(), frames) == frames;
  }
  sf_close(f);
  return ok;
}

// Amplitude of the best-fitting sinusoid at freq (phase-free), over [begin, end).
double FittedAmplitude(const std::vector<float>& y, double freq, int64_t rate, size_t begin,
                       size_t end) {
  double s = 0, c = 0;
  const double w = 2 * std::numbers::pi * freq / double(rate);
  for (size_t i = begin; i < end; ++i) {
    s += y[i] * std::sin(w * double(i));
    c += y[i] * std::cos(w * double(i));
  }
  return 2 * std::hypot(s, c) / double(end - begin);
}

TEST(AudioContainers, FlacIsLossless) {
  test::TempDir dir;
  std::vector<double> x = ShortTone(2, 44100);
  std::string path = dir.File("tone.flac");
  ASSERT_TRUE(WriteWithSndfile(path, SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 2, 44100, x));
  auto same = DecodeAudioFile(path, Processor(44100));
  ASSERT_TRUE(same.ok()) << FormatErrors(same.errors());
  EXPECT_EQ(same->source.container, "FLAC");
  EXPECT_EQ(same->source.sample_format, "pcm_s16");
  ASSERT_EQ(same->samples.size(), 4410u);
  for (size_t i = 0; i < 4410; ++i) {
    ASSERT_EQ(same->samples[i], static_cast<float>(test::Quantize(x[2 * i], WavSample::kS16)));
  }
  std::string bytes = test::ReadText(path);
  auto resampled = DecodeAudioMemory(bytes, Processor(16000));
  ASSERT_TRUE(resampled.ok());
  EXPECT_EQ(resampled->samples.size(), size_t(CanonicalAudioLength(4410, 44100, 16000)));
  EXPECT_GE(test::ToneSnrDb(resampled->samples, 0.5, 1000, 16000, kEdge,
                            resampled->samples.size() - kEdge), 85);
}

TEST(AudioContainers, LossyFormatsWhereLibsndfileHasThem) {
  struct Case {
    const char* name;
    int format;
    const char* container;
  };
  const Case cases[] = {{"vorbis.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, "OGG"},
                        {"opus.ogg", SF_FORMAT_OGG | SF_FORMAT_OPUS, "OGG"},
                        {"tone.mp3", SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III, "MP3"}};
  test::TempDir dir;
  const int64_t rate = 48000;
  std::vector<double> x = Tones({Tone{1000, {0.5}}}, 1, rate, rate / 2);
  int tried = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::string path = dir.File(c.name);
    if (!WriteWithSndfile(path, c.format, 1, rate, x)) continue;
    ++tried;
    auto r = DecodeAudioFile(path, Processor(16000));
    ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
    EXPECT_EQ(r->source.container, c.container);
    EXPECT_EQ(int64_t(r->samples.size()), CanonicalAudioLength(r->source.frames, rate, 16000));
    EXPECT_NEAR(double(r->source.frames), double(rate / 2), 2000.0);
    // Lossy: the 1 kHz tone is there at its level (phase-free fit, middle of the clip).
    size_t n = r->samples.size();
    EXPECT_NEAR(FittedAmplitude(r->samples, 1000, 16000, n / 4, 3 * n / 4), 0.5, 0.03);
  }
  if (tried == 0) GTEST_SKIP() << "this libsndfile writes none of Vorbis, Opus, MP3";
}

// ---- A real recording: speech synthesized by espeak-ng ----

// In-place radix-2 FFT (size a power of two).
void Fft(std::vector<std::complex<double>>& a) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const std::complex<double> w = std::polar(1.0, -2 * std::numbers::pi / double(len));
    for (size_t i = 0; i < n; i += len) {
      std::complex<double> wk = 1;
      for (size_t k = 0; k < len / 2; ++k, wk *= w) {
        std::complex<double> u = a[i + k], v = a[i + k + len / 2] * wk;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
    }
  }
}

// 10 log10(energy of `ref` / energy of `x - ref`), both Hann-windowed, in bins below max_hz.
double BandAgreementDb(const std::vector<float>& x, const std::vector<float>& ref, int64_t rate,
                       double max_hz) {
  const size_t n = x.size();
  std::vector<std::complex<double>> r(n), d(n);
  for (size_t i = 0; i < n; ++i) {
    double w = 0.5 - 0.5 * std::cos(2 * std::numbers::pi * double(i) / double(n));
    r[i] = w * ref[i];
    d[i] = w * (double(x[i]) - ref[i]);
  }
  Fft(r);
  Fft(d);
  double signal = 0, diff = 0;
  for (size_t k = 0; k <= n / 2 && double(k) * double(rate) / double(n) < max_hz; ++k) {
    signal += std::norm(r[k]);
    diff += std::norm(d[k]);
  }
  return diff == 0 ? 400 : 10 * std::log10(signal / diff);
}

TEST(AudioSpeech, EspeakRecordingMatchesSoxVeryHighQuality) {
  test::TempDir dir;
  std::string wav = dir.File("speech.wav");
  auto spoken = test::RunProgram({"espeak-ng", "-w", wav, "The quick brown fox jumps over the lazy dog."});
  if (spoken.exit_code == -1 || spoken.exit_code == 127) GTEST_SKIP() << "espeak-ng is not installed";
  ASSERT_EQ(spoken.exit_code, 0) << spoken.err;
  auto r = DecodeAudioFile(wav, Processor(16000));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->source.container, "WAV");
  EXPECT_EQ(r->source.channels, 1);
  ASSERT_GT(r->source.frames, r->source.sample_rate_hz);  // more than a second of speech
  EXPECT_EQ(int64_t(r->samples.size()),
            CanonicalAudioLength(r->source.frames, r->source.sample_rate_hz, 16000));
  double peak = 0;
  for (float v : r->samples) peak = std::max(peak, double(std::fabs(v)));
  EXPECT_GT(peak, 0.05);
  EXPECT_LE(peak, 1.2);
  // An independent resampler (sox, very high quality) agrees to well within the noise floor.
  std::string ref = dir.File("ref.f32");
  auto sox = test::RunProgram({"sox", wav, "-t", "f32", "-r", "16000", ref, "rate", "-v"});
  if (sox.exit_code != 0) GTEST_SKIP() << "sox unavailable: " << sox.err;
  std::string raw = test::ReadText(ref);
  std::vector<float> y(raw.size() / 4);
  std::memcpy(y.data(), raw.data(), y.size() * 4);
  // Compare below 7 kHz: in the transition band (7.3-8 kHz) any two filters legitimately differ
  // (sox -h and sox -v agree to only ~59 dB there, to ~120 dB below 6 kHz).
  ASSERT_GT(std::min(y.size(), r->samples.size()), size_t{32768} + 2 * kEdge);
  std::vector<float> ours(r->samples.begin() + kEdge, r->samples.begin() + kEdge + 32768);
  std::vector<float> theirs(y.begin() + kEdge, y.begin() + kEdge + 32768);
  EXPECT_GE(BandAgreementDb(ours, theirs, 16000, 7000), 90) << "against sox rate -v";
}
// Decodes `bytes` from memory and from a file: both fail at `path` with `message` in the text,
// the file's error naming it as its document.
void ExpectRejectedAt(const std::string& bytes, const std::string& path, const std::string& message) {
  auto r = DecodeAudioMemory(bytes, Processor(16000));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().path, path);
  EXPECT_NE(r.error().message.find(message), std::string::npos) << r.error().message;
  test::TempDir d;
  std::string file = d.Write("bad.wav", bytes);
  auto f = DecodeAudioFile(file, Processor(16000));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().path, path);
  EXPECT_EQ(f.error().document, file);
}

// A chunk before "data" that claims to run past the end of the file is rejected at once, with
// its byte offset (libsndfile alone spins on such a LIST chunk; found by audio_fuzz).
TEST(AudioHeaders, ChunkPastTheEndIsRejectedQuickly) {
  std::string bytes("RIFF\x64\x00\x00\x00WAVELIST\x66\xff\xff\xff", 20);
  bytes += std::string(64, '\xff');
  ExpectRejectedAt(bytes, "byte 12", "RIFF chunk \"LIST\" claims 4294967142 bytes");
}

// A LIST chunk that fits in the file but whose sub-chunk claims to run past the LIST's own end is
// rejected at once too, with the sub-chunk's byte offset (libsndfile 1.2 spins on it for more than
// 10 s; found by audio_fuzz: the 43 bytes below are its input, also in its seed corpus). The list
// type "WA\x9f\xff" is neither INFO nor adtl, so libsndfile reads it as a sub-chunk id and the
// next word as its size: the walk does the same.
TEST(AudioHeaders, ListSubChunkPastItsListIsRejectedQuickly) {
  const std::string bytes(
      "RIFF$\x02\x00\x00WAVELIST\x16\x00\x00\x00WA\x9f\xff\xf7\xff\xff\xff\x9c\x00@\x00"
      "da=a\x00\x02\x00\x00\x00\x00\x00",
      43);
  ExpectRejectedAt(bytes, "byte 20",
                   "LIST chunk of type \"WA\\x9f\\xff\" (read as a sub-chunk) claims 4294967287 bytes, past the "
                   "end of its LIST chunk (byte 42)");
}

// The same with a sub-chunk that fits when the list type is skipped (size 2): libsndfile 1.2 reads
// the type as an id whose size 0xfffffff7 wraps its 32-bit count and spins for minutes (found by
// audio_fuzz in CI; the 43 bytes below are its input, also in its seed corpus).
TEST(AudioHeaders, UnknownListTypeIsWalkedAsLibsndfileWalksIt) {
  const std::string bytes(
      "RIFF$\x02\x00\x00WAVELIST\x16\x00\x00\x00WA\x9f\xff\xf7\xff\xff\xff\x02\x00\x00\x00"
      "da=a\x00\x02\x00\x00\x00\x00\x00",
      43);
  ExpectRejectedAt(bytes, "byte 20", "(read as a sub-chunk) claims 4294967287 bytes");
}

// Inside an INFO list, a sub-chunk past the LIST's end is named with its own offset.
TEST(AudioHeaders, InfoSubChunkPastItsListIsRejected) {
  std::string bytes("RIFF\x40\x00\x00\x00WAVELIST\x10\x00\x00\x00INFOISFT\xf0\xff\xff\xff", 32);
  bytes += std::string(40, '\0');
  ExpectRejectedAt(bytes, "byte 24", "LIST sub-chunk \"ISFT\" claims 4294967280 bytes, past the end of its LIST chunk (byte 36)");
}

// A sub-chunk header that crosses the LIST's end: libsndfile 1.2 reads its size from the bytes
// after the LIST and spins on one that wraps its count (found by a longer audio_fuzz run; the 36
// bytes below are its input, also in its seed corpus).
TEST(AudioHeaders, SubChunkHeaderCrossingTheListEndIsRejected) {
  const std::string bytes("RIFF$\x02\x00\x00WAVELIST\x0f\x00\x00\x00\x00\x00\x00;\x00\x00\x00\x00"
                          "\x00\xbf\x00\x00\xf8\xff\xff\xff", 36);
  ExpectRejectedAt(bytes, "byte 28", "LIST sub-chunk \"\\x00\\xbf\\x00\\x00\" claims 4294967288 bytes");
}

// libsndfile goes on reading chunks after a data chunk that fits in the file (past the RIFF size
// too): a LIST chunk there gets the same walk (a fuzz input that made libsndfile spin for minutes).
TEST(AudioHeaders, ChunksAfterTheDataChunkAreWalkedToo) {
  const std::string bytes("RIFFd\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x07"
                          "@\x1f\x00\x00@\x1f\x00\x00\x01\x00\x08\x00" "data@\x00\x00\x00\x80\x98\xad\xbb"
                          "\xc0\xbb\xad\x98\x80VEfmt \x10\x00\x00\x00\x01\x00\x01\x07@\x1f\x00\x00@"
                          "\x1f\x00\x00\x01\x00\x08\x00" "data@\x00\x00\x00\x80\x98\xad\xbb\xc0\xbb\xad\x98\x80"
                          "RIFF$\x02\x00\x00WAVELIST\x0f\xf5\xff\xff\xff\x00\x00;"
                          "\x00\x00\x00\x00\x00\xbf\x00\x00\xf8\xff\xff\xff" "e libFLAC 1."
                          "4.3 2022-\x00\x00\x00\x00\x00RIFF$\x02\x00\x00WA"
                          "VELIST\x0f\xf5\xff\xff\xff\x00\x00;\x00\x00\x00\x00\x00\xbf\x00\x00\xf8\xff"
                          "\xff\xff" "e libFLAC 1.4.3 2022-\x00"
                          "\x00\x00\x00\x00\x00\x00" "1022\x01Lw\x8ah",
                          231);
  ExpectRejectedAt(bytes, "byte 108", "RIFF chunk \"LIST\" claims 4294964495 bytes, past the end of the file (231 bytes)");
}

// A LIST chunk of more than 100000 empty sub-chunks is rejected like a file of that many chunks
// (the walk reads 8 bytes a sub-chunk: a file's would otherwise take minutes).
TEST(AudioHeaders, TooManyListSubChunksAreRejected) {
  const uint32_t list = 4 + 8 * 100002;
  std::string bytes("RIFF\x00\x00\x00\x00WAVELIST", 16);
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((list >> (8 * i)) & 0xff);
  bytes += "INFO";
  for (int i = 0; i < 100002; ++i) bytes += std::string("ISFT\x00\x00\x00\x00", 8);
  ExpectRejectedAt(bytes, "byte " + std::to_string(24 + 8 * 100000), "more than 100000 sub-chunks in a LIST chunk");
}

// A well-formed LIST INFO chunk (an odd-sized sub-chunk with its pad byte) still decodes.
TEST(AudioHeaders, WellFormedListChunkStillDecodes) {
  std::string info("INFOINAM\x03\x00\x00\x00" "ab\x00\x00", 16);  // "ab\0" and the pad byte
  std::string list = "LIST" + std::string(1, static_cast<char>(info.size())) + std::string(3, '\0') + info;
  std::string fmt("fmt \x10\x00\x00\x00\x03\x00\x01\x00\x80\x3e\x00\x00\x00\xfa\x00\x00\x04\x00\x20\x00", 24);
  const int frames = 1600;
  std::string data = "data" + std::string(1, static_cast<char>((frames * 4) & 0xff)) +
                     std::string(1, static_cast<char>((frames * 4) >> 8)) + std::string(2, '\0') +
                     std::string(static_cast<size_t>(frames) * 4, '\0');
  std::string body = "WAVE" + fmt + list + data;
  const uint32_t riff = static_cast<uint32_t>(body.size());
  std::string bytes = "RIFF" + std::string{static_cast<char>(riff & 0xff), static_cast<char>((riff >> 8) & 0xff),
                                           static_cast<char>((riff >> 16) & 0xff), '\0'} + body;
  auto r = DecodeAudioMemory(bytes, Processor(16000));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->samples.size(), size_t{frames});
}

}  // namespace
}  // namespace mlc
