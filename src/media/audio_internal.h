// Internals of the audio frontend shared by its two source files: the streaming mono pipeline
// (length bounds, downmix, soxr resampling) that every decoder feeds block by block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "media/audio_backend.h"
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

// Consumes mono blocks at the source rate and yields the canonical output: passes samples
// through at the same rate, else resamples them with soxr (the audio module) as they arrive.
// Rejects the recording as soon as it grows past max_samples.
class MonoPipeline {
 public:
  static Result<std::unique_ptr<MonoPipeline>> Create(int64_t source_rate_hz,
                                                      const AudioDecode& processor,
                                                      const AudioOptions& options);
  ~MonoPipeline();
  MonoPipeline(const MonoPipeline&) = delete;
  MonoPipeline& operator=(const MonoPipeline&) = delete;

  // Frames pushed so far.
  int64_t frames() const { return frames_; }
  // Fails (before resampling them) when these frames would make the recording too long.
  Status Push(const float* mono, int64_t count);
  // Reserves the output for a recording of `frames` source frames (a header's count), so that it
  // is written once instead of grown by copying.
  void ReserveFor(int64_t frames);
  // Flushes the resampler, checks the final length and returns exactly the canonical samples.
  Result<std::vector<float>> Finish();

 private:
  MonoPipeline(int64_t source_rate_hz, const AudioDecode& processor);
  Status Resample(const float* in, size_t count);
  void Append(const float* data, size_t count);

  int64_t source_rate_hz_;
  AudioDecode processor_;
  const MlcAudioBackend* backend_ = nullptr;
  MlcResampler* resampler_ = nullptr;  // null when the rates are equal
  int64_t frames_ = 0;
  std::vector<float> out_;
  std::vector<float> scratch_;
};

}  // namespace mlc::audio_internal
