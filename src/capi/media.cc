// The C API over the media frontends (SPEC 6.1 audio, 6.2 images) and the tokenizer (SPEC 8).
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "capi/capi_internal.h"
#include "mlc_manifest/audio.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/tokenizer.h"

using mlc::capi::Fail;
using mlc::capi::FailWith;
using mlc::capi::Guard;

struct mlc_audio {
  mlc_errors errors;
  std::optional<mlc::DecodedAudio> decoded;
};

struct mlc_image {
  mlc_errors errors;
  std::optional<mlc::NpyArray> tensor;  // [1, H, W, 3] uint8 or uint32
  int64_t shape[4] = {0, 0, 0, 0};
};

struct mlc_tokenizer {
  mlc_errors errors;
  std::unique_ptr<mlc::Tokenizer> tokenizer;
};

namespace {

constexpr const char* kMemoryDocument = "<memory>";

mlc::AudioDecode AudioProcessor(const mlc_audio_params& p) {
  mlc::AudioDecode processor;
  processor.sample_rate_hz = p.sample_rate_hz;
  processor.min_samples = p.min_samples;
  processor.max_samples = p.max_samples;
  return processor;
}

mlc::AudioOptions AudioOpts(const mlc_audio_params& p) {
  mlc::AudioOptions options;
  options.quality = p.very_high_quality ? mlc::ResampleQuality::kVeryHigh : mlc::ResampleQuality::kHigh;
  return options;
}

// Decodes with `decode(processor, options)` after checking the parameters.
template <class Decode>
int DecodeAudio(mlc_audio* h, const mlc_audio_params* params, const std::string& document,
                Decode decode) {
  return Guard(h->errors, [&] {
    h->decoded.reset();
    mlc_audio_params p = params ? *params : mlc_audio_params_default();
    mlc::AudioDecode processor = AudioProcessor(p);
    if (mlc::Status st = mlc::CheckAudioProcessor(processor); !st) {
      return Fail(h->errors, st.errors());
    }
    auto decoded = decode(processor, AudioOpts(p));
    if (!decoded) return Fail(h->errors, decoded.take_errors(), document);
    h->decoded = std::move(*decoded);
    return static_cast<int>(MLC_OK);
  });
}

// The image parameters as the library's processor and options, or an argument error.
int ImageSetup(const mlc_image_params& p, mlc::ImageDecode* processor, mlc::ImageOptions* options,
               mlc::PixelDtype* dtype, mlc_errors& errors) {
  if (p.height < 1 || p.width < 1) {
    return FailWith(errors, MLC_ERR_ARGUMENT, "", "height and width must be >= 1");
  }
  if (p.mode < MLC_RESIZE_STRETCH || p.mode > MLC_RESIZE_CENTER_CROP ||
      p.dtype < MLC_PIXEL_UINT8 || p.dtype > MLC_PIXEL_UINT32 || p.filter < MLC_FILTER_BICUBIC ||
      p.filter > MLC_FILTER_LANCZOS || p.max_pixels < 1 || p.colour_manage < 0 ||
      p.colour_manage > 1) {
    return FailWith(errors, MLC_ERR_ARGUMENT, "",
                    "mode, dtype, filter, max_pixels or colour_manage out of range");
  }
  processor->height = p.height;
  processor->width = p.width;
  processor->mode = p.mode == MLC_RESIZE_CENTER_CROP ? mlc::ResizeMode::kCenterCrop
                                                     : mlc::ResizeMode::kStretch;
  static const mlc::ResizeFilter kFilters[] = {mlc::ResizeFilter::kBicubic,
                                               mlc::ResizeFilter::kBilinear,
                                               mlc::ResizeFilter::kLanczos};
  options->filter = kFilters[p.filter];
  options->max_pixels = p.max_pixels;
  options->colour_manage = p.colour_manage == 1;
  *dtype = p.dtype == MLC_PIXEL_UINT32 ? mlc::PixelDtype::kUint32 : mlc::PixelDtype::kUint8;
  return MLC_OK;
}

template <class Prepare>
int DecodeImage(mlc_image* h, const mlc_image_params* params, const std::string& document,
                Prepare prepare) {
  return Guard(h->errors, [&] {
    h->tensor.reset();
    if (!params) return FailWith(h->errors, MLC_ERR_ARGUMENT, "", "image parameters are required");
    mlc::ImageDecode processor;
    mlc::ImageOptions options;
    mlc::PixelDtype dtype = mlc::PixelDtype::kUint8;
    if (int rc = ImageSetup(*params, &processor, &options, &dtype, h->errors); rc != MLC_OK) {
      return rc;
    }
    auto prepared = prepare(processor, options);
    if (!prepared) return Fail(h->errors, prepared.take_errors(), document);
    h->tensor = mlc::ImageTensor(prepared->rgb, dtype);
    for (int i = 0; i < 4; ++i) h->shape[i] = h->tensor->shape[i];
    return static_cast<int>(MLC_OK);
  });
}

}  // namespace

extern "C" {

MLC_CAPI_HANDLE(audio)
MLC_CAPI_HANDLE(image)
MLC_CAPI_HANDLE(tokenizer)

mlc_audio_params mlc_audio_params_default(void) {
  mlc::AudioDecode d;
  return mlc_audio_params{d.sample_rate_hz, d.min_samples, d.max_samples, 0};
}

int mlc_audio_decode_file(mlc_audio* h, const char* path, const mlc_audio_params* params) {
  if (!h || !path) return MLC_ERR_ARGUMENT;
  return DecodeAudio(h, params, path, [&](const mlc::AudioDecode& proc, const mlc::AudioOptions& o) {
    return mlc::DecodeAudioFile(path, proc, o);
  });
}

int mlc_audio_decode_memory(mlc_audio* h, const void* bytes, size_t length,
                            const mlc_audio_params* params) {
  if (!h || (!bytes && length)) return MLC_ERR_ARGUMENT;
  std::string_view data(static_cast<const char*>(bytes), length);
  return DecodeAudio(h, params, kMemoryDocument,
                     [&](const mlc::AudioDecode& proc, const mlc::AudioOptions& o) {
                       return mlc::DecodeAudioMemory(data, proc, o);
                     });
}

const float* mlc_audio_samples(const mlc_audio* h, size_t* count) {
  if (count) *count = h && h->decoded ? h->decoded->samples.size() : 0;
  return h && h->decoded ? h->decoded->samples.data() : nullptr;
}

int mlc_audio_copy(const mlc_audio* h, float* out, size_t capacity, size_t* count) {
  if (!h || !count) return MLC_ERR_ARGUMENT;
  if (!h->decoded) return MLC_ERR_STATE;
  const std::vector<float>& s = h->decoded->samples;
  *count = s.size();
  if (capacity < s.size()) return MLC_ERR_BUFFER;
  if (!out && !s.empty()) return MLC_ERR_ARGUMENT;
  if (!s.empty()) std::memcpy(out, s.data(), s.size() * sizeof(float));
  return MLC_OK;
}

int mlc_audio_get_info(const mlc_audio* h, mlc_audio_info* out) {
  if (!h || !out) return MLC_ERR_ARGUMENT;
  if (!h->decoded) return MLC_ERR_STATE;
  const mlc::AudioSourceInfo& s = h->decoded->source;
  *out = mlc_audio_info{s.container.c_str(), s.sample_format.c_str(), s.sample_rate_hz,
                        s.channels, s.frames};
  return MLC_OK;
}

mlc_image_params mlc_image_params_default(void) {
  return mlc_image_params{0, 0, MLC_RESIZE_STRETCH, MLC_PIXEL_UINT8, MLC_FILTER_BICUBIC,
                          mlc::ImageOptions().max_pixels, 0};
}

int mlc_image_decode_file(mlc_image* h, const char* path, const mlc_image_params* params) {
  if (!h || !path) return MLC_ERR_ARGUMENT;
  return DecodeImage(h, params, path, [&](const mlc::ImageDecode& proc, const mlc::ImageOptions& o) {
    return mlc::PrepareImageFile(path, proc, o);
  });
}

int mlc_image_decode_memory(mlc_image* h, const void* bytes, size_t length,
                            const mlc_image_params* params) {
  if (!h || (!bytes && length)) return MLC_ERR_ARGUMENT;
  std::string_view data(static_cast<const char*>(bytes), length);
  return DecodeImage(h, params, kMemoryDocument,
                     [&](const mlc::ImageDecode& proc, const mlc::ImageOptions& o) {
                       return mlc::PrepareImage(data, proc, o);
                     });
}

int mlc_image_resize_rgba(mlc_image* h, const uint8_t* rgba, int64_t width, int64_t height,
                          const mlc_image_params* params) {
  if (!h || !rgba) return MLC_ERR_ARGUMENT;
  return DecodeImage(h, params, kMemoryDocument,
                     [&](const mlc::ImageDecode& proc, const mlc::ImageOptions& o) {
                       return mlc::PrepareRgbaPixels(rgba, width, height, proc, o);
                     });
}

int mlc_image_tensor(const mlc_image* h, DLTensor* out) {
  if (!h || !out) return MLC_ERR_ARGUMENT;
  if (!h->tensor) return MLC_ERR_STATE;
  bool wide = h->tensor->descr == "<u4";
  *out = DLTensor{};
  out->data = const_cast<char*>(h->tensor->data.data());
  out->device = DLDevice{kDLCPU, 0};
  out->ndim = 4;
  out->dtype = DLDataType{kDLUInt, static_cast<uint8_t>(wide ? 32 : 8), 1};
  out->shape = const_cast<int64_t*>(h->shape);
  out->strides = nullptr;
  out->byte_offset = 0;
  return MLC_OK;
}

int mlc_image_copy(const mlc_image* h, void* out, size_t capacity, size_t* nbytes) {
  if (!h || !nbytes) return MLC_ERR_ARGUMENT;
  if (!h->tensor) return MLC_ERR_STATE;
  const std::string& data = h->tensor->data;
  *nbytes = data.size();
  if (capacity < data.size()) return MLC_ERR_BUFFER;
  if (!out) return MLC_ERR_ARGUMENT;
  std::memcpy(out, data.data(), data.size());
  return MLC_OK;
}

int mlc_tokenizer_load(mlc_tokenizer* h, const char* dir) {
  if (!h || !dir) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->tokenizer.reset();
    auto tokenizer = mlc::Tokenizer::FromDirectory(dir);
    if (!tokenizer) return Fail(h->errors, tokenizer.take_errors(), dir);
    h->tokenizer = std::move(*tokenizer);
    return static_cast<int>(MLC_OK);
  });
}

int mlc_tokenize(const mlc_tokenizer* h, const char* text, size_t length, int32_t* ids,
                 size_t capacity, size_t* count) {
  if (!h || !count || (!text && length)) return MLC_ERR_ARGUMENT;
  if (!h->tokenizer) return MLC_ERR_STATE;
  try {
    std::vector<int32_t> out = h->tokenizer->Encode(std::string_view(text ? text : "", length));
    *count = out.size();
    if (capacity < out.size()) return MLC_ERR_BUFFER;
    if (!out.empty()) {
      if (!ids) return MLC_ERR_ARGUMENT;
      std::memcpy(ids, out.data(), out.size() * sizeof(int32_t));
    }
    return MLC_OK;
  } catch (const std::exception&) {
    return MLC_ERR_INTERNAL;
  }
}

int mlc_detokenize(const mlc_tokenizer* h, const int32_t* ids, size_t count, char* text,
                   size_t capacity, size_t* length) {
  if (!h || !length || (!ids && count)) return MLC_ERR_ARGUMENT;
  if (!h->tokenizer) return MLC_ERR_STATE;
  try {
    std::string out = h->tokenizer->Decode(std::span<const int32_t>(ids, count));
    *length = out.size();
    if (capacity < out.size() + 1) return MLC_ERR_BUFFER;
    if (!text) return MLC_ERR_ARGUMENT;
    std::memcpy(text, out.data(), out.size());
    text[out.size()] = '\0';
    return MLC_OK;
  } catch (const std::exception&) {
    return MLC_ERR_INTERNAL;
  }
}

size_t mlc_tokenizer_vocab_size(const mlc_tokenizer* h) {
  return h && h->tokenizer ? h->tokenizer->VocabSize() : 0;
}

}  // extern "C"
