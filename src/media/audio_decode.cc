// The audio frontend's decoders: plain 16-bit PCM WAV read directly (the common case, with the
// same samples libsndfile gives and a third of its work), libsndfile (in the audio module) over a
// file of the Env or over bytes in memory for everything else, and raw float samples. Each reads
// blocks of frames, averages the channels and feeds the streaming pipeline, never holding the
// whole source.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "media/audio_backend.h"
#include "media/audio_internal.h"
#include "mlc_manifest/audio.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

using audio_internal::MonoPipeline;

// About this many interleaved samples are decoded per block, whatever the channel count.
constexpr int64_t kBlockSamples = 1 << 15;

// A decoder of the audio module, closed when it goes out of scope.
class Decoder {
 public:
  Decoder(const MlcAudioBackend* backend, MlcAudioDecoder* decoder) : backend_(backend), d_(decoder) {}
  ~Decoder() { backend_->close(d_); }
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;
  const MlcAudioBackend& backend() const { return *backend_; }
  MlcAudioDecoder* get() const { return d_; }

 private:
  const MlcAudioBackend* backend_;
  MlcAudioDecoder* d_;
};

AudioSourceInfo SourceInfo(const MlcAudioFormat& f) {
  AudioSourceInfo s;
  s.container = f.container;
  s.sample_format = f.sample_format;
  s.sample_rate_hz = f.sample_rate_hz;
  s.channels = f.channels;
  return s;
}

// Ends the pipeline's output: the sample count at the processor's rate, with the source's
// description (`frames` of it decoded).
Result<StreamedAudio> Finished(MonoPipeline& pipe, const AudioDecode& processor, AudioSourceInfo source,
                               int64_t frames) {
  auto samples = pipe.Finish();
  MLC_RETURN_IF_ERROR(samples);
  StreamedAudio out;
  out.samples = *samples;
  out.sample_rate_hz = processor.sample_rate_hz;
  out.source = std::move(source);
  out.source.frames = frames;
  out.source.duration_s =
      out.source.sample_rate_hz > 0 ? static_cast<double>(frames) / out.source.sample_rate_hz : 0.0;
  return out;
}

// A streamed decode gathered in memory.
template <class Stream>
Result<DecodedAudio> Collected(Stream&& stream) {
  audio_internal::VectorSink sink;
  Result<StreamedAudio> streamed = stream(sink);
  MLC_RETURN_IF_ERROR(streamed);
  DecodedAudio out;
  out.samples = sink.Take();
  out.sample_rate_hz = streamed->sample_rate_hz;
  out.source = std::move(streamed->source);
  return out;
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

// Reads every frame of an open recording into the pipeline. Checks the header first.
Result<StreamedAudio> DecodeOpen(const Decoder& decoder, const MlcAudioFormat& format,
                                 const AudioDecode& processor, const AudioOptions& options,
                                 AudioSink& sink) {
  Status shape = audio_internal::CheckSourceShape(format.sample_rate_hz, format.channels, options);
  MLC_RETURN_IF_ERROR(shape);
  if (format.frames >= 0) {
    Status declared = audio_internal::CheckDeclaredFrames(format.frames, format.sample_rate_hz, processor);
    MLC_RETURN_IF_ERROR(declared);
  }
  auto pipeline = MonoPipeline::Create(format.sample_rate_hz, processor, options, sink);
  MLC_RETURN_IF_ERROR(pipeline);
  MonoPipeline& pipe = **pipeline;
  if (format.frames >= 0) pipe.Expect(format.frames);

  const int64_t channels = format.channels;
  const int64_t block_frames = std::max<int64_t>(1, kBlockSamples / channels);
  // Scratch left uninitialized (new T[n], not make_unique_for_overwrite, which emscripten's libc++
  // lacks).
  auto block = std::unique_ptr<double[]>(new double[static_cast<size_t>(block_frames * channels)]);
  auto mono = std::unique_ptr<float[]>(new float[static_cast<size_t>(block_frames)]);
  MlcAudioError error{};
  for (;;) {
    const int64_t got = decoder.backend().read(decoder.get(), block.get(), block_frames, &error);
    if (got < 0) {
      return Invalid("frame " + std::to_string(pipe.frames()),
                     std::string("decoding failed: ") + error.message);
    }
    if (got == 0) break;
    Status mixed = audio_internal::DownmixDouble(block.get(), got, channels, pipe.frames(), mono.get());
    MLC_RETURN_IF_ERROR(mixed);
    Status pushed = pipe.Push(mono.get(), got);
    MLC_RETURN_IF_ERROR(pushed);
  }
  return Finished(pipe, processor, SourceInfo(format), pipe.frames());
}

// Opens a recording with the audio module and decodes it; not audio: NotAudio's error (file
// names the input in its hint, "" for bytes in memory).
Result<StreamedAudio> DecodeWithModule(const MlcAudioSource& source, std::string_view head,
                                       const std::string& file, const AudioDecode& processor,
                                       const AudioOptions& options, AudioSink& sink) {
  auto backend = LoadModule<MlcAudioBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcAudioFormat format{};
  MlcAudioError error{};
  MlcAudioDecoder* opened = (*backend)->open(&source, &format, &error);
  if (!opened) return NotAudio(file, head, processor.sample_rate_hz);
  Decoder decoder(*backend, opened);
  return DecodeOpen(decoder, format, processor, options, sink);
}

uint32_t Le32(const unsigned char* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}
uint32_t Le16(const unsigned char* p) { return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8; }

// A four-byte chunk id as text for a message: bytes outside printable ASCII as \xNN.
std::string ChunkIdText(std::string_view id) {
  std::string out;
  for (char c : id) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    }
  }
  return out;
}

// The sub-chunks of a LIST chunk whose body is [body, body + bytes), walked as libsndfile 1.2
// walks them: while any byte of the body is left it reads a word; "INFO" and "adtl" (the list
// types of WAV files) stand alone, "exif", "data" or a zero word end its walk, any other word is a
// sub-chunk id followed by its size, read even where the header crosses the body's end (so an
// unusual list type is read as a sub-chunk too). Each sub-chunk must end inside the body (a
// missing pad byte at its very end is tolerated): libsndfile adds a size to its count in 32 bits,
// and one that wraps makes it skip gigabytes a few bytes at a time.
template <class ReadAt>
Status CheckListChunk(ReadAt&& read_at, uint64_t body, uint64_t bytes, const std::string& where) {
  const uint64_t end = body + bytes;
  uint64_t at = body;
  for (int subs = 0; at < end; ++subs) {
    if (subs > 100000) {  // the bound of the top-level walk: 8-byte reads must not run for minutes
      return Error{ErrorCode::kInvalid, "byte " + std::to_string(at), "more than 100000 sub-chunks in a LIST chunk",
                   where};
    }
    unsigned char ch[8] = {};
    const size_t got = read_at(at, ch, 8);
    if (got < 4) break;
    const std::string_view id(reinterpret_cast<const char*>(ch), 4);
    if (id == "INFO" || id == "adtl") {
      at += 4;
      continue;
    }
    if (id == "exif" || id == "data" || id == std::string_view("\0\0\0\0", 4) || got < 8) break;
    const uint64_t sub = Le32(ch + 4);
    const uint64_t next = at + 8 + sub + (sub & 1);
    if (next > end + 1) {
      const std::string what = at == body ? "LIST chunk of type \"" + ChunkIdText(id) + "\" (read as a sub-chunk)"
                                          : "LIST sub-chunk \"" + ChunkIdText(id) + "\"";
      return Error{ErrorCode::kInvalid, "byte " + std::to_string(at),
                   what + " claims " + std::to_string(sub) + " bytes, past the end of its LIST chunk (byte " +
                       std::to_string(end) + ")",
                   where};
    }
    at = next;
  }
  return Status::Ok();
}

// RIFF/RF64 WAVE chunk walk before libsndfile sees the bytes, through the whole file as libsndfile
// walks it (a data chunk that fits is skipped, a short one ends the walk): a chunk other than "data"
// that claims to run past the end of the file, or a LIST chunk whose sub-chunks run past its own end,
// is rejected (libsndfile 1.2 can spin for a very long time on either). `read_at` fills up to n
// bytes at an offset and returns the count; `where` names the file (the errors' document; "" for
// bytes in memory).
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
                   "more than 100000 RIFF chunks", where};
    }
    std::string id(reinterpret_cast<const char*>(ch), 4);
    uint64_t bytes = Le32(ch + 4);
    uint64_t end = offset + 8 + bytes + (bytes & 1);
    // A short data chunk is a truncated recording: read what is there. One that fits is skipped, as
    // libsndfile skips it to go on reading the chunks after it (past the RIFF size too).
    if (id == "data") {
      if (end > size) break;
      offset = end;
      continue;
    }
    if (end > size + 1) {  // a missing pad byte at the very end is tolerated
      return Error{ErrorCode::kInvalid, "byte " + std::to_string(offset),
                   "RIFF chunk \"" + ChunkIdText(id) + "\" claims " + std::to_string(bytes) +
                       " bytes, past the end of the file (" + std::to_string(size) + " bytes)",
                   where};
    }
    if (id == "LIST" || id == "INFO") {  // libsndfile walks the sub-chunks of both
      Status list = CheckListChunk(read_at, offset + 8, bytes, where);
      MLC_RETURN_IF_ERROR(list);
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
Result<StreamedAudio> DecodePcm16Wav(ReadAt&& read_at, const Pcm16Wav& wav, const AudioDecode& processor,
                                     const AudioOptions& options, AudioSink& sink) {
  Status shape = audio_internal::CheckSourceShape(wav.rate, wav.channels, options);
  MLC_RETURN_IF_ERROR(shape);
  Status declared = audio_internal::CheckDeclaredFrames(wav.frames, wav.rate, processor);
  MLC_RETURN_IF_ERROR(declared);
  auto pipeline = MonoPipeline::Create(wav.rate, processor, options, sink);
  MLC_RETURN_IF_ERROR(pipeline);
  MonoPipeline& pipe = **pipeline;
  pipe.Expect(wav.frames);
  const int64_t block_frames = std::max<int64_t>(1, kBlockSamples / wav.channels);
  const auto block_bytes = static_cast<size_t>(block_frames * wav.channels * 2);
  auto block = std::unique_ptr<unsigned char[]>(new unsigned char[block_bytes]);
  auto mono = std::unique_ptr<float[]>(new float[static_cast<size_t>(block_frames)]);
  for (int64_t done = 0; done < wav.frames;) {
    const int64_t n = std::min(block_frames, wav.frames - done);
    const size_t bytes = static_cast<size_t>(n * wav.channels * 2);
    if (read_at(wav.data_offset + static_cast<uint64_t>(done * wav.channels * 2), block.get(), bytes) != bytes) {
      return Invalid("frame " + std::to_string(done), "decoding failed: the file ended early");
    }
    DownmixPcm16(block.get(), n, wav.channels, mono.get());
    Status pushed = pipe.Push(mono.get(), n);
    MLC_RETURN_IF_ERROR(pushed);
    done += n;
  }
  return Finished(pipe, processor, AudioSourceInfo{"WAV", "pcm_s16", wav.rate, wav.channels}, pipe.frames());
}

// The audio module's source over bytes in memory.
int64_t ReadMemory(void* context, int64_t offset, void* buffer, int64_t n) {
  const std::string_view bytes = *static_cast<const std::string_view*>(context);
  if (offset < 0 || static_cast<uint64_t>(offset) >= bytes.size() || n <= 0) return 0;
  const size_t k = std::min<size_t>(static_cast<size_t>(n), bytes.size() - static_cast<size_t>(offset));
  std::memcpy(buffer, bytes.data() + offset, k);
  return static_cast<int64_t>(k);
}

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

// The audio module's source over a file of the Env; a read error is kept in *failure.
struct FileSource {
  RandomAccessFile* file;
  Status* failure;
};

int64_t ReadFileSource(void* context, int64_t offset, void* buffer, int64_t n) {
  auto* f = static_cast<FileSource*>(context);
  if (offset < 0 || n <= 0) return 0;
  const size_t got = ReadFully(*f->file, f->failure, static_cast<uint64_t>(offset),
                               static_cast<unsigned char*>(buffer), static_cast<size_t>(n));
  if (got == 0 && !f->failure->ok()) return -1;
  return static_cast<int64_t>(got);
}

// The errors of decoding the file at path name it as their document; a read error of the file
// wins over what the decoder made of it.
template <class T>
Result<T> InFile(const std::string& path, const Status& failure, Result<T> decoded) {
  if (!failure) return InDocument(failure.errors(), path);
  return InDocument(std::move(decoded), path);
}

// StreamAudioFile for bytes in memory (the errors have no document).
Result<StreamedAudio> StreamAudioMemory(std::string_view bytes, const AudioDecode& processor,
                                        const AudioOptions& options, AudioSink& sink) {
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
  if (auto wav = FindPcm16Wav(read_mem, bytes.size())) {
    return DecodePcm16Wav(read_mem, *wav, processor, options, sink);
  }
  const MlcAudioSource source{&bytes, static_cast<int64_t>(bytes.size()), ReadMemory};
  return DecodeWithModule(source, bytes.substr(0, 16), "", processor, options, sink);
}

}  // namespace

Result<StreamedAudio> StreamAudioFile(const std::string& path, const AudioDecode& processor,
                                      AudioSink& sink, const AudioOptions& options) {
  Status ok = CheckAudioProcessor(processor);
  MLC_RETURN_IF_ERROR(ok);
  if (path == "-") {  // standard input: read whole (it cannot be seeked), up to 1 GiB
    auto bytes = ReadFile(path, uint64_t{1} << 30);
    MLC_RETURN_IF_ERROR(bytes);
    return InFile(DocumentName(path), Status::Ok(), StreamAudioMemory(*bytes, processor, options, sink));
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
    return InFile(path, failure, DecodePcm16Wav(read_file, *wav, processor, options, sink));
  }
  MLC_RETURN_IF_ERROR(failure);
  if (size > static_cast<uint64_t>(INT64_MAX)) return IoError(path, "too large");
  unsigned char head[16] = {};
  size_t head_size = read_file(0, head, sizeof(head));
  MLC_RETURN_IF_ERROR(failure);
  FileSource context{&f, &failure};
  const MlcAudioSource source{&context, static_cast<int64_t>(size), ReadFileSource};
  auto decoded = DecodeWithModule(source, std::string_view(reinterpret_cast<const char*>(head), head_size),
                                  path, processor, options, sink);
  return InFile(path, failure, std::move(decoded));
}

Result<DecodedAudio> DecodeAudioFile(const std::string& path, const AudioDecode& processor,
                                     const AudioOptions& options) {
  return Collected([&](AudioSink& sink) { return StreamAudioFile(path, processor, sink, options); });
}

Result<DecodedAudio> DecodeAudioMemory(std::string_view bytes, const AudioDecode& processor,
                                       const AudioOptions& options) {
  return Collected([&](AudioSink& sink) { return StreamAudioMemory(bytes, processor, options, sink); });
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
  return Collected([&](AudioSink& sink) -> Result<StreamedAudio> {
    auto pipeline = MonoPipeline::Create(sample_rate_hz, processor, options, sink);
    MLC_RETURN_IF_ERROR(pipeline);
    MonoPipeline& pipe = **pipeline;
    pipe.Expect(frames);
    const int64_t block_frames = std::max<int64_t>(1, kBlockSamples / channels);
    auto mono = std::unique_ptr<float[]>(new float[static_cast<size_t>(block_frames)]);
    for (int64_t start = 0; start < frames; start += block_frames) {
      int64_t count = std::min(block_frames, frames - start);
      Status mixed = audio_internal::DownmixFloat(interleaved.data() + start * channels, count,
                                                  channels, start, mono.get());
      MLC_RETURN_IF_ERROR(mixed);
      Status pushed = pipe.Push(mono.get(), count);
      MLC_RETURN_IF_ERROR(pushed);
    }
    return Finished(pipe, processor, AudioSourceInfo{"raw", "f32", sample_rate_hz, channels}, frames);
  });
}

}  // namespace mlc
