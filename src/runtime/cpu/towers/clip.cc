// LLaVA 1.5's CLIP tower and projector (clip.h): parameters, binding and the image_embed run.
#include "runtime/cpu/towers/clip.h"

#include <cmath>
#include <cstring>

#include "runtime/cpu/blocks.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/towers/vit.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {
namespace {

// CLIP's pixel normalization (OpenAI's image mean and standard deviation).
constexpr float kMean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr float kStd[3] = {0.26862954f, 0.26130258f, 0.27577711f};

class BoundClip : public BoundTower {
 public:
  BoundClip(const ClipConfig& cfg, const ModelConfig& c, const ParamIndex& p) : cfg_(cfg) {
    const std::string& r = cfg.root;
    const int64_t hs = cfg.hidden_size, patch_in = 3 * cfg.patch_size * cfg.patch_size;
    class_embedding_ = FloatsOf(p[r + "embeddings.class_embedding"]);
    patch_ = FloatMatrixOf(p, r + "embeddings.patch_embedding", hs, patch_in);
    positions_ = FloatsOf(p[r + "embeddings.position_embedding.weight"]);
    pre_w_ = FloatsOf(p[r + "pre_layrnorm.weight"]);
    pre_b_ = FloatsOf(p[r + "pre_layrnorm.bias"]);
    for (int64_t l = 0; l < cfg.layers_run(); ++l) {
      layers_.emplace_back(cfg.layer(), c, p, cfg.Layer(l));
    }
    const std::string& j = cfg.projector;
    proj1_ = BiasedLinear{MatrixOf(c, p, j + "linear_1", cfg.text_hidden_size, hs), FloatsOf(p[j + "linear_1.bias"])};
    proj2_ = BiasedLinear{MatrixOf(c, p, j + "linear_2", cfg.text_hidden_size, cfg.text_hidden_size),
                          FloatsOf(p[j + "linear_2.bias"])};
  }

  Result<NDArray> Embed(const NDArray& input, const std::string& function) const override {
    const int64_t s = cfg_.image_size;
    auto chw = NormalizedPixels(input, s, kMean, kStd, function);
    MLC_RETURN_IF_ERROR(chw);
    const int64_t hs = cfg_.hidden_size, np = cfg_.num_patches(), n = np + 1;
    std::vector<float> patches = PatchRows(chw->data(), 3, s, s, cfg_.patch_size);
    std::vector<float> x(static_cast<size_t>(n * hs));
    std::copy(class_embedding_.begin(), class_embedding_.end(), x.begin());
    cpu::Linear(patch_, patches.data(), np, x.data() + hs);
    for (size_t i = 0; i < x.size(); ++i) x[i] += positions_[i];
    LayerNormRows(x.data(), pre_w_, pre_b_, n, hs, cfg_.layer_norm_eps, x.data());
    MLC_RETURN_IF_ERROR(RunVitLayers(layers_, x, n, function));
    // Drop the class row, then the projector: linear, exact GeLU, linear.
    const int64_t th = cfg_.text_hidden_size;
    std::vector<float> mid(static_cast<size_t>(np * th));
    proj1_.Run(x.data() + hs, np, mid.data());
    ApplyRows(GeluErf, mid.data(), static_cast<int64_t>(mid.size()));
    NDArray out = NDArray::Empty({np, th}, DlFloat32());
    proj2_.Run(mid.data(), np, out.data<float>());
    return out;
  }

 private:
  ClipConfig cfg_;
  std::vector<float> class_embedding_, positions_, pre_w_, pre_b_;
  Weight patch_;
  std::vector<VitLayer> layers_;
  BiasedLinear proj1_, proj2_;
};

class ClipTower : public Tower {
 public:
  explicit ClipTower(ClipConfig cfg) : cfg_(std::move(cfg)) {}
  std::string adapter() const override { return "image"; }
  std::string function() const override { return "image_embed"; }

  TaskInput Input() const override {
    ImageDecode im;
    im.mode = ResizeMode::kCenterCrop;  // Hugging Face's CLIP processor: shortest edge, then crop
    im.height = cfg_.image_size;
    im.width = cfg_.image_size;
    im.num_embeddings = cfg_.num_patches();
    return TaskInput{im, adapter(), PromptInsertion{{}, cfg_.image_token_index, {}}};
  }

  void AppendParams(ParamListBuilder& b) const override {
    const std::string& r = cfg_.root;
    const int64_t hs = cfg_.hidden_size, p = cfg_.patch_size;
    b.Float(r + "embeddings.class_embedding", {hs});
    b.Float(r + "embeddings.patch_embedding.weight", {hs, 3, p, p});
    b.Float(r + "embeddings.position_embedding.weight", {cfg_.num_patches() + 1, hs});
    auto norm = [&](const std::string& base) {
      b.Float(base + ".weight", {hs});
      b.Float(base + ".bias", {hs});
    };
    norm(r + "pre_layrnorm");
    for (int64_t l = 0; l < cfg_.num_layers; ++l) AppendVitLayerParams(b, cfg_.Layer(l), cfg_.layer());
    norm(r + "post_layernorm");
    b.Linear(cfg_.projector + "linear_1", cfg_.text_hidden_size, hs, true);
    b.Linear(cfg_.projector + "linear_2", cfg_.text_hidden_size, cfg_.text_hidden_size, true);
  }

  Result<std::unique_ptr<BoundTower>> Bind(const ModelConfig& c, const ParamIndex& p) const override {
    return BindChecked<BoundClip>(*this, cfg_, c, p, "vision tower");
  }

 private:
  ClipConfig cfg_;
};

}  // namespace

std::shared_ptr<const Tower> ReadClipTower(ConfigReader& vision, const ModelConfig& c,
                                           int64_t feature_layer, int64_t image_token_index) {
  ClipConfig cfg;
  if (!cfg.Read(vision, 1e-5)) return nullptr;
  cfg.feature_layer = feature_layer;
  cfg.text_hidden_size = c.hidden_size;
  cfg.image_token_index = image_token_index;
  if (cfg.layers_run() < 0 || cfg.layers_run() > cfg.num_layers) {
    vision.Fail(vision.Path("num_hidden_layers"),
                "vision_feature_layer " + std::to_string(feature_layer) + " is outside the " +
                    std::to_string(cfg.num_layers) + " layers");
  }
  if (c.quantized() && cfg.hidden_size % 32) {
    vision.Fail(vision.Path("hidden_size"), "must be a multiple of 32 for " + c.quantization +
                                                  " (the projector is quantized)");
  }
  if (vision.failed()) return nullptr;
  return std::make_shared<ClipTower>(std::move(cfg));
}

}  // namespace mlc::cpu
