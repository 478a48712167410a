// Internals of the reference runtime shared by its model code, its library and its generator:
// the configuration (stored as model_config), the parameter list and the forward passes.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"

namespace mlc::reference {

struct Config {
  int64_t vocab_size = 512;
  int64_t hidden_size = 64;
  int64_t num_layers = 2;
  int64_t num_heads = 4;
  int64_t intermediate_size = 128;
  int64_t audio_frame_size = 0;  // 0: no audio adapter
  int64_t image_size = 0;        // 0: no image adapter
  int64_t patch_size = 8;
  // "prefill": prefill_tokens adds the modality embedding of each position (token pair only);
  // "inputs": embed_tokens and the adapters add it, so both pairs give the same result.
  std::string modality_embedding = "prefill";
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;

  int64_t head_dim() const { return hidden_size / num_heads; }
  int64_t num_patches() const {
    return image_size ? (image_size / patch_size) * (image_size / patch_size) : 0;
  }
  bool modality_in_inputs() const { return modality_embedding == "inputs"; }
};

Json ConfigJson(const Config& c);
// From model_config; every dimension checked (errors at /model_config/...).
Result<Config> ParseConfig(const Json& model_config);

// Parameters in the order the library passes them.
std::vector<ParamSpec> ParamSpecs(const Config& c);

// The reference KV cache: per layer, keys and values of every position held.
class KvCache : public KvState {
 public:
  KvCache(const Config& c, int64_t capacity);
  std::string TypeName() const override { return "reference.KvCache"; }
  int64_t TotalLength() const override { return length_; }
  int64_t capacity() const { return capacity_; }

  int64_t length_ = 0;
  int64_t capacity_ = 0;
  std::vector<std::vector<float>> keys;    // [layer][position * hidden]
  std::vector<std::vector<float>> values;
};

// Parameter tensors by name (float32, shapes already checked by the loader).
class Weights {
 public:
  static Result<Weights> From(const Config& c, const ParameterSet& params);
  const float* operator[](const std::string& name) const { return by_name_.at(name); }

 private:
  std::map<std::string, const float*> by_name_;
};

// Forward passes over rows of `hidden_size` floats.
// Rows of input embeddings -> last row's logits; appends to the cache.
Result<std::vector<float>> Forward(const Config& c, const Weights& w, KvCache& kv,
                                   std::vector<float> x, int64_t n);
void EmbedTokens(const Config& c, const Weights& w, std::span<const int32_t> ids, float* out);
void AddModality(const Config& c, const Weights& w, int32_t modality, float* row);
// PCM [n] -> [ceil(n / frame), hidden].
std::vector<float> AudioAdapter(const Config& c, const Weights& w, std::span<const float> pcm,
                                int64_t* rows);
// Pixels [1, S, S, 3] (values 0..255) -> [num_patches, hidden].
std::vector<float> ImageAdapter(const Config& c, const Weights& w, std::span<const uint32_t> pixels);

// The reference tokenizer.json (byte-level BPE) for a vocabulary of vocab_size ids; none when
// the vocabulary cannot hold the special tokens and the 256 byte symbols.
std::optional<std::string> TokenizerJson(int64_t vocab_size);

}  // namespace mlc::reference
