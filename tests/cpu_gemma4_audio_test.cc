// Gemma 4's audio tower (towers/gemma4_audio.h) on its own: a tiny config with random parameters in
// the package's dtypes (4-bit matrices, half or float tensors, the fixed tables the converter
// stores), audio_embed against a float64 implementation written here from Hugging Face's
// Gemma4AudioFeatureExtractor / Gemma4AudioModel / Gemma4MultimodalEmbedder in their blocked form,
// on clips of several lengths; the manifest input it declares; and the errors (clip length, dtype,
// a missing dft_matrix, unsupported config) before any row. A disabled case times 30 s of audio at
// the real E2B shape.
#include <gtest/gtest.h>

#include <atomic>

#include "base/interrupt.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/towers/gemma4_audio.h"
#include "runtime/cpu/weights.h"
#include "runtime/splitmix.h"
#include "support/reference64.h"
#include "support/tower_params.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using cpu::Gemma4AudioConfig;
using test::EndsWith;
using test::Params64;
using test::Vec;

constexpr int64_t kTextHidden = 64;

Json TopConfig(Json audio) {
  return Json{{"audio_config", std::move(audio)}, {"audio_token_id", 500}, {"boa_token_id", 498}, {"eoa_token_index", 499}};
}

cpu::ModelConfig TextConfig(cpu::Quant quant, const std::string& name, int64_t hidden = kTextHidden) {
  return test::TowerTextConfig(quant, name, hidden);
}

using Built = test::ReadResult;

Built Read(const Json& model_config, const cpu::ModelConfig& c) {
  return test::ReadTower(cpu::ReadGemma4AudioTower, model_config, c);
}

// Random parameters in their dtypes (test::RandomTowerParams) with the fixed tables from the
// tower and clip bounds tight enough to clip some values (`clip` > 0) or wide.
ParameterSet MakeParams(const cpu::Tower& tower, const std::vector<ParamSpec>& specs, uint64_t seed, float clip) {
  return test::RandomTowerParams(specs, seed, [&](const ParamSpec& s) -> std::optional<std::vector<float>> {
    if ((EndsWith(s.name, "_min") || EndsWith(s.name, "_max")) && clip > 0) {
      const float b = EndsWith(s.name, "input_min") || EndsWith(s.name, "input_max") ? 2.5f * clip : clip;
      return std::vector<float>{EndsWith(s.name, "_min") ? -b : b};
    }
    return tower.StoredValues(s.name);
  });
}

// A deterministic clip: two tones and a little noise.
NDArray Clip(int64_t n, uint64_t seed = 3) {
  NDArray t = NDArray::Empty({n}, DlFloat32());
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const double s = static_cast<double>(i) / 16000.0;
    t.data<float>()[i] = static_cast<float>(0.3 * std::sin(2 * M_PI * 440 * s) + 0.2 * std::sin(2 * M_PI * 1230 * s + 1) +
                                            0.05 * rng.Symmetric());
  }
  return t;
}

// ---- the float64 reference, from Hugging Face's definitions ----

struct Reference {
  const Json& a;  // audio_config
  const Params64& p;
  bool q8;  // 4-bit matrices: operands rounded as the kernels round them (test::RoundingFor)
  int64_t text_hidden;

  mutable int64_t product_rows = 0;  // rows of the product being computed (the frames, or the relative positions)

  int64_t H() const { return a["hidden_size"]; }
  double Eps() const { return a["rms_norm_eps"]; }

  Vec Lin(const std::string& base, const Vec& x, int64_t out, int64_t in) const {
    return test::RoundedMatVec(p.Matrix(base, out, in), x, out, in, test::RoundingFor(q8, product_rows));
  }

  // Gemma4ClippableLinear.
  Vec Clipped(const std::string& base, Vec x, int64_t out, int64_t in) const {
    const bool clip = a["use_clipped_linears"];
    auto bound = [&](const char* leaf) { return p.Floats(base + "." + leaf)[0]; };
    if (clip) for (double& v : x) v = std::clamp(v, bound("input_min"), bound("input_max"));
    Vec y = Lin(base + ".linear", x, out, in);
    if (clip) for (double& v : y) v = std::clamp(v, bound("output_min"), bound("output_max"));
    return y;
  }

  // Gemma4RMSNorm: x * (mean(x^2) + eps)^-0.5 * weight (no weight: with_scale false).
  static Vec Rms(const Vec& x, const Vec* w, double eps) {
    double ms = 0;
    for (double v : x) ms += v * v;
    ms = ms / static_cast<double>(x.size()) + eps;
    Vec y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * std::pow(ms, -0.5) * (w ? (*w)[i] : 1.0);
    return y;
  }

  Vec ClampRms(Vec x, const std::string& weight, double eps) const {
    const double gc = a["gradient_clipping"];
    for (double& v : x) v = std::clamp(v, -gc, gc);
    Vec w = p.Floats(weight);
    return Rms(x, &w, eps);
  }

  static double Silu(double v) { return v / (1 + std::exp(-v)); }

  // Gemma4AudioFeatureExtractor: 160 zeros of left padding, frames of 320 every 160 (the 321-sample
  // window's last sample only marks validity), periodic Hann, |rfft(512)|, HTK mel filters over
  // 0..8000 Hz, log(x + 1e-3).
  std::vector<Vec> LogMel(const float* x, int64_t n) const {
    const int64_t mels = a["feature_size"];
    std::vector<double> padded(160, 0.0);
    for (int64_t i = 0; i < n; ++i) padded.push_back(x[i]);
    const int64_t frames = (static_cast<int64_t>(padded.size()) - 321) / 160 + 1;
    auto hz_to_mel = [](double f) { return 2595.0 * std::log10(1 + f / 700.0); };
    auto mel_to_hz = [](double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1); };
    std::vector<double> filt(static_cast<size_t>(mels + 2));
    for (int64_t i = 0; i < mels + 2; ++i) filt[static_cast<size_t>(i)] = mel_to_hz(hz_to_mel(8000.0) * static_cast<double>(i) / static_cast<double>(mels + 1));
    Vec cosine(512), sine(512), window(320);
    for (int64_t i = 0; i < 512; ++i) {
      cosine[static_cast<size_t>(i)] = std::cos(2 * M_PI * static_cast<double>(i) / 512.0);
      sine[static_cast<size_t>(i)] = std::sin(2 * M_PI * static_cast<double>(i) / 512.0);
    }
    for (int64_t j = 0; j < 320; ++j) window[static_cast<size_t>(j)] = 0.5 - 0.5 * std::cos(2 * M_PI * static_cast<double>(j) / 320.0);
    std::vector<Vec> out;
    for (int64_t fr = 0; fr < frames; ++fr) {
      Vec mag(257);
      for (int64_t k = 0; k < 257; ++k) {
        double re = 0, im = 0;
        for (int64_t j = 0; j < 320; ++j) {
          const double v = padded[static_cast<size_t>(fr * 160 + j)] * window[static_cast<size_t>(j)];
          re += v * cosine[static_cast<size_t>((j * k) % 512)];
          im -= v * sine[static_cast<size_t>((j * k) % 512)];
        }
        mag[static_cast<size_t>(k)] = std::sqrt(re * re + im * im);
      }
      Vec row(static_cast<size_t>(mels));
      for (int64_t m = 0; m < mels; ++m) {
        double acc = 0;
        for (int64_t k = 0; k < 257; ++k) {
          const double f = 8000.0 * static_cast<double>(k) / 256.0;
          const double lo = filt[static_cast<size_t>(m)], mid = filt[static_cast<size_t>(m + 1)], hi = filt[static_cast<size_t>(m + 2)];
          const double weight = std::max(0.0, std::min((f - lo) / (mid - lo), (hi - f) / (hi - mid)));
          acc += weight * mag[static_cast<size_t>(k)];
        }
        row[static_cast<size_t>(m)] = std::log(acc + 1e-3);
      }
      out.push_back(std::move(row));
    }
    return out;
  }

  // Gemma4AudioSubSampleConvProjectionLayer over NCHW [cin][t][f]: conv 3x3 stride 2 padding 1,
  // LayerNorm over channels (no bias), ReLU.
  std::vector<std::vector<Vec>> ConvLayer(const std::vector<std::vector<Vec>>& in, const std::string& base) const {
    const int64_t cin = static_cast<int64_t>(in.size()), t = static_cast<int64_t>(in[0].size());
    const int64_t f = static_cast<int64_t>(in[0][0].size());
    Vec w = p.Floats(base + ".conv.weight"), g = p.Floats(base + ".norm.weight");
    const int64_t cout = static_cast<int64_t>(g.size()), to = (t - 1) / 2 + 1, fo = (f - 1) / 2 + 1;
    std::vector<std::vector<Vec>> out(static_cast<size_t>(cout), std::vector<Vec>(static_cast<size_t>(to), Vec(static_cast<size_t>(fo))));
    for (int64_t y = 0; y < to; ++y) {
      for (int64_t x = 0; x < fo; ++x) {
        Vec col(static_cast<size_t>(cout), 0.0);
        for (int64_t o = 0; o < cout; ++o) {
          double acc = 0;
          for (int64_t ci = 0; ci < cin; ++ci) {
            for (int64_t ky = 0; ky < 3; ++ky) {
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = 2 * y - 1 + ky, ix = 2 * x - 1 + kx;
                if (iy < 0 || iy >= t || ix < 0 || ix >= f) continue;
                acc += w[static_cast<size_t>(((o * cin + ci) * 3 + ky) * 3 + kx)] * in[static_cast<size_t>(ci)][static_cast<size_t>(iy)][static_cast<size_t>(ix)];
              }
            }
          }
          col[static_cast<size_t>(o)] = acc;
        }
        Vec normed = test::LayerNorm(col, g, Vec(g.size(), 0.0), Eps());
        for (int64_t o = 0; o < cout; ++o) out[static_cast<size_t>(o)][static_cast<size_t>(y)][static_cast<size_t>(x)] = std::max(0.0, normed[static_cast<size_t>(o)]);
      }
    }
    return out;
  }

  // Gemma4AudioFeedForward (half step).
  void FeedForward(std::vector<Vec>& x, const std::string& base) const {
    const int64_t h = H();
    for (Vec& row : x) {
      Vec up = Clipped(base + "ffw_layer_1", ClampRms(row, base + "pre_layer_norm.weight", 1e-6), 4 * h, h);
      for (double& v : up) v = Silu(v);
      Vec down = ClampRms(Clipped(base + "ffw_layer_2", up, h, 4 * h), base + "post_layer_norm.weight", 1e-6);
      for (size_t i = 0; i < row.size(); ++i) row[i] += a["residual_weight"].get<double>() * down[i];
    }
  }

  // Gemma4AudioAttention in HF's blocked form: queries in blocks of chunk_size, keys and values in
  // each block's context (max_past before it), relative logits through the padded-reshape shift,
  // the logit cap, then the 5D mask (valid rows, 0 <= q - k < context_left - 1) at -1e9.
  std::vector<Vec> Attention(const std::vector<Vec>& x, const std::string& base) const {
    const int64_t h = H(), heads = a["num_attention_heads"], d = h / heads, T = static_cast<int64_t>(x.size());
    const int64_t chunk = a["attention_chunk_size"], left = a["attention_context_left"];
    const int64_t max_past = left - 1, C = chunk + max_past, R = C / 2 + 1;
    const double cap = a["attention_logit_cap"];
    Vec pds = p.Floats(base + "per_dim_scale");
    std::vector<Vec> q, k, v;
    for (const Vec& row : x) {
      Vec qr = Clipped(base + "q_proj", row, h, h), kr = Clipped(base + "k_proj", row, h, h);
      for (int64_t i = 0; i < h; ++i) {
        qr[static_cast<size_t>(i)] *= std::pow(static_cast<double>(d), -0.5) / std::log(2.0) * std::log(1 + std::exp(pds[static_cast<size_t>(i % d)]));
        kr[static_cast<size_t>(i)] *= std::log(1 + M_E) / std::log(2.0);
      }
      q.push_back(qr);
      k.push_back(kr);
      v.push_back(Clipped(base + "v_proj", row, h, h));
    }
    Vec pos = p.Floats(base + "relative_positions");
    std::vector<Vec> rel;
    product_rows = R;
    for (int64_t r = 0; r < R; ++r) {
      rel.push_back(Lin(base + "relative_k_proj", Vec(pos.begin() + r * h, pos.begin() + (r + 1) * h), h, h));
    }
    product_rows = T;
    std::vector<Vec> out(static_cast<size_t>(T), Vec(static_cast<size_t>(h), 0.0));
    const int64_t blocks = (T + chunk - 1) / chunk;
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t hd = 0; hd < heads; ++hd) {
        auto qd = [&](int64_t i, int64_t dim) {
          const int64_t t = b * chunk + i;
          return t < T ? q[static_cast<size_t>(t)][static_cast<size_t>(hd * d + dim)] : 0.0;
        };
        // matrix_bd before the shift: [chunk][R], padded to C + 1 columns and read as [chunk][C].
        Vec flat(static_cast<size_t>(chunk * (C + 1)), 0.0);
        for (int64_t i = 0; i < chunk; ++i) {
          for (int64_t r = 0; r < R; ++r) {
            double s = 0;
            for (int64_t dim = 0; dim < d; ++dim) s += qd(i, dim) * rel[static_cast<size_t>(r)][static_cast<size_t>(hd * d + dim)];
            flat[static_cast<size_t>(i * (C + 1) + r)] = s;
          }
        }
        for (int64_t i = 0; i < chunk; ++i) {
          const int64_t t = b * chunk + i;
          Vec logits(static_cast<size_t>(C));
          for (int64_t j = 0; j < C; ++j) {
            const int64_t s = b * chunk - max_past + j;
            double ac = 0;
            if (s >= 0 && s < T) {
              for (int64_t dim = 0; dim < d; ++dim) ac += qd(i, dim) * k[static_cast<size_t>(s)][static_cast<size_t>(hd * d + dim)];
            }
            double logit = cap * std::tanh((ac + flat[static_cast<size_t>(i * C + j)]) / cap);
            const bool valid = t < T && s >= 0 && s < T && t - s >= 0 && t - s < left - 1;
            logits[static_cast<size_t>(j)] = valid ? logit : -1e9;
          }
          if (t >= T) continue;
          double mx = -1e300, sum = 0;
          for (double l : logits) mx = std::max(mx, l);
          for (double l : logits) sum += std::exp(l - mx);
          for (int64_t j = 0; j < C; ++j) {
            const int64_t s = b * chunk - max_past + j;
            if (s < 0 || s >= T) continue;
            const double w = std::exp(logits[static_cast<size_t>(j)] - mx) / sum;
            for (int64_t dim = 0; dim < d; ++dim) out[static_cast<size_t>(t)][static_cast<size_t>(hd * d + dim)] += w * v[static_cast<size_t>(s)][static_cast<size_t>(hd * d + dim)];
          }
        }
      }
    }
    for (Vec& row : out) row = Clipped(base + "post", row, h, h);
    return out;
  }

  // Gemma4AudioLightConv1d.
  void LightConv(std::vector<Vec>& x, const std::string& base) const {
    const int64_t h = H(), kernel = a["conv_kernel_size"], T = static_cast<int64_t>(x.size());
    Vec pre = p.Floats(base + "pre_layer_norm.weight"), w = p.Floats(base + "depthwise_conv1d.weight");
    std::vector<Vec> u;
    for (const Vec& row : x) {
      Vec g = Clipped(base + "linear_start", Rms(row, &pre, Eps()), 2 * h, h);
      Vec glu(static_cast<size_t>(h));
      for (int64_t c = 0; c < h; ++c) glu[static_cast<size_t>(c)] = g[static_cast<size_t>(c)] / (1 + std::exp(-g[static_cast<size_t>(h + c)]));
      u.push_back(glu);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec conv(static_cast<size_t>(h), 0.0);
      for (int64_t c = 0; c < h; ++c) {
        for (int64_t j = 0; j < kernel; ++j) {
          const int64_t s = t + j - (kernel - 1);  // left padding kernel - 1
          if (s >= 0) conv[static_cast<size_t>(c)] += w[static_cast<size_t>(c * kernel + j)] * u[static_cast<size_t>(s)][static_cast<size_t>(c)];
        }
      }
      Vec y = ClampRms(conv, base + "conv_norm.weight", Eps());
      for (double& v : y) v = Silu(v);
      Vec o = Clipped(base + "linear_end", y, h, h);
      for (int64_t c = 0; c < h; ++c) x[static_cast<size_t>(t)][static_cast<size_t>(c)] += o[static_cast<size_t>(c)];
    }
  }

  std::vector<Vec> Run(const NDArray& clip) const {
    const int64_t h = H(), c0 = a["subsampling_conv_channels"][0], c1 = a["subsampling_conv_channels"][1];
    std::vector<Vec> mel = LogMel(clip.data<float>(), clip.shape()[0]);
    std::vector<std::vector<Vec>> img{mel};
    const std::string sub = "audio_tower.subsample_conv_projection.";
    img = ConvLayer(ConvLayer(img, sub + "layer0"), sub + "layer1");
    const int64_t T = static_cast<int64_t>(img[0].size()), F = static_cast<int64_t>(img[0][0].size());
    product_rows = T;
    std::vector<Vec> x;
    for (int64_t t = 0; t < T; ++t) {
      Vec flat;  // permute(0, 2, 3, 1): frequency-major, channels inner
      for (int64_t f = 0; f < F; ++f) {
        for (int64_t c = 0; c < c1; ++c) flat.push_back(img[static_cast<size_t>(c)][static_cast<size_t>(t)][static_cast<size_t>(f)]);
      }
      x.push_back(Lin(sub + "input_proj_linear", flat, h, (c0 / 4) * c1));
    }
    for (int64_t l = 0; l < a["num_hidden_layers"].get<int64_t>(); ++l) {
      const std::string pre = "audio_tower.layers." + std::to_string(l) + ".";
      FeedForward(x, pre + "feed_forward1.");
      std::vector<Vec> normed;
      for (const Vec& row : x) normed.push_back(ClampRms(row, pre + "norm_pre_attn.weight", 1e-6));
      std::vector<Vec> att = Attention(normed, pre + "self_attn.");
      for (int64_t t = 0; t < T; ++t) {
        Vec o = ClampRms(att[static_cast<size_t>(t)], pre + "norm_post_attn.weight", 1e-6);
        for (int64_t i = 0; i < h; ++i) x[static_cast<size_t>(t)][static_cast<size_t>(i)] += o[static_cast<size_t>(i)];
      }
      LightConv(x, pre + "lconv1d.");
      FeedForward(x, pre + "feed_forward2.");
      for (Vec& row : x) row = ClampRms(row, pre + "norm_out.weight", 1e-6);
    }
    const int64_t out = a["output_proj_dims"];
    std::vector<Vec> rows;
    Vec bias = p.Floats("audio_tower.output_proj.bias");
    for (const Vec& row : x) {
      Vec o = Lin("audio_tower.output_proj", row, out, h);
      for (int64_t i = 0; i < out; ++i) o[static_cast<size_t>(i)] += bias[static_cast<size_t>(i)];
      rows.push_back(Lin("embed_audio.embedding_projection", Rms(o, nullptr, Eps()), text_hidden, out));
    }
    return rows;
  }
};

using TinyTower = test::TowerCase;

TinyTower MakeTiny(cpu::Quant quant, const std::string& quant_name, float clip) {
  return test::MakeTowerCase(cpu::ReadGemma4AudioTower, TopConfig(cpu::Gemma4AudioConfigJson(true)),
                             TextConfig(quant, quant_name),
                             [clip](const cpu::Tower& tower, const std::vector<ParamSpec>& specs) {
                               return MakeParams(tower, specs, 11, clip);
                             });
}

std::unique_ptr<cpu::BoundTower> BindTiny(const TinyTower& t) {
  auto bound = test::BindTower(t, t.specs, t.params);
  EXPECT_TRUE(bound) << bound.error().ToString();
  return bound ? std::move(*bound) : nullptr;
}

void CompareWithReference(cpu::Quant quant, const std::string& name, float clip) {
  TinyTower t = MakeTiny(quant, name, clip);
  ASSERT_TRUE(t.tower);
  auto bound = BindTiny(t);
  ASSERT_TRUE(bound);
  Params64 p64(t.params);
  Reference ref{t.mc["audio_config"], p64, t.c.quantized(), kTextHidden};
  // 161 samples (one frame, one row); 100 ms (a single partial chunk); 1.3 s (several chunks, the
  // last partial); 2 s.
  for (int64_t n : {int64_t{161}, int64_t{1600}, int64_t{20800}, int64_t{32000}}) {
    NDArray clip_samples = Clip(n);
    auto rows = bound->Embed(clip_samples, "audio_embed");
    ASSERT_TRUE(rows) << rows.error().ToString();
    const int64_t expect_rows = Gemma4AudioConfig::Rows(n);
    ASSERT_EQ(rows->shape(), (std::vector<int64_t>{expect_rows, kTextHidden})) << n;
    std::vector<Vec> want = ref.Run(clip_samples);
    ASSERT_EQ(static_cast<int64_t>(want.size()), expect_rows) << n;
    std::vector<float> got(rows->data<float>(), rows->data<float>() + rows->Elements());
    Vec flat;
    for (const Vec& r : want) flat.insert(flat.end(), r.begin(), r.end());
    const double err = test::RelError(got, flat);
    std::printf("%s n=%lld rows=%lld relative error %.2e\n", name.c_str(), static_cast<long long>(n), static_cast<long long>(expect_rows), err);
    // Where the kernels take the frames' 4-bit products as bfloat16 (the AMX path), the reference
    // rounds the same operands, but the float convolutions before them run as split bfloat16 there
    // (cpu::SplitBf16MinTokens: within 2^-15, not float32's rounding), so an activation the two
    // put on either side of a rounding boundary moves by a whole bfloat16 step (2^-8 relative) in
    // one of them, and the layers after it spread that: the bound is then 1e-2 (measured: 6e-3),
    // as for SigLIP's patches, still far below a wrong product.
    const bool bf16 = test::RoundingFor(t.c.quantized(), expect_rows) == test::Q4Rounding::kBf16;
    EXPECT_LT(err, bf16 ? 1e-2 : 1e-3) << name << " n=" << n;
  }
}

// A package written by `reference-model --family gemma4 --audio` (the writer's stored tables, its
// bfloat16-stored float32 records, the family's binding): audio_embed through the CPU library
// agrees with the float64 model over the package's own parameters.
TEST(CpuGemma4Audio, PackageAdapterMatchesFloat64Reference) {
 for (const char* quant : {"q0f32", "q4f16_1"}) {
  test::TempDir dir;
  FamilyModelOptions o;
  o.family = "gemma4";
  o.quantization = quant;
  o.audio = true;
  o.seed = 8;
  const std::string pkg = dir.File("g4");
  auto w = WriteFamilyModel(pkg, o);
  ASSERT_TRUE(w) << FormatErrors(w.errors());
  auto lib = OpenCpuLibrary(pkg);
  ASSERT_TRUE(lib) << lib.error().ToString();
  auto params = LoadParameters(pkg, (*lib)->Metadata().params);
  ASSERT_TRUE(params) << params.error().ToString();
  const Json mc = Json::parse(test::ReadText(JoinPath(pkg, kChatConfigFileName)))["model_config"];
  const int64_t text_hidden = mc["text_config"]["hidden_size"];
  NDArray clip = Clip(20800);
  // At full scale: quiet mel bins sit near the log floor, where float32 and float64 part further.
  for (int64_t i = 0; i < clip.Elements(); ++i) clip.data<float>()[i] *= 1.8f;
  std::vector<Value> args = {clip, ObjectRef(*params)};
  auto out = (*(*lib)->GetFunction("audio_embed"))(args);
  ASSERT_TRUE(out) << out.error().ToString();
  const NDArray& rows = std::get<NDArray>(out->front());
  ASSERT_EQ(rows.shape(), (std::vector<int64_t>{Gemma4AudioConfig::Rows(20800), text_hidden}));
  Params64 p64(**params);
  Reference ref{mc["audio_config"], p64, std::string(quant) == "q4f16_1", text_hidden};
  Vec flat;
  for (const Vec& r : ref.Run(clip)) flat.insert(flat.end(), r.begin(), r.end());
  std::vector<float> got(rows.data<float>(), rows.data<float>() + rows.Elements());
  // 4-bit: the int8 activation steps of 14 products a layer (see cpu_gemma4_test's LogitTolerance).
  EXPECT_LT(test::RelError(got, flat), std::string(quant) == "q0f32" ? 1e-3 : 3e-2) << quant;
 }
}

TEST(CpuGemma4Audio, RowCountsFollowTheIssue) {
  EXPECT_EQ(Gemma4AudioConfig::Frames(161), 1);
  EXPECT_EQ(Gemma4AudioConfig::Rows(161), 1);
  EXPECT_EQ(Gemma4AudioConfig::Frames(480000), 2999);
  EXPECT_EQ(Gemma4AudioConfig::Rows(480000), 750);
  EXPECT_EQ(Gemma4AudioConfig::Rows(320), 1);
  EXPECT_EQ(Gemma4AudioConfig::Rows(16000 * 2), 50);
}

TEST(CpuGemma4Audio, MatchesFloat64ReferenceQ4) { CompareWithReference(cpu::Quant::kQ4F16, "q4f16_1", 1.5f); }

TEST(CpuGemma4Audio, MatchesFloat64ReferenceFloat32NoClipping) {
  CompareWithReference(cpu::Quant::kQ0F32, "q0f32", 0.0f);
}

TEST(CpuGemma4Audio, DeclaresTheManifestInputAndParameterOrder) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1", 0);
  ASSERT_TRUE(t.tower);
  EXPECT_EQ(t.tower->adapter(), "audio");
  EXPECT_EQ(t.tower->function(), "audio_embed");
  TaskInput in = t.tower->Input();
  const AudioDecode* audio = std::get_if<AudioDecode>(&in.processor);
  ASSERT_TRUE(audio);
  EXPECT_EQ(*audio, (AudioDecode{16000, 1, 161, 480000}));
  EXPECT_EQ(in.adapter, std::optional<std::string>("audio"));
  EXPECT_EQ(in.prompt, std::optional<PromptInsertion>(PromptInsertion{{498}, 500, {499}}));
  ASSERT_FALSE(t.specs.empty());
  EXPECT_EQ(t.specs.front().name, "audio_preprocessor.dft_matrix");
  EXPECT_EQ(t.specs.front().dtype, "float32");
  EXPECT_EQ(t.specs[1].name, "audio_preprocessor.mel_filters");
  EXPECT_EQ(test::SpecShape(t.specs[1]), (std::vector<int64_t>{257, 16}));
  EXPECT_EQ(t.specs.back().name, "embed_audio.embedding_projection.q_scale");
  for (const ParamSpec& s : t.specs) {
    if (EndsWith(s.name, "input_min")) {
      EXPECT_TRUE(s.shape.empty() && s.dtype == "float16") << s.name;
    }
  }
}

// At Gemma 4 E2B's shape the list is the real package's audio part, entry for entry (names,
// shapes, dtypes, order: from audio_preprocessor.dft_matrix to the end of the reference list).
TEST(CpuGemma4Audio, ParameterListIsTheRealPackages) {
  const std::string dir = std::string(MLC_SHARED_DIR) + "/reference/gemma-4-E2B-it/";
  Json mc = Json::parse(test::ReadText(dir + "model_config.json"));
  cpu::ModelConfig c = TextConfig(cpu::Quant::kQ4F16, "q4f16_1", mc["text_config"]["hidden_size"].get<int64_t>());
  c.vocab_size = mc["text_config"]["vocab_size"].get<int64_t>();
  Built b = Read(mc, c);
  ASSERT_TRUE(b.tower) << ErrorsJson(b.errors).dump();
  std::vector<ParamSpec> ours = test::TowerSpecs(*b.tower, c);
  auto all = ParseParamSpecs(Json::parse(test::ReadText(dir + "params-q4f16_1.json")));
  ASSERT_TRUE(all) << all.error().ToString();
  auto first = std::find_if(all->begin(), all->end(), [](const ParamSpec& p) { return p.name == "audio_preprocessor.dft_matrix"; });
  ASSERT_NE(first, all->end());
  ASSERT_EQ(static_cast<size_t>(all->end() - first), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    const ParamSpec& want = *(first + static_cast<std::ptrdiff_t>(i));
    EXPECT_EQ(ours[i].name, want.name) << i;
    EXPECT_EQ(ours[i].shape, want.shape) << want.name;
    EXPECT_EQ(ours[i].dtype, want.dtype) << want.name;
    if (ours[i].name != want.name) break;
  }
  TaskInput in = b.tower->Input();
  EXPECT_EQ(in.prompt, std::optional<PromptInsertion>(PromptInsertion{{256000}, 258881, {258883}}));
  EXPECT_EQ(std::get<AudioDecode>(in.processor), (AudioDecode{16000, 1, 161, 480000}));
}

// The stored tables are the converter's: the DFT of a Hann-windowed frame, real parts then
// imaginary ones; the sinusoid table [sin | cos] with position 0 in the last row.
TEST(CpuGemma4Audio, StoredTablesAreTheFeatureExtractors) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1", 0);
  ASSERT_TRUE(t.tower);
  auto dft = t.tower->StoredValues("audio_preprocessor.dft_matrix");
  ASSERT_TRUE(dft && dft->size() == 320u * 514u);
  const int64_t j = 37, k = 11;
  const double w = 0.5 - 0.5 * std::cos(2 * M_PI * j / 320.0);
  EXPECT_NEAR((*dft)[j * 514 + k], w * std::cos(2 * M_PI * j * k / 512.0), 1e-6);
  EXPECT_NEAR(std::fabs((*dft)[j * 514 + 257 + k]), std::fabs(w * std::sin(2 * M_PI * j * k / 512.0)), 1e-6);
  auto rel = t.tower->StoredValues("audio_tower.layers.1.self_attn.relative_positions");
  ASSERT_TRUE(rel && rel->size() == 13u * 64u);
  EXPECT_EQ((*rel)[12 * 64 + 0], 0.0f);  // sin(0)
  EXPECT_EQ((*rel)[12 * 64 + 32], 1.0f);  // cos(0)
  EXPECT_NEAR((*rel)[0], std::sin(12.0), 1e-6);
  auto bound = t.tower->StoredValues("audio_tower.layers.0.self_attn.q_proj.output_max");
  ASSERT_TRUE(bound && bound->size() == 1u);
  EXPECT_GT((*bound)[0], 1.0f);
  EXPECT_FALSE(t.tower->StoredValues("audio_tower.layers.0.self_attn.per_dim_scale"));
}

TEST(CpuGemma4Audio, RefusesBadClipsBeforeAnyRow) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1", 0);
  ASSERT_TRUE(t.tower);
  auto bound = BindTiny(t);
  ASSERT_TRUE(bound);
  for (int64_t n : {int64_t{160}, int64_t{480001}}) {
    auto rows = bound->Embed(NDArray::Empty({n}, DlFloat32()), "audio_embed");
    ASSERT_FALSE(rows) << n;
    EXPECT_NE(rows.error().message.find("161..480000"), std::string::npos) << rows.error().message;
    EXPECT_NE(rows.error().message.find("audio_embed"), std::string::npos);
  }
  for (const NDArray& bad : {NDArray::Empty({1000}, DlInt32()), NDArray::Empty({1, 1000}, DlFloat32()), NDArray()}) {
    auto rows = bound->Embed(bad, "audio_embed");
    ASSERT_FALSE(rows);
    EXPECT_NE(rows.error().message.find("float32 [n]"), std::string::npos) << rows.error().message;
  }
}

// An interrupted call (base/interrupt.h) stops between conformer layers, naming the function.
TEST(CpuGemma4Audio, InterruptedEmbedStopsBetweenLayers) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1", 0);
  ASSERT_TRUE(t.tower);
  auto bound = BindTiny(t);
  ASSERT_TRUE(bound);
  NDArray clip = NDArray::Empty({4000}, DlFloat32());
  for (int64_t i = 0; i < 4000; ++i) clip.data<float>()[i] = 0.1f * static_cast<float>(i % 17) / 17.0f;
  std::atomic<bool> flag{true};
  const InterruptScope scope(&flag);
  auto rows = bound->Embed(clip, "audio_embed");
  ASSERT_FALSE(rows);
  EXPECT_NE(rows.error().message.find("audio_embed: interrupted"), std::string::npos) << rows.error().message;
  flag = false;
  EXPECT_TRUE(bound->Embed(clip, "audio_embed"));
}

TEST(CpuGemma4Audio, RefusesAMissingDftMatrix) {
  TinyTower t = MakeTiny(cpu::Quant::kQ4F16, "q4f16_1", 0);
  ASSERT_TRUE(t.tower);
  std::vector<ParamSpec> specs(t.specs.begin() + 1, t.specs.end());
  ParameterSet params;
  params.names.assign(t.params.names.begin() + 1, t.params.names.end());
  params.tensors.assign(t.params.tensors.begin() + 1, t.params.tensors.end());
  auto index = cpu::ParamIndex::Make(specs, params);
  ASSERT_TRUE(index);
  auto bound = t.tower->Bind(t.c, *index);
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.error().message.find("audio_preprocessor.dft_matrix"), std::string::npos) << bound.error().message;
  // The same name with the wrong dtype.
  specs = t.specs;
  params = t.params;
  specs[0].dtype = "float16";
  params.tensors[0] = NDArray::Empty({320, 514}, *ParseDlDtype("float16"));
  index = cpu::ParamIndex::Make(specs, params);
  ASSERT_TRUE(index);
  bound = t.tower->Bind(t.c, *index);
  ASSERT_FALSE(bound);
  EXPECT_NE(bound.error().message.find("expected \"audio_preprocessor.dft_matrix\" [320, 514] float32"), std::string::npos)
      << bound.error().message;
}

TEST(CpuGemma4Audio, ConfigErrorsNameTheirField) {
  auto error_at = [](Json mc, const cpu::ModelConfig& c) {
    Built b = Read(mc, c);
    EXPECT_FALSE(b.tower);
    return b.errors.empty() ? std::string() : b.errors.front().path;
  };
  const cpu::ModelConfig q4 = TextConfig(cpu::Quant::kQ4F16, "q4f16_1");
  Json mc = TopConfig(cpu::Gemma4AudioConfigJson(true));
  Json bad = mc;
  bad["audio_config"]["attention_context_right"] = 2;
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/attention_context_right");
  bad = mc;
  bad["audio_config"]["sampling_rate"] = 24000;
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/sampling_rate");
  bad = mc;
  bad["audio_config"]["subsampling_conv_channels"] = Json{8, 4};
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/subsampling_conv_channels");
  bad = mc;
  bad["audio_config"]["num_attention_heads"] = 3;
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/num_attention_heads");
  bad = mc;
  bad["audio_config"]["output_proj_dims"] = 48;  // embed_audio's input is quantized
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/output_proj_dims");
  bad = mc;
  bad.erase("audio_config");
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config");
  bad = mc;
  bad["audio_token_id"] = 512;  // past the vocabulary
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_token_id");
  bad = mc;
  bad["audio_config"]["hidden_act"] = "gelu";
  EXPECT_EQ(error_at(bad, q4), "/model_config/audio_config/hidden_act");
  // Float weights take any output width.
  bad = mc;
  bad["audio_config"]["output_proj_dims"] = 48;
  EXPECT_TRUE(Read(bad, TextConfig(cpu::Quant::kQ0F16, "q0f16")).tower);
}

// 30 s at Gemma 4 E2B's shape with random 4-bit weights: the time of one audio_embed.
// Run with --gtest_also_run_disabled_tests.
TEST(CpuGemma4Audio, DISABLED_RealShapeSpeed) {
  Json mc = TopConfig(cpu::Gemma4AudioConfigJson(false));
  mc["audio_token_id"] = 258881;
  mc["boa_token_id"] = 256000;
  mc["eoa_token_index"] = 258883;
  cpu::ModelConfig c = TextConfig(cpu::Quant::kQ4F16, "q4f16_1", 1536);
  c.vocab_size = 262144;
  Built b = Read(mc, c);
  ASSERT_TRUE(b.tower) << ErrorsJson(b.errors).dump();
  std::vector<ParamSpec> specs = test::TowerSpecs(*b.tower, c);
  ParameterSet params = MakeParams(*b.tower, specs, 5, 0);
  auto index = cpu::ParamIndex::Make(specs, params);
  ASSERT_TRUE(index);
  auto bound = b.tower->Bind(c, *index);
  ASSERT_TRUE(bound);
  NDArray clip_samples = Clip(480000);
  for (int run = 0; run < 2; ++run) {
    auto start = std::chrono::steady_clock::now();
    const std::clock_t cpu_start = std::clock();
    auto rows = (*bound)->Embed(clip_samples, "audio_embed");
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double cpu = static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC;
    ASSERT_TRUE(rows);
    EXPECT_EQ(rows->shape(), (std::vector<int64_t>{750, 1536}));
    for (int64_t i = 0; i < rows->Elements(); ++i) ASSERT_TRUE(std::isfinite(rows->data<float>()[i]));
    std::printf("audio_embed 30 s (750 rows, 12 layers), %d threads, %s: %.3f s (%.3f s of CPU)\n", cpu::ThreadCount(),
                cpu::KernelIsa(), s, cpu);
  }
}

}  // namespace
}  // namespace mlc
