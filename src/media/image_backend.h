// The image decoder lives in a module of its own (libmlc_manifest_vips.so, src/image_vips/):
// libvips and the hundred libraries behind it cost 40 ms of start-up that no other command should
// pay. This is the table the module exports and the loader the library uses to reach it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mlc_manifest/error.h"
#include "mlc_manifest/image.h"

namespace mlc {

// Bumped whenever the table or a type it passes changes.
inline constexpr int kImageBackendAbi = 2;

struct ImageBackend {
  int abi;
  Result<ImageInfo> (*probe)(std::string_view bytes, const ImageOptions& options);
  Result<DecodedImage> (*decode)(std::string_view bytes, const ImageOptions& options, int shrink);
  Result<std::optional<PreparedImage>> (*decode_and_resize)(std::string_view bytes,
                                                            const ImageInfo& header,
                                                            const ResizePlan& plan,
                                                            const ImageOptions& options, int shrink);
  Result<std::string> (*encode_png)(const RgbImage& rgb);
};

// The module's file name, and the folders searched for it: $MLC_MANIFEST_IMAGE_MODULE (a file)
// alone when set, else the running executable's folder, then the build's output folder.
inline constexpr const char* kImageModuleFile = "libmlc_manifest_vips.so";

// Loads the module once (thread-safe); an I/O error naming every place tried when it is missing.
Result<const ImageBackend*> LoadImageBackend();

}  // namespace mlc
