// An independent float64 SigLIP vision model with Gemma 3's multimodal projector, for the SigLIP
// and Gemma 3 vision tests, written from Hugging Face's SiglipVisionModel and
// Gemma3MultiModalProjector over a package's vision_config and parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "mlc_manifest/json.h"
#include "support/reference64.h"

namespace mlc::test {

struct SiglipReference64 {
  const Json& v;  // vision_config
  const Params64& p;
  bool q8 = false;  // 4-bit matrices: operands rounded as the kernels round them (RoundingFor)
  int64_t tokens = 0;  // mm_tokens_per_image

  // The projector's rows ([tokens][text_hidden]) for RGB pixels [image_size, image_size, 3].
  std::vector<Vec> Run(const std::vector<uint8_t>& px, int64_t text_hidden) const;
};

}  // namespace mlc::test
