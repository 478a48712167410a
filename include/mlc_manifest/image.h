// The image frontend (SPEC 6.2): turns an image file into exactly what an `image_decode`
// processor declares. Decoding (libvips) yields upright 8-bit RGB with alpha dropped (an embedded
// ICC profile ignored, as Pillow's convert("RGB"), unless ImageOptions::colour_manage); the
// resize is ours and follows Pillow's resampling conventions so the pixels match the Pillow-based
// preprocessing the models were trained with; the result is a uint8 (or widened uint32)
// [1, height, width, 3] NHWC tensor.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/npy.h"

namespace mlc {

// ---- Resampling ----

enum class ResizeFilter { kBicubic, kBilinear, kLanczos };
const char* ResizeFilterName(ResizeFilter filter);  // "bicubic", "bilinear", "lanczos"
std::optional<ResizeFilter> ParseResizeFilter(std::string_view name);

// 8-bit RGB pixels, row-major, 3 bytes per pixel (H x W x 3).
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels;
};

// The geometry of SPEC 6.2: the source is scaled to scaled_width x scaled_height and the
// width x height window at (left, top) of the scaled image is kept.
struct ResizePlan {
  ResizeMode mode = ResizeMode::kStretch;
  int64_t source_width = 0;
  int64_t source_height = 0;
  int64_t scaled_width = 0;
  int64_t scaled_height = 0;
  int64_t left = 0;
  int64_t top = 0;
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const ResizePlan&) const = default;
};

// stretch: straight to width x height. center_crop: s = max(height / h, width / w), scaled size
// round(w s) x round(h s) (rounding half up, as WebLLM's Math.round), window at
// floor((W' - width) / 2), floor((H' - height) / 2). Sizes must be >= 1.
ResizePlan PlanResize(int64_t source_width, int64_t source_height, ResizeMode mode,
                      int64_t height, int64_t width);

// The part of the source a resize maps onto the scaled image, in source pixels: normally the
// whole image (0, 0, width, height); fractional when the decoder already shrank the image and
// its last row or column covers only part of a block.
struct SourceBox {
  double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
};

// Resizes src (whose size is plan.source_*) following Pillow's ImagingResample for 8-bit images:
// separable, horizontal pass first, fixed-point weights with 22 fractional bits, rounding and
// clamping to 8 bits between the passes. Only the kept window is computed. `box` defaults to the
// whole source.
RgbImage ResizeRgb(const RgbImage& src, const ResizePlan& plan, ResizeFilter filter,
                   const std::optional<SourceBox>& box = std::nullopt);

// The same resize fed with source rows as a decoder produces them, top to bottom: the horizontal
// pass runs on each row the window needs as it arrives (others are skipped), and each output row
// is made as soon as its last source row has arrived, so only a few rows are ever held. Gives
// exactly ResizeRgb's pixels.
class RowResizer {
 public:
  RowResizer(const ResizePlan& plan, ResizeFilter filter, const std::optional<SourceBox>& box);
  ~RowResizer();
  RowResizer(const RowResizer&) = delete;
  RowResizer& operator=(const RowResizer&) = delete;

  // Source rows [y, y + count), RGB, `stride` bytes apart; calls must come in row order.
  void PushRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride);
  // The same for RGBX rows (4 bytes a pixel, X ignored) whose first pixel is source column
  // `first_column`; each row must hold at least the columns of NeededColumns().
  void PushRgbxRows(int64_t y, int64_t count, const uint8_t* rows, int64_t stride,
                    int64_t first_column);
  // The source columns [first, last) and rows the window reads; a decoder may skip the rest.
  std::pair<int64_t, int64_t> NeededColumns() const;
  std::pair<int64_t, int64_t> NeededRows() const;
  // The plan.width x plan.height result (the output rows not made yet are made now); rows that
  // were never pushed count as black.
  RgbImage Finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---- Decoding ----

struct ImageOptions {
  int64_t max_pixels = 100'000'000;    // stored width x height; larger images are rejected
  uint64_t max_file_bytes = 256ull << 20;
  // A JPEG's decode budget, read from its markers before any decoding (kLimit): each scan of a
  // progressive file is a pass over the whole image.
  int64_t max_jpeg_scans = 100;
  int64_t max_jpeg_scan_pixels = 2'000'000'000;  // scans x width x height
  bool composite_on_white = false;     // blend alpha onto white instead of dropping it
  bool shrink_on_load = true;          // JPEG DCT scaling for large reductions (>= 45 dB)
  ResizeFilter filter = ResizeFilter::kBicubic;
  // Convert through an embedded ICC profile to sRGB, as browsers do. Off by default (SPEC 6.2):
  // the models' reference processors (Pillow's convert("RGB"), Hugging Face's load_image,
  // stb_image) take the encoded values and ignore the profile.
  bool colour_manage = false;
};

struct ImageInfo {
  std::string format;             // "jpeg", "png", "webp", "gif", "bmp", "tiff", "heif"
  int64_t width = 0;              // as stored
  int64_t height = 0;
  int orientation = 1;            // EXIF orientation 1..8
  int64_t upright_width = 0;      // after the orientation is applied
  int64_t upright_height = 0;
  int bands = 0;                  // stored bands, alpha included
  int bits = 8;                   // bits per sample as decoded
  std::string colour;             // "srgb", "grey", "cmyk", ... (libvips interpretation)
  bool has_alpha = false;
  bool has_icc = false;           // an embedded ICC profile was present
  bool icc_applied = false;       // ... and was used to convert to sRGB (colour_manage)
  int shrink = 1;                 // JPEG DCT shrink-on-load factor used (1 = full decode)
  std::string chroma_subsampling; // JPEG: "4:2:0", "4:4:4", ...; "" for other formats
};

// Reads only the header: format, size, orientation. Rejects non-images, unsupported formats and
// images over the pixel limit (ErrorCode::kLimit) without decoding pixels.
Result<ImageInfo> ProbeImage(std::string_view bytes, const ImageOptions& options = {});

struct DecodedImage {
  ImageInfo info;
  RgbImage rgb;       // upright, 8-bit RGB (sRGB when colour managed), alpha dropped (or composited)
  SourceBox box;      // the full-resolution extent the pixels stand for (see SourceBox)
};

// Decodes a whole image (shrink: JPEG DCT scaling 1, 2, 4 or 8; ignored for other formats).
Result<DecodedImage> DecodeImage(std::string_view bytes, const ImageOptions& options = {},
                                 int shrink = 1);
Result<DecodedImage> DecodeImageFile(const std::string& path, const ImageOptions& options = {},
                                     int shrink = 1);

// ---- The whole frontend ----

struct PreparedImage {
  ImageInfo info;
  ResizePlan plan;    // in upright full-resolution source pixels
  RgbImage rgb;       // plan.width x plan.height
};

// The JPEG DCT shrink factor the frontend uses for this plan (1 when none keeps >= 45 dB): only
// for JPEGs without chroma subsampling, and only where the resize still reduces each axis by at
// least 4 after the shrink.
int ChooseShrink(const ImageInfo& info, const ResizePlan& plan, const ImageOptions& options);

// Decodes straight into the resize, without holding the whole image, where the decoded rows are
// already upright RGB (EXIF orientation 1, not grey or CMYK): rows are resized as libvips
// produces them, overlapping decode and resize. std::nullopt when the image needs the
// whole-image path (DecodeImage, then ResizeRgb). `plan` is in full-resolution pixels.
Result<std::optional<PreparedImage>> DecodeAndResize(std::string_view bytes, const ImageInfo& header,
                                                     const ResizePlan& plan,
                                                     const ImageOptions& options, int shrink);

// Probe, plan, decode (shrinking on load where allowed) and resize.
Result<PreparedImage> PrepareImage(std::string_view bytes, ResizeMode mode, int64_t height,
                                   int64_t width, const ImageOptions& options = {});
Result<PreparedImage> PrepareImage(std::string_view bytes, const ImageDecode& processor,
                                   const ImageOptions& options = {});
// The same resize over pixels a caller already decoded (a browser's createImageBitmap/canvas
// ImageData): `rgba` is width x height x 4 bytes, row-major, alpha dropped (as the decoder
// drops it). Limits as PrepareImage's.
Result<PreparedImage> PrepareRgbaPixels(const uint8_t* rgba, int64_t width, int64_t height,
                                        const ImageDecode& processor, const ImageOptions& options = {});
Result<PreparedImage> PrepareImageFile(const std::string& path, const ImageDecode& processor,
                                       const ImageOptions& options = {});

// ---- Output ----

enum class PixelDtype { kUint8, kUint32 };
const char* PixelDtypeName(PixelDtype dtype);                  // "uint8" / "uint32"
std::optional<PixelDtype> ParsePixelDtype(std::string_view name);

// uint8 [1, H, W, 3] ("|u1"), or the same values widened to uint32 ("<u4").
NpyArray ImageTensor(const RgbImage& rgb, PixelDtype dtype);

// PNG bytes of the image (for previews).
Result<std::string> EncodePng(const RgbImage& rgb);

// Peak signal-to-noise ratio in dB between two same-sized images (infinity when equal).
double Psnr(const RgbImage& a, const RgbImage& b);

}  // namespace mlc
