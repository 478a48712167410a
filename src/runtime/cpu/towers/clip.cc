// LLaVA 1.5's CLIP tower and projector (clip.h): parameters, binding and the image_embed run.
#include "runtime/cpu/towers/clip.h"

#include <cmath>
#include <cstring>

#include "runtime/cpu/blocks.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {
namespace {

// CLIP's pixel normalization (OpenAI's image mean and standard deviation).
constexpr float kMean[3] = {0.48145466f, 0.4578275f, 0.40821073f};
constexpr float kStd[3] = {0.26862954f, 0.26130258f, 0.27577711f};

struct Linear1 {
  Weight w;
  std::vector<float> bias;
};

struct ClipLayer {
  Linear1 q, k, v, out, fc1, fc2;
  std::vector<float> ln1_w, ln1_b, ln2_w, ln2_b;
};

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
    auto linear = [&](const std::string& base, int64_t out, int64_t in) {
      return Linear1{FloatMatrixOf(p, base, out, in), FloatsOf(p[base + ".bias"])};
    };
    for (int64_t l = 0; l < cfg.layers_run(); ++l) {
      const std::string pre = r + "encoder.layers." + std::to_string(l) + ".";
      ClipLayer layer;
      layer.q = linear(pre + "self_attn.q_proj", hs, hs);
      layer.k = linear(pre + "self_attn.k_proj", hs, hs);
      layer.v = linear(pre + "self_attn.v_proj", hs, hs);
      layer.out = linear(pre + "self_attn.out_proj", hs, hs);
      layer.fc1 = linear(pre + "mlp.fc1", cfg.intermediate_size, hs);
      layer.fc2 = linear(pre + "mlp.fc2", hs, cfg.intermediate_size);
      layer.ln1_w = FloatsOf(p[pre + "layer_norm1.weight"]);
      layer.ln1_b = FloatsOf(p[pre + "layer_norm1.bias"]);
      layer.ln2_w = FloatsOf(p[pre + "layer_norm2.weight"]);
      layer.ln2_b = FloatsOf(p[pre + "layer_norm2.bias"]);
      layers_.push_back(std::move(layer));
    }
    const std::string& j = cfg.projector;
    proj1_ = Linear1{MatrixOf(c, p, j + "linear_1", cfg.text_hidden_size, hs), FloatsOf(p[j + "linear_1.bias"])};
    proj2_ = Linear1{MatrixOf(c, p, j + "linear_2", cfg.text_hidden_size, cfg.text_hidden_size),
                     FloatsOf(p[j + "linear_2.bias"])};
  }

  Result<NDArray> Embed(const NDArray& input, const std::string& function) const override {
    const int64_t s = cfg_.image_size;
    const bool u8 = SameDtype(input.dtype(), DlUInt8()), u32 = SameDtype(input.dtype(), DlUInt32());
    if (!input.defined() || (!u8 && !u32) || input.shape() != std::vector<int64_t>{1, s, s, 3}) {
      return Invalid("", function + ": expected pixels uint8 or uint32 [1, " + std::to_string(s) + ", " +
                             std::to_string(s) + ", 3], got " +
                             (input.defined() ? input.Describe() : std::string("nothing")));
    }
    std::vector<float> chw = Normalize(input, u8);
    const int64_t hs = cfg_.hidden_size, np = cfg_.num_patches(), n = np + 1;
    std::vector<float> patches = PatchRows(chw.data(), 3, s, s, cfg_.patch_size);
    std::vector<float> x(static_cast<size_t>(n * hs));
    std::copy(class_embedding_.begin(), class_embedding_.end(), x.begin());
    cpu::Linear(patch_, patches.data(), np, x.data() + hs);
    for (size_t i = 0; i < x.size(); ++i) x[i] += positions_[i];
    LayerNormRows(x.data(), pre_w_, pre_b_, n, hs, cfg_.layer_norm_eps, x.data());
    for (const ClipLayer& layer : layers_) RunLayer(layer, x, n);
    // Drop the class row, then the projector: linear, exact GeLU, linear.
    const int64_t th = cfg_.text_hidden_size;
    std::vector<float> mid(static_cast<size_t>(np * th));
    cpu::Linear(proj1_.w, x.data() + hs, np, mid.data(), proj1_.bias.data());
    ApplyRows(GeluErf, mid.data(), static_cast<int64_t>(mid.size()));
    NDArray out = NDArray::Empty({np, th}, DlFloat32());
    cpu::Linear(proj2_.w, mid.data(), np, out.data<float>(), proj2_.bias.data());
    return out;
  }

 private:
  // uint8 / uint32 NHWC pixels -> channel-major (p / 255 - mean) / std.
  std::vector<float> Normalize(const NDArray& input, bool u8) const {
    const int64_t s = cfg_.image_size, area = s * s;
    std::vector<float> chw(static_cast<size_t>(3 * area));
    for (int64_t i = 0; i < area; ++i) {
      for (int64_t ch = 0; ch < 3; ++ch) {
        const float v = u8 ? static_cast<float>(input.data<uint8_t>()[i * 3 + ch])
                           : static_cast<float>(input.data<uint32_t>()[i * 3 + ch]);
        chw[static_cast<size_t>(ch * area + i)] = (v / 255.0f - kMean[ch]) / kStd[ch];
      }
    }
    return chw;
  }

  void RunLayer(const ClipLayer& layer, std::vector<float>& x, int64_t n) const {
    const int64_t hs = cfg_.hidden_size, heads = cfg_.num_heads, d = hs / heads;
    const size_t rows = static_cast<size_t>(n * hs);
    std::vector<float> h(rows), q(rows), k(rows), v(rows), attn(rows), o(rows);
    LayerNormRows(x.data(), layer.ln1_w, layer.ln1_b, n, hs, cfg_.layer_norm_eps, h.data());
    cpu::Linear(layer.q.w, h.data(), n, q.data(), layer.q.bias.data());
    cpu::Linear(layer.k.w, h.data(), n, k.data(), layer.k.bias.data());
    cpu::Linear(layer.v.w, h.data(), n, v.data(), layer.v.bias.data());
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    DenseAttention(q.data(), k.data(), v.data(), hs, n, heads, d, scale, attn.data());
    cpu::Linear(layer.out.w, attn.data(), n, o.data(), layer.out.bias.data());
    for (size_t i = 0; i < rows; ++i) x[i] += o[i];
    LayerNormRows(x.data(), layer.ln2_w, layer.ln2_b, n, hs, cfg_.layer_norm_eps, h.data());
    std::vector<float> mid(static_cast<size_t>(n * cfg_.intermediate_size));
    cpu::Linear(layer.fc1.w, h.data(), n, mid.data(), layer.fc1.bias.data());
    ApplyRows(QuickGelu, mid.data(), static_cast<int64_t>(mid.size()));
    cpu::Linear(layer.fc2.w, mid.data(), n, o.data(), layer.fc2.bias.data());
    for (size_t i = 0; i < rows; ++i) x[i] += o[i];
  }

  ClipConfig cfg_;
  std::vector<float> class_embedding_, positions_, pre_w_, pre_b_;
  Weight patch_;
  std::vector<ClipLayer> layers_;
  Linear1 proj1_, proj2_;
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
    for (int64_t l = 0; l < cfg_.num_layers; ++l) {
      const std::string pre = r + "encoder.layers." + std::to_string(l) + ".";
      for (const char* proj : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
        b.Linear(pre + "self_attn." + proj, hs, hs, true, /*quantize=*/false);
      }
      norm(pre + "layer_norm1");
      b.Linear(pre + "mlp.fc1", cfg_.intermediate_size, hs, true, false);
      b.Linear(pre + "mlp.fc2", hs, cfg_.intermediate_size, true, false);
      norm(pre + "layer_norm2");
    }
    norm(r + "post_layernorm");
    b.Linear(cfg_.projector + "linear_1", cfg_.text_hidden_size, hs, true);
    b.Linear(cfg_.projector + "linear_2", cfg_.text_hidden_size, cfg_.text_hidden_size, true);
  }

  Result<std::unique_ptr<BoundTower>> Bind(const ModelConfig& c, const ParamIndex& p) const override {
    std::unique_ptr<BoundTower> bound = std::make_unique<BoundClip>(cfg_, c, p);
    return bound;
  }

 private:
  ClipConfig cfg_;
};

}  // namespace

std::shared_ptr<const Tower> ReadClipTower(ConfigReader& vision, const ModelConfig& c,
                                           int64_t feature_layer, int64_t image_token_index) {
  ClipConfig cfg;
  cfg.hidden_size = vision.Int("hidden_size", 1, int64_t{1} << 16);
  cfg.intermediate_size = vision.Int("intermediate_size", 1, int64_t{1} << 18);
  cfg.num_heads = vision.Int("num_attention_heads", 1, 1024);
  cfg.num_layers = vision.Int("num_hidden_layers", 1, 1024);
  cfg.patch_size = vision.Int("patch_size", 1, 1024);
  cfg.image_size = vision.Int("image_size", 1, 8192);
  cfg.layer_norm_eps = vision.Number("layer_norm_eps", 0, 1e-5);
  cfg.feature_layer = feature_layer;
  cfg.text_hidden_size = c.hidden_size;
  cfg.image_token_index = image_token_index;
  if (vision.failed()) return nullptr;
  if (vision.Int("num_channels", 3, 3, 3) != 3) return nullptr;
  if (cfg.hidden_size % cfg.num_heads) {
    vision.Fail(vision.Path("num_attention_heads"), "expected a divisor of hidden_size");
  }
  if (cfg.image_size % cfg.patch_size) {
    vision.Fail(vision.Path("patch_size"), "expected a divisor of image_size");
  }
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
