// The audio codecs live in a module of their own (libmlc_manifest_audio.so, src/modules/audio/):
// libsndfile with its codec libraries (FLAC, Vorbis, Opus, mpg123, LAME) costs start-up that
// commands without audio, and 16-bit WAV read directly, should not pay (the resampler is a module
// of its own: media/resampler_backend.h). This is the table the module exports -- plain C: opaque
// handles, the caller's byte source as callbacks, error text in caller-provided buffers -- and
// the loader the audio frontend uses to reach it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/module_loader.h"

extern "C" {

// Bumped whenever the table or a struct it passes changes.
enum { MLC_AUDIO_BACKEND_ABI = 2 };

// What went wrong, NUL-terminated and cut to fit.
typedef struct MlcAudioError {
  char message[512];
} MlcAudioError;

// The bytes a decoder reads: read_at fills up to n bytes at offset and returns the count (0 at
// the end, -1 when the source failed: the caller keeps the reason).
typedef struct MlcAudioSource {
  void* context;
  int64_t size;
  int64_t (*read_at)(void* context, int64_t offset, void* buffer, int64_t n);
} MlcAudioSource;

// The header of an opened recording (frames: -1 when unknown).
typedef struct MlcAudioFormat {
  char container[32];      // "WAV", "FLAC", "OGG", "MP3", ...
  char sample_format[32];  // "pcm_s16", "f32", "vorbis", ...
  int64_t sample_rate_hz, channels, frames;
} MlcAudioFormat;

typedef struct MlcAudioDecoder MlcAudioDecoder;

typedef struct MlcAudioBackend {
  int abi;
  // libsndfile over the source, which must outlive the decoder. NULL when it is not audio
  // libsndfile reads. Reads give integer PCM as doubles scaled by 1/2^(bits-1), float unscaled.
  MlcAudioDecoder* (*open)(const MlcAudioSource* source, MlcAudioFormat* format,
                           MlcAudioError* error);
  // Reads up to `frames` interleaved frames: the count, 0 at the end, -1 on a decoding error.
  int64_t (*read)(MlcAudioDecoder* decoder, double* out, int64_t frames, MlcAudioError* error);
  void (*close)(MlcAudioDecoder* decoder);
} MlcAudioBackend;

}  // extern "C"

// libmlc_manifest_audio.so, $MLC_MANIFEST_AUDIO_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcAudioBackend, "audio", "the audio module (libsndfile)", MLC_AUDIO_BACKEND_ABI);
