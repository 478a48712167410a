// The float64 SigLIP and Gemma 3 projector of the vision tests (see siglip64.h).
#include "support/siglip64.h"

#include <cmath>
#include <string>

#include "support/vit64.h"

namespace mlc::test {

namespace {

const std::string kRoot = "vision_tower.vision_model.";

// SiglipVisionEmbeddings: Conv2d(3, hidden, patch, stride patch) with bias over pixels normalized by
// mean and std 0.5, flattened row-major over the grid, plus the position table's rows (no class row).
std::vector<Vec> Embeddings(const Json& v, const Params64& p, const std::vector<uint8_t>& px) {
  const int64_t h = v["hidden_size"], patch = v["patch_size"], s = v["image_size"], g = s / patch;
  const double half[3] = {0.5, 0.5, 0.5};
  const std::string e = kRoot + "embeddings.";
  std::vector<Vec> rows = PatchEmbeddings64(p.Floats(e + "patch_embedding.weight"), p.Floats(e + "patch_embedding.bias"),
                                            px, s, patch, h, half, half);
  Vec pos = p.Matrix(e + "position_embedding", g * g, h);
  for (size_t t = 0; t < rows.size(); ++t) {
    for (int64_t i = 0; i < h; ++i) rows[t][static_cast<size_t>(i)] += pos[t * static_cast<size_t>(h) + static_cast<size_t>(i)];
  }
  return rows;
}

// AvgPool2d (kernel = stride = k) over the [hidden, g, g] map of the rows, flattened row-major.
std::vector<Vec> AveragePool(const std::vector<Vec>& x, int64_t g, int64_t k) {
  const int64_t side = g / k;
  const size_t h = x.front().size();
  std::vector<Vec> out;
  for (int64_t oy = 0; oy < side; ++oy) {
    for (int64_t ox = 0; ox < side; ++ox) {
      Vec pooled(h, 0.0);
      for (int64_t dy = 0; dy < k; ++dy) {
        for (int64_t dx = 0; dx < k; ++dx) {
          const Vec& src = x[static_cast<size_t>((oy * k + dy) * g + ox * k + dx)];
          for (size_t i = 0; i < h; ++i) pooled[i] += src[i] / static_cast<double>(k * k);
        }
      }
      out.push_back(std::move(pooled));
    }
  }
  return out;
}

}  // namespace

std::vector<Vec> SiglipReference64::Run(const std::vector<uint8_t>& px, int64_t text_hidden) const {
  const int64_t h = v["hidden_size"], g = v["image_size"].get<int64_t>() / v["patch_size"].get<int64_t>();
  const double eps = v["layer_norm_eps"];
  std::vector<Vec> x = Embeddings(v, p, px);
  // SiglipEncoderLayer: CLIP's layer with gelu_pytorch_tanh.
  const VitLayer64 layer{h, v["intermediate_size"], v["num_attention_heads"], eps, GeluTanh64, q8};
  for (int64_t l = 0; l < v["num_hidden_layers"].get<int64_t>(); ++l) {
    layer.Run(p, kRoot + "encoder.layers." + std::to_string(l) + ".", x);
  }
  for (Vec& row : x) {
    row = LayerNorm(row, p.Floats(kRoot + "post_layernorm.weight"), p.Floats(kRoot + "post_layernorm.bias"), eps);
  }
  // Gemma3MultiModalProjector: the average pool down to sqrt(tokens) per side; Gemma3RMSNorm
  // (x * rsqrt(mean x^2 + eps) * (1 + w): the stored gain is 1 + w); the projection without bias.
  const int64_t side = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(tokens))));
  const Vec gain = p.Floats("multi_modal_projector.mm_soft_emb_norm.weight");
  std::vector<Vec> out;
  for (const Vec& pooled : AveragePool(x, g, g / side)) {
    out.push_back(BiasedLinear64(p, "multi_modal_projector.mm_input_projection", RmsNorm(pooled, gain, eps),
                                 text_hidden, h, RoundingFor(q8, tokens)));
  }
  return out;
}

}  // namespace mlc::test
