// The library's side of the audio module: finds and opens libmlc_manifest_audio.so on first use.
#include "media/audio_backend.h"

#include "base/module_loader.h"

namespace mlc {

Result<const MlcAudioBackend*> LoadAudioBackend() {
  return LoadModuleOnce<MlcAudioBackend>({kAudioModuleFile, "MLC_MANIFEST_AUDIO_MODULE", "mlc_manifest_audio_backend",
                                          "the audio module (libsndfile, soxr)", MLC_AUDIO_BACKEND_ABI});
}

}  // namespace mlc
