// Test inputs for the audio frontend: WAV bytes written by hand (every sample format, plain and
// WAVE_FORMAT_EXTENSIBLE headers, RF64, extra chunks), tones, and quality measurements.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace mlc::test {

enum class WavSample { kU8, kS16, kS24, kS32, kF32, kF64 };
const char* WavSampleName(WavSample format);
int WavSampleBits(WavSample format);

struct WavLayout {
  WavSample format = WavSample::kS16;
  int64_t channels = 1;
  int64_t sample_rate_hz = 16000;
  bool extensible = false;  // WAVE_FORMAT_EXTENSIBLE fmt chunk
  bool rf64 = false;        // RF64 container with a ds64 chunk
  // Chunks written before "fmt ", between "fmt " and "data", and after "data" (id, body).
  std::vector<std::pair<std::string, std::string>> before_fmt, before_data, after_data;
};

// The value a sample decodes to after quantization to this format (integer PCM scaled by
// 1/2^(bits-1), 8-bit unsigned centred at 128; float formats as stored).
double Quantize(double x, WavSample format);

// The sample bytes of interleaved values, little-endian, quantized to the format.
std::string EncodeSamples(const std::vector<double>& interleaved, WavSample format);

// A whole WAV (or RF64) file around already-encoded sample bytes. data_size_override, when
// >= 0, is written as the data chunk's declared size instead of the real one.
std::string WavFile(const WavLayout& layout, const std::string& sample_bytes,
                    int64_t data_size_override = -1);
// WavFile(layout, EncodeSamples(interleaved, layout.format)).
std::string EncodeWav(const WavLayout& layout, const std::vector<double>& interleaved);

// interleaved[frame * channels + c] = amplitudes[c] * sin(2 pi f t + phase) for each tone.
struct Tone {
  double freq_hz;
  std::vector<double> amplitudes;  // one per channel
};
std::vector<double> Tones(const std::vector<Tone>& tones, int64_t channels, int64_t rate,
                          int64_t frames);

// 10 log10(sum ref^2 / sum (x - ref)^2) over [begin, end) where ref[i] = amp sin(2 pi f i / rate).
double ToneSnrDb(const std::vector<float>& x, double amp, double freq_hz, int64_t rate,
                 size_t begin, size_t end);
// Speech-like noise (a deterministic pseudo-random signal of amplitude 0.15) at `rate`, silent
// in the gaps [a, b) given in seconds.
std::vector<float> NoiseWithPauses(double seconds, const std::vector<std::pair<double, double>>& gaps,
                                   int64_t rate = 16000);

// 20 log10(rms(x[begin, end)) / reference_rms).
double LevelDb(const std::vector<float>& x, size_t begin, size_t end, double reference_rms);

}  // namespace mlc::test
