// The audio frontend's decoders: plain 16-bit PCM WAV read directly (the common case, with the
// same samples libsndfile gives and a third of its work), libsndfile over a file of the Env or
// over bytes in memory (sf_open_virtual) for everything else, and raw float samples. Each reads
// blocks of frames, averages the channels and feeds the streaming pipeline, never holding the
// whole source.
#include <sndfile.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "media/audio_internal.h"
#include "mlc_manifest/audio.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

using audio_internal::MonoPipeline;

// About this many interleaved samples are decoded per block, whatever the channel count.
constexpr int64_t kBlockSamples = 1 << 15;

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, SndfileCloser>;

std::string ContainerName(int format) {
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
  SF_FORMAT_INFO info{};
  info.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof info) == 0 && info.name) {
    return info.name;
  }
  return "unknown";
}

std::string SampleFormatName(int format) {
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
  SF_FORMAT_INFO info{};
  info.format = format & SF_FORMAT_SUBMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof info) == 0 && info.name) {
    return info.name;
  }
  return "unknown";
}

AudioSourceInfo SourceInfo(const SF_INFO& info) {
  AudioSourceInfo s;
  s.container = ContainerName(info.format);
  s.sample_format = SampleFormatName(info.format);
  s.sample_rate_hz = info.samplerate;
  s.channels = info.channels;
  return s;
}

void Finalize(AudioSourceInfo& s, int64_t frames) {
  s.frames = frames;
  s.duration_s = s.sample_rate_hz > 0 ? static_cast<double>(frames) / s.sample_rate_hz : 0.0;
}

// What the first bytes of a file that is not audio libsndfile reads look like, for the message.
std::string Sniff(std::string_view head) {
  if (head.size() >= 12 && head.substr(4, 4) == "ftyp") return "an MP4/M4A (AAC) container";
  if (head.starts_with("\x1A\x45\xDF\xA3")) return "a Matroska/WebM container";
  if (head.starts_with("\x89PNG") || head.starts_with("\xFF\xD8\xFF")) return "an image";
  if (head.starts_with("#!AMR")) return "AMR";
  if (head.starts_with("\x30\x26\xB2\x75")) return "an ASF/WMA container";
  return "";
}

// A file that is not WAV, FLAC, Ogg or MP3: names the formats taken and how to convert.
Error NotAudio(const std::string& file, std::string_view head, int64_t sample_rate_hz) {
  std::string kind = Sniff(head);
  std::string input = file.empty() ? "in.m4a" : file;
  return Invalid("", "not a recognized audio file" + (kind.empty() ? "" : " (" + kind + ")") +
                            ": audio must be WAV, FLAC, Ogg (Vorbis, Opus) or MP3; convert it "
                            "first, e.g. `ffmpeg -i " + input + " -ar " +
                            std::to_string(sample_rate_hz) + " out.wav`");
}

// Reads every frame of an open file into the pipeline. Checks the header first.
Result<DecodedAudio> DecodeOpen(SNDFILE* sf, const SF_INFO& info, const AudioDecode& processor,
                                const AudioOptions& options) {
  Status shape = audio_internal::CheckSourceShape(info.samplerate, info.channels, options);
  MLC_RETURN_IF_ERROR(shape);
  if (info.frames != SF_COUNT_MAX) {
    Status declared = audio_internal::CheckDeclaredFrames(info.frames, info.samplerate, processor);
    MLC_RETURN_IF_ERROR(declared);
  }
  auto pipeline = MonoPipeline::Create(info.samplerate, processor, options);
  MLC_RETURN_IF_ERROR(pipeline);
  MonoPipeline& pipe = **pipeline;
  if (info.frames != SF_COUNT_MAX) pipe.ReserveFor(info.frames);

  // Integer PCM as doubles scaled by 1/2^(bits-1) (exact); float data unscaled.
  sf_command(sf, SFC_SET_NORM_DOUBLE, nullptr, SF_TRUE);
  sf_command(sf, SFC_SET_SCALE_FLOAT_INT_READ, nullptr, SF_FALSE);
  const int64_t channels = info.channels;
  const int64_t block_frames = std::max<int64_t>(1, kBlockSamples / channels);
  std::vector<double> block(static_cast<size_t>(block_frames * channels));
  std::vector<float> mono(static_cast<size_t>(block_frames));
  for (;;) {
    sf_count_t got = sf_readf_double(sf, block.data(), block_frames);
    if (got <= 0) break;
    Status mixed = audio_internal::DownmixDouble(block.data(), got, channels, pipe.frames(),
                                                 mono.data());
    MLC_RETURN_IF_ERROR(mixed);
    Status pushed = pipe.Push(mono.data(), got);
    MLC_RETURN_IF_ERROR(pushed);
  }
  if (sf_error(sf) != SF_ERR_NO_ERROR) {
    return Invalid("frame " + std::to_string(pipe.frames()),
                   std::string("decoding failed: ") + sf_strerror(sf));
  }
  auto samples = pipe.Finish();
  MLC_RETURN_IF_ERROR(samples);
  DecodedAudio out;
  out.samples = std::move(*samples);
  out.sample_rate_hz = processor.sample_rate_hz;
  out.source = SourceInfo(info);
  Finalize(out.source, pipe.frames());
  return out;
}

// RIFF/RF64 WAVE chunk walk before libsndfile sees the bytes: a chunk other than "data" that
// claims to run past the end of the file is rejected (libsndfile 1.2 can spin for a very long
// time on such a LIST chunk). `read_at` fills up to n bytes at an offset and returns the count;
// `where` names the file (the errors' document; "" for bytes in memory).
template <class ReadAt>
Status CheckRiffChunks(ReadAt&& read_at, uint64_t size, const std::string& where) {
  unsigned char head[12];
  if (size < 12 || read_at(0, head, 12) != 12) return Status::Ok();
  bool riff = std::memcmp(head, "RIFF", 4) == 0 || std::memcmp(head, "RF64", 4) == 0;
  if (!riff || std::memcmp(head + 8, "WAVE", 4) != 0) return Status::Ok();
  uint64_t offset = 12;
  for (int chunks = 0; offset + 8 <= size; ++chunks) {
    unsigned char ch[8];
    if (read_at(offset, ch, 8) != 8) break;
    if (chunks > 100000) {
      return Error{ErrorCode::kInvalid, "byte " + std::to_string(offset),
                   "more than 100000 RIFF chunks before the data chunk", where};
    }
    std::string id(reinterpret_cast<const char*>(ch), 4);
    if (id == "data") break;  // a short data chunk is a truncated recording, read what is there
    uint64_t bytes = static_cast<uint64_t>(ch[4]) | static_cast<uint64_t>(ch[5]) << 8 |
                     static_cast<uint64_t>(ch[6]) << 16 | static_cast<uint64_t>(ch[7]) << 24;
    uint64_t end = offset + 8 + bytes + (bytes & 1);
    if (end > size + 1) {  // a missing pad byte at the very end is tolerated
      return Error{ErrorCode::kInvalid, "byte " + std::to_string(offset),
                   "RIFF chunk \"" + id + "\" claims " + std::to_string(bytes) +
                       " bytes, past the end of the file (" + std::to_string(size) + " bytes)",
                   where};
    }
    offset = end;
  }
  return Status::Ok();
}

// ---- 16-bit PCM WAV without libsndfile ----

// Where the samples of a plain 16-bit PCM RIFF/WAVE file are: format tag 1, 16 bits, a "fmt "
// chunk before a "data" chunk that lies wholly inside the file and holds whole frames. Anything
// else (RF64, WAVE_FORMAT_EXTENSIBLE, other sample formats, a short data chunk) is libsndfile's.
struct Pcm16Wav {
  int64_t channels = 0;
  int64_t rate = 0;
  uint64_t data_offset = 0;
  int64_t frames = 0;
};

uint32_t Le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint32_t Le16(const unsigned char* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }

template <class ReadAt>
std::optional<Pcm16Wav> FindPcm16Wav(ReadAt&& read_at, uint64_t size) {
  unsigned char head[12];
  if (size < 12 || read_at(0, head, 12) != 12) return std::nullopt;
  if (std::memcmp(head, "RIFF", 4) != 0 || std::memcmp(head + 8, "WAVE", 4) != 0) return std::nullopt;
  Pcm16Wav wav;
  bool have_fmt = false;
  uint64_t offset = 12;
  for (int chunks = 0; offset + 8 <= size && chunks < 64; ++chunks) {
    unsigned char ch[8];
    if (read_at(offset, ch, 8) != 8) return std::nullopt;
    const uint64_t bytes = Le32(ch + 4);
    if (std::memcmp(ch, "fmt ", 4) == 0) {
      unsigned char fmt[16];
      if (have_fmt || bytes < 16 || read_at(offset + 8, fmt, 16) != 16) return std::nullopt;
      const uint32_t channels = Le16(fmt + 2), bits = Le16(fmt + 14), align = Le16(fmt + 12);
      if (Le16(fmt) != 1 || bits != 16 || channels < 1 || align != 2 * channels) return std::nullopt;
      wav.channels = channels;
      wav.rate = Le32(fmt + 4);
      have_fmt = true;
    } else if (std::memcmp(ch, "data", 4) == 0) {
      const uint64_t frame_bytes = static_cast<uint64_t>(wav.channels) * 2;
      if (!have_fmt || offset + 8 + bytes > size || bytes % frame_bytes != 0) return std::nullopt;
      wav.data_offset = offset + 8;
      wav.frames = static_cast<int64_t>(bytes / frame_bytes);
      return wav;
    }
    offset += 8 + bytes + (bytes & 1);
  }
  return std::nullopt;
}

// The mean of each frame's samples as libsndfile's normalized doubles give it (x / 32768, summed,
// divided by the channel count, rounded to float). For one and two channels the sum has at most
// 17 significant bits and the scale is a power of two, so float arithmetic gives that value
// exactly (and vectorizes); more channels divide in double as the general downmix does.
void DownmixPcm16(const unsigned char* in, int64_t frames, int64_t channels, float* out) {
  auto sample = [in](int64_t i) {
    if constexpr (std::endian::native == std::endian::little) {
      int16_t v;
      std::memcpy(&v, in + 2 * i, 2);
      return v;
    }
    return static_cast<int16_t>(Le16(in + 2 * i));
  };
  if (channels == 1) {
    for (int64_t i = 0; i < frames; ++i) out[i] = static_cast<float>(sample(i)) * (1.0f / 32768);
  } else if (channels == 2) {
    int64_t i = 0;
#if defined(__SSE2__)
    if constexpr (std::endian::native == std::endian::little) {
      // Four frames at a time: pmaddwd with ones adds each left/right pair into an int32.
      const __m128i ones = _mm_set1_epi16(1);
      const __m128 scale = _mm_set1_ps(0.5f / 32768);
      for (; i + 4 <= frames; i += 4) {
        const __m128i pairs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 4 * i));
        _mm_storeu_ps(out + i, _mm_mul_ps(_mm_cvtepi32_ps(_mm_madd_epi16(pairs, ones)), scale));
      }
    }
#endif
    for (; i < frames; ++i) {
      out[i] = static_cast<float>(sample(2 * i) + sample(2 * i + 1)) * (0.5f / 32768);
    }
  } else {
    const double c = static_cast<double>(channels);
    for (int64_t i = 0; i < frames; ++i) {
      int64_t sum = 0;
      for (int64_t k = 0; k < channels; ++k) sum += sample(i * channels + k);
      out[i] = static_cast<float>(static_cast<double>(sum) * (1.0 / 32768) / c);
    }
  }
}

// Decodes a Pcm16Wav through the pipeline, reading blocks of frames; nullopt never (the layout
// was checked), an error when the file shrinks under the reader.
template <class ReadAt>
Result<DecodedAudio> DecodePcm16Wav(ReadAt&& read_at, const Pcm16Wav& wav,
                                    const AudioDecode& processor, const AudioOptions& options) {
  Status shape = audio_internal::CheckSourceShape(wav.rate, wav.channels, options);
  MLC_RETURN_IF_ERROR(shape);
  Status declared = audio_internal::CheckDeclaredFrames(wav.frames, wav.rate, processor);
  MLC_RETURN_IF_ERROR(declared);
  auto pipeline = MonoPipeline::Create(wav.rate, processor, options);
  MLC_RETURN_IF_ERROR(pipeline);
  MonoPipeline& pipe = **pipeline;
  pipe.ReserveFor(wav.frames);
  const int64_t block_frames = std::max<int64_t>(1, kBlockSamples * 4 / wav.channels);
  std::vector<unsigned char> block(static_cast<size_t>(block_frames * wav.channels * 2));
  std::vector<float> mono(static_cast<size_t>(block_frames));
  for (int64_t done = 0; done < wav.frames;) {
    const int64_t n = std::min(block_frames, wav.frames - done);
    const size_t bytes = static_cast<size_t>(n * wav.channels * 2);
    if (read_at(wav.data_offset + static_cast<uint64_t>(done * wav.channels * 2), block.data(), bytes) != bytes) {
      return Invalid("frame " + std::to_string(done), "decoding failed: the file ended early");
    }
    DownmixPcm16(block.data(), n, wav.channels, mono.data());
    Status pushed = pipe.Push(mono.data(), n);
    MLC_RETURN_IF_ERROR(pushed);
    done += n;
  }
  auto samples = pipe.Finish();
  MLC_RETURN_IF_ERROR(samples);
  DecodedAudio out;
  out.samples = std::move(*samples);
  out.sample_rate_hz = processor.sample_rate_hz;
  out.source.container = "WAV";
  out.source.sample_format = "pcm_s16";
  out.source.sample_rate_hz = wav.rate;
  out.source.channels = wav.channels;
  Finalize(out.source, pipe.frames());
  return out;
}

// sf_open_virtual callbacks over a byte range.
struct MemoryStream {
  const char* data;
  sf_count_t size;
  sf_count_t pos;
};

sf_count_t MemLength(void* user) { return static_cast<MemoryStream*>(user)->size; }

// A seek of a stream of `size` bytes now at *pos: the new position, or -1 (out of range).
sf_count_t SeekWithin(sf_count_t size, sf_count_t* pos, sf_count_t offset, int whence) {
  sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? *pos : size;
  sf_count_t target = base + offset;
  if (offset > 0 && target < base) return -1;  // overflow
  if (target < 0) return -1;
  *pos = target;
  return *pos;
}

sf_count_t MemSeek(sf_count_t offset, int whence, void* user) {
  auto* m = static_cast<MemoryStream*>(user);
  return SeekWithin(m->size, &m->pos, offset, whence);
}

sf_count_t MemRead(void* ptr, sf_count_t count, void* user) {
  auto* m = static_cast<MemoryStream*>(user);
  if (count <= 0 || m->pos >= m->size) return 0;
  sf_count_t n = std::min(count, m->size - m->pos);
  std::memcpy(ptr, m->data + m->pos, static_cast<size_t>(n));
  m->pos += n;
  return n;
}

sf_count_t MemWrite(const void*, sf_count_t, void*) { return 0; }

sf_count_t MemTell(void* user) { return static_cast<MemoryStream*>(user)->pos; }

// Reads n bytes at `at` of a file, looping over short reads; fewer only at the end of the file.
// A read error is kept in *failure (the first one) and ends this and every later read.
size_t ReadFully(RandomAccessFile& file, Status* failure, uint64_t at, unsigned char* buf, size_t n) {
  size_t got = 0;
  while (got < n && failure->ok()) {
    auto k = file.ReadAt(at + got, reinterpret_cast<char*>(buf) + got, n - got);
    if (!k) {
      *failure = k.error();
      break;
    }
    if (*k == 0) break;
    got += *k;
  }
  return got;
}

// sf_open_virtual callbacks over a file of the Env.
struct FileStream {
  RandomAccessFile* file;
  sf_count_t size;
  sf_count_t pos;
  Status* failure;
};

sf_count_t FileLength(void* user) { return static_cast<FileStream*>(user)->size; }

sf_count_t FileSeek(sf_count_t offset, int whence, void* user) {
  auto* f = static_cast<FileStream*>(user);
  return SeekWithin(f->size, &f->pos, offset, whence);
}

sf_count_t FileRead(void* ptr, sf_count_t count, void* user) {
  auto* f = static_cast<FileStream*>(user);
  if (count <= 0 || f->pos >= f->size) return 0;
  size_t want = static_cast<size_t>(std::min(count, f->size - f->pos));
  size_t got = ReadFully(*f->file, f->failure, static_cast<uint64_t>(f->pos),
                         static_cast<unsigned char*>(ptr), want);
  f->pos += static_cast<sf_count_t>(got);
  return static_cast<sf_count_t>(got);
}

sf_count_t FileTell(void* user) { return static_cast<FileStream*>(user)->pos; }

// The errors of decoding the file at path name it as their document; a read error of the file
// wins over what the decoder made of it.
Result<DecodedAudio> InFile(const std::string& path, const Status& failure,
                            Result<DecodedAudio> decoded) {
  if (!failure) return InDocument(failure.errors(), path);
  return InDocument(std::move(decoded), path);
}

}  // namespace

Result<DecodedAudio> DecodeAudioFile(const std::string& path, const AudioDecode& processor,
                                     const AudioOptions& options) {
  Status ok = CheckAudioProcessor(processor);
  MLC_RETURN_IF_ERROR(ok);
  if (path == "-") {  // standard input: read whole (it cannot be seeked), up to 1 GiB
    auto bytes = ReadFile(path, uint64_t{1} << 30);
    MLC_RETURN_IF_ERROR(bytes);
    return InFile(DocumentName(path), Status::Ok(), DecodeAudioMemory(*bytes, processor, options));
  }
  auto file = DefaultEnv()->NewRandomAccessFile(path, "");
  MLC_RETURN_IF_ERROR(file);
  RandomAccessFile& f = **file;
  const uint64_t size = f.size();
  Status failure;
  auto read_file = [&f, &failure](uint64_t at, unsigned char* buf, size_t n) {
    return ReadFully(f, &failure, at, buf, n);
  };
  Status chunks = CheckRiffChunks(read_file, size, path);
  MLC_RETURN_IF_ERROR(failure);
  MLC_RETURN_IF_ERROR(chunks);
  if (auto wav = FindPcm16Wav(read_file, size)) {
    return InFile(path, failure, DecodePcm16Wav(read_file, *wav, processor, options));
  }
  MLC_RETURN_IF_ERROR(failure);
  if (size > static_cast<uint64_t>(INT64_MAX)) return IoError(path, "too large");
  unsigned char head[16] = {};
  size_t head_size = read_file(0, head, sizeof(head));
  MLC_RETURN_IF_ERROR(failure);
  FileStream stream{&f, static_cast<sf_count_t>(size), 0, &failure};
  SF_VIRTUAL_IO io{FileLength, FileSeek, FileRead, MemWrite, FileTell};
  SF_INFO info{};
  SndfilePtr sf(sf_open_virtual(&io, SFM_READ, &info, &stream));
  MLC_RETURN_IF_ERROR(failure);
  if (!sf) {
    return InDocument(Errors{NotAudio(path, std::string_view(reinterpret_cast<const char*>(head), head_size),
                                      processor.sample_rate_hz)},
                      path);
  }
  return InFile(path, failure, DecodeOpen(sf.get(), info, processor, options));
}

Result<DecodedAudio> DecodeAudioMemory(std::string_view bytes, const AudioDecode& processor,
                                       const AudioOptions& options) {
  Status ok = CheckAudioProcessor(processor);
  MLC_RETURN_IF_ERROR(ok);
  auto read_mem = [bytes](uint64_t at, unsigned char* buf, size_t n) {
    if (at >= bytes.size()) return size_t{0};
    size_t k = std::min<size_t>(n, bytes.size() - at);
    std::memcpy(buf, bytes.data() + at, k);
    return k;
  };
  Status chunks = CheckRiffChunks(read_mem, bytes.size(), "");
  MLC_RETURN_IF_ERROR(chunks);
  if (auto wav = FindPcm16Wav(read_mem, bytes.size())) return DecodePcm16Wav(read_mem, *wav, processor, options);
  MemoryStream stream{bytes.data(), static_cast<sf_count_t>(bytes.size()), 0};
  SF_VIRTUAL_IO io{MemLength, MemSeek, MemRead, MemWrite, MemTell};
  SF_INFO info{};
  SndfilePtr sf(sf_open_virtual(&io, SFM_READ, &info, &stream));
  if (!sf) return NotAudio("", bytes.substr(0, 16), processor.sample_rate_hz);
  return DecodeOpen(sf.get(), info, processor, options);
}

Result<DecodedAudio> DecodeAudioSamples(std::span<const float> interleaved, int64_t channels,
                                        int64_t sample_rate_hz, const AudioDecode& processor,
                                        const AudioOptions& options) {
  Status ok = CheckAudioProcessor(processor);
  MLC_RETURN_IF_ERROR(ok);
  Status shape = audio_internal::CheckSourceShape(sample_rate_hz, channels, options);
  MLC_RETURN_IF_ERROR(shape);
  if (interleaved.size() % static_cast<size_t>(channels) != 0) {
    return Invalid("", std::to_string(interleaved.size()) + " samples do not make whole frames of " +
                           std::to_string(channels) + " channels");
  }
  const int64_t frames = static_cast<int64_t>(interleaved.size()) / channels;
  Status declared = audio_internal::CheckDeclaredFrames(frames, sample_rate_hz, processor);
  MLC_RETURN_IF_ERROR(declared);
  auto pipeline = MonoPipeline::Create(sample_rate_hz, processor, options);
  MLC_RETURN_IF_ERROR(pipeline);
  MonoPipeline& pipe = **pipeline;
  const int64_t block_frames = std::max<int64_t>(1, kBlockSamples / channels);
  std::vector<float> mono(static_cast<size_t>(block_frames));
  for (int64_t start = 0; start < frames; start += block_frames) {
    int64_t count = std::min(block_frames, frames - start);
    Status mixed = audio_internal::DownmixFloat(interleaved.data() + start * channels, count,
                                                channels, start, mono.data());
    MLC_RETURN_IF_ERROR(mixed);
    Status pushed = pipe.Push(mono.data(), count);
    MLC_RETURN_IF_ERROR(pushed);
  }
  auto samples = pipe.Finish();
  MLC_RETURN_IF_ERROR(samples);
  DecodedAudio out;
  out.samples = std::move(*samples);
  out.sample_rate_hz = processor.sample_rate_hz;
  out.source.container = "raw";
  out.source.sample_format = "f32";
  out.source.sample_rate_hz = sample_rate_hz;
  out.source.channels = channels;
  Finalize(out.source, frames);
  return out;
}

}  // namespace mlc
