// Gemma 3's SigLIP tower and projector (siglip.h): configuration, parameters in the converter's
// order, binding and the image_embed run.
//
// The rows are the projector's output as Hugging Face computes it. MLC's own image_embed divides
// them by sqrt(text hidden) because its decoder scales every input row by that factor; this CPU
// program scales token rows when it embeds them (EmbedTokens) and leaves adapter rows as they are.
#include "runtime/cpu/towers/siglip.h"

#include <cmath>

#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {
namespace {

constexpr float kHalf[3] = {0.5f, 0.5f, 0.5f};  // SigLIP's image mean and standard deviation

// Hugging Face's Gemma3MultiModalProjector.
struct Projector {
  std::vector<float> norm;  // mm_soft_emb_norm, 1 + Gemma's gain as the converter stores it
  Weight projection;        // mm_input_projection [text hidden, vision hidden]
};

class BoundSiglip : public BoundTower {
 public:
  BoundSiglip(const SiglipConfig& cfg, const ModelConfig& c, const ParamIndex& p) : cfg_(cfg) {
    const std::string& r = cfg.root;
    const int64_t hs = cfg.hidden_size, np = cfg.num_patches();
    patch_ = BiasedLinear{FloatMatrixOf(p, r + "embeddings.patch_embedding", hs, 3 * cfg.patch_size * cfg.patch_size),
                          FloatsOf(p[r + "embeddings.patch_embedding.bias"])};
    // The position table is an embedding (quantized under q4): its rows dequantized once here.
    const Weight positions = TableOf(c, p, r + "embeddings.position_embedding", np, hs);
    positions_.resize(static_cast<size_t>(np * hs));
    for (int64_t i = 0; i < np; ++i) DequantizeRow(positions, i, positions_.data() + i * hs);
    for (int64_t l = 0; l < cfg.num_layers; ++l) layers_.emplace_back(cfg.layer(), c, p, cfg.Layer(l));
    post_w_ = FloatsOf(p[r + "post_layernorm.weight"]);
    post_b_ = FloatsOf(p[r + "post_layernorm.bias"]);
    projector_.norm = FloatsOf(p[cfg.projector + "mm_soft_emb_norm.weight"]);
    projector_.projection = MatrixOf(c, p, cfg.projector + "mm_input_projection", cfg.text_hidden_size, hs);
  }

  Result<NDArray> Embed(const NDArray& input, const std::string& function) const override {
    const int64_t s = cfg_.image_size, hs = cfg_.hidden_size, np = cfg_.num_patches();
    auto chw = NormalizedPixels(input, s, kHalf, kHalf, function);
    MLC_RETURN_IF_ERROR(chw);
    std::vector<float> patches = PatchRows(chw->data(), 3, s, s, cfg_.patch_size);
    std::vector<float> x(static_cast<size_t>(np * hs));
    patch_.Run(patches.data(), np, x.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += positions_[i];
    MLC_RETURN_IF_ERROR(RunVitLayers(layers_, x, np, function));
    LayerNormRows(x.data(), post_w_, post_b_, np, hs, cfg_.layer_norm_eps, x.data());
    std::vector<float> pooled = Pool(x);
    const int64_t rows = cfg_.tokens_per_image;
    RmsNormRows(pooled.data(), projector_.norm, rows, hs, cfg_.layer_norm_eps, pooled.data());
    NDArray out = NDArray::Empty({rows, cfg_.text_hidden_size}, DlFloat32());
    cpu::Linear(projector_.projection, pooled.data(), rows, out.data<float>());
    return out;
  }

 private:
  // The patch grid's rows [grid * grid, hidden] averaged over pool x pool squares (stride pool):
  // [tokens_per_side^2, hidden], row-major over the squares.
  std::vector<float> Pool(const std::vector<float>& x) const {
    const int64_t hs = cfg_.hidden_size, g = cfg_.grid(), k = cfg_.pool(), side = cfg_.tokens_per_side();
    std::vector<float> out(static_cast<size_t>(side * side * hs), 0.0f);
    const float inverse = 1.0f / static_cast<float>(k * k);
    ParallelFor(side * side, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        float* row = out.data() + t * hs;
        const int64_t oy = t / side, ox = t % side;
        for (int64_t dy = 0; dy < k; ++dy) {
          for (int64_t dx = 0; dx < k; ++dx) {
            const float* src = x.data() + ((oy * k + dy) * g + ox * k + dx) * hs;
            for (int64_t i = 0; i < hs; ++i) row[i] += src[i];
          }
        }
        for (int64_t i = 0; i < hs; ++i) row[i] *= inverse;
      }
    });
    return out;
  }

  SiglipConfig cfg_;
  BiasedLinear patch_;
  std::vector<float> positions_, post_w_, post_b_;
  std::vector<VitLayer> layers_;
  Projector projector_;
};

class SiglipTower : public Tower {
 public:
  explicit SiglipTower(SiglipConfig cfg) : cfg_(std::move(cfg)) {}
  std::string adapter() const override { return "image"; }
  std::string function() const override { return "image_embed"; }

  TaskInput Input() const override {
    ImageDecode im;
    im.mode = ResizeMode::kStretch;  // Gemma 3's processor: a plain resize to image_size square
    im.height = cfg_.image_size;
    im.width = cfg_.image_size;
    im.num_embeddings = cfg_.tokens_per_image;
    return TaskInput{im, adapter(),
                     PromptInsertion{{cfg_.boi_token_id}, cfg_.image_token_id, {cfg_.eoi_token_id}}};
  }

  // MLC's module order: embeddings (patch convolution, positions), the encoder layers, the
  // post-LayerNorm, then the projector (norm, projection without bias).
  void AppendParams(ParamListBuilder& b) const override {
    const std::string& r = cfg_.root;
    const int64_t hs = cfg_.hidden_size, p = cfg_.patch_size;
    b.Float(r + "embeddings.patch_embedding.weight", {hs, 3, p, p});
    b.Vector(r + "embeddings.patch_embedding.bias", hs);
    b.Matrix(r + "embeddings.position_embedding", cfg_.num_patches(), hs);
    for (int64_t l = 0; l < cfg_.num_layers; ++l) AppendVitLayerParams(b, cfg_.Layer(l), cfg_.layer());
    b.Vector(r + "post_layernorm.weight", hs);
    b.Vector(r + "post_layernorm.bias", hs);
    b.Vector(cfg_.projector + "mm_soft_emb_norm.weight", hs);
    b.Matrix(cfg_.projector + "mm_input_projection", cfg_.text_hidden_size, hs);
  }

  Result<std::unique_ptr<BoundTower>> Bind(const ModelConfig& c, const ParamIndex& p) const override {
    return BindChecked<BoundSiglip>(*this, cfg_, c, p, "vision tower");
  }

 private:
  SiglipConfig cfg_;
};

// A prompt id of model_config: MLC's default when absent, inside the vocabulary.
int64_t TokenId(ConfigReader& top, const char* key, int64_t fallback, int64_t vocab) {
  const int64_t id = top.Int(key, 0, int64_t{1} << 30, fallback);
  if (id >= vocab) {
    top.Fail(top.Path(key), "token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(vocab) + ")");
  }
  return id;
}

// The pooling: mm_tokens_per_image the square of a divisor of the patch grid's side.
void CheckPooling(ConfigReader& top, const SiglipConfig& cfg) {
  const int64_t side = cfg.tokens_per_side();
  if (side * side != cfg.tokens_per_image || cfg.grid() % side) {
    top.Fail(top.Path("mm_tokens_per_image"),
             "expected the square of a divisor of the " + std::to_string(cfg.grid()) +
                 " x " + std::to_string(cfg.grid()) + " patch grid (the average pool's output), got " +
                 std::to_string(cfg.tokens_per_image));
  }
}

}  // namespace

int64_t SiglipConfig::tokens_per_side() const {
  int64_t side = static_cast<int64_t>(std::llround(std::sqrt(static_cast<double>(tokens_per_image))));
  return side > 0 ? side : 1;
}

std::shared_ptr<const Tower> ReadSiglipTower(ConfigReader& top, const ModelConfig& text) {
  ConfigReader v = top.Sub("vision_config");
  if (v.failed()) return nullptr;
  SiglipConfig cfg;
  if (!cfg.Read(v, 1e-6)) return nullptr;
  const std::string act = v.String({"hidden_act"});
  if (act == "gelu") {
    cfg.gelu_tanh = false;
  } else if (!act.empty() && act != "gelu_pytorch_tanh" && act != "gelu_tanh") {
    v.Unsupported(v.Path("hidden_act"), "expected gelu_pytorch_tanh (SigLIP's) or gelu, got \"" + act + "\"");
  }
  if (v.Bool("vision_use_head", false)) {
    v.Unsupported(v.Path("vision_use_head"), "expected false (Gemma 3 takes the patch rows, not the pooled head)");
  }
  cfg.tokens_per_image = top.Int("mm_tokens_per_image", 1, int64_t{1} << 20, 256);
  cfg.text_hidden_size = text.hidden_size;
  cfg.boi_token_id = TokenId(top, "boi_token_index", 255999, text.vocab_size);
  cfg.image_token_id = TokenId(top, "image_token_index", 262144, text.vocab_size);
  cfg.eoi_token_id = TokenId(top, "eoi_token_index", 256000, text.vocab_size);
  if (v.failed()) return nullptr;
  CheckPooling(top, cfg);
  if (v.failed()) return nullptr;
  return std::make_shared<SiglipTower>(std::move(cfg));
}

}  // namespace mlc::cpu
