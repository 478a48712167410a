// Opens the library's modules with dlopen from the places module_loader.h lists.
#include "base/module_loader.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace mlc {

namespace {

std::vector<std::string> Candidates(const ModuleSpec& spec) {
  if (const char* path = std::getenv(ModuleVariable(spec).c_str()); path && *path) return {path};
  const std::string file = ModuleFile(spec);
  std::vector<std::string> out;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) out.push_back((exe.parent_path() / file).string());
  // Beside the shared object holding this code (an installed libmlc_manifest.so.1), or in its
  // mlc_manifest/ folder (where `cmake --install` puts the modules).
  static const char kHere = 0;
  Dl_info self{};
  if (::dladdr(&kHere, &self) && self.dli_fname) {
    const std::filesystem::path lib = std::filesystem::path(self.dli_fname).parent_path();
    if (lib != exe.parent_path()) out.push_back((lib / file).string());
    out.push_back((lib / "mlc_manifest" / file).string());
  }
#ifdef MLC_MODULE_BUILD_DIR
  out.push_back(std::string(MLC_MODULE_BUILD_DIR) + "/" + file);
#endif
#ifdef MLC_MODULE_INSTALL_DIR
  out.push_back(std::string(MLC_MODULE_INSTALL_DIR) + "/" + file);
#endif
  return out;
}

}  // namespace

Result<const void*> OpenModule(const ModuleSpec& spec, ModuleEntryCall call) {
  std::string tried;
  for (const std::string& path : Candidates(spec)) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      void* entry = ::dlsym(handle, ModuleEntry(spec).c_str());
      const void* table = entry ? call(entry) : nullptr;
      // Every table starts with its interface version.
      if (table && *static_cast<const int*>(table) == spec.abi) return table;
      return IoError(path, std::string("is not ") + spec.what + " of this build (expected interface version " +
                               std::to_string(spec.abi) + ")");
    }
    const char* why = ::dlerror();
    tried += "\n  " + path + ": " + (why ? why : "cannot be opened");
  }
  return IoError(ModuleFile(spec), std::string(spec.what) + " cannot be loaded; tried:" + tried);
}

}  // namespace mlc
