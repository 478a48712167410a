// The shared parts of the ViT image towers (vit.h): pixel normalization and the encoder layer.
#include "runtime/cpu/towers/vit.h"

#include <cmath>

#include "base/interrupt.h"
#include "runtime/cpu/blocks.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {

void BiasedLinear::Run(const float* x, int64_t n, float* y) const {
  cpu::Linear(w, x, n, y, bias.empty() ? nullptr : bias.data());
}

Result<std::vector<float>> NormalizedPixels(const NDArray& input, int64_t size, const float mean[3],
                                            const float std_dev[3], const std::string& function) {
  const bool u8 = input.defined() && SameDtype(input.dtype(), DlUInt8());
  const bool u32 = input.defined() && SameDtype(input.dtype(), DlUInt32());
  if (!input.defined() || (!u8 && !u32) || input.shape() != std::vector<int64_t>{1, size, size, 3}) {
    return Invalid("", function + ": expected pixels uint8 or uint32 [1, " + std::to_string(size) + ", " +
                           std::to_string(size) + ", 3], got " +
                           (input.defined() ? input.Describe() : std::string("nothing")));
  }
  const int64_t area = size * size;
  std::vector<float> chw(static_cast<size_t>(3 * area));
  for (int64_t i = 0; i < area; ++i) {
    for (int64_t ch = 0; ch < 3; ++ch) {
      const float v = u8 ? static_cast<float>(input.data<uint8_t>()[i * 3 + ch])
                         : static_cast<float>(input.data<uint32_t>()[i * 3 + ch]);
      chw[static_cast<size_t>(ch * area + i)] = (v / 255.0f - mean[ch]) / std_dev[ch];
    }
  }
  return chw;
}

bool VitConfig::Read(ConfigReader& vision, double default_eps) {
  hidden_size = vision.Int("hidden_size", 1, int64_t{1} << 16);
  intermediate_size = vision.Int("intermediate_size", 1, int64_t{1} << 18);
  num_heads = vision.Int("num_attention_heads", 1, 1024);
  num_layers = vision.Int("num_hidden_layers", 1, 1024);
  patch_size = vision.Int("patch_size", 1, 1024);
  image_size = vision.Int("image_size", 1, 8192);
  layer_norm_eps = vision.Number("layer_norm_eps", 0, default_eps);
  if (vision.failed()) return false;
  if (vision.Int("num_channels", 3, 3, 3) != 3) return false;
  if (hidden_size % num_heads) vision.Fail(vision.Path("num_attention_heads"), "expected a divisor of hidden_size");
  if (image_size % patch_size) vision.Fail(vision.Path("patch_size"), "expected a divisor of image_size");
  return true;
}

void AppendVitLayerParams(ParamListBuilder& b, const std::string& prefix, const VitLayerShape& s) {
  const int64_t hs = s.hidden_size;
  auto norm = [&](const std::string& base) {
    b.Vector(base + ".weight", hs);
    b.Vector(base + ".bias", hs);
  };
  for (const char* proj : {"k_proj", "v_proj", "q_proj", "out_proj"}) {
    b.Linear(prefix + "self_attn." + proj, hs, hs, /*bias=*/true, s.quantized);
  }
  norm(prefix + "layer_norm1");
  b.Linear(prefix + "mlp.fc1", s.intermediate_size, hs, true, s.quantized);
  b.Linear(prefix + "mlp.fc2", hs, s.intermediate_size, true, s.quantized);
  norm(prefix + "layer_norm2");
}

VitLayer::VitLayer(const VitLayerShape& s, const ModelConfig& c, const ParamIndex& p, const std::string& prefix)
    : s_(s) {
  auto linear = [&](const std::string& base, int64_t out, int64_t in) {
    Weight w = s.quantized ? MatrixOf(c, p, base, out, in) : FloatMatrixOf(p, base, out, in);
    return BiasedLinear{w, FloatsOf(p[base + ".bias"])};
  };
  const int64_t hs = s.hidden_size;
  q_ = linear(prefix + "self_attn.q_proj", hs, hs);
  k_ = linear(prefix + "self_attn.k_proj", hs, hs);
  v_ = linear(prefix + "self_attn.v_proj", hs, hs);
  out_ = linear(prefix + "self_attn.out_proj", hs, hs);
  fc1_ = linear(prefix + "mlp.fc1", s.intermediate_size, hs);
  fc2_ = linear(prefix + "mlp.fc2", hs, s.intermediate_size);
  ln1_w_ = FloatsOf(p[prefix + "layer_norm1.weight"]);
  ln1_b_ = FloatsOf(p[prefix + "layer_norm1.bias"]);
  ln2_w_ = FloatsOf(p[prefix + "layer_norm2.weight"]);
  ln2_b_ = FloatsOf(p[prefix + "layer_norm2.bias"]);
}

void VitLayer::Run(std::vector<float>& x, int64_t n) const {
  const int64_t hs = s_.hidden_size, heads = s_.num_heads, d = hs / heads;
  const size_t rows = static_cast<size_t>(n * hs);
  // The layer's activations, kept per thread between layers and images (no zero-filled pages
  // a layer: every element is written before it is read).
  thread_local std::vector<float> h, q, k, v, attn, o, mid;
  for (std::vector<float>* b : {&h, &q, &k, &v, &attn, &o}) b->resize(rows);
  mid.resize(static_cast<size_t>(n * s_.intermediate_size));
  LayerNormRows(x.data(), ln1_w_, ln1_b_, n, hs, s_.layer_norm_eps, h.data());
  q_.Run(h.data(), n, q.data());
  k_.Run(h.data(), n, k.data());
  v_.Run(h.data(), n, v.data());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  DenseAttention(q.data(), k.data(), v.data(), hs, n, heads, d, scale, attn.data());
  out_.Run(attn.data(), n, o.data());
  for (size_t i = 0; i < rows; ++i) x[i] += o[i];
  LayerNormRows(x.data(), ln2_w_, ln2_b_, n, hs, s_.layer_norm_eps, h.data());
  fc1_.Run(h.data(), n, mid.data());
  ApplyRows(s_.activation, mid.data(), n * s_.intermediate_size);
  fc2_.Run(mid.data(), n, o.data());
  for (size_t i = 0; i < rows; ++i) x[i] += o[i];
}

Status RunVitLayers(const std::vector<VitLayer>& layers, std::vector<float>& x, int64_t n,
                    const std::string& function) {
  for (const VitLayer& layer : layers) {
    MLC_RETURN_IF_ERROR(CheckInterrupt(function));
    layer.Run(x, n);
  }
  return Status::Ok();
}

}  // namespace mlc::cpu
