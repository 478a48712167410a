// The image decoder lives in a module of its own (libmlc_manifest_image.so, src/modules/image/):
// libvips and the hundred libraries behind it cost 40 ms of start-up that no other command should
// pay. This is the table the module exports -- plain C: fixed-size structs, caller-owned error
// buffers and results written through the caller's allocator, so that neither side depends on
// the other's C++ standard library or allocator -- and the loader the library uses to reach it. The inline
// converters below (image_backend_convert.h) turn the C structs into image.h's types and back.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "base/module_loader.h"

extern "C" {

// Bumped whenever the table or a struct it passes changes.
enum { MLC_IMAGE_BACKEND_ABI = 3 };

// One error: its ErrorCode value, where (a position in the image's bytes; "" for the whole
// image: the caller names the file as the error's document) and what (NUL-terminated, cut to
// fit).
typedef struct MlcImageError {
  int code;
  char path[64];
  char message[1024];
} MlcImageError;

typedef struct MlcImageOptions {
  int64_t max_pixels;
  uint64_t max_file_bytes;
  int composite_on_white;
  int shrink_on_load;
  int filter;  // ResizeFilter
  int colour_manage;  // convert through an embedded ICC profile to sRGB
} MlcImageOptions;

typedef struct MlcImageInfo {
  char format[16];
  int64_t width, height;
  int orientation;
  int64_t upright_width, upright_height;
  int bands, bits;
  char colour[32];
  int has_alpha, has_icc, icc_applied, shrink;
  char chroma_subsampling[16];
} MlcImageInfo;

typedef struct MlcResizePlan {
  int mode;  // ResizeMode
  int64_t source_width, source_height, scaled_width, scaled_height, left, top, width, height;
} MlcResizePlan;

// Where the module puts bytes it returns: it calls allocate(context, size) once and fills the
// `size` bytes it gets (NULL: out of memory, an error). The caller owns that memory.
typedef struct MlcAllocator {
  void* context;
  uint8_t* (*allocate)(void* context, size_t size);
} MlcAllocator;

// 8-bit RGB, row-major (width x height x 3 bytes).
typedef struct MlcRgbView {
  int64_t width, height;
  const uint8_t* pixels;
} MlcRgbView;

typedef struct MlcSourceBox {
  double x0, y0, x1, y1;
} MlcSourceBox;

// Every function returns 1 on success and 0 with *error filled on failure. Pixels and bytes
// are returned through the caller's allocator (rgb: width x height x 3 bytes, their size set
// in *width / *height). Thread-safe.
typedef struct MlcImageBackend {
  int abi;
  int (*probe)(const uint8_t* bytes, size_t size, const MlcImageOptions* options,
               MlcImageInfo* info, MlcImageError* error);
  int (*decode)(const uint8_t* bytes, size_t size, const MlcImageOptions* options, int shrink,
                MlcImageInfo* info, int64_t* width, int64_t* height, MlcAllocator rgb,
                MlcSourceBox* box, MlcImageError* error);
  // *done is 0 when the image needs the whole-image path (nothing else is set).
  int (*decode_and_resize)(const uint8_t* bytes, size_t size, const MlcImageInfo* header,
                           const MlcResizePlan* plan, const MlcImageOptions* options, int shrink,
                           int* done, MlcImageInfo* info, MlcResizePlan* plan_out, int64_t* width,
                           int64_t* height, MlcAllocator rgb, MlcImageError* error);
  int (*encode_png)(const MlcRgbView* rgb, MlcAllocator png, MlcImageError* error);
} MlcImageBackend;

}  // extern "C"

// libmlc_manifest_image.so, $MLC_MANIFEST_IMAGE_MODULE (base/module_loader.h).
MLC_MODULE_TABLE(MlcImageBackend, "image", "the image decoding module (libvips)", MLC_IMAGE_BACKEND_ABI);
