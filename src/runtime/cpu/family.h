// The model families of the CPU program as data: a FamilySpec per family (its model_type, its
// configuration hook, the converter's names and parameter order, the pair it exports, the defaults
// its random-weight packages use), one table of them (families.cc), and the configuration every
// decoder runs from (ModelConfig, with a per-layer plan: head sizes, attention window, rotary
// positions and where the layer's keys and values live). Adding a family is one file in decoders/
// and one row in the table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/package.h"
#include "runtime/cpu/kv_cache.h"

namespace mlc::cpu {

class ConfigReader;
class Tower;
struct FamilySpec;

enum class Quant { kQ0F32, kQ0F16, kQ4F16, kQ4F32 };

enum class RopeScaling { kNone, kLinear, kLlama3, kLongRope, kProportional };

// Rotary positions (rotate-half, MLC's RopeMode.NORMAL) over the first rotary_dim dims of a head.
struct Rope {
  double theta = 10000.0;
  int64_t rotary_dim = 0;
  RopeScaling scaling = RopeScaling::kNone;
  double factor = 1.0;                // linear (positions divided by it), llama3
  double low_freq_factor = 1.0;       // llama3
  double high_freq_factor = 4.0;      // llama3
  int64_t original_max_position = 0;  // llama3, longrope
  int64_t max_position = 0;           // longrope
  std::vector<double> long_factor, short_factor;  // longrope, rotary_dim / 2 each
  // proportional (Gemma 4's full layers): only the first rotated_pairs pairs turn, at
  // theta^(-2j / rotary_dim); the others keep frequency 0.
  int64_t rotated_pairs = 0;

  // The rotation frequency of pair j (j < rotary_dim / 2), scaling applied; longrope takes the
  // long factors when the context window is past the original one.
  double InvFrequency(int64_t j, int64_t context_window_size) const;
  // The factor cos and sin are multiplied by (longrope's attention factor, else 1).
  double Magnitude() const;
};

enum class Activation { kSilu, kGeluTanh };

// One decoder layer's attention and MLP sizes.
struct LayerPlan {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t intermediate_size = 0;
  int64_t sliding_window = 0;  // > 0: the layer attends to the last sliding_window positions
  size_t rope = 0;             // index into ModelConfig::ropes
  KvUse kv = KvUse::kOwn;
  int64_t kv_source = 0;       // the layer whose keys and values it reads (itself when kOwn)

  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  int64_t qkv_size() const { return q_size() + 2 * kv_size(); }
};

struct ModelConfig {
  const FamilySpec* family = nullptr;
  Quant quant = Quant::kQ4F16;
  std::string model_type;
  std::string quantization;

  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // of the uniform layers (LayerPlan may differ)
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  double rms_norm_eps = 1e-5;
  bool tie_word_embeddings = false;
  Activation activation = Activation::kSilu;
  double embed_scale = 1.0;  // embed_tokens multiplies its rows by this (Gemma: sqrt(hidden))

  std::vector<Rope> ropes = {Rope{}};  // ropes[0]: the model's; families may add more
  double attn_logit_softcap = 0;       // 0: none
  double final_logit_softcap = 0;      // 0: none
  double query_pre_attn_scalar = 0;    // 0: the layer's head_dim
  int64_t layer_sliding_window = 0;    // the window of the layers that slide (0: none)

  // Top level of mlc-chat-config.json.
  int64_t context_window_size = 0;
  int64_t prefill_chunk_size = 0;
  int64_t sliding_window_size = -1;
  int64_t attention_sink_size = -1;

  // Attention details of the families with unfused projections (Gemma 4): each head's query and
  // key RMS-normalized by q_norm / k_norm, each value head RMS-normalized without a gain.
  bool v_norm = false;
  // Per-layer inputs (Gemma 4's per-layer embeddings): width 0 when the family has none.
  struct PerLayerInputs {
    int64_t width = 0;       // hidden_size_per_layer_input
    int64_t vocab = 0;       // vocab_size_per_layer_input
    int64_t pad_token_id = 0;  // looked up at adapter positions (modality id != 0)
  } per_layer;
  bool layer_scalar = false;  // each layer's output multiplied by its stored layer_scalar

  std::vector<LayerPlan> layers;  // num_layers entries
  // The adapters' models (vision, audio), in the order of the program's adapters.
  std::vector<std::shared_ptr<const Tower>> towers;

  bool quantized() const { return quant == Quant::kQ4F16 || quant == Quant::kQ4F32; }
  // dtype of norms, biases and unquantised matrices: "float16" or "float32".
  std::string float_dtype() const {
    return quant == Quant::kQ0F16 || quant == Quant::kQ4F16 ? "float16" : "float32";
  }
  // Width of embed_tokens' rows (the decoder's input rows).
  int64_t embed_width() const { return hidden_size; }
  const Rope& rope() const { return ropes.front(); }
  Rope& rope() { return ropes.front(); }
  // The widest layer's sizes (buffers of a forward pass).
  int64_t max_q_size() const;
  int64_t max_qkv_size() const;
  int64_t max_intermediate_size() const;
};

// The converter's names of one layer's parts and of the model's. An empty name: the family has
// no such part.
struct Names {
  std::string embed;       // "model.embed_tokens" / "transformer.embd"
  std::string final_norm;  // "model.norm" / "transformer.norm"
  std::string lm_head = "lm_head";
  std::string layer_root;  // "model.layers." / "transformer.h."
  std::string qkv, o, gate_up = "mlp.gate_up_proj", down = "mlp.down_proj";  // relative to Layer(l)
  // Unfused projections (when qkv is empty) and per-head norms of queries and keys.
  std::string q, k, v, q_norm, k_norm;
  // Per-layer inputs (ModelConfig::per_layer): the tables "<per_layer_embed>.<layer>", the
  // projection of the input rows and its norm; per layer the gate, projection and norm.
  std::string per_layer_embed, per_layer_model_projection, per_layer_projection_norm;
  std::string per_layer_gate, per_layer_projection, per_layer_norm;
  bool qkv_bias = false;
  bool norm_first = false;    // the layer's parameters list its attention norm first (Phi-3)
  std::string attn_norm;      // before attention
  std::string attn_out_norm;  // on the attention output (Gemma 2)
  std::string mlp_norm;       // before the MLP
  std::string mlp_out_norm;   // on the MLP output (Gemma 2)
  std::string Layer(int64_t l) const { return layer_root + std::to_string(l) + "."; }
};

// A matrix parameter [out, in] as the converter stores it: "<base>.weight", or "<base>.q_weight"
// [out, ceil(in / 32) * 4] uint32 with "<base>.q_scale" [out, ceil(in / 32)] (a partial last group
// padded, as MLC's group quantizer stores it).
struct MatrixSpec {
  std::string base;
  int64_t out = 0;
  int64_t in = 0;
};

// Appends a family's parameters in the converter's (module) order.
class ParamListBuilder {
 public:
  explicit ParamListBuilder(const ModelConfig& c) : c_(c) {}
  void Vector(const std::string& name, int64_t size);  // a norm or bias in the float dtype
  // A linear weight as the quantization stores it ("<base>.q_weight" + ".q_scale", or ".weight").
  void Matrix(const std::string& base, int64_t out, int64_t in);
  // A tensor kept in the float dtype whatever the quantization (towers MLC does not quantize).
  void Float(const std::string& name, std::vector<int64_t> shape);
  // A tensor of an explicit dtype whatever the quantization (e.g. float32 tables; shape {}: a scalar).
  void Add(const std::string& name, std::vector<int64_t> shape, const std::string& dtype);
  // Matrix (or a float matrix when `quantize` is false), then "<base>.bias" when `bias`.
  void Linear(const std::string& base, int64_t out, int64_t in, bool bias, bool quantize = true);
  std::vector<ParamSpec> Take() { return std::move(params_); }

 private:
  const ModelConfig& c_;
  std::vector<ParamSpec> params_;
};

// The package reference-model --family is asked for.
struct WriterShape {
  std::string name;  // a FamilyShapes() value
  bool tiny = false;  // name == "tiny": the small test shape
  int64_t context_window_size = 0;
  bool audio = false;  // with the family's audio tower (--audio)
};

// What a family's random-weight packages look like (reference-model --family).
struct WriterDefaults {
  int64_t tiny_kv_heads = 2;
  int64_t tiny_head_dim = 32;
  // Adds the family's own fields to model_config (the common ones are in it already).
  void (*model_config)(const WriterShape& shape, Json& mc) = nullptr;
  bool audio_tower = false;  // WriterShape::audio adds the family's audio tower
  // The conversation template of mlc-chat-config.json (nullptr: the reference tokenizer's).
  Json (*conv_template)() = nullptr;
};

// One row of the family table.
struct FamilySpec {
  // The model_config object holding the decoder's fields ("text_config" for a multimodal
  // family's nested config); nullptr: model_config itself.
  const char* text_config = nullptr;
  const char* model_type = "";
  Names names;
  double default_rms_norm_eps = 1e-5;
  // Reads the family's own model_config fields into c and lays out c.layers (the common fields
  // and a uniform plan are filled in before it runs); errors go to the reader.
  void (*configure)(ConfigReader& r, ModelConfig& c) = nullptr;
  // The parameter list in the converter's order.
  std::vector<ParamSpec> (*params)(const ModelConfig& c) = nullptr;
  GenerationPair pair = GenerationPair::kEmbeds;  // the pair its program exports
  WriterDefaults writer;
};

// Every family, in the order they are listed to users.
const std::vector<const FamilySpec*>& Families();
// The family of a model_type, or nullptr.
const FamilySpec* FindFamily(std::string_view model_type);
// "llama, qwen2, ..." (the supported list in errors and help).
std::string FamilyList();

// From mlc-chat-config.json; every dimension checked (errors at /model_config/... of the file).
Result<ModelConfig> ParseModelConfig(const ChatConfig& chat);

// The parameter list in module order.
std::vector<ParamSpec> ParamSpecs(const ModelConfig& c);

// Every matrix of the model (embedding and lm_head included), in module order.
std::vector<MatrixSpec> Matrices(const ModelConfig& c);

// The parameter list of the common pre-norm decoder in the llama order: per layer the projections
// (fused qkv, or q, k and v when Names::qkv is empty; o; the per-head q/k norms when named),
// then the norms (the attention norm first with Names::norm_first); the final norm; lm_head unless
// tied.
std::vector<ParamSpec> DecoderParams(const ModelConfig& c);

// The tasks of a CPU package: chat.completions over the "generation" program, text in, and one
// input per tower (its processor and prompt insertion).
Tasks TasksOf(const ModelConfig& c);

}  // namespace mlc::cpu
