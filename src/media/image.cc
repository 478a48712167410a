// The image frontend end to end (SPEC 6.2): probe the header, plan the resize in upright
// full-resolution pixels, decode (with JPEG shrink-on-load only where it stays >= 45 dB from the
// full decode: 4:4:4 chroma and a large remaining reduction), resize with Pillow's conventions,
// and lay the pixels out as the adapter's tensor.
#include <algorithm>
#include <cstring>

#include "media/jpeg_direct.h"
#include "media/jpeg_markers.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"

namespace mlc {
namespace {

// Shrink-on-load is used only when, after the DCT shrink, the resize still reduces each axis by
// at least this factor, and only for JPEGs whose chroma is not subsampled. Measured against the
// full decode (tests/image_test.cc, ShrinkOnLoad*) on adversarial content (1-2 px lines, a
// checkerboard, hard chroma edges): without subsampling a remaining reduction of 3 lands at
// 41-45 dB and one of 4 or more at >= 47 dB; with 4:2:0 chroma the scaled decode skips the
// decoder's chroma upsampling, which costs 37-44 dB whatever the reduction, so it is never used.
constexpr double kShrinkGap = 4.0;

bool FullChroma(const ImageInfo& info) {
  return info.chroma_subsampling == "4:4:4" || info.chroma_subsampling == "4:4:4:4";
}

}  // namespace

int ChooseShrink(const ImageInfo& info, const ResizePlan& plan, const ImageOptions& options) {
  if (!options.shrink_on_load || info.format != "jpeg" || !FullChroma(info)) return 1;
  const double rx = static_cast<double>(info.upright_width) / plan.scaled_width;
  const double ry = static_cast<double>(info.upright_height) / plan.scaled_height;
  const double reduction = std::min(rx, ry);
  for (int shrink : {8, 4, 2}) {
    if (reduction / shrink >= kShrinkGap) return shrink;
  }
  return 1;
}

namespace {

// The largest edge a target may have (as the CLI's --height / --width) and at most
// options.max_pixels pixels in all.
constexpr int64_t kMaxTargetEdge = 65535;

Status CheckTargetSize(int64_t height, int64_t width, const ImageOptions& options) {
  if (height > kMaxTargetEdge || width > kMaxTargetEdge || height * width > options.max_pixels) {
    return Error{ErrorCode::kLimit, "",
                 "target size " + std::to_string(width) + "x" + std::to_string(height) +
                     " is over the limit (each side at most " + std::to_string(kMaxTargetEdge) +
                     ", at most " + std::to_string(options.max_pixels) + " pixels)"};
  }
  return Status::Ok();
}

}  // namespace

Result<PreparedImage> PrepareImage(std::string_view bytes, ResizeMode mode, int64_t height,
                                   int64_t width, const ImageOptions& options) {
  if (height < 1 || width < 1) {
    return Error{ErrorCode::kUsage, "", "target size must be at least 1x1"};
  }
  // A size from a manifest is checked before any buffer is sized from it.
  MLC_RETURN_IF_ERROR(CheckTargetSize(height, width, options));
  MLC_RETURN_IF_ERROR(jpeg_markers::CheckJpegBudget(bytes, options.max_jpeg_scans, options.max_jpeg_scan_pixels));
  // The common photo (a plain upright YCbCr JPEG) needs neither libvips nor its start-up.
  if (auto direct = jpeg_direct::Prepare(bytes, mode, height, width, options)) {
    return std::move(*direct);
  }
  auto info = ProbeImage(bytes, options);
  MLC_RETURN_IF_ERROR(info);
  PreparedImage prepared;
  prepared.plan = PlanResize(info->upright_width, info->upright_height, mode, height, width);
  if (Status s = CheckTargetSize(prepared.plan.scaled_height, prepared.plan.scaled_width, options); !s) {
    return s.errors();
  }
  const int shrink = ChooseShrink(*info, prepared.plan, options);
  auto streamed = DecodeAndResize(bytes, *info, prepared.plan, options, shrink);
  MLC_RETURN_IF_ERROR(streamed);
  if (*streamed) return std::move(**streamed);
  auto decoded = DecodeImage(bytes, options, shrink);
  MLC_RETURN_IF_ERROR(decoded);
  prepared.info = decoded->info;
  // The plan is in full-resolution pixels; the decoded image may be smaller (shrink-on-load),
  // so the resize maps the plan's scaled size onto the decoded pixels' extent.
  ResizePlan plan = prepared.plan;
  plan.source_width = decoded->rgb.width;
  plan.source_height = decoded->rgb.height;
  prepared.rgb = ResizeRgb(decoded->rgb, plan, options.filter, decoded->box);
  return prepared;
}

Result<PreparedImage> PrepareImage(std::string_view bytes, const ImageDecode& processor,
                                   const ImageOptions& options) {
  return PrepareImage(bytes, processor.mode, processor.height, processor.width, options);
}

Result<PreparedImage> PrepareRgbaPixels(const uint8_t* rgba, int64_t width, int64_t height,
                                        const ImageDecode& processor, const ImageOptions& options) {
  if (processor.height < 1 || processor.width < 1) {
    return Error{ErrorCode::kUsage, "", "target size must be at least 1x1"};
  }
  MLC_RETURN_IF_ERROR(CheckTargetSize(processor.height, processor.width, options));
  if (width < 1 || height < 1) return Error{ErrorCode::kInvalid, "", "image has no pixels"};
  if (width > options.max_pixels / height) {
    return Error{ErrorCode::kLimit, "", "image " + std::to_string(width) + "x" + std::to_string(height) +
                                            " is over max_pixels " + std::to_string(options.max_pixels)};
  }
  PreparedImage prepared;
  prepared.info.format = "rgba";
  prepared.info.width = prepared.info.upright_width = width;
  prepared.info.height = prepared.info.upright_height = height;
  prepared.info.bands = 4;
  prepared.info.colour = "srgb";
  prepared.info.has_alpha = true;
  prepared.plan = PlanResize(width, height, processor.mode, processor.height, processor.width);
  MLC_RETURN_IF_ERROR(CheckTargetSize(prepared.plan.scaled_height, prepared.plan.scaled_width, options));
  RowResizer resizer(prepared.plan, options.filter, std::nullopt);
  const auto [first_row, last_row] = resizer.NeededRows();
  const size_t stride = static_cast<size_t>(width) * 4;
  // RGBX rows as they are: the resizer ignores the fourth byte (alpha dropped, as decoding does).
  resizer.PushRgbxRows(first_row, last_row - first_row, rgba + static_cast<size_t>(first_row) * stride,
                       static_cast<int64_t>(stride), 0);
  prepared.rgb = resizer.Finish();
  return prepared;
}

Result<PreparedImage> PrepareImageFile(const std::string& path, const ImageDecode& processor,
                                       const ImageOptions& options) {
  auto bytes = ReadFileBytes(path, options.max_file_bytes);
  MLC_RETURN_IF_ERROR(bytes);
  return InDocument(PrepareImage(bytes->view(), processor, options), DocumentName(path));
}

const char* PixelDtypeName(PixelDtype dtype) {
  return dtype == PixelDtype::kUint32 ? "uint32" : "uint8";
}

std::optional<PixelDtype> ParsePixelDtype(std::string_view name) {
  if (name == "uint8") return PixelDtype::kUint8;
  if (name == "uint32") return PixelDtype::kUint32;
  return std::nullopt;
}

NpyArray ImageTensor(const RgbImage& rgb, PixelDtype dtype) {
  NpyArray array;
  array.shape = {1, rgb.height, rgb.width, 3};
  if (dtype == PixelDtype::kUint8) {
    array.descr = "|u1";
    array.data.assign(reinterpret_cast<const char*>(rgb.pixels.data()), rgb.pixels.size());
    return array;
  }
  array.descr = "<u4";
  array.data.resize(rgb.pixels.size() * 4);
  char* out = array.data.data();
  for (size_t i = 0; i < rgb.pixels.size(); ++i) {
    const uint32_t v = rgb.pixels[i];
    const unsigned char le[4] = {static_cast<unsigned char>(v), 0, 0, 0};
    std::memcpy(out + i * 4, le, 4);
  }
  return array;
}

}  // namespace mlc
