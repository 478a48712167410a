// Gemma 3's vision tower: SigLIP with Gemma 3's multimodal projector, as MLC's converter lays it
// out (python/mlc_llm/model/vision/siglip_vision.py and model/gemma3/gemma3v_model.py: the tower
// and the projector quantized as the decoder is, a partial last group where a width is not a
// multiple of 32; the position table an embedding, quantized too) and as Hugging Face's
// SiglipVisionModel and Gemma3MultiModalProjector compute it: pixels / 255 normalized by mean and
// std 0.5, the patch convolution (with bias), positions (no class row), the pre-LayerNorm encoder
// layers (biases, tanh GeLU), the post-LayerNorm, average pooling of the patch grid down to
// mm_tokens_per_image rows, RMSNorm (mm_soft_emb_norm, its +1 folded into the stored gain by the
// converter) and the projection to the decoder's width.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/cpu/blocks.h"
#include "runtime/cpu/towers/tower.h"
#include "runtime/cpu/towers/vit.h"

namespace mlc::cpu {

struct SiglipConfig : VitConfig {
  bool gelu_tanh = true;          // hidden_act gelu_pytorch_tanh (SigLIP's); false: the exact GeLU
  int64_t tokens_per_image = 0;   // mm_tokens_per_image: rows after pooling (a square)
  int64_t text_hidden_size = 0;   // the projection's output
  int64_t boi_token_id = 0;       // prompt prefix
  int64_t image_token_id = 0;     // placeholder
  int64_t eoi_token_id = 0;       // prompt suffix
  std::string projector = "multi_modal_projector.";

  int64_t tokens_per_side() const;
  int64_t pool() const { return grid() / tokens_per_side(); }  // the average pool's kernel and stride
  VitLayerShape layer() const {
    return VitLayerShape{hidden_size, intermediate_size, num_heads, layer_norm_eps,
                         gelu_tanh ? GeluTanh : GeluErf, /*quantized=*/true};
  }
};

// Reads model_config.vision_config (errors at /model_config/vision_config/...) and, from
// model_config itself, mm_tokens_per_image, boi_token_index, image_token_index and
// eoi_token_index (MLC's Gemma3VConfig defaults when absent, each checked against the
// vocabulary); the projection's width is the decoder's hidden size. nullptr after recording errors.
std::shared_ptr<const Tower> ReadSiglipTower(ConfigReader& top, const ModelConfig& text);

}  // namespace mlc::cpu
