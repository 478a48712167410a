// The resampler lives in a module of its own (libmlc_manifest_resampler.so, src/modules/resampler/): soxr
// with OpenMP, opened only when a recording's rate differs from the processor's, and without
// libsndfile's codec libraries when the recording is 16-bit WAV read directly. This is the
// plain-C table the module exports and the loader the audio pipeline uses to reach it.
#pragma once

#include <stddef.h>

#include "base/module_loader.h"
#include "media/audio_backend.h"

extern "C" {

// Bumped whenever the table changes.
enum { MLC_RESAMPLER_BACKEND_ABI = 1 };

typedef struct MlcResampler MlcResampler;

typedef struct MlcResamplerBackend {
  int abi;
  // soxr, one channel of float32, one thread, flat passband (HQ or, with very_high, VHQ).
  MlcResampler* (*create)(double from_hz, double to_hz, int very_high, MlcAudioError* error);
  // Takes up to in_count samples (in NULL: flush) and gives up to out_room: 1, or 0 on failure.
  int (*resample)(MlcResampler* resampler, const float* in, size_t in_count, size_t* consumed,
                  float* out, size_t out_room, size_t* produced, MlcAudioError* error);
  void (*destroy)(MlcResampler* resampler);
} MlcResamplerBackend;

}  // extern "C"

// libmlc_manifest_resampler.so, $MLC_MANIFEST_RESAMPLER_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcResamplerBackend, "resampler", "the resampler module (soxr)", MLC_RESAMPLER_BACKEND_ABI);
