// The library's side of the image module: finds and opens libmlc_manifest_image.so on first use
// and forwards the image decoding calls of image.h to it.
#include "media/image_backend.h"

#include "media/image_backend_convert.h"
#include "media/jpeg_markers.h"
#include "mlc_manifest/fs.h"

namespace mlc {

namespace {

const uint8_t* AsBytes(std::string_view bytes) { return reinterpret_cast<const uint8_t*>(bytes.data()); }

}  // namespace

Result<ImageInfo> ProbeImage(std::string_view bytes, const ImageOptions& options) {
  auto backend = LoadModule<MlcImageBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcImageOptions o = image_c::ToC(options);
  MlcImageInfo info{};
  MlcImageError error{};
  if (!(*backend)->probe(AsBytes(bytes), bytes.size(), &o, &info, &error)) return image_c::ToError(error);
  return image_c::FromC(info);
}

Result<DecodedImage> DecodeImage(std::string_view bytes, const ImageOptions& options, int shrink) {
  MLC_RETURN_IF_ERROR(jpeg_markers::CheckJpegBudget(bytes, options.max_jpeg_scans, options.max_jpeg_scan_pixels));
  auto backend = LoadModule<MlcImageBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcImageOptions o = image_c::ToC(options);
  MlcImageInfo info{};
  MlcSourceBox box{};
  MlcImageError error{};
  DecodedImage out;
  if (!(*backend)->decode(AsBytes(bytes), bytes.size(), &o, shrink, &info, &out.rgb.width,
                          &out.rgb.height, image_c::AllocatorInto(&out.rgb.pixels), &box, &error)) {
    return image_c::ToError(error);
  }
  out.info = image_c::FromC(info);
  out.box = image_c::FromC(box);
  return out;
}

Result<DecodedImage> DecodeImageFile(const std::string& path, const ImageOptions& options,
                                     int shrink) {
  auto bytes = ReadFileBytes(path, options.max_file_bytes);
  MLC_RETURN_IF_ERROR(bytes);
  return InDocument(DecodeImage(bytes->view(), options, shrink), DocumentName(path));
}

Result<std::optional<PreparedImage>> DecodeAndResize(std::string_view bytes, const ImageInfo& header,
                                                     const ResizePlan& plan,
                                                     const ImageOptions& options, int shrink) {
  auto backend = LoadModule<MlcImageBackend>();
  MLC_RETURN_IF_ERROR(backend);
  MlcImageOptions o = image_c::ToC(options);
  MlcImageInfo header_c = image_c::ToC(header), info{};
  MlcResizePlan plan_c = image_c::ToC(plan), plan_out{};
  MlcImageError error{};
  int done = 0;
  PreparedImage out;
  if (!(*backend)->decode_and_resize(AsBytes(bytes), bytes.size(), &header_c, &plan_c, &o, shrink,
                                     &done, &info, &plan_out, &out.rgb.width, &out.rgb.height,
                                     image_c::AllocatorInto(&out.rgb.pixels), &error)) {
    return image_c::ToError(error);
  }
  if (!done) return std::optional<PreparedImage>();
  out.info = image_c::FromC(info);
  out.plan = image_c::FromC(plan_out);
  return std::optional<PreparedImage>(std::move(out));
}

Result<std::string> EncodePng(const RgbImage& rgb) {
  auto backend = LoadModule<MlcImageBackend>();
  MLC_RETURN_IF_ERROR(backend);
  if (rgb.width >= 1 && rgb.height >= 1 &&
      rgb.pixels.size() != static_cast<size_t>(rgb.width) * static_cast<size_t>(rgb.height) * 3) {
    return Invalid("", "expected width x height x 3 bytes of pixels");
  }
  MlcRgbView view{rgb.width, rgb.height, rgb.pixels.data()};
  MlcImageError error{};
  std::string png;
  if (!(*backend)->encode_png(&view, image_c::AllocatorInto(&png), &error)) {
    return image_c::ToError(error);
  }
  return png;
}

}  // namespace mlc
