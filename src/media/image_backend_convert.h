// Both sides of the image module's C table (media/image_backend.h) convert between its plain C
// structs and image.h's types with these inline functions; each side compiles its own copy.
#pragma once

#include <cstdlib>
#include <cstring>
#include <string>

#include "media/image_backend.h"
#include "mlc_manifest/image.h"

namespace mlc::image_c {

template <size_t N>
inline void CopyText(char (&out)[N], const std::string& text) {
  size_t n = text.size() < N - 1 ? text.size() : N - 1;
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

inline void SetError(MlcImageError* out, const Errors& errors) {
  const Error& e = errors.front();
  out->code = static_cast<int>(e.code);
  CopyText(out->path, e.path);
  std::string message = e.message;
  if (errors.size() > 1) message += " (and " + std::to_string(errors.size() - 1) + " more)";
  CopyText(out->message, message);
}

inline Error ToError(const MlcImageError& e) {
  Error out;
  out.code = static_cast<ErrorCode>(e.code);
  out.path = std::string(e.path, strnlen(e.path, sizeof e.path));
  out.message = std::string(e.message, strnlen(e.message, sizeof e.message));
  return out;
}

inline MlcImageOptions ToC(const ImageOptions& o) {
  return MlcImageOptions{o.max_pixels,
                         o.max_file_bytes,
                         o.composite_on_white ? 1 : 0,
                         o.shrink_on_load ? 1 : 0,
                         static_cast<int>(o.filter),
                         o.colour_manage ? 1 : 0};
}

inline ImageOptions FromC(const MlcImageOptions& c) {
  ImageOptions o;
  o.max_pixels = c.max_pixels;
  o.max_file_bytes = c.max_file_bytes;
  o.composite_on_white = c.composite_on_white != 0;
  o.shrink_on_load = c.shrink_on_load != 0;
  o.filter = static_cast<ResizeFilter>(c.filter);
  o.colour_manage = c.colour_manage != 0;
  return o;
}

// The fields both sides copy one for one: numbers, flags and strings of ImageInfo; the numbers
// of ResizePlan.
#define MLC_IMAGE_INFO_NUMBERS(F) \
  F(width) F(height) F(orientation) F(upright_width) F(upright_height) F(bands) F(bits) F(shrink)
#define MLC_IMAGE_INFO_FLAGS(F) F(has_alpha) F(has_icc) F(icc_applied)
#define MLC_IMAGE_INFO_STRINGS(F) F(format) F(colour) F(chroma_subsampling)
#define MLC_RESIZE_PLAN_NUMBERS(F) \
  F(source_width) F(source_height) F(scaled_width) F(scaled_height) F(left) F(top) F(width) F(height)

inline MlcImageInfo ToC(const ImageInfo& i) {
  MlcImageInfo c{};
#define MLC_COPY(f) c.f = i.f;
#define MLC_FLAG(f) c.f = i.f ? 1 : 0;
#define MLC_TEXT(f) CopyText(c.f, i.f);
  MLC_IMAGE_INFO_NUMBERS(MLC_COPY) MLC_IMAGE_INFO_FLAGS(MLC_FLAG) MLC_IMAGE_INFO_STRINGS(MLC_TEXT)
#undef MLC_COPY
#undef MLC_FLAG
#undef MLC_TEXT
  return c;
}

inline ImageInfo FromC(const MlcImageInfo& c) {
  ImageInfo i;
#define MLC_COPY(f) i.f = c.f;
#define MLC_FLAG(f) i.f = c.f != 0;
#define MLC_TEXT(f) i.f = std::string(c.f, strnlen(c.f, sizeof c.f));
  MLC_IMAGE_INFO_NUMBERS(MLC_COPY) MLC_IMAGE_INFO_FLAGS(MLC_FLAG) MLC_IMAGE_INFO_STRINGS(MLC_TEXT)
#undef MLC_COPY
#undef MLC_FLAG
#undef MLC_TEXT
  return i;
}

inline MlcResizePlan ToC(const ResizePlan& p) {
  MlcResizePlan c{};
  c.mode = static_cast<int>(p.mode);
#define MLC_COPY(f) c.f = p.f;
  MLC_RESIZE_PLAN_NUMBERS(MLC_COPY)
#undef MLC_COPY
  return c;
}

inline ResizePlan FromC(const MlcResizePlan& c) {
  ResizePlan p;
  p.mode = static_cast<ResizeMode>(c.mode);
#define MLC_COPY(f) p.f = c.f;
  MLC_RESIZE_PLAN_NUMBERS(MLC_COPY)
#undef MLC_COPY
  return p;
}

inline MlcSourceBox ToC(const SourceBox& b) { return MlcSourceBox{b.x0, b.y0, b.x1, b.y1}; }
inline SourceBox FromC(const MlcSourceBox& c) { return SourceBox{c.x0, c.y0, c.x1, c.y1}; }

// Module side: bytes handed over through the caller's allocator. False when it gives none.
inline bool Give(MlcAllocator to, const void* data, size_t size) {
  uint8_t* out = to.allocate(to.context, size);
  if (!out) return size == 0;
  if (size) std::memcpy(out, data, size);
  return true;
}

// Library side: an allocator that fills a std::vector<uint8_t> or a std::string.
template <class Container>
MlcAllocator AllocatorInto(Container* c) {
  return MlcAllocator{c, [](void* context, size_t size) -> uint8_t* {
                        auto* out = static_cast<Container*>(context);
                        try {
                          out->resize(size);
                        } catch (...) {  // no exception crosses the C table
                          return nullptr;
                        }
                        return reinterpret_cast<uint8_t*>(out->data());
                      }};
}

}  // namespace mlc::image_c
