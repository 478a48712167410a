// Hand-written WAV/RF64 bytes and tone measurements for the audio frontend's tests.
#include "support/wav_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace mlc::test {
namespace {

void PutLe(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string Chunk(const std::string& id, const std::string& body, int64_t size_override = -1) {
  std::string out = id.substr(0, 4);
  out.resize(4, ' ');
  PutLe(out, size_override >= 0 ? static_cast<uint64_t>(size_override) : body.size(), 4);
  out += body;
  if (body.size() % 2 == 1) out.push_back('\0');  // RIFF pad byte
  return out;
}

bool IsFloat(WavSample f) { return f == WavSample::kF32 || f == WavSample::kF64; }

int64_t QuantizeInt(double x, int bits) {
  const double scale = std::ldexp(1.0, bits - 1);
  double q = std::nearbyint(x * scale);
  return static_cast<int64_t>(std::clamp(q, -scale, scale - 1));
}

std::string FmtBody(const WavLayout& l) {
  const int bits = WavSampleBits(l.format);
  const int64_t block = l.channels * bits / 8;
  std::string fmt;
  uint16_t tag = IsFloat(l.format) ? 3 : 1;
  PutLe(fmt, l.extensible ? 0xFFFE : tag, 2);
  PutLe(fmt, static_cast<uint64_t>(l.channels), 2);
  PutLe(fmt, static_cast<uint64_t>(l.sample_rate_hz), 4);
  PutLe(fmt, static_cast<uint64_t>(l.sample_rate_hz * block), 4);
  PutLe(fmt, static_cast<uint64_t>(block), 2);
  PutLe(fmt, static_cast<uint64_t>(bits), 2);
  if (l.extensible) {
    PutLe(fmt, 22, 2);    // cbSize
    PutLe(fmt, static_cast<uint64_t>(bits), 2);  // valid bits per sample
    PutLe(fmt, l.channels == 1 ? 0x4 : l.channels == 2 ? 0x3 : 0x3F, 4);  // channel mask
    PutLe(fmt, tag, 2);  // sub-format GUID xxxx0000-0000-0010-8000-00AA00389B71
    const unsigned char guid_tail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                         0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};
    fmt.append(reinterpret_cast<const char*>(guid_tail), sizeof guid_tail);
  } else if (IsFloat(l.format)) {
    PutLe(fmt, 0, 2);  // cbSize
  }
  return fmt;
}

}  // namespace

const char* WavSampleName(WavSample f) {
  switch (f) {
    case WavSample::kU8: return "pcm_u8";
    case WavSample::kS16: return "pcm_s16";
    case WavSample::kS24: return "pcm_s24";
    case WavSample::kS32: return "pcm_s32";
    case WavSample::kF32: return "f32";
    case WavSample::kF64: return "f64";
  }
  return "?";
}

int WavSampleBits(WavSample f) {
  switch (f) {
    case WavSample::kU8: return 8;
    case WavSample::kS16: return 16;
    case WavSample::kS24: return 24;
    case WavSample::kS32: return 32;
    case WavSample::kF32: return 32;
    case WavSample::kF64: return 64;
  }
  return 0;
}

double Quantize(double x, WavSample f) {
  if (f == WavSample::kF32) return static_cast<float>(x);
  if (f == WavSample::kF64) return x;
  const int bits = WavSampleBits(f);
  return std::ldexp(static_cast<double>(QuantizeInt(x, bits)), -(bits - 1));
}

std::string EncodeSamples(const std::vector<double>& interleaved, WavSample f) {
  std::string out;
  out.reserve(interleaved.size() * static_cast<size_t>(WavSampleBits(f) / 8));
  for (double x : interleaved) {
    switch (f) {
      case WavSample::kU8: PutLe(out, static_cast<uint64_t>(QuantizeInt(x, 8) + 128), 1); break;
      case WavSample::kS16: PutLe(out, static_cast<uint64_t>(QuantizeInt(x, 16)), 2); break;
      case WavSample::kS24: PutLe(out, static_cast<uint64_t>(QuantizeInt(x, 24)), 3); break;
      case WavSample::kS32: PutLe(out, static_cast<uint64_t>(QuantizeInt(x, 32)), 4); break;
      case WavSample::kF32: {
        float v = static_cast<float>(x);
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        PutLe(out, bits, 4);
        break;
      }
      case WavSample::kF64: {
        uint64_t bits;
        std::memcpy(&bits, &x, 8);
        PutLe(out, bits, 8);
        break;
      }
    }
  }
  return out;
}

std::string WavFile(const WavLayout& l, const std::string& sample_bytes,
                    int64_t data_size_override) {
  std::string body = "WAVE";
  const uint64_t data_size = data_size_override >= 0 ? static_cast<uint64_t>(data_size_override)
                                                     : sample_bytes.size();
  if (l.rf64) {
    std::string ds64;
    PutLe(ds64, 0, 8);  // RIFF size, patched below
    PutLe(ds64, data_size, 8);
    PutLe(ds64, data_size / static_cast<uint64_t>(l.channels * WavSampleBits(l.format) / 8), 8);
    PutLe(ds64, 0, 4);  // table length
    body += Chunk("ds64", ds64);
  }
  for (const auto& [id, chunk] : l.before_fmt) body += Chunk(id, chunk);
  body += Chunk("fmt ", FmtBody(l));
  for (const auto& [id, chunk] : l.before_data) body += Chunk(id, chunk);
  body += Chunk("data", sample_bytes, l.rf64 ? 0xFFFFFFFF : static_cast<int64_t>(data_size));
  for (const auto& [id, chunk] : l.after_data) body += Chunk(id, chunk);
  std::string out = l.rf64 ? "RF64" : "RIFF";
  PutLe(out, l.rf64 ? 0xFFFFFFFFu : body.size(), 4);
  out += body;
  if (l.rf64) {  // ds64 RIFF size sits right after "RF64" size "WAVE" "ds64" size
    std::string riff_size;
    PutLe(riff_size, out.size() - 8, 8);
    out.replace(20, 8, riff_size);
  }
  return out;
}

std::string EncodeWav(const WavLayout& layout, const std::vector<double>& interleaved) {
  return WavFile(layout, EncodeSamples(interleaved, layout.format));
}

std::vector<double> Tones(const std::vector<Tone>& tones, int64_t channels, int64_t rate,
                          int64_t frames) {
  std::vector<double> out(static_cast<size_t>(frames * channels), 0.0);
  for (const Tone& t : tones) {
    const double w = 2 * std::numbers::pi * t.freq_hz / static_cast<double>(rate);
    for (int64_t i = 0; i < frames; ++i) {
      const double s = std::sin(w * static_cast<double>(i));
      for (int64_t c = 0; c < channels; ++c) out[static_cast<size_t>(i * channels + c)] += t.amplitudes[static_cast<size_t>(c)] * s;
    }
  }
  return out;
}

double ToneSnrDb(const std::vector<float>& x, double amp, double freq_hz, int64_t rate,
                 size_t begin, size_t end) {
  const double w = 2 * std::numbers::pi * freq_hz / static_cast<double>(rate);
  double signal = 0, noise = 0;
  for (size_t i = begin; i < end && i < x.size(); ++i) {
    const double ref = amp * std::sin(w * static_cast<double>(i));
    signal += ref * ref;
    noise += (x[i] - ref) * (x[i] - ref);
  }
  if (noise == 0) return 400;
  return 10 * std::log10(signal / noise);
}

double LevelDb(const std::vector<float>& x, size_t begin, size_t end, double reference_rms) {
  double sum = 0;
  size_t n = 0;
  for (size_t i = begin; i < end && i < x.size(); ++i, ++n) sum += double(x[i]) * x[i];
  if (n == 0 || sum == 0) return -400;
  return 20 * std::log10(std::sqrt(sum / static_cast<double>(n)) / reference_rms);
}

std::vector<float> NoiseWithPauses(double seconds, const std::vector<std::pair<double, double>>& gaps, int64_t rate) {
  std::vector<float> pcm(static_cast<size_t>(seconds * static_cast<double>(rate)));
  uint32_t state = 12345;
  for (size_t i = 0; i < pcm.size(); ++i) {
    state = state * 1664525u + 1013904223u;
    const double t = static_cast<double>(i) / static_cast<double>(rate);
    bool silent = false;
    for (const auto& [a, b] : gaps) silent = silent || (t >= a && t < b);
    pcm[i] = silent ? 0.0f : 0.3f * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
  }
  return pcm;
}

}  // namespace mlc::test
