// The parts the ViT image towers (CLIP, SigLIP) share: the canonical pixels of SPEC 6 checked and
// normalized to channel-major floats, and the pre-LayerNorm transformer encoder layer (LayerNorm,
// biased q/k/v projections, bidirectional attention, biased output projection, residual;
// LayerNorm, fc1, activation, fc2, residual) with its parameters in the converter's order
// (self_attn.{k,v,q,out}_proj, layer_norm1, mlp.fc1, mlp.fc2, layer_norm2). The towers differ in
// the MLP's activation and in whether the layer's matrices are quantized.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlc_manifest/tensor.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"

namespace mlc::cpu {

class ParamIndex;

// A linear layer with its bias (bias empty: none).
struct BiasedLinear {
  Weight w;
  std::vector<float> bias;
  // y [n, w.out] = x [n, w.in] W^T + bias.
  void Run(const float* x, int64_t n, float* y) const;
};

// Pixels uint8 or uint32 [1, size, size, 3] (NHWC) -> channel-major (p / 255 - mean[c]) / std[c]
// [3, size, size]; an error naming `function` for any other shape or dtype.
Result<std::vector<float>> NormalizedPixels(const NDArray& input, int64_t size, const float mean[3],
                                            const float std_dev[3], const std::string& function);

// The sizes of a ViT tower's vision_config and where its parameters live.
struct VitConfig {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_heads = 0;
  int64_t num_layers = 0;
  int64_t patch_size = 0;
  int64_t image_size = 0;
  double layer_norm_eps = 1e-5;
  std::string root = "vision_tower.vision_model.";

  int64_t grid() const { return image_size / patch_size; }
  int64_t num_patches() const { return grid() * grid(); }
  std::string Layer(int64_t l) const { return root + "encoder.layers." + std::to_string(l) + "."; }
  // Reads hidden_size, intermediate_size, num_attention_heads, num_hidden_layers, patch_size,
  // image_size, layer_norm_eps (default_eps when absent) and num_channels (3) from vision_config,
  // errors at their paths; false when one is unreadable. Heads that do not divide hidden_size and
  // patches that do not tile the image are recorded too (the sizes are still usable).
  bool Read(ConfigReader& vision, double default_eps);
};

struct VitLayerShape {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_heads = 0;
  double layer_norm_eps = 1e-5;
  float (*activation)(float) = nullptr;  // the MLP's: QuickGelu (CLIP), GeluTanh (SigLIP)
  bool quantized = false;  // the matrices stored as the package's quantization (else in float)
};

// Appends the parameters of the layer under `prefix` ("...encoder.layers.3.") in the converter's order.
void AppendVitLayerParams(ParamListBuilder& b, const std::string& prefix, const VitLayerShape& s);

// One encoder layer bound to its parameters (views into the mapped shards).
class VitLayer {
 public:
  VitLayer(const VitLayerShape& s, const ModelConfig& c, const ParamIndex& p, const std::string& prefix);
  // x [n, hidden_size] through the layer, in place.
  void Run(std::vector<float>& x, int64_t n) const;

 private:
  VitLayerShape s_;
  BiasedLinear q_, k_, v_, out_, fc1_, fc2_;
  std::vector<float> ln1_w_, ln1_b_, ln2_w_, ln2_b_;
};

// x [n, hidden_size] through the layers in order, in place; between layers an interrupted call
// (base/interrupt.h) stops with the error naming `function`.
Status RunVitLayers(const std::vector<VitLayer>& layers, std::vector<float>& x, int64_t n,
                    const std::string& function);

}  // namespace mlc::cpu
