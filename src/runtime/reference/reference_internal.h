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

// The reference KV cache: pages of page_size positions per layer, keys and values of each
// sequence in the pages its page table lists (the paged KV cache's sequence interface).
class KvCache : public PagedKvState {
 public:
  // capacity positions in total, in pages of page_size; at most max_sequences sequences.
  KvCache(const Config& c, int64_t capacity, int64_t page_size, int64_t max_sequences);
  std::string TypeName() const override { return "reference.KvCache"; }
  int64_t TotalLength() const override;
  Status AddSequence(int64_t seq_id) override;
  Status RemoveSequence(int64_t seq_id) override;
  Status ForkSequence(int64_t parent_id, int64_t child_id) override;
  Status BeginForward(std::span<const int64_t> seq_ids,
                      std::span<const int64_t> append_lengths) override;
  void EndForward() override { forward_.clear(); }
  Result<int64_t> SequenceLength(int64_t seq_id) const override;
  int64_t PageSize() const override { return page_size_; }
  int64_t FreePages() const override { return static_cast<int64_t>(free_.size()); }
  int64_t TotalPages() const override { return num_pages_; }

  // One sequence's part of a forward pass: `length` new positions after `start` held ones.
  struct Segment {
    int64_t seq_id = 0;
    int64_t start = 0;
    int64_t length = 0;
  };
  // The segments of a call with n positions: those BeginForward named (their lengths must sum to
  // n), else the only sequence with n positions. Pages for the new positions are taken here.
  Result<std::vector<Segment>> Prepare(const std::string& function, int64_t n);
  // Marks a segment's positions as held once its layers have run.
  void Commit(const Segment& s) { seqs_[s.seq_id].length = s.start + s.length; }
  float* Key(int64_t layer, int64_t seq_id, int64_t pos) { return Row(keys_, layer, seq_id, pos); }
  float* Value(int64_t layer, int64_t seq_id, int64_t pos) { return Row(values_, layer, seq_id, pos); }

 private:
  struct Sequence {
    int64_t length = 0;
    std::vector<int64_t> pages;
  };
  float* Row(std::vector<std::vector<float>>& store, int64_t layer, int64_t seq_id, int64_t pos);
  int64_t PagesFor(int64_t positions) const { return (positions + page_size_ - 1) / page_size_; }

  int64_t hidden_ = 0;
  int64_t page_size_ = 16;
  int64_t num_pages_ = 0;
  int64_t max_sequences_ = 1;
  std::vector<std::vector<float>> keys_;    // [layer][page * page_size * hidden]
  std::vector<std::vector<float>> values_;
  std::vector<int64_t> free_;               // free page ids
  std::map<int64_t, Sequence> seqs_;
  std::vector<std::pair<int64_t, int64_t>> forward_;  // (seq_id, length) since BeginForward
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
// Rows of input embeddings -> the last row's logits of each sequence of the call (KvCache::Prepare),
// one after another; appends to the cache.
Result<std::vector<float>> Forward(const Config& c, const Weights& w, KvCache& kv,
                                   std::vector<float> x, int64_t n, const std::string& function);
void EmbedTokens(const Config& c, const Weights& w, std::span<const int32_t> ids, float* out);
void AddModality(const Config& c, const Weights& w, int32_t modality, float* row);
// PCM [n] -> [ceil(n / frame), hidden].
std::vector<float> AudioAdapter(const Config& c, const Weights& w, std::span<const float> pcm,
                                int64_t* rows);
// Pixels [1, S, S, 3] (values 0..255) -> [num_patches, hidden].
std::vector<float> ImageAdapter(const Config& c, const Weights& w, std::span<const uint32_t> pixels);

}  // namespace mlc::reference
