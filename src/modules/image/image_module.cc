// The image module (libmlc_manifest_image.so, loaded on first use by media/image_backend.cc so
// that no other command pays libvips's start-up). Image decoding with libvips (C API): format
// detection against an allow-list, header-only probing with the pixel limit, then a sequential
// decode to upright 8-bit RGB: an embedded ICC profile ignored (the encoded values, as Pillow's
// convert("RGB")) unless colour management is asked for, 16-bit samples scaled, grey expanded,
// CMYK without a profile converted as Pillow does, alpha dropped (or composited onto white) and
// the EXIF orientation applied.
#include <dlfcn.h>
#include <gmodule.h>
#include <vips/vips.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "media/image_backend.h"
#include "media/image_backend_convert.h"
#include "mlc_manifest/image.h"

namespace mlc {
namespace {

// ---- libvips plumbing ----

// libvips loads its optional modules (ImageMagick, HEIF, PDF, OpenSlide, JPEG XL) and the large
// libraries behind them in vips_init: 40 ms of a 200 ms run. We need two of them, and only for
// their formats: LoadVipsModule opens a module when an image of its format arrives. A library
// does not change the environment (another thread may be reading it), so skipping them in
// vips_init is the program's choice: the CLI points VIPSHOME at a libdir without modules
// before it starts any thread.
bool InitVips() {
  static std::once_flag once;
  static bool ok = false;
  std::call_once(once, [] {
    ok = VIPS_INIT("mlc-manifest") == 0;
    if (ok) {
      vips_cache_set_max(0);  // no operation cache: every image is decoded once
      vips_cache_set_max_mem(0);
      // One worker per threadpool. libvips 8.14 ends a pool whose work failed (a damaged image)
      // by setting its stop flag outside the allocation lock, while a second worker may be
      // past its own check of that flag and about to assert it clear: a rare abort of the
      // whole process on hostile input. Our decodes are sequential (rows flow top to bottom
      // into the resizer), so a second worker had nothing to do in parallel anyway.
      vips_concurrency_set(1);
      // Decoder warnings about damaged files become errors (fail_on) or are irrelevant; a
      // library does not print them on stderr.
      g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING,
                        [](const gchar*, GLogLevelFlags, const gchar*, gpointer) {}, nullptr);
    }
  });
  return ok;
}

// Opens libvips's module `name` ("heif", "magick") from the folder beside the libvips library,
// once; its loaders register themselves. False when it is not installed.
bool LoadVipsModule(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, bool> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(name);
  if (it != loaded.end()) return it->second;
  bool ok = false;
  Dl_info where{};
  if (dladdr(reinterpret_cast<void*>(&vips_image_new), &where) != 0 && where.dli_fname) {
    const std::string path = (std::filesystem::path(where.dli_fname).parent_path() /
                              ("vips-modules-" + std::to_string(VIPS_MAJOR_VERSION) + "." +
                               std::to_string(VIPS_MINOR_VERSION)) /
                              ("vips-" + name + ".so"))
                                 .string();
    if (GModule* module = g_module_open(path.c_str(), G_MODULE_BIND_LAZY)) {
      g_module_make_resident(module);
      ok = true;
    }
  }
  loaded[name] = ok;
  return ok;
}

// The libvips error text (thread-local use of a global buffer: copy and clear).
std::string TakeVipsError() {
  char* text = vips_error_buffer_copy();
  std::string s = text ? text : "";
  g_free(text);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  const size_t nl = s.find('\n');
  if (nl != std::string::npos) s = s.substr(0, nl);  // the first line says what failed
  return s.empty() ? "libvips failed" : s;
}

struct ImageRef {
  VipsImage* image = nullptr;
  ImageRef() = default;
  explicit ImageRef(VipsImage* i) : image(i) {}
  ImageRef(const ImageRef&) = delete;
  ImageRef& operator=(const ImageRef&) = delete;
  ImageRef(ImageRef&& o) noexcept : image(o.image) { o.image = nullptr; }
  ImageRef& operator=(ImageRef&& o) noexcept {
    std::swap(image, o.image);
    return *this;
  }
  ~ImageRef() {
    if (image) g_object_unref(image);
  }
  VipsImage* get() const { return image; }
};

// ---- Formats ----

struct FormatEntry {
  const char* loader;  // vips nickname of the buffer loader
  const char* name;
};

constexpr FormatEntry kFormats[] = {
    {"jpegload_buffer", "jpeg"}, {"pngload_buffer", "png"},   {"webpload_buffer", "webp"},
    {"gifload_buffer", "gif"},   {"tiffload_buffer", "tiff"}, {"heifload_buffer", "heif"},
};

bool LooksLikeBmp(std::string_view bytes) {
  return bytes.size() >= 26 && bytes[0] == 'B' && bytes[1] == 'M';
}

// An ISO base media file (HEIF, AVIF; also MP4, which the HEIF loader then refuses).
bool LooksLikeIsoMedia(std::string_view bytes) {
  return bytes.size() >= 12 && bytes.substr(4, 4) == "ftyp";
}

// Detects the format from the bytes; the loader is one of the allow-listed ones.
Result<std::string> DetectFormat(std::string_view bytes) {
  if (bytes.empty()) return Invalid("byte 0", "empty input: expected an image file");
  if (LooksLikeBmp(bytes)) LoadVipsModule("magick");
  if (LooksLikeIsoMedia(bytes)) LoadVipsModule("heif");
  // libvips answers with a class name ("VipsForeignLoadPngBuffer"); compare nicknames.
  const char* found = vips_foreign_find_load_buffer(bytes.data(), bytes.size());
  const char* loader = found ? vips_nickname_find(g_type_from_name(found)) : nullptr;
  if (found && !loader) loader = found;
  vips_error_clear();
  if (LooksLikeBmp(bytes)) {
    // libvips has no BMP loader of its own; it reads BMP through ImageMagick.
    if (vips_type_find("VipsOperation", "magickload_buffer") == 0) {
      return Error{ErrorCode::kUnsupported, "byte 0",
                   "BMP image, but this libvips cannot read BMP (no ImageMagick loader)"};
    }
    return std::string("bmp");
  }
  if (loader) {
    for (const FormatEntry& f : kFormats) {
      if (std::strcmp(loader, f.loader) == 0) return std::string(f.name);
    }
    return Error{ErrorCode::kUnsupported, "byte 0",
                 std::string("not a supported image format (libvips detects ") + loader +
                     "); expected JPEG, PNG, WebP, GIF, BMP, TIFF or HEIF"};
  }
  return Invalid("byte 0",
                 "not an image: expected JPEG, PNG, WebP, GIF, BMP, TIFF or HEIF data");
}

// The buffer loaders of the formats other than JPEG (which takes a shrink factor too): libvips's
// variadic C API, options in name/value pairs ended by nullptr. BMP is read through ImageMagick.
using VipsBufferLoad = int (*)(void* buf, size_t len, VipsImage** out, ...);
struct FormatLoad {
  const char* format;
  VipsBufferLoad load;
};
const FormatLoad kLoads[] = {
    {"png", vips_pngload_buffer},   {"webp", vips_webpload_buffer}, {"gif", vips_gifload_buffer},
    {"tiff", vips_tiffload_buffer}, {"heif", vips_heifload_buffer}, {"bmp", vips_magickload_buffer},
};

// Opens the image lazily (header only until pixels are asked for) with the format's loader.
Result<ImageRef> OpenImage(std::string_view bytes, const std::string& format, int shrink) {
  void* buf = const_cast<char*>(bytes.data());
  const size_t len = bytes.size();
  VipsImage* out = nullptr;
  const VipsAccess seq = VIPS_ACCESS_SEQUENTIAL;
  const VipsFailOn fail = VIPS_FAIL_ON_TRUNCATED;
  int rc = -1;
  if (format == "jpeg") {
    rc = vips_jpegload_buffer(buf, len, &out, "access", seq, "fail_on", fail, "shrink",
                              shrink, nullptr);
  }
  for (const FormatLoad& f : kLoads) {
    if (format == f.format) rc = f.load(buf, len, &out, "access", seq, "fail_on", fail, nullptr);
  }
  if (rc != 0 || !out) {
    return Invalid("byte 0", "cannot read the " + format + " header: " + TakeVipsError());
  }
  return ImageRef(out);
}

std::string ColourName(VipsInterpretation interpretation) {
  switch (interpretation) {
    case VIPS_INTERPRETATION_B_W:
    case VIPS_INTERPRETATION_GREY16: return "grey";
    case VIPS_INTERPRETATION_sRGB:
    case VIPS_INTERPRETATION_RGB16: return "srgb";
    case VIPS_INTERPRETATION_CMYK: return "cmyk";
    case VIPS_INTERPRETATION_scRGB: return "scrgb";
    case VIPS_INTERPRETATION_LAB:
    case VIPS_INTERPRETATION_LABS: return "lab";
    default: break;
  }
  const char* nick = vips_enum_nick(VIPS_TYPE_INTERPRETATION, interpretation);
  return nick ? nick : "unknown";
}

int BitsOf(VipsBandFormat format) {
  switch (format) {
    case VIPS_FORMAT_UCHAR:
    case VIPS_FORMAT_CHAR: return 8;
    case VIPS_FORMAT_USHORT:
    case VIPS_FORMAT_SHORT: return 16;
    case VIPS_FORMAT_FLOAT:
    case VIPS_FORMAT_UINT:
    case VIPS_FORMAT_INT: return 32;
    default: return 64;
  }
}

int OrientationOf(VipsImage* image) {
  int o = 1;
  if (vips_image_get_typeof(image, VIPS_META_ORIENTATION) &&
      vips_image_get_int(image, VIPS_META_ORIENTATION, &o) == 0 && o >= 1 && o <= 8) {
    return o;
  }
  vips_error_clear();
  return 1;
}

bool Transposes(int orientation) { return orientation >= 5; }

ImageInfo InfoOf(VipsImage* image, const std::string& format) {
  ImageInfo info;
  info.format = format;
  info.width = vips_image_get_width(image);
  info.height = vips_image_get_height(image);
  info.orientation = OrientationOf(image);
  info.upright_width = Transposes(info.orientation) ? info.height : info.width;
  info.upright_height = Transposes(info.orientation) ? info.width : info.height;
  info.bands = vips_image_get_bands(image);
  info.bits = BitsOf(vips_image_get_format(image));
  info.colour = ColourName(vips_image_guess_interpretation(image));
  info.has_alpha = vips_image_hasalpha(image);
  info.has_icc = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
  const char* subsampling = nullptr;
  if (format == "jpeg" && vips_image_get_typeof(image, "jpeg-chroma-subsample") != 0 &&
      vips_image_get_string(image, "jpeg-chroma-subsample", &subsampling) == 0 && subsampling) {
    info.chroma_subsampling = subsampling;
  }
  return info;
}

Status CheckLimits(const ImageInfo& info, const ImageOptions& options) {
  if (info.width < 1 || info.height < 1) {
    return Invalid("", "image has no pixels: expected a width and height >= 1");
  }
  const int64_t pixels = info.width * info.height;
  if (pixels > options.max_pixels) {
    return Error{ErrorCode::kLimit, "",
                 std::to_string(info.width) + "x" + std::to_string(info.height) + " = " +
                     std::to_string(pixels) + " pixels, over the limit of " +
                     std::to_string(options.max_pixels) + " pixels"};
  }
  return Status::Ok();
}

// ---- The conversion pipeline (each step takes and returns a lazily evaluated image) ----

using Step = Result<ImageRef>;

// Takes the address of the output so the result is read after the call has run.
Step Wrap(int rc, VipsImage** out, const char* what) {
  VipsImage* image = out ? *out : nullptr;
  if (rc != 0 || !image) {
    if (image) g_object_unref(image);
    return Invalid("", std::string(what) + ": " + TakeVipsError());
  }
  return ImageRef(image);
}

int ColourBands(VipsImage* image) {
  const int bands = vips_image_get_bands(image);
  return vips_image_hasalpha(image) ? bands - 1 : bands;
}

// Drops alpha (the contract's rule) or blends it onto white.
Step HandleAlpha(ImageRef in, const ImageOptions& options) {
  if (!vips_image_hasalpha(in.get())) return in;
  VipsImage* out = nullptr;
  if (options.composite_on_white) {
    const bool wide = vips_image_get_format(in.get()) == VIPS_FORMAT_USHORT;
    const bool cmyk = vips_image_get_interpretation(in.get()) == VIPS_INTERPRETATION_CMYK;
    const double white = cmyk ? 0.0 : (wide ? 65535.0 : 255.0);
    const int n = ColourBands(in.get());
    double background[4] = {white, white, white, white};
    VipsArrayDouble* bg = vips_array_double_new(background, std::min(n, 4));
    const int rc = vips_flatten(in.get(), &out, "background", bg, "max_alpha",
                                wide ? 65535.0 : 255.0, nullptr);
    vips_area_unref(VIPS_AREA(bg));
    return Wrap(rc, &out, "cannot composite alpha onto white");
  }
  return Wrap(vips_extract_band(in.get(), &out, 0, "n", ColourBands(in.get()), nullptr), &out,
              "cannot drop alpha");
}

// Embedded profile -> sRGB, when colour management is asked for (SPEC 6.2: by default the encoded
// values are kept, as the models' reference processors do). Returns the input unchanged
// (applied = false) when not asked or when the profile cannot be used.
Step ApplyIcc(ImageRef in, bool colour_manage, bool* applied) {
  *applied = false;
  if (!colour_manage || !vips_image_get_typeof(in.get(), VIPS_META_ICC_NAME)) return in;
  VipsImage* out = nullptr;
  if (vips_icc_transform(in.get(), &out, "srgb", "embedded", TRUE, "depth", 8, nullptr) != 0 ||
      !out) {
    vips_error_clear();
    return in;  // a broken profile: decode as if untagged
  }
  *applied = true;
  return ImageRef(out);
}

// Any sample format -> 8 bits: 16-bit by its high byte (as Pillow and libvips), others through
// libvips's colourspace conversion to sRGB.
Step ToEightBit(ImageRef in) {
  const VipsBandFormat format = vips_image_get_format(in.get());
  if (format == VIPS_FORMAT_UCHAR) return in;
  VipsImage* out = nullptr;
  if (format == VIPS_FORMAT_USHORT) {
    VipsImage* shifted = nullptr;
    if (vips_rshift_const1(in.get(), &shifted, 8, nullptr) != 0) {
      return Wrap(-1, nullptr, "cannot scale 16-bit samples");
    }
    ImageRef s(shifted);
    return Wrap(vips_cast_uchar(s.get(), &out, nullptr), &out, "cannot scale 16-bit samples");
  }
  VipsImage* srgb = nullptr;
  if (vips_colourspace(in.get(), &srgb, VIPS_INTERPRETATION_sRGB, nullptr) != 0) {
    return Wrap(-1, nullptr, "cannot convert to sRGB");
  }
  ImageRef s(srgb);
  return Wrap(vips_cast_uchar(s.get(), &out, nullptr), &out, "cannot convert to 8 bits");
}

// Interpretations other than grey, RGB and CMYK (Lab, XYZ, ...) go through libvips to sRGB.
Step ToKnownColour(ImageRef in) {
  const int bands = vips_image_get_bands(in.get());
  const VipsInterpretation t = vips_image_guess_interpretation(in.get());
  const bool simple = t == VIPS_INTERPRETATION_B_W || t == VIPS_INTERPRETATION_GREY16 ||
                      t == VIPS_INTERPRETATION_sRGB || t == VIPS_INTERPRETATION_RGB16 ||
                      t == VIPS_INTERPRETATION_CMYK || t == VIPS_INTERPRETATION_MULTIBAND;
  if (simple && (bands == 1 || bands == 3 || (bands == 4 && t == VIPS_INTERPRETATION_CMYK))) {
    return in;
  }
  VipsImage* out = nullptr;
  if (vips_colourspace(in.get(), &out, VIPS_INTERPRETATION_sRGB, nullptr) == 0 && out &&
      (vips_image_get_bands(out) == 3)) {
    return ImageRef(out);
  }
  if (out) g_object_unref(out);
  vips_error_clear();
  if (bands >= 3) {  // unknown multi-band data: keep the first three bands as RGB
    return Wrap(vips_extract_band(in.get(), &out, 0, "n", 3, nullptr), &out,
                "cannot read the colour bands");
  }
  return Wrap(vips_extract_band(in.get(), &out, 0, "n", 1, nullptr), &out,
              "cannot read the colour bands");
}

// Pillow's CMYK -> RGB: R = (255 - K) - (C (255 - K)) / 255, rounded as its MULDIV255.
inline uint8_t CmykChannel(int c, int nk) {
  const int t = c * nk + 128;
  const int v = nk - (((t >> 8) + t) >> 8);
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

// The source coordinate (sx, sy) of upright pixel (x, y) for an EXIF orientation; w, h are the
// stored size.
inline void SourceOf(int orientation, int64_t x, int64_t y, int64_t w, int64_t h, int64_t* sx,
                     int64_t* sy) {
  switch (orientation) {
    case 2: *sx = w - 1 - x; *sy = y; return;
    case 3: *sx = w - 1 - x; *sy = h - 1 - y; return;
    case 4: *sx = x; *sy = h - 1 - y; return;
    case 5: *sx = y; *sy = x; return;
    case 6: *sx = y; *sy = h - 1 - x; return;
    case 7: *sx = w - 1 - y; *sy = h - 1 - x; return;
    case 8: *sx = w - 1 - y; *sy = x; return;
    default: *sx = x; *sy = y; return;
  }
}

// Decoded samples (1, 3 or 4 = CMYK bands, 8-bit, stored orientation) -> upright RGB.
RgbImage ToUprightRgb(const uint8_t* data, int64_t w, int64_t h, int bands, int orientation) {
  RgbImage rgb;
  const bool transpose = Transposes(orientation);
  rgb.width = transpose ? h : w;
  rgb.height = transpose ? w : h;
  rgb.pixels.resize(static_cast<size_t>(w) * h * 3);
  auto convert = [&](const uint8_t* p, uint8_t* q) {
    if (bands == 1) {
      q[0] = q[1] = q[2] = p[0];
    } else if (bands == 4) {
      const int nk = 255 - p[3];
      q[0] = CmykChannel(p[0], nk);
      q[1] = CmykChannel(p[1], nk);
      q[2] = CmykChannel(p[2], nk);
    } else {
      q[0] = p[0];
      q[1] = p[1];
      q[2] = p[2];
    }
  };
  if (orientation == 1 && bands == 3) {
    std::memcpy(rgb.pixels.data(), data, rgb.pixels.size());
    return rgb;
  }
  for (int64_t y = 0; y < rgb.height; ++y) {
    uint8_t* row = rgb.pixels.data() + static_cast<size_t>(y) * rgb.width * 3;
    for (int64_t x = 0; x < rgb.width; ++x) {
      int64_t sx = 0, sy = 0;
      SourceOf(orientation, x, y, w, h, &sx, &sy);
      convert(data + (static_cast<size_t>(sy) * w + sx) * bands, row + x * 3);
    }
  }
  return rgb;
}

// The full-resolution extent of a DCT-shrunk axis: the last stored block may be partial, and an
// orientation that reverses the axis moves it to the start.
void ShrunkExtent(int64_t full, int64_t stored, int shrink, bool reversed, double* a0,
                  double* a1) {
  const double extent = static_cast<double>(full) / shrink;
  if (reversed) {
    *a0 = static_cast<double>(stored) - extent;
    *a1 = static_cast<double>(stored);
  } else {
    *a0 = 0.0;
    *a1 = extent;
  }
}

SourceBox BoxFor(const ImageInfo& full, int64_t w, int64_t h, int shrink, int orientation) {
  if (shrink <= 1) {
    const bool t = Transposes(orientation);
    return {0, 0, static_cast<double>(t ? h : w), static_cast<double>(t ? w : h)};
  }
  SourceBox box;
  // Stored-axis reversal per orientation: x reversed for 2, 3, 7, 8; y reversed for 3, 4, 6, 7.
  const bool rev_x = orientation == 2 || orientation == 3 || orientation == 7 || orientation == 8;
  const bool rev_y = orientation == 3 || orientation == 4 || orientation == 6 || orientation == 7;
  double sx0, sx1, sy0, sy1;
  ShrunkExtent(full.width, w, shrink, rev_x, &sx0, &sx1);
  ShrunkExtent(full.height, h, shrink, rev_y, &sy0, &sy1);
  if (Transposes(orientation)) {
    box = {sy0, sx0, sy1, sx1};
  } else {
    box = {sx0, sy0, sx1, sy1};
  }
  return box;
}

// The DCT shrink factor libjpeg can apply: 2, 4 or 8 for a JPEG, else 1 (a full decode).
int UsableShrink(const std::string& format, int shrink) {
  return format == "jpeg" && (shrink == 2 || shrink == 4 || shrink == 8) ? shrink : 1;
}

// Opens the image and converts it to 8-bit RGB (or grey / CMYK), alpha handled, lazily: nothing
// is decoded until pixels are asked for. Sets info->icc_applied.
Result<ImageRef> OpenConverted(std::string_view bytes, const std::string& format,
                               const ImageOptions& options, int shrink, ImageInfo* info) {
  auto opened = OpenImage(bytes, format, shrink);
  MLC_RETURN_IF_ERROR(opened);
  auto step = HandleAlpha(std::move(*opened), options);
  MLC_RETURN_IF_ERROR(step);
  step = ApplyIcc(std::move(*step), options.colour_manage, &info->icc_applied);
  MLC_RETURN_IF_ERROR(step);
  step = ToEightBit(std::move(*step));
  MLC_RETURN_IF_ERROR(step);
  return ToKnownColour(std::move(*step));
}

// A tile whose decode fails is blacked out by libvips's tile cache, which then stops the run
// with only a warning: the call succeeds with damaged pixels. The failed decoder has written the
// (process-wide) error buffer, so a message there after the run means the pixels are not whole.
Status CheckNoPixelError(const std::string& format) {
  const char* buffer = vips_error_buffer();
  if (buffer == nullptr || buffer[0] == '\0') return Status::Ok();
  return Invalid("", "damaged " + format + " data, its pixels cannot be decoded: " + TakeVipsError());
}

Status CheckDecodedSize(int64_t w, int64_t h, const ImageOptions& options) {
  if (w * h > options.max_pixels || w < 1 || h < 1) {
    return Invalid("", "decoded size differs from the header");
  }
  return Status::Ok();
}

Result<DecodedImage> DecodePixels(std::string_view bytes, const std::string& format,
                                  const ImageInfo& header, const ImageOptions& options,
                                  int shrink) {
  DecodedImage decoded;
  decoded.info = header;
  decoded.info.shrink = shrink;
  auto converted = OpenConverted(bytes, format, options, shrink, &decoded.info);
  MLC_RETURN_IF_ERROR(converted);
  VipsImage* final_image = converted->get();
  const int64_t w = vips_image_get_width(final_image);
  const int64_t h = vips_image_get_height(final_image);
  const int bands = vips_image_get_bands(final_image);
  MLC_RETURN_IF_ERROR(CheckDecodedSize(w, h, options));
  size_t size = 0;
  vips_error_clear();
  void* data = vips_image_write_to_memory(final_image, &size);
  if (!data) {
    return Invalid("", "cannot decode the " + format + " pixels: " + TakeVipsError());
  }
  std::unique_ptr<void, decltype(&g_free)> hold(data, g_free);
  MLC_RETURN_IF_ERROR(CheckNoPixelError(format));
  if (size != static_cast<size_t>(w) * h * bands) {
    return Invalid("", "decoder returned an unexpected amount of data");
  }
  decoded.rgb = ToUprightRgb(static_cast<const uint8_t*>(data), w, h, bands, header.orientation);
  decoded.box = BoxFor(header, w, h, shrink, header.orientation);
  return decoded;
}

// vips_sink_disc's callback: each section of rows, top to bottom, into the resizer.
int PushSection(VipsRegion* region, VipsRect* area, void* resizer) {
  const auto* rows = reinterpret_cast<const uint8_t*>(VIPS_REGION_ADDR(region, area->left, area->top));
  static_cast<RowResizer*>(resizer)->PushRows(area->top, area->height, rows,
                                              VIPS_REGION_LSKIP(region));
  return 0;
}

Result<std::optional<PreparedImage>> ModuleDecodeAndResize(std::string_view bytes, const ImageInfo& header,
                                                     const ResizePlan& plan,
                                                     const ImageOptions& options, int shrink) {
  if (header.orientation != 1) return std::optional<PreparedImage>();
  shrink = UsableShrink(header.format, shrink);
  PreparedImage prepared;
  prepared.info = header;
  prepared.info.shrink = shrink;
  prepared.plan = plan;
  auto converted = OpenConverted(bytes, header.format, options, shrink, &prepared.info);
  MLC_RETURN_IF_ERROR(converted);
  VipsImage* image = converted->get();
  if (vips_image_get_bands(image) != 3 || vips_image_get_format(image) != VIPS_FORMAT_UCHAR) {
    return std::optional<PreparedImage>();  // grey or CMYK: the whole-image path expands it
  }
  const int64_t w = vips_image_get_width(image);
  const int64_t h = vips_image_get_height(image);
  MLC_RETURN_IF_ERROR(CheckDecodedSize(w, h, options));
  // The plan is in full-resolution pixels; the decoded image may be smaller (shrink-on-load),
  // so the resize maps the plan's scaled size onto the decoded pixels' extent.
  ResizePlan decoded_plan = plan;
  decoded_plan.source_width = w;
  decoded_plan.source_height = h;
  RowResizer resizer(decoded_plan, options.filter, BoxFor(header, w, h, shrink, 1));
  vips_error_clear();
  if (vips_sink_disc(image, PushSection, &resizer) != 0) {
    return Invalid("", "cannot decode the " + header.format + " pixels: " + TakeVipsError());
  }
  MLC_RETURN_IF_ERROR(CheckNoPixelError(header.format));
  prepared.rgb = resizer.Finish();
  return std::optional<PreparedImage>(std::move(prepared));
}

Result<ImageInfo> ModuleProbe(std::string_view bytes, const ImageOptions& options) {
  if (!InitVips()) return Error{ErrorCode::kUnsupported, "", "libvips failed to start"};
  if (bytes.size() > options.max_file_bytes) {
    return Error{ErrorCode::kLimit, "", "image file of " + std::to_string(bytes.size()) +
                                            " bytes is over the limit of " +
                                            std::to_string(options.max_file_bytes)};
  }
  auto format = DetectFormat(bytes);
  MLC_RETURN_IF_ERROR(format);
  auto opened = OpenImage(bytes, *format, 1);
  MLC_RETURN_IF_ERROR(opened);
  ImageInfo info = InfoOf(opened->get(), *format);
  Status limits = CheckLimits(info, options);
  MLC_RETURN_IF_ERROR(limits);
  return info;
}

Result<DecodedImage> ModuleDecode(std::string_view bytes, const ImageOptions& options,
                                 int shrink) {
  auto info = ModuleProbe(bytes, options);
  MLC_RETURN_IF_ERROR(info);
  return DecodePixels(bytes, info->format, *info, options, UsableShrink(info->format, shrink));
}

Result<std::string> ModuleEncodePng(const MlcRgbView& rgb) {
  if (!InitVips()) return Error{ErrorCode::kUnsupported, "", "libvips failed to start"};
  if (rgb.width < 1 || rgb.height < 1) return Invalid("", "empty image");
  const size_t size = static_cast<size_t>(rgb.width) * static_cast<size_t>(rgb.height) * 3;
  ImageRef image(vips_image_new_from_memory(rgb.pixels, size,
                                            static_cast<int>(rgb.width),
                                            static_cast<int>(rgb.height), 3, VIPS_FORMAT_UCHAR));
  if (!image.get()) return Invalid("", "cannot wrap pixels: " + TakeVipsError());
  void* buf = nullptr;
  size_t len = 0;
  if (vips_pngsave_buffer(image.get(), &buf, &len, nullptr) != 0) {
    return Invalid("", "cannot encode PNG: " + TakeVipsError());
  }
  std::string out(static_cast<const char*>(buf), len);
  g_free(buf);
  return out;
}

// ---- The C table (media/image_backend.h) ----

std::string_view View(const uint8_t* bytes, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(bytes), size);
}

int Fail(MlcImageError* error, const Errors& errors) {
  image_c::SetError(error, errors);
  return 0;
}

int OutOfMemory(MlcImageError* error) {
  return Fail(error, {Error{ErrorCode::kLimit, "", "out of memory for the decoded pixels"}});
}

// No exception crosses the C table.
template <class F>
int Guarded(MlcImageError* error, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return OutOfMemory(error);
  } catch (const std::exception& e) {
    return Fail(error, {Invalid("", std::string("image module: ") + e.what())});
  }
}

int CProbe(const uint8_t* bytes, size_t size, const MlcImageOptions* options, MlcImageInfo* info,
           MlcImageError* error) {
  return Guarded(error, [&] {
    auto r = ModuleProbe(View(bytes, size), image_c::FromC(*options));
    if (!r) return Fail(error, r.errors());
    *info = image_c::ToC(*r);
    return 1;
  });
}

int CDecode(const uint8_t* bytes, size_t size, const MlcImageOptions* options, int shrink,
            MlcImageInfo* info, int64_t* width, int64_t* height, MlcAllocator rgb,
            MlcSourceBox* box, MlcImageError* error) {
  return Guarded(error, [&] {
    auto r = ModuleDecode(View(bytes, size), image_c::FromC(*options), shrink);
    if (!r) return Fail(error, r.errors());
    if (!image_c::Give(rgb, r->rgb.pixels.data(), r->rgb.pixels.size())) return OutOfMemory(error);
    *info = image_c::ToC(r->info);
    *width = r->rgb.width;
    *height = r->rgb.height;
    *box = image_c::ToC(r->box);
    return 1;
  });
}

int CDecodeAndResize(const uint8_t* bytes, size_t size, const MlcImageInfo* header,
                     const MlcResizePlan* plan, const MlcImageOptions* options, int shrink,
                     int* done, MlcImageInfo* info, MlcResizePlan* plan_out, int64_t* width,
                     int64_t* height, MlcAllocator rgb, MlcImageError* error) {
  return Guarded(error, [&] {
    auto r = ModuleDecodeAndResize(View(bytes, size), image_c::FromC(*header),
                                   image_c::FromC(*plan), image_c::FromC(*options), shrink);
    if (!r) return Fail(error, r.errors());
    *done = r->has_value() ? 1 : 0;
    if (!*done) return 1;
    const PreparedImage& p = **r;
    if (!image_c::Give(rgb, p.rgb.pixels.data(), p.rgb.pixels.size())) return OutOfMemory(error);
    *info = image_c::ToC(p.info);
    *plan_out = image_c::ToC(p.plan);
    *width = p.rgb.width;
    *height = p.rgb.height;
    return 1;
  });
}

int CEncodePng(const MlcRgbView* rgb, MlcAllocator png, MlcImageError* error) {
  return Guarded(error, [&] {
    auto r = ModuleEncodePng(*rgb);
    if (!r) return Fail(error, r.errors());
    if (!image_c::Give(png, r->data(), r->size())) return OutOfMemory(error);
    return 1;
  });
}

}  // namespace
}  // namespace mlc

// The module's one exported symbol (base/module_loader.h), which LoadModule looks up after dlopen.
MLC_MODULE_ENTRY(image, MlcImageBackend) {
  static const MlcImageBackend backend{MLC_IMAGE_BACKEND_ABI, &mlc::CProbe, &mlc::CDecode,
                                       &mlc::CDecodeAndResize, &mlc::CEncodePng};
  return &backend;
}
