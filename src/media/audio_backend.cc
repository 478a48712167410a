// The library's side of the audio modules: finds and opens libmlc_manifest_audio.so (libsndfile)
// and libmlc_manifest_soxr.so (soxr), each on its first use.
#include "media/audio_backend.h"

#include "base/module_loader.h"
#include "media/resampler_backend.h"

namespace mlc {

Result<const MlcAudioBackend*> LoadAudioBackend() {
  return LoadModuleOnce<MlcAudioBackend>({kAudioModuleFile, "MLC_MANIFEST_AUDIO_MODULE", "mlc_manifest_audio_backend",
                                          "the audio module (libsndfile)", MLC_AUDIO_BACKEND_ABI});
}

Result<const MlcResamplerBackend*> LoadResamplerBackend() {
  return LoadModuleOnce<MlcResamplerBackend>({kResamplerModuleFile, "MLC_MANIFEST_SOXR_MODULE",
                                              "mlc_manifest_resampler_backend", "the resampler module (soxr)",
                                              MLC_RESAMPLER_BACKEND_ABI});
}

}  // namespace mlc
