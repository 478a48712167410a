// The audio frontend's streaming core: canonical lengths (SPEC 6.1), channel averaging with the
// non-finite check, and soxr resampling (through the resampler module) fed block by block, its
// output handed to a sink as it is made (in memory, or straight into a file).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "media/audio_backend.h"
#include "media/audio_internal.h"

namespace mlc {

const char* ResampleQualityName(ResampleQuality quality) {
  return quality == ResampleQuality::kVeryHigh ? "very-high" : "high";
}

int64_t CanonicalAudioLength(int64_t frames, int64_t source_rate_hz, int64_t target_rate_hz) {
  if (frames <= 0 || source_rate_hz <= 0 || target_rate_hz <= 0) return 0;
  if (source_rate_hz == target_rate_hz) return frames;
  __extension__ typedef unsigned __int128 u128;
  // round_half_up(n * t / s) = floor((2 n t + s) / (2 s)), exact in 128 bits.
  u128 s = static_cast<u128>(source_rate_hz);
  u128 num = 2 * static_cast<u128>(frames) * static_cast<u128>(target_rate_hz) + s;
  u128 q = num / (2 * s);
  constexpr u128 kMax = static_cast<u128>(std::numeric_limits<int64_t>::max());
  if (q > kMax) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(1, static_cast<int64_t>(q));
}

Status CheckAudioProcessor(const AudioDecode& p) {
  auto usage = [](std::string path, std::string message) {
    return Error{ErrorCode::kUsage, std::move(path), std::move(message)};
  };
  if (p.sample_rate_hz < 1) return usage("sample_rate_hz", "expected an integer >= 1");
  if (p.channels != 1) return usage("channels", "expected 1 (mono output)");
  if (p.min_samples < 1) return usage("min_samples", "expected an integer >= 1");
  if (p.max_samples < p.min_samples) {
    return usage("max_samples", "expected an integer >= min_samples (" +
                                    std::to_string(p.min_samples) + ")");
  }
  return Status::Ok();
}

namespace audio_internal {
namespace {

constexpr size_t kScratchSamples = 16384;

// A number as %g prints it ("3.40282e+38", "10000").
std::string NumberText(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

Error Limit(std::string path, std::string message) {
  return Error{ErrorCode::kLimit, std::move(path), std::move(message)};
}

std::string LengthText(int64_t frames, int64_t source_rate, const AudioDecode& p, int64_t n) {
  std::string text = std::to_string(frames) + " frames at " + std::to_string(source_rate) + " Hz";
  if (source_rate != p.sample_rate_hz) {
    text += " make " + std::to_string(n) + " samples at " + std::to_string(p.sample_rate_hz) + " Hz";
  }
  return text;
}

Error TooLong(int64_t frames, int64_t source_rate, const AudioDecode& p, bool at_least) {
  int64_t n = CanonicalAudioLength(frames, source_rate, p.sample_rate_hz);
  return Invalid("", std::string("recording too long: ") + (at_least ? "at least " : "") +
                         LengthText(frames, source_rate, p, n) + ", over max_samples " +
                         std::to_string(p.max_samples));
}

Error TooShort(int64_t frames, int64_t source_rate, const AudioDecode& p) {
  int64_t n = CanonicalAudioLength(frames, source_rate, p.sample_rate_hz);
  return Invalid("", "recording too short: " + LengthText(frames, source_rate, p, n) +
                         ", under min_samples " + std::to_string(p.min_samples));
}

Error NoFrames() { return Invalid("", "recording has zero frames (no samples to decode)"); }

// Says why frame `frame` could not be averaged: which channel is non-finite, or the range.
template <class T>
Error BadFrame(const T* samples, int64_t channels, int64_t frame) {
  for (int64_t c = 0; c < channels; ++c) {
    if (!std::isfinite(samples[c])) {
      return Invalid("frame " + std::to_string(frame),
                     std::string("non-finite sample (") + (std::isnan(samples[c]) ? "NaN" : "infinity") +
                         ") in channel " + std::to_string(c) + ", expected a finite number");
    }
  }
  return Invalid("frame " + std::to_string(frame),
                 "sample value outside the float32 range, expected a finite float32 mean");
}

template <class T>
Status Downmix(const T* in, int64_t frames, int64_t channels, int64_t first_frame, float* out) {
  bool all_finite = true;
  if (channels == 1) {
    for (int64_t i = 0; i < frames; ++i) {
      out[i] = static_cast<float>(in[i]);
      all_finite &= std::isfinite(out[i]);
    }
  } else if (channels == 2) {
    for (int64_t i = 0; i < frames; ++i) {
      double sum = static_cast<double>(in[2 * i]) + static_cast<double>(in[2 * i + 1]);
      out[i] = static_cast<float>(sum * 0.5);
      all_finite &= std::isfinite(out[i]);
    }
  } else {
    const double c = static_cast<double>(channels);
    for (int64_t i = 0; i < frames; ++i) {
      const T* frame = in + i * channels;
      double sum = 0;
      for (int64_t k = 0; k < channels; ++k) sum += static_cast<double>(frame[k]);
      out[i] = static_cast<float>(sum / c);
      all_finite &= std::isfinite(out[i]);
    }
  }
  if (all_finite) return Status::Ok();
  for (int64_t i = 0; i < frames; ++i) {
    if (!std::isfinite(out[i])) return BadFrame(in + i * channels, channels, first_frame + i);
  }
  return Status::Ok();
}

}  // namespace

Status CheckSourceShape(int64_t rate, int64_t channels, const AudioOptions& options) {
  if (channels < 1) return Invalid("", "recording declares no channels, expected at least 1");
  if (channels > options.max_channels) {
    return Limit("", "recording has " + std::to_string(channels) + " channels, over the limit of " +
                         std::to_string(options.max_channels));
  }
  if (rate < 1) return Invalid("", "recording declares sample rate " + std::to_string(rate) +
                                       " Hz, expected at least 1 Hz");
  if (rate > options.max_source_rate_hz) {
    return Limit("", "sample rate " + std::to_string(rate) + " Hz is over the limit of " +
                         std::to_string(options.max_source_rate_hz) + " Hz");
  }
  return Status::Ok();
}

Status CheckDeclaredFrames(int64_t frames, int64_t source_rate, const AudioDecode& p) {
  if (frames <= 0) return NoFrames();
  int64_t n = CanonicalAudioLength(frames, source_rate, p.sample_rate_hz);
  if (n > p.max_samples) return TooLong(frames, source_rate, p, false);
  if (n < p.min_samples) return TooShort(frames, source_rate, p);
  return Status::Ok();
}

Status DownmixDouble(const double* in, int64_t frames, int64_t channels, int64_t first_frame,
                     float* out) {
  return Downmix(in, frames, channels, first_frame, out);
}

Status DownmixFloat(const float* in, int64_t frames, int64_t channels, int64_t first_frame,
                    float* out) {
  return Downmix(in, frames, channels, first_frame, out);
}

void VectorSink::Expect(int64_t samples) {
  if (samples > 0) samples_.reserve(static_cast<size_t>(samples));
}

Status VectorSink::Write(std::span<const float> samples) {
  samples_.insert(samples_.end(), samples.begin(), samples.end());
  return Status::Ok();
}

MonoPipeline::MonoPipeline(int64_t source_rate_hz, const AudioDecode& processor, AudioSink& sink)
    : source_rate_hz_(source_rate_hz), processor_(processor), sink_(sink) {}

MonoPipeline::~MonoPipeline() {
  if (resampler_) backend_->destroy(resampler_);
}

Result<std::unique_ptr<MonoPipeline>> MonoPipeline::Create(int64_t source_rate_hz,
                                                           const AudioDecode& processor,
                                                           const AudioOptions& options, AudioSink& sink) {
  Status ok = CheckAudioProcessor(processor);
  MLC_RETURN_IF_ERROR(ok);
  int64_t hi = std::max(source_rate_hz, processor.sample_rate_hz);
  int64_t lo = std::min(source_rate_hz, processor.sample_rate_hz);
  if (lo < 1 || hi / lo >= options.max_rate_ratio) {
    return Limit("", "resampling " + std::to_string(source_rate_hz) + " Hz to " +
                         std::to_string(processor.sample_rate_hz) +
                         " Hz is over the ratio limit of " + std::to_string(options.max_rate_ratio));
  }
  if (!(options.max_sample_magnitude > 0)) {
    return Error{ErrorCode::kUsage, "", "max_sample_magnitude must be a positive number"};
  }
  std::unique_ptr<MonoPipeline> p(new MonoPipeline(source_rate_hz, processor, sink));
  p->max_magnitude_ = options.max_sample_magnitude;
  if (source_rate_hz == processor.sample_rate_hz) return p;
  auto backend = LoadModule<MlcResamplerBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcAudioError error{};
  MlcResampler* r = (*backend)->create(
      static_cast<double>(source_rate_hz), static_cast<double>(processor.sample_rate_hz),
      options.quality == ResampleQuality::kVeryHigh ? 1 : 0, &error);
  if (!r) {
    return Error{ErrorCode::kUnsupported, "",
                 std::string("cannot resample ") + std::to_string(source_rate_hz) + " Hz to " +
                     std::to_string(processor.sample_rate_hz) + " Hz: " + error.message};
  }
  p->backend_ = *backend;
  p->resampler_ = r;
  p->scratch_.resize(kScratchSamples);
  return p;
}

void MonoPipeline::Expect(int64_t frames) {
  sink_.Expect(CanonicalAudioLength(frames, source_rate_hz_, processor_.sample_rate_hz));
}

Status MonoPipeline::Write(const float* data, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(data[i])) {
      return Invalid("sample " + std::to_string(written_ + static_cast<int64_t>(i)),
                     "resampled value outside the float32 range, expected a finite sample");
    }
  }
  written_ += static_cast<int64_t>(count);
  return sink_.Write(std::span<const float>(data, count));
}

Status MonoPipeline::Emit(const float* data, size_t count, int64_t limit) {
  if (!pending_.empty()) {  // earlier samples first
    pending_.insert(pending_.end(), data, data + count);
    const size_t now = static_cast<size_t>(std::clamp<int64_t>(limit - written_, 0, static_cast<int64_t>(pending_.size())));
    Status wrote = Write(pending_.data(), now);
    MLC_RETURN_IF_ERROR(wrote);
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(now));
    return Status::Ok();
  }
  const size_t now = static_cast<size_t>(std::clamp<int64_t>(limit - written_, 0, static_cast<int64_t>(count)));
  Status wrote = Write(data, now);
  MLC_RETURN_IF_ERROR(wrote);
  pending_.assign(data + now, data + count);
  return Status::Ok();
}

Status MonoPipeline::Resample(const float* in, size_t count) {
  // Nothing past the canonical length of the frames pushed so far can be part of the output.
  const int64_t limit = CanonicalAudioLength(frames_, source_rate_hz_, processor_.sample_rate_hz);
  size_t consumed = 0;
  int idle = 0;
  // in == nullptr flushes: drain until soxr has nothing more to give.
  for (;;) {
    size_t idone = 0, odone = 0;
    MlcAudioError error{};
    if (!backend_->resample(resampler_, in ? in + consumed : nullptr, in ? count - consumed : 0,
                            &idone, scratch_.data(), scratch_.size(), &odone, &error)) {
      return Error{ErrorCode::kUnsupported, "", std::string("resampler failed: ") + error.message};
    }
    Status emitted = Emit(scratch_.data(), odone, limit);
    MLC_RETURN_IF_ERROR(emitted);
    consumed += idone;
    if (in == nullptr) {
      if (odone == 0) return Status::Ok();
      continue;
    }
    if (consumed >= count) return Status::Ok();
    idle = (idone == 0 && odone == 0) ? idle + 1 : 0;
    if (idle > 2) return Error{ErrorCode::kUnsupported, "", "resampler made no progress"};
  }
}

Status MonoPipeline::Push(const float* mono, int64_t count) {
  if (count <= 0) return Status::Ok();
  int64_t total = frames_ + count;
  if (CanonicalAudioLength(total, source_rate_hz_, processor_.sample_rate_hz) >
      processor_.max_samples) {
    return TooLong(total, source_rate_hz_, processor_, true);
  }
  for (int64_t i = 0; i < count; ++i) {
    if (!(std::fabs(mono[i]) <= max_magnitude_)) {  // NaN too
      return Limit("frame " + std::to_string(frames_ + i),
                   "sample value " + NumberText(mono[i]) + " is outside [-" + NumberText(max_magnitude_) + ", " +
                       NumberText(max_magnitude_) + "] (the max_sample_magnitude limit; audio samples lie "
                       "within [-1, 1])");
    }
  }
  frames_ = total;
  if (!resampler_) return Emit(mono, static_cast<size_t>(count), frames_);
  return Resample(mono, static_cast<size_t>(count));
}

Result<int64_t> MonoPipeline::Finish() {
  if (frames_ == 0) return NoFrames();
  const int64_t n = CanonicalAudioLength(frames_, source_rate_hz_, processor_.sample_rate_hz);
  if (n < processor_.min_samples) return TooShort(frames_, source_rate_hz_, processor_);
  if (n > processor_.max_samples) return TooLong(frames_, source_rate_hz_, processor_, false);
  if (resampler_) {
    Status flushed = Resample(nullptr, 0);
    MLC_RETURN_IF_ERROR(flushed);
  }
  pending_.clear();  // past the end: trimmed
  // Zeros after the end when the resampler gave fewer than the canonical length.
  const std::vector<float> zeros(
      static_cast<size_t>(std::clamp<int64_t>(n - written_, 0, static_cast<int64_t>(kScratchSamples))), 0.0f);
  while (written_ < n) {
    const size_t k = static_cast<size_t>(std::min<int64_t>(n - written_, static_cast<int64_t>(zeros.size())));
    Status wrote = Write(zeros.data(), k);
    MLC_RETURN_IF_ERROR(wrote);
  }
  return n;
}

}  // namespace audio_internal
}  // namespace mlc
