// The CLIP vision tower of LLaVA 1.5 with its projector, as MLC's converter lays it out
// (python/mlc_llm/model/vision/clip_vision.py, kept in float: no_quantization) and as Hugging Face's
// LLaVA computes it: pixels / 255 normalized by CLIP's mean and std, patch convolution, class row,
// positions, pre-LayerNorm, the encoder layers (QuickGELU MLP) up to vision_feature_layer, the class
// row dropped, then the projector (linear, GeLU, linear; quantized as the decoder is).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/cpu/blocks.h"
#include "runtime/cpu/towers/tower.h"
#include "runtime/cpu/towers/vit.h"

namespace mlc::cpu {

struct ClipConfig : VitConfig {
  int64_t feature_layer = -2;  // the hidden state taken (Hugging Face's vision_feature_layer)
  int64_t text_hidden_size = 0;  // the projector's output
  int64_t image_token_index = 0; // the placeholder id of the prompt
  std::string projector = "multi_modal_projector.";

  // Encoder layers run to reach feature_layer (hidden state 0 is the embeddings' output).
  int64_t layers_run() const { return num_layers + 1 + feature_layer; }
  // The encoder layer's shape (QuickGELU, matrices in float) and parameter prefix.
  VitLayerShape layer() const {
    return VitLayerShape{hidden_size, intermediate_size, num_heads, layer_norm_eps, QuickGelu, false};
  }
};

// Reads vision_config (sizes checked, errors at /model_config/vision_config/...) and the
// projector's width from the decoder's hidden size.
std::shared_ptr<const Tower> ReadClipTower(ConfigReader& vision, const ModelConfig& c,
                                           int64_t feature_layer, int64_t image_token_index);

}  // namespace mlc::cpu
