// OpenModule for the WebAssembly build (base/module_loader.h), which has no dlopen: the modules
// are linked into the binary, and cmake/wasm.cmake names those that are (MLC_WASM_MODULES, one
// MLC_WASM_MODULE_<purpose> definition each). A module left out of the build is an I/O error
// saying so, as a native build reports a module it cannot find.
#include <cstring>
#include <string>

#include "base/crypto_backend.h"
#include "base/module_loader.h"
#include "media/audio_backend.h"
#include "media/resampler_backend.h"

// The entries of the modules linked in (MLC_MODULE_ENTRY in each module's source).
extern "C" {
const MlcCryptoBackend* mlc_manifest_crypto_backend();
const MlcAudioBackend* mlc_manifest_audio_backend();
const MlcResamplerBackend* mlc_manifest_resampler_backend();
}

namespace mlc {

namespace {

struct LinkedModule {
  const char* purpose;
  void* entry;
};

template <class Table>
void* Entry(const Table* (*entry)()) {
  return reinterpret_cast<void*>(entry);
}

const LinkedModule kLinked[] = {
#ifdef MLC_WASM_MODULE_crypto
    {"crypto", Entry(&mlc_manifest_crypto_backend)},
#endif
#ifdef MLC_WASM_MODULE_audio
    {"audio", Entry(&mlc_manifest_audio_backend)},
#endif
#ifdef MLC_WASM_MODULE_resampler
    {"resampler", Entry(&mlc_manifest_resampler_backend)},
#endif
    {nullptr, nullptr},
};

}  // namespace

Result<const void*> OpenModule(const ModuleSpec& spec, ModuleEntryCall call) {
  for (const LinkedModule& linked : kLinked) {
    if (!linked.purpose || std::strcmp(linked.purpose, spec.purpose) != 0) continue;
    const void* table = call(linked.entry);
    if (table && *static_cast<const int*>(table) == spec.abi) return table;
    return IoError(ModuleFile(spec), std::string("is not ") + spec.what + " of this build");
  }
  return IoError(ModuleFile(spec), std::string(spec.what) + " is not part of the WebAssembly build");
}

}  // namespace mlc
