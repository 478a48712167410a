// The library's side of the audio module: finds and opens libmlc_manifest_audio.so on first use.
#include "media/audio_backend.h"

#include <mutex>

#include "base/module_loader.h"

namespace mlc {

Result<const MlcAudioBackend*> LoadAudioBackend() {
  static std::once_flag once;
  static Result<const MlcAudioBackend*> loaded = Errors{};
  std::call_once(once, [] {
    auto table = OpenModule({kAudioModuleFile, "MLC_MANIFEST_AUDIO_MODULE", "mlc_manifest_audio_backend",
                             "the audio module (libsndfile, soxr)", MLC_AUDIO_BACKEND_ABI},
                             &CallModuleEntry<MlcAudioBackend>);
    if (table) {
      loaded = static_cast<const MlcAudioBackend*>(*table);
    } else {
      loaded = table.errors();
    }
  });
  return loaded;
}

}  // namespace mlc
