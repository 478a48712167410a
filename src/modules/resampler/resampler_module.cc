// The resampler module (libmlc_manifest_resampler.so): soxr behind the plain C table of
// media/resampler_backend.h, opened by the audio pipeline only when a recording's rate differs
// from the processor's, so that no other command (and no other recording) loads soxr and OpenMP.
#include <soxr.h>

#include <cstdio>

#include "media/resampler_backend.h"

namespace {

void SetError(MlcAudioError* error, const char* text) {
  std::snprintf(error->message, sizeof error->message, "%s", text ? text : "");
}

MlcResampler* CreateResampler(double from_hz, double to_hz, int very_high, MlcAudioError* error) {
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  // soxr's recipes roll the passband off by up to 0.01 dB towards its edge (0.913 of Nyquist),
  // which costs 7 kHz tones at 16 kHz output to ~62 dB SNR from 44.1 kHz; ROLLOFF_NONE keeps
  // the passband flat (>= 130 dB SNR) with the same stopband (>= 125 dB from Nyquist).
  soxr_quality_spec_t q = soxr_quality_spec(very_high ? SOXR_VHQ : SOXR_HQ, SOXR_ROLLOFF_NONE);
  soxr_runtime_spec_t rt = soxr_runtime_spec(1);
  soxr_error_t err = nullptr;
  soxr_t s = soxr_create(from_hz, to_hz, 1, &err, &io, &q, &rt);
  if (!s || err) {
    if (s) soxr_delete(s);
    SetError(error, err ? err : "soxr failed");
    return nullptr;
  }
  return reinterpret_cast<MlcResampler*>(s);
}

int Resample(MlcResampler* r, const float* in, size_t in_count, size_t* consumed, float* out,
             size_t out_room, size_t* produced, MlcAudioError* error) {
  *consumed = *produced = 0;
  soxr_error_t err = soxr_process(reinterpret_cast<soxr_t>(r), in, in ? in_count : 0, consumed,
                                  out, out_room, produced);
  if (!err) return 1;
  SetError(error, err);
  return 0;
}

void DeleteResampler(MlcResampler* r) {
  if (r) soxr_delete(reinterpret_cast<soxr_t>(r));
}

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(resampler, MlcResamplerBackend) {
  static const MlcResamplerBackend backend{MLC_RESAMPLER_BACKEND_ABI, &CreateResampler, &Resample,
                                           &DeleteResampler};
  return &backend;
}
