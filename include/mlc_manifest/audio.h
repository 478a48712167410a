// The audio frontend (SPEC 6.1): turns a recording (a file, bytes in memory or raw float
// samples) into exactly what an `audio_decode` processor declares: mono float32 PCM at
// sample_rate_hz, with the contract's canonical length. 16-bit WAV is read directly, other formats
// by libsndfile, resampling is soxr's; the source is streamed, so memory stays proportional to
// the output (or a few blocks, streamed to a sink).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"

namespace mlc {

enum class ResampleQuality {
  kHigh,      // soxr HQ (20-bit precision), flat passband; the default
  kVeryHigh,  // soxr VHQ (28-bit precision), flat passband
};
const char* ResampleQualityName(ResampleQuality quality);  // "high" / "very-high"

struct AudioOptions {
  ResampleQuality quality = ResampleQuality::kHigh;
  // Limits on untrusted input (ErrorCode::kLimit when exceeded).
  int64_t max_channels = 256;
  int64_t max_source_rate_hz = 1'536'000;
  // Largest resampling ratio either way (target / source or source / target).
  int64_t max_rate_ratio = 4096;
  // Largest magnitude of a decoded (downmixed) sample: float audio lies within [-1, 1], and a
  // finite sample near FLT_MAX would overflow the mel spectrum into NaN rows. A sample over it is
  // kLimit at its frame ("frame N").
  double max_sample_magnitude = 1e4;
};

// What the recording was, as found in its header (and, for frames, as decoded).
struct AudioSourceInfo {
  std::string container;      // "WAV", "WAVEX", "RF64", "FLAC", "OGG", "MP3", "raw", ...
  std::string sample_format;  // "pcm_u8", "pcm_s16", "pcm_s24", "pcm_s32", "f32", "f64", ...
  int64_t sample_rate_hz = 0;
  int64_t channels = 0;
  int64_t frames = 0;          // frames decoded
  double duration_s = 0;       // frames / sample_rate_hz
};

struct DecodedAudio {
  std::vector<float> samples;  // mono PCM, exactly the canonical length
  int64_t sample_rate_hz = 0;  // the processor's rate
  AudioSourceInfo source;
};

// SPEC 6.1's canonical length: n at the same rate, else max(1, round_half_up(n * target /
// source)), in exact integer arithmetic. n = 0 gives 0 (a recording without samples is
// rejected before this matters). Rates must be >= 1.
int64_t CanonicalAudioLength(int64_t frames, int64_t source_rate_hz, int64_t target_rate_hz);

// Checks the processor itself (rate >= 1, channels == 1, 1 <= min <= max); kUsage otherwise.
Status CheckAudioProcessor(const AudioDecode& processor);

// Where a streamed decode puts the canonical samples, in order, block by block.
class AudioSink {
 public:
  virtual ~AudioSink() = default;
  // The canonical length, when a header tells it before the first block (a hint: a recording
  // may still fail or, without a header count, end elsewhere).
  virtual void Expect(int64_t samples) { (void)samples; }
  // The next samples (valid only during the call); an error stops the decode with it.
  virtual Status Write(std::span<const float> samples) = 0;
};

// What a streamed decode made: the canonical sample count at the processor's rate, and the source.
struct StreamedAudio {
  int64_t samples = 0;
  int64_t sample_rate_hz = 0;
  AudioSourceInfo source;
};

// DecodeAudioFile with the samples handed to `sink` as they are made instead of held, so that
// memory stays a few blocks whatever the length (e.g. straight into an output file). The sink
// gets exactly `samples` values in total when this succeeds; when it fails, part of them.
Result<StreamedAudio> StreamAudioFile(const std::string& path, const AudioDecode& processor,
                                      AudioSink& sink, const AudioOptions& options = {});

// Decodes a file ("-": standard input, up to 1 GiB). An unreadable file is ErrorCode::kIo; a file
// that is not audio, or a recording the processor rejects, is kInvalid (kLimit for AudioOptions
// limits). Errors name the file as their document.
Result<DecodedAudio> DecodeAudioFile(const std::string& path, const AudioDecode& processor,
                                     const AudioOptions& options = {});

// Decodes an encoded file held in memory (WAV, FLAC, Ogg, MP3, ... as libsndfile reads them).
Result<DecodedAudio> DecodeAudioMemory(std::string_view bytes, const AudioDecode& processor,
                                       const AudioOptions& options = {});

// Takes raw float samples (interleaved when channels > 1) at sample_rate_hz.
Result<DecodedAudio> DecodeAudioSamples(std::span<const float> interleaved, int64_t channels,
                                        int64_t sample_rate_hz, const AudioDecode& processor,
                                        const AudioOptions& options = {});

// ---- Long recordings ----

// Where a recording of pcm.size() samples longer than processor.max_samples is cut into windows
// of at most max_samples each (and at least min_samples where the length allows): the end of
// each window, in order, the last one pcm.size(); {pcm.size()} when it fits one. Each cut is at
// the quietest 20 ms (short-time energy, in 10 ms steps) within the last quarter of its window
// (at most its last 5 s), so that a pause there is where the recording is cut; the latest of
// equally quiet places wins.
std::vector<int64_t> AudioWindowEnds(std::span<const float> pcm, const AudioDecode& processor);

// AudioWindowEnds as a recording streams in (an AudioSink for StreamAudioFile): each window is
// handed on as soon as its cut is known -- the same windows, while holding at most about one
// window of samples, whatever the recording's length.
class AudioWindower : public AudioSink {
 public:
  // A window's samples (valid during the call) and where it starts in the recording; an error
  // stops the decode with it.
  using OnWindow = std::function<Status(std::span<const float> window, int64_t start)>;
  AudioWindower(const AudioDecode& processor, OnWindow on_window);
  void Expect(int64_t samples) override { expected_ = samples; }
  Status Write(std::span<const float> samples) override;
  // Hands on the windows that are left; call once the decode has succeeded.
  Status Finish();
  // The canonical length a header announced (0 when none).
  int64_t expected() const { return expected_; }

 private:
  AudioDecode processor_;
  OnWindow on_window_;
  std::vector<float> buffer_;  // the samples from start_ on
  int64_t start_ = 0;
  int64_t expected_ = 0;
};

}  // namespace mlc
