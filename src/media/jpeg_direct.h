// The fast path of the image frontend for the common photo: a plain YCbCr JPEG (upright, one
// scan; an ICC profile only when it is to be ignored, the default) decoded by libjpeg-turbo straight into the resize, without libvips and its
// hundred libraries. Every other file, and any file libjpeg warns about, goes to libvips.
#pragma once

#include <optional>
#include <string_view>

#include "mlc_manifest/image.h"

namespace mlc::jpeg_direct {

// The prepared image when `bytes` is a JPEG this path serves, with pixels identical to the
// libvips path's (same libjpeg settings, same resize); nullopt when libvips must decide (other
// formats, colour models, profiles to apply, orientations, progressive files, damaged or
// over-limit data).
std::optional<PreparedImage> Prepare(std::string_view bytes, ResizeMode mode, int64_t height,
                                     int64_t width, const ImageOptions& options);

// The EXIF orientation (1..8) of an APP1 "Exif\0\0" payload; nullopt when the payload cannot be
// read with certainty (the caller then leaves the file to libvips). 1 when the tag is absent.
std::optional<int> ExifOrientation(std::string_view app1);

}  // namespace mlc::jpeg_direct
