// libFuzzer target: arbitrary bytes through the audio frontend's decode-from-memory path
// (libsndfile over sf_open_virtual, downmix, soxr). Nothing may crash, hang or leak; a
// recording that decodes must come out at exactly its canonical length, all finite.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "mlc_manifest/audio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  mlc::AudioDecode processor;
  processor.sample_rate_hz = 16000;
  processor.max_samples = 64000;  // small outputs keep each run fast
  mlc::AudioOptions options;
  options.max_channels = 64;
  options.max_source_rate_hz = 384000;
  options.max_rate_ratio = 64;
  auto r = mlc::DecodeAudioMemory(bytes, processor, options);
  if (!r.ok()) return 0;
  const auto& s = r->source;
  if (s.frames < 1 ||
      static_cast<int64_t>(r->samples.size()) !=
          mlc::CanonicalAudioLength(s.frames, s.sample_rate_hz, processor.sample_rate_hz) ||
      r->samples.size() > static_cast<size_t>(processor.max_samples)) {
    std::abort();
  }
  for (float v : r->samples) {
    if (!std::isfinite(v)) std::abort();
  }
  return 0;
}
