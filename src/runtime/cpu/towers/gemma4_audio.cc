// Gemma 4's audio tower and embedder (gemma4_audio.h): configuration, parameters in the converter's
// order, the values a random-weight package stores for the fixed tensors, binding, and the
// audio_embed run.
//
// The preprocessor's tensors: MLC's gemma4 branch was not found to read its layout from, so the
// convention is defined from Hugging Face's Gemma4AudioFeatureExtractor: a frame is 320 samples
// (160 zeros of left padding before the clip, hop 160); dft_matrix [320, 514] maps a frame to the
// 257 real parts (columns 0..256) then the 257 imaginary parts (columns 257..513) of its 512-point
// DFT with the periodic Hann window folded in; the magnitude of each bin times mel_filters
// [257, mel bins] (HTK mel scale, 0..8000 Hz, no normalization), then log(x + 1e-3).
#include "runtime/cpu/towers/gemma4_audio.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/interrupt.h"
#include "runtime/cpu/blocks.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/weights.h"

namespace mlc::cpu {
namespace {

const std::string kPre = "audio_preprocessor.";
const std::string kTower = "audio_tower.";
const std::string kEmbed = "embed_audio.";
constexpr double kPi = 3.14159265358979323846;
constexpr double kNormEps = 1e-6;   // HF's Gemma4RMSNorm default (feed-forward and layer norms)
constexpr float kMelFloor = 1e-3f;  // log(mel + kMelFloor)

std::string LayerRoot(int64_t l) { return kTower + "layers." + std::to_string(l) + "."; }

// The clipped linears of a layer, relative to LayerRoot, with their shapes.
struct ClippedSpec {
  const char* name;
  int64_t out_mult, in_mult;  // x hidden_size
};
constexpr ClippedSpec kFfnUp{"ffw_layer_1", 4, 1}, kFfnDown{"ffw_layer_2", 1, 4};
constexpr ClippedSpec kAttn[] = {{"q_proj", 1, 1}, {"k_proj", 1, 1}, {"v_proj", 1, 1}, {"post", 1, 1}};
constexpr ClippedSpec kStart{"linear_start", 2, 1}, kEnd{"linear_end", 1, 1};
constexpr const char* kClipBounds[] = {"input_min", "input_max", "output_min", "output_max"};

// ---- the fixed tensors, as the converter computes them ----

double Hann(int64_t j) { return 0.5 - 0.5 * std::cos(2 * kPi * static_cast<double>(j) / Gemma4AudioConfig::kFrameLength); }

std::vector<float> DftMatrix() {
  const int64_t n = Gemma4AudioConfig::kFrameLength, bins = Gemma4AudioConfig::kFftBins, fft = 2 * (bins - 1);
  std::vector<float> m(static_cast<size_t>(n * 2 * bins));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t k = 0; k < bins; ++k) {
      const double a = 2 * kPi * static_cast<double>((j * k) % fft) / static_cast<double>(fft);
      m[static_cast<size_t>(j * 2 * bins + k)] = static_cast<float>(Hann(j) * std::cos(a));
      m[static_cast<size_t>(j * 2 * bins + bins + k)] = static_cast<float>(-Hann(j) * std::sin(a));
    }
  }
  return m;
}

double HzToMel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double MelToHz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

// [257, mel_bins]: triangles between mel-spaced edges over 0..8000 Hz, bins at k * 8000 / 256.
std::vector<float> MelFilters(int64_t mel_bins) {
  const int64_t bins = Gemma4AudioConfig::kFftBins;
  const double top = Gemma4AudioConfig::kSampleRate / 2;
  std::vector<double> edges(static_cast<size_t>(mel_bins + 2));
  for (size_t i = 0; i < edges.size(); ++i) {
    edges[i] = MelToHz(HzToMel(top) * static_cast<double>(i) / static_cast<double>(mel_bins + 1));
  }
  std::vector<float> m(static_cast<size_t>(bins * mel_bins));
  for (int64_t k = 0; k < bins; ++k) {
    const double f = top * static_cast<double>(k) / static_cast<double>(bins - 1);
    for (int64_t b = 0; b < mel_bins; ++b) {
      const size_t i = static_cast<size_t>(b);
      const double down = (f - edges[i]) / (edges[i + 1] - edges[i]);
      const double up = (edges[i + 2] - f) / (edges[i + 2] - edges[i + 1]);
      m[static_cast<size_t>(k * mel_bins + b)] = static_cast<float>(std::max(0.0, std::min(down, up)));
    }
  }
  return m;
}

// [rows, hidden]: row r holds [sin(p t_i)..., cos(p t_i)...] for position p = rows - 1 - r.
std::vector<float> RelativePositions(int64_t rows, int64_t hidden) {
  const int64_t half = hidden / 2;
  const double step = std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1));
  std::vector<float> m(static_cast<size_t>(rows * hidden), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    const double p = static_cast<double>(rows - 1 - r);
    for (int64_t i = 0; i < half; ++i) {
      const double a = p * std::exp(-static_cast<double>(i) * step);
      m[static_cast<size_t>(r * hidden + i)] = static_cast<float>(std::sin(a));
      m[static_cast<size_t>(r * hidden + half + i)] = static_cast<float>(std::cos(a));
    }
  }
  return m;
}

std::vector<float> Transposed(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < cols; ++k) t[static_cast<size_t>(k * rows + r)] = m[static_cast<size_t>(r * cols + k)];
  }
  return t;
}

Weight FloatWeight(const std::vector<float>& m, int64_t out, int64_t in) {
  Weight w;
  w.format = WeightFormat::kF32;
  w.out = out;
  w.in = in;
  w.data = m.data();
  return w;
}

// ---- row operations on the pool ----

template <class F>
void EachValue(float* x, int64_t n, F f) {
  ParallelFor(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) x[i] = f(x[i]);
  });
}

// x = SiLU(x) over `rows` rows of `width` (the vectorised gated kernel with a unit gate).
void SiluRows(float* x, int64_t rows, int64_t width) {
  const std::vector<float> ones(static_cast<size_t>(width), 1.0f);
  ParallelFor(rows, 8, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) SiluMul(x + r * width, ones.data(), x + r * width, width);
  });
}

// min / max rather than std::clamp's branches, so that the loop vectorises.
inline float Bounded(float v, float lo, float hi) { return std::min(std::max(v, lo), hi); }

void Clamp(float* x, int64_t n, float lo, float hi) {
  ParallelFor(n, 16384, [x, lo, hi](int64_t begin, int64_t end) {
    const float low = lo, high = hi;  // locals: no reload past the stores through x
    for (int64_t i = begin; i < end; ++i) x[i] = Bounded(x[i], low, high);
  });
}

// A Gemma4ClippableLinear: input clamped, product, output clamped (no bounds: +-inf).
struct Clipped {
  Weight w;
  float in_min = -INFINITY, in_max = INFINITY, out_min = -INFINITY, out_max = INFINITY;

  // x by value: clamped in place (callers move the inputs they are done with).
  std::vector<float> Run(std::vector<float> x, int64_t n) const {
    std::vector<float> y(static_cast<size_t>(n * w.out));
    if (in_min > -INFINITY || in_max < INFINITY) Clamp(x.data(), static_cast<int64_t>(x.size()), in_min, in_max);
    cpu::Linear(w, x.data(), n, y.data());
    if (out_min > -INFINITY || out_max < INFINITY) Clamp(y.data(), static_cast<int64_t>(y.size()), out_min, out_max);
    return y;
  }
};

struct FeedForward {
  Clipped up, down;
  std::vector<float> pre_norm, post_norm;
};

struct AudioLayer {
  FeedForward ff1, ff2;
  Clipped q, k, v, post;
  std::vector<float> q_mul;  // per head dim: head_dim^-0.5 / ln 2 * softplus(per_dim_scale)
  std::vector<float> rel_k;  // [relative_rows, hidden]: relative_k_proj(relative_positions)
  Clipped start, end;
  std::vector<float> depthwise;  // [hidden, kernel]
  std::vector<float> lconv_norm, conv_norm;
  std::vector<float> norm_pre_attn, norm_post_attn, norm_out;
};

// Every parameter of the tower in the converter's order (AppendParams and Bind's checks).
void TowerParams(const Gemma4AudioConfig& a, ParamListBuilder& b) {
  const int64_t h = a.hidden_size;
  b.Add(kPre + "dft_matrix", {Gemma4AudioConfig::kFrameLength, 2 * Gemma4AudioConfig::kFftBins}, "float32");
  b.Add(kPre + "mel_filters", {Gemma4AudioConfig::kFftBins, a.feature_size}, "float32");
  const std::string sub = kTower + "subsample_conv_projection.";
  b.Float(sub + "layer0.conv.weight", {a.conv_channels0, 1, 3, 3});
  b.Vector(sub + "layer0.norm.weight", a.conv_channels0);
  b.Float(sub + "layer1.conv.weight", {a.conv_channels1, a.conv_channels0, 3, 3});
  b.Vector(sub + "layer1.norm.weight", a.conv_channels1);
  b.Matrix(sub + "input_proj_linear", h, a.proj_in());
  auto clipped = [&](const std::string& base, const ClippedSpec& s) {
    b.Matrix(base + s.name + ".linear", s.out_mult * h, s.in_mult * h);
    if (!a.clipped_linears) return;
    for (const char* bound : kClipBounds) b.Float(base + s.name + "." + bound, {});
  };
  for (int64_t l = 0; l < a.num_layers; ++l) {
    const std::string pre = LayerRoot(l);
    for (const char* ff : {"feed_forward1.", "feed_forward2."}) {
      clipped(pre + ff, kFfnUp);
      clipped(pre + ff, kFfnDown);
      b.Vector(pre + ff + "pre_layer_norm.weight", h);
      b.Vector(pre + ff + "post_layer_norm.weight", h);
    }
    for (const ClippedSpec& s : kAttn) clipped(pre + "self_attn.", s);
    b.Matrix(pre + "self_attn.relative_k_proj", h, h);
    b.Vector(pre + "self_attn.per_dim_scale", a.head_dim());
    b.Float(pre + "self_attn.relative_positions", {a.relative_rows(), h});
    clipped(pre + "lconv1d.", kStart);
    clipped(pre + "lconv1d.", kEnd);
    b.Float(pre + "lconv1d.depthwise_conv1d.weight", {h, 1, a.conv_kernel_size});
    b.Vector(pre + "lconv1d.pre_layer_norm.weight", h);
    b.Vector(pre + "lconv1d.conv_norm.weight", h);
    for (const char* norm : {"norm_pre_attn", "norm_post_attn", "norm_out"}) {
      b.Vector(pre + norm + ".weight", h);
    }
  }
  b.Linear(kTower + "output_proj", a.output_proj_dims, h, /*bias=*/true);
  b.Matrix(kEmbed + "embedding_projection", a.text_hidden_size, a.output_proj_dims);
}

class BoundGemma4Audio : public BoundTower {
 public:
  BoundGemma4Audio(const Gemma4AudioConfig& a, const ModelConfig& c, const ParamIndex& p) : a_(a) {
    const int64_t h = a.hidden_size, bins = Gemma4AudioConfig::kFftBins;
    dft_ = Transposed(FloatsOf(p[kPre + "dft_matrix"]), Gemma4AudioConfig::kFrameLength, 2 * bins);
    mel_ = Transposed(FloatsOf(p[kPre + "mel_filters"]), bins, a.feature_size);
    const std::string sub = kTower + "subsample_conv_projection.";
    conv0_ = FloatMatrixOf(p, sub + "layer0.conv", a.conv_channels0, 9);
    conv1_ = FloatMatrixOf(p, sub + "layer1.conv", a.conv_channels1, a.conv_channels0 * 9);
    norm0_ = FloatsOf(p[sub + "layer0.norm.weight"]);
    norm1_ = FloatsOf(p[sub + "layer1.norm.weight"]);
    input_proj_ = MatrixOf(c, p, sub + "input_proj_linear", h, a.proj_in());
    auto clipped = [&](const std::string& base, const ClippedSpec& s) {
      Clipped out;
      out.w = MatrixOf(c, p, base + s.name + ".linear", s.out_mult * h, s.in_mult * h);
      if (a.clipped_linears) {
        float* bounds[] = {&out.in_min, &out.in_max, &out.out_min, &out.out_max};
        for (size_t i = 0; i < 4; ++i) *bounds[i] = FloatsOf(p[base + s.name + "." + kClipBounds[i]])[0];
      }
      return out;
    };
    const double q_scale = 1.0 / std::sqrt(static_cast<double>(a.head_dim())) / std::log(2.0);
    for (int64_t l = 0; l < a.num_layers; ++l) {
      const std::string pre = LayerRoot(l);
      AudioLayer layer;
      FeedForward* ffs[] = {&layer.ff1, &layer.ff2};
      const char* ff_names[] = {"feed_forward1.", "feed_forward2."};
      for (size_t i = 0; i < 2; ++i) {
        const std::string base = pre + ff_names[i];
        ffs[i]->up = clipped(base, kFfnUp);
        ffs[i]->down = clipped(base, kFfnDown);
        ffs[i]->pre_norm = FloatsOf(p[base + "pre_layer_norm.weight"]);
        ffs[i]->post_norm = FloatsOf(p[base + "post_layer_norm.weight"]);
      }
      const std::string attn = pre + "self_attn.";
      layer.q = clipped(attn, kAttn[0]);
      layer.k = clipped(attn, kAttn[1]);
      layer.v = clipped(attn, kAttn[2]);
      layer.post = clipped(attn, kAttn[3]);
      for (float s : FloatsOf(p[attn + "per_dim_scale"])) {
        const double softplus = std::log1p(std::exp(-std::fabs(static_cast<double>(s)))) + std::max(0.0, static_cast<double>(s));
        layer.q_mul.push_back(static_cast<float>(q_scale * softplus));
      }
      // The relative keys depend on weights only: projected once here.
      std::vector<float> positions = FloatsOf(p[attn + "relative_positions"]);
      layer.rel_k.resize(positions.size());
      cpu::Linear(MatrixOf(c, p, attn + "relative_k_proj", h, h), positions.data(), a.relative_rows(),
                  layer.rel_k.data());
      layer.start = clipped(pre + "lconv1d.", kStart);
      layer.end = clipped(pre + "lconv1d.", kEnd);
      layer.depthwise = FloatsOf(p[pre + "lconv1d.depthwise_conv1d.weight"]);
      layer.lconv_norm = FloatsOf(p[pre + "lconv1d.pre_layer_norm.weight"]);
      layer.conv_norm = FloatsOf(p[pre + "lconv1d.conv_norm.weight"]);
      layer.norm_pre_attn = FloatsOf(p[pre + "norm_pre_attn.weight"]);
      layer.norm_post_attn = FloatsOf(p[pre + "norm_post_attn.weight"]);
      layer.norm_out = FloatsOf(p[pre + "norm_out.weight"]);
      layers_.push_back(std::move(layer));
    }
    output_proj_ = MatrixOf(c, p, kTower + "output_proj", a.output_proj_dims, h);
    output_bias_ = FloatsOf(p[kTower + "output_proj.bias"]);
    embed_ = MatrixOf(c, p, kEmbed + "embedding_projection", a.text_hidden_size, a.output_proj_dims);
  }

  Result<NDArray> Embed(const NDArray& input, const std::string& function) const override {
    if (!input.defined() || !SameDtype(input.dtype(), DlFloat32()) || input.ndim() != 1) {
      return Invalid("", function + ": expected mono samples float32 [n], got " +
                             (input.defined() ? input.Describe() : std::string("nothing")));
    }
    const int64_t n = input.shape()[0];
    if (n < Gemma4AudioConfig::kMinSamples || n > a_.max_samples) {
      return Invalid("", function + ": expected " + std::to_string(Gemma4AudioConfig::kMinSamples) + ".." +
                             std::to_string(a_.max_samples) + " samples at 16 kHz, got " + std::to_string(n));
    }
    const int64_t frames = Gemma4AudioConfig::Frames(n);
    std::vector<float> mel = LogMel(input.data<float>(), frames);
    int64_t t = frames, f = a_.feature_size;
    std::vector<float> x = ConvLayer(mel, t, f, 1, conv0_, norm0_);
    x = ConvLayer(x, t, f, a_.conv_channels0, conv1_, norm1_);
    // Rows [t, f * channels] (channel-last, as HF flattens) -> hidden.
    std::vector<float> h(static_cast<size_t>(t * a_.hidden_size));
    cpu::Linear(input_proj_, x.data(), t, h.data());
    for (const AudioLayer& layer : layers_) {
      MLC_RETURN_IF_ERROR(CheckInterrupt(function));
      RunLayer(layer, h, t);
    }
    std::vector<float> o(static_cast<size_t>(t * a_.output_proj_dims));
    cpu::Linear(output_proj_, h.data(), t, o.data(), output_bias_.data());
    const std::vector<float> ones(static_cast<size_t>(a_.output_proj_dims), 1.0f);
    RmsNormRows(o.data(), ones, t, a_.output_proj_dims, a_.rms_norm_eps, o.data());
    NDArray out = NDArray::Empty({t, a_.text_hidden_size}, DlFloat32());
    cpu::Linear(embed_, o.data(), t, out.data<float>());
    return out;
  }

 private:
  // [frames, mel bins] log-mel features.
  std::vector<float> LogMel(const float* samples, int64_t frames) const {
    const int64_t len = Gemma4AudioConfig::kFrameLength, hop = Gemma4AudioConfig::kHop;
    const int64_t bins = Gemma4AudioConfig::kFftBins, pad = len / 2;
    std::vector<float> rows(static_cast<size_t>(frames * len));
    for (int64_t i = 0; i < frames; ++i) {
      for (int64_t j = 0; j < len; ++j) {
        const int64_t s = i * hop + j - pad;  // < n for every frame counted
        rows[static_cast<size_t>(i * len + j)] = s >= 0 ? samples[s] : 0.0f;
      }
    }
    std::vector<float> spectrum(static_cast<size_t>(frames * 2 * bins));
    cpu::Linear(FloatWeight(dft_, 2 * bins, len), rows.data(), frames, spectrum.data());
    std::vector<float> magnitude(static_cast<size_t>(frames * bins));
    for (int64_t i = 0; i < frames; ++i) {
      const float* s = spectrum.data() + i * 2 * bins;
      for (int64_t k = 0; k < bins; ++k) magnitude[static_cast<size_t>(i * bins + k)] = std::hypot(s[k], s[bins + k]);
    }
    std::vector<float> mel(static_cast<size_t>(frames * a_.feature_size));
    cpu::Linear(FloatWeight(mel_, a_.feature_size, bins), magnitude.data(), frames, mel.data());
    EachValue(mel.data(), static_cast<int64_t>(mel.size()), [](float v) { return std::log(v + kMelFloor); });
    return mel;
  }

  // A 3x3 stride-2 convolution (padding 1, no bias) over channel-last [t, f, cin], then LayerNorm
  // over the output channels (no bias) and ReLU; t and f become the output's sizes.
  std::vector<float> ConvLayer(const std::vector<float>& in, int64_t& t, int64_t& f, int64_t cin,
                               const Weight& w, const std::vector<float>& gain) const {
    const int64_t t_out = (t + 1) / 2, f_out = (f + 1) / 2, cols = cin * 9, cout = w.out;
    std::vector<float> out(static_cast<size_t>(t_out * f_out * cout));
    // Columns (cin, kt, kf) per output position, in slices of output time to bound the memory.
    const int64_t slice = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, f_out * cols));
    std::vector<float> patches;
    for (int64_t t0 = 0; t0 < t_out; t0 += slice) {
      const int64_t t1 = std::min(t_out, t0 + slice), positions = (t1 - t0) * f_out;
      patches.assign(static_cast<size_t>(positions * cols), 0.0f);
      ParallelFor(positions, 16, [&](int64_t begin, int64_t end) {
        for (int64_t pos = begin; pos < end; ++pos) {
          const int64_t ot = t0 + pos / f_out, of = pos % f_out;
          float* row = patches.data() + pos * cols;
          for (int64_t kt = 0; kt < 3; ++kt) {
            const int64_t it = 2 * ot - 1 + kt;
            if (it < 0 || it >= t) continue;
            for (int64_t kf = 0; kf < 3; ++kf) {
              const int64_t jf = 2 * of - 1 + kf;
              if (jf < 0 || jf >= f) continue;
              const float* src = in.data() + (it * f + jf) * cin;
              for (int64_t ch = 0; ch < cin; ++ch) row[(ch * 3 + kt) * 3 + kf] = src[ch];
            }
          }
        }
      });
      cpu::Linear(w, patches.data(), positions, out.data() + t0 * f_out * cout);
    }
    const std::vector<float> zeros(static_cast<size_t>(cout), 0.0f);
    LayerNormRows(out.data(), gain, zeros, t_out * f_out, cout, a_.rms_norm_eps, out.data());
    EachValue(out.data(), static_cast<int64_t>(out.size()), [](float v) { return std::max(v, 0.0f); });
    t = t_out;
    f = f_out;
    return out;
  }

  float Clip() const { return static_cast<float>(a_.gradient_clipping); }

  // x clamped to +-gradient_clipping, then RMSNorm with `gain`, row by row (into a new buffer).
  std::vector<float> ClampNorm(const std::vector<float>& x, const std::vector<float>& gain, int64_t n,
                               double eps) const {
    const int64_t hs = a_.hidden_size;
    const float clip = Clip();
    std::vector<float> y(x.size());
    ParallelFor(n, 8, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        float* o = y.data() + r * hs;
        const float* in = x.data() + r * hs;
        for (int64_t i = 0; i < hs; ++i) o[i] = Bounded(in[i], -clip, clip);
        RmsNorm(o, gain.data(), hs, eps, o);
      }
    });
    return y;
  }

  // x += residual_weight * post_norm(clamp(down(silu(up(pre_norm(clamp(x))))))).
  void RunFeedForward(const FeedForward& ff, std::vector<float>& x, int64_t n) const {
    std::vector<float> mid = ff.up.Run(ClampNorm(x, ff.pre_norm, n, kNormEps), n);
    SiluRows(mid.data(), n, ff.up.w.out);
    std::vector<float> y = ClampNorm(ff.down.Run(std::move(mid), n), ff.post_norm, n, kNormEps);
    const float rw = static_cast<float>(a_.residual_weight);
    for (size_t i = 0; i < x.size(); ++i) x[i] += rw * y[i];
  }

  // Chunked local attention as a sliding window: row t sees rows t - window + 1 .. t, each with
  // the relative key of its distance (HF's blocked form reduces to this: every key its mask keeps
  // lies in the query's block context, and the shifted relative logits index the table by
  // context_left - 1 - distance, zero past its end).
  std::vector<float> Attention(const AudioLayer& layer, const std::vector<float>& x, int64_t n) const {
    const int64_t hs = a_.hidden_size, heads = a_.num_heads, d = a_.head_dim(), rows = a_.relative_rows();
    std::vector<float> q = layer.q.Run(x, n), k = layer.k.Run(x, n), v = layer.v.Run(x, n);
    const float k_scale = static_cast<float>(std::log(1 + std::exp(1.0)) / std::log(2.0));
    const float cap = static_cast<float>(a_.logit_cap);
    std::vector<float> out(static_cast<size_t>(n * hs));
    ParallelFor(n * heads, 4, [&](int64_t begin, int64_t end) {
      std::vector<float> qh(static_cast<size_t>(d)), scores;
      for (int64_t task = begin; task < end; ++task) {
        const int64_t t = task / heads, hd = task % heads;
        for (int64_t i = 0; i < d; ++i) qh[static_cast<size_t>(i)] = q[static_cast<size_t>(t * hs + hd * d + i)] * layer.q_mul[static_cast<size_t>(i)];
        const int64_t first = std::max<int64_t>(0, t - a_.window() + 1);
        scores.assign(static_cast<size_t>(t - first + 1), 0.0f);
        float top = -INFINITY;
        for (int64_t s = first; s <= t; ++s) {
          float logit = Dot(qh.data(), k.data() + s * hs + hd * d, d) * k_scale;
          const int64_t r = a_.context_left - 1 - (t - s);
          if (r < rows) logit += Dot(qh.data(), layer.rel_k.data() + r * hs + hd * d, d);
          logit = cap * std::tanh(logit / cap);
          scores[static_cast<size_t>(s - first)] = logit;
          top = std::max(top, logit);
        }
        float sum = 0;
        for (float& s : scores) sum += (s = std::exp(s - top));
        float* o = out.data() + t * hs + hd * d;
        for (int64_t s = first; s <= t; ++s) {
          AddScaled(scores[static_cast<size_t>(s - first)] / sum, v.data() + s * hs + hd * d, o, d);
        }
      }
    });
    return layer.post.Run(std::move(out), n);
  }

  // The light convolution: GLU, causal depthwise convolution, norm, SiLU, linear; residual.
  void RunLightConv(const AudioLayer& layer, std::vector<float>& x, int64_t n) const {
    const int64_t hs = a_.hidden_size, kernel = a_.conv_kernel_size;
    std::vector<float> normed(x.size());
    RmsNormRows(x.data(), layer.lconv_norm, n, hs, a_.rms_norm_eps, normed.data());
    std::vector<float> g = layer.start.Run(std::move(normed), n);
    std::vector<float> u(x.size());  // GLU: first half times the sigmoid of the second
    ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t ch = 0; ch < hs; ++ch) {
          const float gate = g[static_cast<size_t>(t * 2 * hs + hs + ch)];
          u[static_cast<size_t>(t * hs + ch)] = g[static_cast<size_t>(t * 2 * hs + ch)] / (1.0f + std::exp(-gate));
        }
      }
    });
    std::vector<float> conv(x.size(), 0.0f);
    ParallelFor(n, 16, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        for (int64_t j = 0; j < kernel; ++j) {
          const int64_t src = t - (kernel - 1) + j;
          if (src < 0) continue;
          for (int64_t ch = 0; ch < hs; ++ch) {
            conv[static_cast<size_t>(t * hs + ch)] += layer.depthwise[static_cast<size_t>(ch * kernel + j)] * u[static_cast<size_t>(src * hs + ch)];
          }
        }
      }
    });
    std::vector<float> y = ClampNorm(conv, layer.conv_norm, n, a_.rms_norm_eps);
    SiluRows(y.data(), n, hs);
    std::vector<float> o = layer.end.Run(std::move(y), n);
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }

  // One conformer layer (HF's Gemma4AudioLayer).
  void RunLayer(const AudioLayer& layer, std::vector<float>& x, int64_t n) const {
    RunFeedForward(layer.ff1, x, n);
    std::vector<float> a = Attention(layer, ClampNorm(x, layer.norm_pre_attn, n, kNormEps), n);
    a = ClampNorm(a, layer.norm_post_attn, n, kNormEps);
    for (size_t i = 0; i < x.size(); ++i) x[i] += a[i];
    RunLightConv(layer, x, n);
    RunFeedForward(layer.ff2, x, n);
    x = ClampNorm(x, layer.norm_out, n, kNormEps);
  }

  Gemma4AudioConfig a_;
  std::vector<float> dft_, mel_;  // [514, 320] and [mel bins, 257] float32 (transposed once)
  Weight conv0_, conv1_, input_proj_, output_proj_, embed_;
  std::vector<float> norm0_, norm1_, output_bias_;
  std::vector<AudioLayer> layers_;
};

class Gemma4AudioTower : public Tower {
 public:
  explicit Gemma4AudioTower(Gemma4AudioConfig a) : a_(a) {}
  std::string adapter() const override { return "audio"; }
  std::string function() const override { return "audio_embed"; }

  TaskInput Input() const override {
    AudioDecode audio;
    audio.sample_rate_hz = Gemma4AudioConfig::kSampleRate;
    audio.channels = 1;
    audio.min_samples = Gemma4AudioConfig::kMinSamples;
    audio.max_samples = a_.max_samples;
    return TaskInput{audio, adapter(), PromptInsertion{{a_.boa_token_id}, a_.audio_token_id, {a_.eoa_token_id}}};
  }

  void AppendParams(ParamListBuilder& b) const override { TowerParams(a_, b); }

  std::optional<std::vector<float>> StoredValues(const std::string& name) const override {
    if (name == kPre + "dft_matrix") return DftMatrix();
    if (name == kPre + "mel_filters") return MelFilters(a_.feature_size);
    if (name.rfind(kTower, 0) != 0) return std::nullopt;
    auto ends = [&](const std::string& suffix) {
      return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (ends(".relative_positions")) return RelativePositions(a_.relative_rows(), a_.hidden_size);
    // Clip bounds wide enough to leave random activations mostly as they are.
    constexpr float kBound = 16.0f;
    if (ends(".input_min") || ends(".output_min")) return std::vector<float>{-kBound};
    if (ends(".input_max") || ends(".output_max")) return std::vector<float>{kBound};
    return std::nullopt;
  }

  Result<std::unique_ptr<BoundTower>> Bind(const ModelConfig& c, const ParamIndex& p) const override {
    return BindChecked<BoundGemma4Audio>(*this, a_, c, p, "audio tower");
  }

 private:
  Gemma4AudioConfig a_;
};

// subsampling_conv_channels: two positive integers.
void ReadChannels(ConfigReader& r, Gemma4AudioConfig& a) {
  const char* key = "subsampling_conv_channels";
  const Json& v = r.Get(key);
  std::optional<int64_t> c0, c1;
  if (r.Has(key) && v.is_array() && v.size() == 2) {
    c0 = SafeInteger(v[0]);
    c1 = SafeInteger(v[1]);
  }
  if (!c0 || !c1 || *c0 < 1 || *c1 < 1 || *c0 > 4096 || *c1 > 4096) {
    r.Fail(r.Path(key), "expected two integers in [1, 4096]");
    return;
  }
  a.conv_channels0 = *c0;
  a.conv_channels1 = *c1;
}

// An optional integer field the tower implements one value of.
void RequireValue(ConfigReader& r, const char* key, int64_t value, const std::string& what) {
  if (r.Has(key) && SafeInteger(r.Get(key)) != std::optional<int64_t>(value)) {
    r.Unsupported(r.Path(key), "expected " + what);
  }
}

void CheckShapes(ConfigReader& r, const ModelConfig& c, const Gemma4AudioConfig& a) {
  if (a.hidden_size % a.num_heads || a.head_dim() % 2) {
    r.Fail(r.Path("num_attention_heads"), "expected a divisor of hidden_size leaving an even head size");
  }
  if (a.hidden_size % 2) r.Fail(r.Path("hidden_size"), "expected an even size (the sinusoid table's halves)");
  if (a.conv_channels0 / 4 != a.subsampled_features()) {
    // HF sizes input_proj_linear by subsampling_conv_channels[0] // 4 frequency rows.
    r.Fail(r.Path("subsampling_conv_channels"),
           "subsampling_conv_channels[0] // 4 must equal the " + std::to_string(a.subsampled_features()) +
               " frequency rows left of feature_size " + std::to_string(a.feature_size) + " after two stride-2 convolutions");
  }
  if (!c.quantized()) return;
  auto group = [&](const char* key, const std::string& what, int64_t v) {
    if (v % 32) r.Fail(r.Path(key), what + " = " + std::to_string(v) + " must be a multiple of 32 for " + c.quantization);
  };
  group("hidden_size", "hidden_size", a.hidden_size);
  group("subsampling_conv_channels", "input_proj_linear's input width", a.proj_in());
  group("output_proj_dims", "output_proj_dims", a.output_proj_dims);
}

}  // namespace

std::shared_ptr<const Tower> ReadGemma4AudioTower(ConfigReader& top, const ModelConfig& c) {
  ConfigReader r = top.Sub("audio_config");
  if (r.failed()) return nullptr;
  Gemma4AudioConfig a;
  a.hidden_size = r.Int("hidden_size", 2, int64_t{1} << 16);
  a.num_layers = r.Int("num_hidden_layers", 1, 1024);
  a.num_heads = r.Int("num_attention_heads", 1, 1024);
  ReadChannels(r, a);
  a.conv_kernel_size = r.Int("conv_kernel_size", 1, 1024);
  a.residual_weight = r.Number("residual_weight", 0, 0.5);
  a.chunk_size = r.Int("attention_chunk_size", 1, 4096);
  a.context_left = r.Int("attention_context_left", 2, 4096);
  RequireValue(r, "attention_context_right", 0, "0 (look-ahead is not implemented)");
  a.logit_cap = r.Number("attention_logit_cap", 0, 50.0);
  if (a.logit_cap <= 0) r.Fail(r.Path("attention_logit_cap"), "expected a number > 0");
  a.clipped_linears = r.Bool("use_clipped_linears", true);
  a.rms_norm_eps = r.Number("rms_norm_eps", 0, 1e-6);
  a.gradient_clipping = r.Number("gradient_clipping", 0, 1e10);
  a.output_proj_dims = r.Int("output_proj_dims", 1, int64_t{1} << 16);
  a.feature_size = r.Int("feature_size", 1, 4096);
  RequireValue(r, "sampling_rate", Gemma4AudioConfig::kSampleRate, "16000 (the feature extractor's rate)");
  a.max_samples = r.Int("max_samples", Gemma4AudioConfig::kMinSamples, int64_t{1} << 28, 480000);
  const std::string act = r.String({"hidden_act"});
  if (!act.empty() && act != "silu") r.Unsupported(r.Path("hidden_act"), "expected \"silu\"");
  a.text_hidden_size = c.hidden_size;
  const int64_t last_id = std::max<int64_t>(c.vocab_size - 1, 0);
  a.audio_token_id = top.Int("audio_token_id", 0, last_id);
  a.boa_token_id = top.Int("boa_token_id", 0, last_id);
  a.eoa_token_id = top.Int(top.Has("eoa_token_index") || !top.Has("eoa_token_id") ? "eoa_token_index" : "eoa_token_id",
                           0, last_id);
  if (r.failed()) return nullptr;
  CheckShapes(r, c, a);
  if (r.failed()) return nullptr;
  return std::make_shared<Gemma4AudioTower>(a);
}

Json Gemma4AudioConfigJson(bool tiny) {
  Json a = {{"hidden_size", tiny ? 64 : 1024},
            {"num_hidden_layers", tiny ? 2 : 12},
            {"num_attention_heads", tiny ? 4 : 8},
            {"hidden_act", "silu"},
            {"subsampling_conv_channels", tiny ? Json{16, 8} : Json{128, 32}},
            {"conv_kernel_size", 5},
            {"residual_weight", 0.5},
            {"attention_chunk_size", 12},
            {"attention_context_left", 13},
            {"attention_context_right", 0},
            {"attention_logit_cap", 50.0},
            {"attention_invalid_logits_value", -1e9},
            {"use_clipped_linears", true},
            {"rms_norm_eps", 1e-6},
            {"gradient_clipping", 1e10},
            {"output_proj_dims", tiny ? 96 : 1536},
            {"feature_size", tiny ? 16 : 128},
            {"sampling_rate", 16000},
            {"max_samples", 480000}};
  return a;
}

}  // namespace mlc::cpu
