// The model families of the CPU program: their configuration (read from mlc-chat-config.json and
// checked), the converter's parameter names and fused layouts, and the parameter list in the
// order of the model's modules. Shared by the program, its library and the package writer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/package.h"

namespace mlc::cpu {

enum class Family { kLlama, kQwen2, kGemma, kGemma2, kPhi3 };
enum class Quant { kQ0F32, kQ0F16, kQ4F16, kQ4F32 };

enum class RopeScaling { kNone, kLlama3, kLongRope };

struct ModelConfig {
  Family family = Family::kLlama;
  Quant quant = Quant::kQ4F16;
  std::string model_type;
  std::string quantization;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;

  // Rotary positions (rotate-half, MLC's RopeMode.NORMAL) over the first rotary_dim dims.
  double rope_theta = 10000.0;
  int64_t rotary_dim = 0;
  RopeScaling rope_scaling = RopeScaling::kNone;
  double rope_factor = 1.0;           // llama3
  double low_freq_factor = 1.0;       // llama3
  double high_freq_factor = 4.0;      // llama3
  int64_t original_max_position = 0;  // llama3, longrope
  int64_t max_position = 0;           // longrope
  std::vector<double> long_factor, short_factor;  // longrope, rotary_dim / 2 each

  // Gemma 2.
  double attn_logit_softcap = 0;   // 0: none
  double final_logit_softcap = 0;  // 0: none
  double query_pre_attn_scalar = 0;  // 0: head_dim
  int64_t layer_sliding_window = 0;  // sliding window of the even layers (0: none)

  // Top level of mlc-chat-config.json.
  int64_t context_window_size = 0;
  int64_t prefill_chunk_size = 0;
  int64_t sliding_window_size = -1;
  int64_t attention_sink_size = -1;

  bool quantized() const { return quant == Quant::kQ4F16 || quant == Quant::kQ4F32; }
  // dtype of norms, biases and unquantised matrices: "float16" or "float32".
  std::string float_dtype() const {
    return quant == Quant::kQ0F16 || quant == Quant::kQ4F16 ? "float16" : "float32";
  }
  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
  bool gemma() const { return family == Family::kGemma || family == Family::kGemma2; }
  // Whether layer l attends over a sliding window of layer_sliding_window positions (Gemma 2:
  // the even layers).
  bool LayerSlides(int64_t l) const { return layer_sliding_window > 0 && l % 2 == 0; }
  // The rotation frequency of pair j (j < rotary_dim / 2), scaling applied.
  double InvFrequency(int64_t j) const;
  // The factor cos and sin are multiplied by (longrope's attention factor, else 1).
  double RopeMagnitude() const;
};

// From mlc-chat-config.json; every dimension checked (errors at /model_config/... of the file).
Result<ModelConfig> ParseModelConfig(const ChatConfig& chat);

// The converter's names of one layer's parts and of the model's.
struct Names {
  std::string embed;       // "model.embed_tokens" / "transformer.embd"
  std::string final_norm;  // "model.norm" / "transformer.norm"
  std::string lm_head;     // "lm_head"
  std::string Layer(int64_t l) const;  // "model.layers.L." / "transformer.h.L."
  std::string qkv, o, gate_up, down;    // relative to Layer(l)
  std::string norm_attn, norm_post_attn, norm_pre_ff, norm_post_ff;  // pre_ff/post_ff: gemma2
  std::string layer_root;
};
Names NamesOf(Family family);

// A matrix parameter [out, in] as the converter stores it: "<base>.weight", or "<base>.q_weight"
// [out, in / 8] uint32 with "<base>.q_scale" [out, in / 32].
struct MatrixSpec {
  std::string base;
  int64_t out = 0;
  int64_t in = 0;
};

// The parameter list in module order.
std::vector<ParamSpec> ParamSpecs(const ModelConfig& c);

// Every matrix of the model (embedding and lm_head included), in module order.
std::vector<MatrixSpec> Matrices(const ModelConfig& c);

// The tasks of a CPU package: chat.completions, text in, over the "generation" program.
Tasks TextTasks();

}  // namespace mlc::cpu
