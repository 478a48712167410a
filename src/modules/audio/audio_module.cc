// The audio module (libmlc_manifest_audio.so): libsndfile's decoders over the caller's byte
// source behind the plain C table of media/audio_backend.h. The audio frontend
// (src/media/audio_*.cc) opens it on first use for what it does not read itself, so no other
// command loads libsndfile or its codec libraries.
#include <sndfile.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <new>

#include "media/audio_backend.h"

struct MlcAudioDecoder {
  MlcAudioSource source;
  sf_count_t pos = 0;
  SNDFILE* file = nullptr;
};

namespace {

void SetText(char* out, size_t room, const char* text) {
  std::snprintf(out, room, "%s", text ? text : "");
}

template <size_t N>
void SetText(char (&out)[N], const char* text) {
  SetText(out, N, text);
}

const char* ContainerName(int format) {
  switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV: return "WAV";
    case SF_FORMAT_WAVEX: return "WAVEX";
    case SF_FORMAT_RF64: return "RF64";
    case SF_FORMAT_W64: return "W64";
    case SF_FORMAT_AIFF: return "AIFF";
    case SF_FORMAT_AU: return "AU";
    case SF_FORMAT_CAF: return "CAF";
    case SF_FORMAT_FLAC: return "FLAC";
    case SF_FORMAT_OGG: return "OGG";
    case SF_FORMAT_MPEG: return "MP3";
    default: break;
  }
  return nullptr;
}

const char* SampleFormatName(int format) {
  switch (format & SF_FORMAT_SUBMASK) {
    case SF_FORMAT_PCM_U8: return "pcm_u8";
    case SF_FORMAT_PCM_S8: return "pcm_s8";
    case SF_FORMAT_PCM_16: return "pcm_s16";
    case SF_FORMAT_PCM_24: return "pcm_s24";
    case SF_FORMAT_PCM_32: return "pcm_s32";
    case SF_FORMAT_FLOAT: return "f32";
    case SF_FORMAT_DOUBLE: return "f64";
    case SF_FORMAT_ULAW: return "ulaw";
    case SF_FORMAT_ALAW: return "alaw";
    case SF_FORMAT_IMA_ADPCM: return "ima_adpcm";
    case SF_FORMAT_MS_ADPCM: return "ms_adpcm";
    case SF_FORMAT_GSM610: return "gsm610";
    case SF_FORMAT_VORBIS: return "vorbis";
    case SF_FORMAT_OPUS: return "opus";
    case SF_FORMAT_MPEG_LAYER_I: return "mp1";
    case SF_FORMAT_MPEG_LAYER_II: return "mp2";
    case SF_FORMAT_MPEG_LAYER_III: return "mp3";
    default: break;
  }
  return nullptr;
}

// Our name for a format, else libsndfile's, else "unknown".
template <size_t N>
void FormatName(char (&out)[N], const char* ours, int masked) {
  if (ours) return SetText(out, ours);
  SF_FORMAT_INFO info{};
  info.format = masked;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof info) == 0 && info.name) {
    return SetText(out, info.name);
  }
  SetText(out, "unknown");
}

// sf_open_virtual callbacks over the caller's source.
sf_count_t Length(void* user) { return static_cast<MlcAudioDecoder*>(user)->source.size; }

sf_count_t Seek(sf_count_t offset, int whence, void* user) {
  auto* d = static_cast<MlcAudioDecoder*>(user);
  const sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? d->pos : d->source.size;
  const sf_count_t target = base + offset;
  if ((offset > 0 && target < base) || target < 0) return -1;  // overflow or before the start
  d->pos = target;
  return d->pos;
}

sf_count_t Read(void* ptr, sf_count_t count, void* user) {
  auto* d = static_cast<MlcAudioDecoder*>(user);
  if (count <= 0 || d->pos >= d->source.size) return 0;
  const int64_t want = std::min<int64_t>(count, d->source.size - d->pos);
  const int64_t got = d->source.read_at(d->source.context, d->pos, ptr, want);
  if (got <= 0) return 0;
  d->pos += got;
  return got;
}

sf_count_t Write(const void*, sf_count_t, void*) { return 0; }

sf_count_t Tell(void* user) { return static_cast<MlcAudioDecoder*>(user)->pos; }

MlcAudioDecoder* Open(const MlcAudioSource* source, MlcAudioFormat* format, MlcAudioError* error) {
  auto* d = new (std::nothrow) MlcAudioDecoder{*source};
  if (!d) {
    SetText(error->message, "out of memory");
    return nullptr;
  }
  SF_VIRTUAL_IO io{Length, Seek, Read, Write, Tell};
  SF_INFO info{};
  d->file = sf_open_virtual(&io, SFM_READ, &info, d);
  if (!d->file) {
    SetText(error->message, sf_strerror(nullptr));
    delete d;
    return nullptr;
  }
  // Integer PCM as doubles scaled by 1/2^(bits-1) (exact); float data unscaled.
  sf_command(d->file, SFC_SET_NORM_DOUBLE, nullptr, SF_TRUE);
  sf_command(d->file, SFC_SET_SCALE_FLOAT_INT_READ, nullptr, SF_FALSE);
  FormatName(format->container, ContainerName(info.format), info.format & SF_FORMAT_TYPEMASK);
  FormatName(format->sample_format, SampleFormatName(info.format), info.format & SF_FORMAT_SUBMASK);
  format->sample_rate_hz = info.samplerate;
  format->channels = info.channels;
  format->frames = info.frames == SF_COUNT_MAX ? -1 : info.frames;
  return d;
}

int64_t ReadFrames(MlcAudioDecoder* d, double* out, int64_t frames, MlcAudioError* error) {
  const sf_count_t got = sf_readf_double(d->file, out, frames);
  if (got > 0) return got;
  if (sf_error(d->file) != SF_ERR_NO_ERROR) {
    SetText(error->message, sf_strerror(d->file));
    return -1;
  }
  return 0;
}

void Close(MlcAudioDecoder* d) {
  if (!d) return;
  if (d->file) sf_close(d->file);
  delete d;
}

}  // namespace

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(audio, MlcAudioBackend) {
  static const MlcAudioBackend backend{MLC_AUDIO_BACKEND_ABI, &Open, &ReadFrames, &Close};
  return &backend;
}
