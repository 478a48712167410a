// Gemma 4's audio adapter (the "audio" input, function audio_embed) as MLC's converter lays it out
// and as Hugging Face's Gemma4AudioModel + Gemma4MultimodalEmbedder compute it: mono 16 kHz
// samples -> log-mel frames from the package's own audio_preprocessor tensors (dft_matrix,
// mel_filters) -> two stride-2 3x3 convolutions (LayerNorm over channels, ReLU) and input_proj_linear
// -> the conformer layers (half-step feed-forwards, chunked local attention with relative
// position keys and a logit cap, a light depthwise convolution; clipped linears) -> output_proj
// -> embed_audio (RMSNorm without scale, projection to the decoder's width).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "mlc_manifest/json.h"
#include "runtime/cpu/towers/tower.h"

namespace mlc::cpu {

struct Gemma4AudioConfig {
  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t conv_channels0 = 0;  // subsampling_conv_channels[0]
  int64_t conv_channels1 = 0;  // subsampling_conv_channels[1]
  int64_t conv_kernel_size = 0;  // the light convolution's (causal, depthwise)
  double residual_weight = 0.5;  // the half-step feed-forwards' scale
  int64_t chunk_size = 0;
  int64_t context_left = 0;
  double logit_cap = 0;
  bool clipped_linears = true;
  double rms_norm_eps = 1e-6;
  double gradient_clipping = 1e10;
  int64_t output_proj_dims = 0;
  int64_t feature_size = 0;  // mel bins
  int64_t max_samples = 0;
  int64_t text_hidden_size = 0;  // embed_audio's output (the decoder's hidden size)
  int64_t boa_token_id = 0;      // prompt prefix
  int64_t audio_token_id = 0;    // placeholder
  int64_t eoa_token_id = 0;      // prompt suffix

  // The feature extractor at 16 kHz: 20 ms frames every 10 ms, a 512-point real DFT.
  static constexpr int64_t kSampleRate = 16000;
  static constexpr int64_t kFrameLength = 320;
  static constexpr int64_t kHop = 160;
  static constexpr int64_t kFftBins = 257;  // 512 / 2 + 1
  static constexpr int64_t kMinSamples = kFrameLength / 2 + 1;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t subsampled_features() const { return (feature_size + 3) / 4; }  // two stride-2 convs
  int64_t proj_in() const { return subsampled_features() * conv_channels1; }
  // Rows of the stored relative position table (Hugging Face's context_size // 2 + 1).
  int64_t relative_rows() const { return (chunk_size + context_left - 1) / 2 + 1; }
  // Keys a row attends to: itself and the context_left - 2 before it (HF's mask keeps
  // 0 <= query - key < context_left - 1).
  int64_t window() const { return context_left - 1; }
  static int64_t Frames(int64_t samples) { return (samples - kMinSamples) / kHop + 1; }
  static int64_t Rows(int64_t samples) { return ((Frames(samples) + 1) / 2 + 1) / 2; }
};

// Reads model_config.audio_config (errors at /model_config/audio_config/...) and the prompt ids
// (boa_token_id, audio_token_id, eoa_token_index) from model_config itself; embed_audio's width is
// the decoder's hidden size. nullptr after recording errors.
std::shared_ptr<const Tower> ReadGemma4AudioTower(ConfigReader& top, const ModelConfig& c);

// The audio_config of random-weight packages: tiny (hidden 64, 2 layers, 16 mel bins) or
// Gemma 4 E2B's.
Json Gemma4AudioConfigJson(bool tiny);

}  // namespace mlc::cpu
