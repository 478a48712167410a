// The CPU families' configuration and parameter lists: model_config fields as MLC LLM's model
// classes read them (python/mlc_llm/model/<family>/<family>_model.py), the converter's names and
// fused layouts (fused q/k/v, fused gate/up), and the group quantization's q_weight / q_scale
// pairs (python/mlc_llm/quantization/group_quantization.py: group 32, eight 4-bit values per
// uint32 along the input axis).
#include <cmath>
#include <map>

#include "mlc_manifest/cpu_model.h"
#include "runtime/cpu/family.h"

namespace mlc::cpu {
namespace {

constexpr int64_t kGroup = 32;

const std::map<std::string, Family>& FamilyNames() {
  static const std::map<std::string, Family> kNames = {{"llama", Family::kLlama},
                                                       {"qwen2", Family::kQwen2},
                                                       {"gemma", Family::kGemma},
                                                       {"gemma2", Family::kGemma2},
                                                       {"phi3", Family::kPhi3}};
  return kNames;
}

const std::map<std::string, Quant>& QuantNames() {
  static const std::map<std::string, Quant> kNames = {{"q0f32", Quant::kQ0F32},
                                                      {"q0f16", Quant::kQ0F16},
                                                      {"q4f16_1", Quant::kQ4F16},
                                                      {"q4f32_1", Quant::kQ4F32}};
  return kNames;
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

// Reads fields of model_config (then the top level for the context fields), recording errors
// at their JSON Pointer in mlc-chat-config.json.
class ConfigReader {
 public:
  ConfigReader(const ChatConfig& chat, Errors* errors) : chat_(chat), errors_(errors) {}

  bool Has(const char* key) const {
    return chat_.model_config.is_object() && chat_.model_config.contains(key) &&
           !chat_.model_config[key].is_null();
  }
  const Json& Get(const char* key) const { return chat_.model_config[key]; }

  // An integer in [minimum, maximum]; `fallback` when absent (nullopt: required).
  int64_t Int(const char* key, int64_t minimum, int64_t maximum,
              std::optional<int64_t> fallback = std::nullopt) {
    if (!Has(key)) {
      if (fallback) return *fallback;
      Fail(Path(key), "required: an integer");
      return minimum;
    }
    auto v = SafeInteger(Get(key));
    if (!v || *v < minimum || *v > maximum) {
      Fail(Path(key), "expected an integer in [" + std::to_string(minimum) + ", " +
                          std::to_string(maximum) + "]");
      return minimum;
    }
    return *v;
  }
  double Number(const char* key, double minimum, double fallback) {
    if (!Has(key)) return fallback;
    if (!Get(key).is_number() || !(Get(key).get<double>() >= minimum) ||
        !std::isfinite(Get(key).get<double>())) {
      Fail(Path(key), "expected a finite number >= " + std::to_string(minimum));
      return fallback;
    }
    return Get(key).get<double>();
  }
  bool Bool(const char* key, bool fallback) {
    if (!Has(key)) return fallback;
    if (!Get(key).is_boolean()) {
      Fail(Path(key), "expected true or false");
      return fallback;
    }
    return Get(key).get<bool>();
  }
  void Fail(const std::string& path, std::string message) {
    errors_->push_back(Invalid(path, std::move(message)));
  }
  static std::string Path(const std::string& key) { return "/model_config/" + key; }

 private:
  const ChatConfig& chat_;
  Errors* errors_;
};

constexpr int64_t kMaxDim = int64_t{1} << 20;

void ReadRopeScaling(ConfigReader& r, ModelConfig& c, Errors* errors) {
  if (!r.Has("rope_scaling")) return;
  const Json& s = r.Get("rope_scaling");
  std::string path = ConfigReader::Path("rope_scaling");
  if (!s.is_object()) {
    r.Fail(path, "expected an object");
    return;
  }
  std::string type;
  for (const char* key : {"rope_type", "type"}) {
    if (s.contains(key) && s[key].is_string()) type = s[key].get<std::string>();
  }
  auto number = [&](const char* key, double fallback) {
    if (!s.contains(key)) return fallback;
    if (!s[key].is_number() || !std::isfinite(s[key].get<double>()) || s[key].get<double>() <= 0) {
      r.Fail(path + "/" + key, "expected a positive number");
      return fallback;
    }
    return s[key].get<double>();
  };
  if (c.family == Family::kLlama && type == "llama3") {
    c.rope_scaling = RopeScaling::kLlama3;
    c.rope_factor = number("factor", 8.0);
    c.low_freq_factor = number("low_freq_factor", 1.0);
    c.high_freq_factor = number("high_freq_factor", 4.0);
    c.original_max_position =
        static_cast<int64_t>(number("original_max_position_embeddings", 8192));
    if (c.high_freq_factor <= c.low_freq_factor) {
      r.Fail(path + "/high_freq_factor", "expected more than low_freq_factor");
    }
  } else if (c.family == Family::kPhi3 && (type == "su" || type == "longrope")) {
    c.rope_scaling = RopeScaling::kLongRope;
    auto factors = [&](const char* key, std::vector<double>& out) {
      if (!s.contains(key) || !s[key].is_array() ||
          static_cast<int64_t>(s[key].size()) != c.rotary_dim / 2) {
        r.Fail(path + "/" + key, "expected an array of rotary_dim / 2 = " +
                                     std::to_string(c.rotary_dim / 2) + " numbers");
        return;
      }
      for (size_t i = 0; i < s[key].size(); ++i) {
        const Json& v = s[key][i];
        if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
          r.Fail(PointerAppend(path + "/" + key, i), "expected a positive number");
          return;
        }
        out.push_back(v.get<double>());
      }
    };
    factors("long_factor", c.long_factor);
    factors("short_factor", c.short_factor);
    c.original_max_position = r.Int("original_max_position_embeddings", 1, int64_t{1} << 30);
    c.max_position = r.Int("max_position_embeddings", 1, int64_t{1} << 30);
  } else if (!type.empty() || !s.empty()) {
    errors->push_back(Error{ErrorCode::kUnsupported, path,
                            "rope scaling type \"" + type + "\" is not supported for " +
                                c.model_type + " (supported: " +
                                (c.family == Family::kLlama ? "llama3" : c.family == Family::kPhi3 ? "su, longrope" : "none") +
                                ")"});
  }
}

}  // namespace

double ModelConfig::InvFrequency(int64_t j) const {
  double inv = std::pow(rope_theta, -2.0 * static_cast<double>(j) / static_cast<double>(rotary_dim));
  if (rope_scaling == RopeScaling::kLlama3) {
    const double kPi = 3.14159265358979323846;
    double wavelen = 2 * kPi / inv;
    double orig = static_cast<double>(original_max_position);
    double low_wavelen = orig / low_freq_factor, high_wavelen = orig / high_freq_factor;
    if (wavelen < high_wavelen) return inv;
    if (wavelen > low_wavelen) return inv / rope_factor;
    double smooth = (orig / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    return (1 - smooth) * inv / rope_factor + smooth * inv;
  }
  if (rope_scaling == RopeScaling::kLongRope) {
    // The long factors when the context window is past the original one (as llama.cpp and
    // MLC decide it once for the model), else the short ones.
    const std::vector<double>& f =
        context_window_size > original_max_position ? long_factor : short_factor;
    return inv / f[static_cast<size_t>(j)];
  }
  return inv;
}

double ModelConfig::RopeMagnitude() const {
  if (rope_scaling != RopeScaling::kLongRope || max_position <= original_max_position) return 1.0;
  double scale = static_cast<double>(max_position) / static_cast<double>(original_max_position);
  return std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original_max_position)));
}

Result<ModelConfig> ParseModelConfig(const ChatConfig& chat) {
  ModelConfig c;
  c.model_type = chat.model_type;
  c.quantization = chat.quantization;
  auto fam = FamilyNames().find(chat.model_type);
  auto q = QuantNames().find(chat.quantization);
  Errors errors;
  if (fam == FamilyNames().end()) {
    errors.push_back(Error{ErrorCode::kUnsupported, "/model_type",
                           "model_type \"" + chat.model_type +
                               "\" has no built-in CPU program (supported: " +
                               JoinNames(CpuModelTypes()) + ")"});
  }
  if (q == QuantNames().end()) {
    errors.push_back(Error{ErrorCode::kUnsupported, "/quantization",
                           "quantization \"" + chat.quantization +
                               "\" is not supported by the CPU program (supported: " +
                               JoinNames(CpuQuantizations()) + ")"});
  }
  if (!errors.empty()) return errors;
  c.family = fam->second;
  c.quant = q->second;
  if (!chat.model_config.is_object()) return Invalid("/model_config", "expected an object");

  ConfigReader r(chat, &errors);
  c.hidden_size = r.Int("hidden_size", 1, kMaxDim);
  c.intermediate_size = r.Int("intermediate_size", 1, kMaxDim);
  c.num_layers = r.Int("num_hidden_layers", 1, 4096);
  c.num_heads = r.Int("num_attention_heads", 1, 4096);
  c.num_kv_heads = r.Int("num_key_value_heads", 1, 4096, c.num_heads);
  if (r.Has("num_key_value_heads") && SafeInteger(r.Get("num_key_value_heads")) == 0) {
    c.num_kv_heads = c.num_heads;  // MLC: 0 means as many as the query heads
  }
  int64_t default_head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 1;
  c.head_dim = r.Int("head_dim", 2, 4096, default_head_dim);
  if (r.Has("head_dim") && SafeInteger(r.Get("head_dim")) == 0) c.head_dim = default_head_dim;
  std::optional<int64_t> top_vocab = chat.vocab_size;
  c.vocab_size = r.Int("vocab_size", 1, int64_t{1} << 24, top_vocab);
  c.rms_norm_eps = r.Number("rms_norm_eps", 0, c.gemma() ? 1e-6 : 1e-5);
  if (r.Has("position_embedding_base")) {
    c.rope_theta = r.Number("position_embedding_base", 1, 10000);
  } else {
    c.rope_theta = r.Number("rope_theta", 1, 10000);
  }
  if (c.rope_theta <= 1) r.Fail(ConfigReader::Path("rope_theta"), "expected a number > 1");
  c.tie_word_embeddings = c.gemma() ? true : r.Bool("tie_word_embeddings", false);
  double partial = c.family == Family::kPhi3 ? r.Number("partial_rotary_factor", 0, 1.0) : 1.0;
  c.rotary_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * partial);
  if (c.rotary_dim < 2 || c.rotary_dim % 2 || c.rotary_dim > c.head_dim) {
    r.Fail(ConfigReader::Path("partial_rotary_factor"),
           "expected an even rotary dimension in [2, head_dim]");
  }
  if (c.head_dim % 2) r.Fail(ConfigReader::Path("head_dim"), "expected an even head_dim");
  if (c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads) {
    r.Fail(ConfigReader::Path("num_key_value_heads"),
           "expected a divisor of num_attention_heads (" + std::to_string(c.num_heads) + ")");
  }
  if (c.gemma()) {
    std::string act;
    for (const char* key : {"hidden_activation", "hidden_act"}) {
      if (act.empty() && r.Has(key) && r.Get(key).is_string()) act = r.Get(key).get<std::string>();
    }
    if (!act.empty() && act != "gelu" && act != "gelu_pytorch_tanh") {
      errors.push_back(Error{ErrorCode::kUnsupported, ConfigReader::Path("hidden_activation"),
                             "expected gelu or gelu_pytorch_tanh"});
    }
    if (r.Bool("attention_bias", false)) {
      errors.push_back(Error{ErrorCode::kUnsupported, ConfigReader::Path("attention_bias"),
                             "Gemma with attention biases is not supported"});
    }
  }
  if (c.family == Family::kGemma2) {
    c.attn_logit_softcap = r.Number("attn_logit_softcapping", 0, 0);
    c.final_logit_softcap = r.Number("final_logit_softcapping", 0, 0);
    c.query_pre_attn_scalar = r.Number("query_pre_attn_scalar", 0, 0);
    c.layer_sliding_window = r.Int("sliding_window", 0, int64_t{1} << 30, 0);
  }
  if (c.family == Family::kQwen2 || c.family == Family::kLlama) {
    std::string act = r.Has("hidden_act") && r.Get("hidden_act").is_string()
                          ? r.Get("hidden_act").get<std::string>()
                          : "silu";
    if (act != "silu") {
      errors.push_back(Error{ErrorCode::kUnsupported, ConfigReader::Path("hidden_act"),
                             "expected silu"});
    }
  }
  if (errors.empty()) ReadRopeScaling(r, c, &errors);

  // The context fields: top level first, then model_config (as MLC's chat config has them).
  auto top = [&](const char* key, std::optional<int64_t> v, int64_t minimum, bool required,
                 int64_t fallback) {
    if (!v) v = chat.Dimension(key);
    if (!v) {
      if (required) errors.push_back(Invalid(std::string("/") + key, "required: an integer"));
      return fallback;
    }
    if (*v < minimum || *v > (int64_t{1} << 30)) {
      errors.push_back(Invalid(std::string("/") + key,
                               "expected an integer in [" + std::to_string(minimum) + ", 2^30]"));
      return fallback;
    }
    return *v;
  };
  c.context_window_size = top("context_window_size", chat.context_window_size, -1, true, 1);
  c.prefill_chunk_size = top("prefill_chunk_size", chat.prefill_chunk_size, 1, true, 1);
  c.sliding_window_size = top("sliding_window_size", chat.sliding_window_size, -1, false, -1);
  c.attention_sink_size = top("attention_sink_size", chat.attention_sink_size, -1, false, -1);
  if (c.context_window_size == -1 || c.context_window_size == 0) {
    if (c.sliding_window_size <= 0) {
      errors.push_back(Invalid("/context_window_size",
                               "expected a positive context window (or a sliding window)"));
    }
  }
  if (c.quantized()) {
    for (auto [key, v] : {std::pair<const char*, int64_t>{"hidden_size", c.hidden_size},
                          {"intermediate_size", c.intermediate_size},
                          {"num_attention_heads x head_dim", c.q_size()}}) {
      if (v % kGroup) {
        errors.push_back(Invalid(ConfigReader::Path(key == std::string("hidden_size") ||
                                                            key == std::string("intermediate_size")
                                                        ? key
                                                        : "head_dim"),
                                 std::string(key) + " = " + std::to_string(v) + " must be a multiple of " +
                                     std::to_string(kGroup) + " for " + c.quantization));
      }
    }
  }
  if (!errors.empty()) return InDocument(std::move(errors), kChatConfigFileName);
  return c;
}

std::string Names::Layer(int64_t l) const { return layer_root + std::to_string(l) + "."; }

Names NamesOf(Family family) {
  Names n;
  if (family == Family::kPhi3) {
    n.embed = "transformer.embd";
    n.final_norm = "transformer.norm";
    n.layer_root = "transformer.h.";
    n.qkv = "mixer.qkv_proj";
    n.o = "mixer.out_proj";
    n.norm_attn = "ln";
  } else {
    n.embed = "model.embed_tokens";
    n.final_norm = "model.norm";
    n.layer_root = "model.layers.";
    n.qkv = family == Family::kQwen2 ? "self_attn.c_attn" : "self_attn.qkv_proj";
    n.o = family == Family::kQwen2 ? "self_attn.o_proj" : "self_attn.o_proj";
    n.norm_attn = "input_layernorm";
  }
  n.lm_head = "lm_head";
  n.gate_up = "mlp.gate_up_proj";
  n.down = "mlp.down_proj";
  n.norm_post_attn = "post_attention_layernorm";
  if (family == Family::kGemma2) {
    n.norm_pre_ff = "pre_feedforward_layernorm";
    n.norm_post_ff = "post_feedforward_layernorm";
  }
  return n;
}

std::vector<MatrixSpec> Matrices(const ModelConfig& c) {
  Names n = NamesOf(c.family);
  std::vector<MatrixSpec> out;
  out.push_back({n.embed, c.vocab_size, c.hidden_size});
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = n.Layer(l);
    out.push_back({p + n.qkv, c.qkv_size(), c.hidden_size});
    out.push_back({p + n.o, c.hidden_size, c.q_size()});
    out.push_back({p + n.gate_up, 2 * c.intermediate_size, c.hidden_size});
    out.push_back({p + n.down, c.hidden_size, c.intermediate_size});
  }
  if (!c.tie_word_embeddings) out.push_back({n.lm_head, c.vocab_size, c.hidden_size});
  return out;
}

std::vector<ParamSpec> ParamSpecs(const ModelConfig& c) {
  Names n = NamesOf(c.family);
  const std::string f = c.float_dtype();
  std::vector<ParamSpec> out;
  auto vec = [&](const std::string& name, int64_t size) {
    out.push_back(ParamSpec{name, {size}, f});
  };
  auto matrix = [&](const std::string& base, int64_t rows, int64_t cols) {
    if (c.quantized()) {
      out.push_back(ParamSpec{base + ".q_weight", {rows, cols / 8}, "uint32"});
      out.push_back(ParamSpec{base + ".q_scale", {rows, cols / kGroup}, f});
    } else {
      out.push_back(ParamSpec{base + ".weight", {rows, cols}, f});
    }
  };
  matrix(n.embed, c.vocab_size, c.hidden_size);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    std::string p = n.Layer(l);
    if (c.family == Family::kPhi3) {
      vec(p + n.norm_attn + ".weight", c.hidden_size);
      matrix(p + n.qkv, c.qkv_size(), c.hidden_size);
      matrix(p + n.o, c.hidden_size, c.q_size());
      matrix(p + n.gate_up, 2 * c.intermediate_size, c.hidden_size);
      matrix(p + n.down, c.hidden_size, c.intermediate_size);
      vec(p + n.norm_post_attn + ".weight", c.hidden_size);
      continue;
    }
    matrix(p + n.qkv, c.qkv_size(), c.hidden_size);
    if (c.family == Family::kQwen2) vec(p + n.qkv + ".bias", c.qkv_size());
    matrix(p + n.o, c.hidden_size, c.q_size());
    matrix(p + n.gate_up, 2 * c.intermediate_size, c.hidden_size);
    matrix(p + n.down, c.hidden_size, c.intermediate_size);
    vec(p + n.norm_attn + ".weight", c.hidden_size);
    vec(p + n.norm_post_attn + ".weight", c.hidden_size);
    if (c.family == Family::kGemma2) {
      vec(p + n.norm_pre_ff + ".weight", c.hidden_size);
      vec(p + n.norm_post_ff + ".weight", c.hidden_size);
    }
  }
  vec(n.final_norm + ".weight", c.hidden_size);
  if (!c.tie_word_embeddings) matrix(n.lm_head, c.vocab_size, c.hidden_size);
  return out;
}

Tasks TextTasks() {
  Task task;
  task.executor = "generation";
  task.output = "text";
  task.inputs["text"] = TaskInput{std::string("tokenizer"), std::nullopt, std::nullopt};
  return {{"chat.completions", task}};
}

}  // namespace mlc::cpu

namespace mlc {

const std::vector<std::string>& CpuModelTypes() {
  static const std::vector<std::string> kTypes = {"llama", "qwen2", "gemma", "gemma2", "phi3"};
  return kTypes;
}

const std::vector<std::string>& CpuQuantizations() {
  static const std::vector<std::string> kQuants = {"q0f32", "q0f16", "q4f16_1", "q4f32_1"};
  return kQuants;
}

Result<std::vector<ParamSpec>> CpuParamSpecs(const ChatConfig& config) {
  auto c = cpu::ParseModelConfig(config);
  MLC_RETURN_IF_ERROR(c);
  return cpu::ParamSpecs(*c);
}

}  // namespace mlc
