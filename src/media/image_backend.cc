// The library's side of the image module: finds and opens libmlc_manifest_vips.so on first use
// and forwards the image decoding calls of image.h to it.
#include "media/image_backend.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

std::vector<std::string> ModuleCandidates() {
  if (const char* path = std::getenv("MLC_MANIFEST_IMAGE_MODULE"); path && *path) return {path};
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / kImageModuleFile).string());
  // Beside the shared library holding this code (an installed libmlc_manifest.so.1), or in its
  // mlc_manifest/ folder (where `cmake --install` puts the module).
  static const char kHere = 0;
  Dl_info self{};
  if (::dladdr(&kHere, &self) && self.dli_fname) {
    const std::filesystem::path lib = std::filesystem::path(self.dli_fname).parent_path();
    if (lib != exe.parent_path()) out.push_back((lib / kImageModuleFile).string());
    out.push_back((lib / "mlc_manifest" / kImageModuleFile).string());
  }
  out.emplace_back(MLC_IMAGE_MODULE_PATH);
#ifdef MLC_IMAGE_MODULE_INSTALL_PATH
  out.emplace_back(MLC_IMAGE_MODULE_INSTALL_PATH);
#endif
  return out;
}

Result<const ImageBackend*> OpenModule() {
  std::string tried;
  for (const std::string& path : ModuleCandidates()) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      using Entry = const ImageBackend* (*)();
      auto entry = reinterpret_cast<Entry>(::dlsym(handle, "mlc_manifest_image_backend"));
      const ImageBackend* backend = entry ? entry() : nullptr;
      if (backend && backend->abi == kImageBackendAbi) return backend;
      return IoError(path, "is not an image module of this build (expected interface version " +
                               std::to_string(kImageBackendAbi) + ")");
    }
    const char* why = ::dlerror();
    tried += "\n  " + path + ": " + (why ? why : "cannot be opened");
  }
  return IoError(kImageModuleFile, "the image decoding module (libvips) cannot be loaded; tried:" + tried);
}

}  // namespace

Result<const ImageBackend*> LoadImageBackend() {
  static std::once_flag once;
  static Result<const ImageBackend*> loaded = Errors{};
  std::call_once(once, [] { loaded = OpenModule(); });
  return loaded;
}

Result<ImageInfo> ProbeImage(std::string_view bytes, const ImageOptions& options) {
  auto backend = LoadImageBackend();
  MLC_RETURN_IF_ERROR(backend);
  return (*backend)->probe(bytes, options);
}

Result<DecodedImage> DecodeImage(std::string_view bytes, const ImageOptions& options, int shrink) {
  auto backend = LoadImageBackend();
  MLC_RETURN_IF_ERROR(backend);
  return (*backend)->decode(bytes, options, shrink);
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
  auto backend = LoadImageBackend();
  MLC_RETURN_IF_ERROR(backend);
  return (*backend)->decode_and_resize(bytes, header, plan, options, shrink);
}

Result<std::string> EncodePng(const RgbImage& rgb) {
  auto backend = LoadImageBackend();
  MLC_RETURN_IF_ERROR(backend);
  return (*backend)->encode_png(rgb);
}

}  // namespace mlc
