// Internals of the audio frontend shared by its two source files: the streaming mono pipeline
// (length bounds, downmix, soxr resampling, hand-over to a sink) that every decoder feeds block
// by block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "media/audio_backend.h"
#include "media/resampler_backend.h"
#include "mlc_manifest/audio.h"

namespace mlc::audio_internal {

// Checks a source's rate and channel count against the options' limits.
Status CheckSourceShape(int64_t sample_rate_hz, int64_t channels, const AudioOptions& options);

// Rejects, from a frame count known in advance (a header), a recording whose canonical length
// falls outside [min_samples, max_samples] or that has no frames.
Status CheckDeclaredFrames(int64_t frames, int64_t source_rate_hz, const AudioDecode& processor);

// Averages `frames` interleaved frames of `channels` samples into out[0..frames). A non-finite
// sample, or a mean outside float32's range, fails with the frame number (counted from
// first_frame) in the error's path.
Status DownmixDouble(const double* in, int64_t frames, int64_t channels, int64_t first_frame,
                     float* out);
Status DownmixFloat(const float* in, int64_t frames, int64_t channels, int64_t first_frame,
                    float* out);

// Gathers a decode's samples in memory (DecodeAudioFile and friends), reserved once from the
// header's length.
class VectorSink final : public AudioSink {
 public:
  void Expect(int64_t samples) override;
  Status Write(std::span<const float> samples) override;
  std::vector<float> Take() { return std::move(samples_); }

 private:
  std::vector<float> samples_;
};

// Consumes mono blocks at the source rate and hands the canonical output to a sink as it is
// made: passes samples through at the same rate, else resamples them with soxr (the resampler
// module) as they arrive. Rejects the recording as soon as it grows past max_samples; the sink
// never gets a sample past the canonical length of the frames pushed so far, nor a non-finite one.
class MonoPipeline {
 public:
  static Result<std::unique_ptr<MonoPipeline>> Create(int64_t source_rate_hz,
                                                      const AudioDecode& processor,
                                                      const AudioOptions& options, AudioSink& sink);
  ~MonoPipeline();
  MonoPipeline(const MonoPipeline&) = delete;
  MonoPipeline& operator=(const MonoPipeline&) = delete;

  // Frames pushed so far.
  int64_t frames() const { return frames_; }
  // Fails (before resampling them) when these frames would make the recording too long or a
  // sample is over the magnitude limit (at its frame).
  Status Push(const float* mono, int64_t count);
  // Tells the sink the canonical length of a recording of `frames` source frames (a header's).
  void Expect(int64_t frames);
  // Flushes the resampler, checks the final length and ends the output at exactly the canonical
  // length (zeros after the end when the resampler gave fewer); the sample count.
  Result<int64_t> Finish();

 private:
  MonoPipeline(int64_t source_rate_hz, const AudioDecode& processor, AudioSink& sink);
  Status Resample(const float* in, size_t count);
  // Hands samples on, up to `limit` in total; the rest waits in pending_ for a later limit.
  Status Emit(const float* data, size_t count, int64_t limit);
  Status Write(const float* data, size_t count);

  int64_t source_rate_hz_;
  AudioDecode processor_;
  AudioSink& sink_;
  const MlcResamplerBackend* backend_ = nullptr;
  MlcResampler* resampler_ = nullptr;  // null when the rates are equal
  double max_magnitude_ = 0;  // AudioOptions::max_sample_magnitude
  int64_t frames_ = 0;
  int64_t written_ = 0;
  std::vector<float> pending_;
  std::vector<float> scratch_;
};

}  // namespace mlc::audio_internal
