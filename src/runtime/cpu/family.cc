// What every CPU family shares: model_config fields as MLC LLM's model classes read them
// (python/mlc_llm/model/<family>/<family>_model.py), the uniform per-layer plan the families adjust,
// the checks over that plan, rotary frequencies, and the converter's parameter list of the common
// pre-norm decoder with the group quantization's q_weight / q_scale pairs
// (python/mlc_llm/quantization/group_quantization.py: group 32, eight 4-bit values per uint32 along
// the input axis). The families themselves are rows of the table in families.cc.
#include <algorithm>
#include <cmath>
#include <map>

#include "mlc_manifest/cpu_model.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/towers/tower.h"

namespace mlc::cpu {
namespace {

constexpr int64_t kGroup = 32;
constexpr int64_t kMaxDim = int64_t{1} << 20;

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

// The fields every family reads, and a uniform layer plan from them.
void ReadCommonFields(ConfigReader& r, const FamilySpec& spec, ModelConfig& c) {
  c.hidden_size = r.Int("hidden_size", 1, kMaxDim);
  c.intermediate_size = r.Int("intermediate_size", 1, kMaxDim);
  c.num_layers = r.Int("num_hidden_layers", 1, 4096);
  c.num_heads = r.Int("num_attention_heads", 1, 4096);
  c.num_kv_heads = r.Int("num_key_value_heads", 1, 4096, c.num_heads);
  if (r.Has("num_key_value_heads") && SafeInteger(r.Get("num_key_value_heads")) == 0) {
    c.num_kv_heads = c.num_heads;  // MLC: 0 means as many as the query heads
  }
  int64_t default_head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 1;
  const bool head_dim_given = r.Has("head_dim") && SafeInteger(r.Get("head_dim")) != 0;
  c.head_dim = r.Int("head_dim", 2, 4096, default_head_dim);
  if (!head_dim_given) c.head_dim = default_head_dim;
  // Without a head_dim the heads split hidden_size evenly (as MLC's models assert).
  if (!head_dim_given && c.num_heads > 0 && c.hidden_size > 0 && c.hidden_size % c.num_heads != 0) {
    r.Fail(r.Path("num_attention_heads"), "expected a divisor of hidden_size (" + std::to_string(c.hidden_size) +
                                              ") when head_dim is not given");
  }
  std::optional<int64_t> top_vocab = r.chat().vocab_size;
  c.vocab_size = r.Int("vocab_size", 1, int64_t{1} << 24, top_vocab);
  c.rms_norm_eps = r.Number("rms_norm_eps", 0, spec.default_rms_norm_eps);
  Rope& rope = c.rope();
  if (r.Has("position_embedding_base")) {
    rope.theta = r.Number("position_embedding_base", 1, 10000);
  } else {
    rope.theta = r.Number("rope_theta", 1, 10000);
  }
  if (rope.theta <= 1) r.Fail(r.Path("rope_theta"), "expected a number > 1");
  rope.rotary_dim = c.head_dim;
  c.tie_word_embeddings = r.Bool("tie_word_embeddings", false);
  LayerPlan plan;
  plan.num_heads = c.num_heads;
  plan.num_kv_heads = c.num_kv_heads;
  plan.head_dim = c.head_dim;
  plan.intermediate_size = c.intermediate_size;
  c.layers.assign(static_cast<size_t>(std::max<int64_t>(c.num_layers, 0)), plan);
  for (size_t l = 0; l < c.layers.size(); ++l) c.layers[l].kv_source = static_cast<int64_t>(l);
}

// The plan after the family laid it out: rotary dims, head sizes, shared KV sources.
void CheckLayers(ConfigReader& r, const ModelConfig& c) {
  for (size_t i = 0; i < c.ropes.size(); ++i) {
    const Rope& rope = c.ropes[i];
    int64_t widest = 0;
    for (const LayerPlan& p : c.layers) {
      if (p.rope == i) widest = std::max(widest, p.head_dim);
    }
    if (rope.rotary_dim < 2 || rope.rotary_dim % 2 || (widest && rope.rotary_dim > widest)) {
      r.Fail(r.Path("partial_rotary_factor"),
             "expected an even rotary dimension in [2, head_dim]");
      break;
    }
  }
  // Each rule is reported once, at the first layer that breaks it.
  auto first = [&](auto broken) {
    for (size_t l = 0; l < c.layers.size(); ++l) {
      if (broken(l, c.layers[l])) return true;
    }
    return false;
  };
  if (first([](size_t, const LayerPlan& p) { return p.head_dim % 2 != 0; })) {
    r.Fail(r.Path("head_dim"), "expected an even head_dim");
  }
  for (const LayerPlan& p : c.layers) {
    if (p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads) {
      r.Fail(r.Path("num_key_value_heads"),
             "expected a divisor of num_attention_heads (" + std::to_string(p.num_heads) + ")");
      break;
    }
  }
  for (size_t l = 0; l < c.layers.size(); ++l) {
    const LayerPlan& p = c.layers[l];
    if (p.kv != KvUse::kShared) continue;
    const bool earlier_own = p.kv_source >= 0 && p.kv_source < static_cast<int64_t>(l) &&
                             c.layers[static_cast<size_t>(p.kv_source)].kv == KvUse::kOwn;
    if (!earlier_own || c.layers[static_cast<size_t>(p.kv_source)].kv_size() != p.kv_size()) {
      r.Fail(r.Path("num_hidden_layers"),
             "layer " + std::to_string(l) + " shares the keys and values of layer " +
                 std::to_string(p.kv_source) + ", which has none of the same size");
      break;
    }
  }
}

// 4-bit weights need every quantized input width to be a multiple of the group.
void CheckQuantGroups(ConfigReader& r, const ModelConfig& c) {
  if (!c.quantized()) return;
  auto check = [&](const char* key, const std::string& what, int64_t v) {
    if (v % kGroup == 0) return true;
    r.Fail(r.Path(key), what + " = " + std::to_string(v) + " must be a multiple of " +
                                        std::to_string(kGroup) + " for " + c.quantization);
    return false;
  };
  check("hidden_size", "hidden_size", c.hidden_size);
  for (const LayerPlan& p : c.layers) {
    if (!check("intermediate_size", "intermediate_size", p.intermediate_size)) break;
  }
  for (const LayerPlan& p : c.layers) {
    if (!check("head_dim", "num_attention_heads x head_dim", p.q_size())) break;
  }
}

// The context fields: top level first, then model_config (as MLC's chat config has them).
void ReadContextFields(const ChatConfig& chat, ModelConfig& c, Errors& errors) {
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
  if ((c.context_window_size == -1 || c.context_window_size == 0) && c.sliding_window_size <= 0) {
    errors.push_back(Invalid("/context_window_size",
                             "expected a positive context window (or a sliding window)"));
  }
}

}  // namespace

double Rope::InvFrequency(int64_t j, int64_t context_window_size) const {
  double inv = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(rotary_dim));
  if (scaling == RopeScaling::kProportional) return j < rotated_pairs ? inv : 0.0;
  if (scaling == RopeScaling::kLlama3) {
    const double kPi = 3.14159265358979323846;
    double wavelen = 2 * kPi / inv;
    double orig = static_cast<double>(original_max_position);
    double low_wavelen = orig / low_freq_factor, high_wavelen = orig / high_freq_factor;
    if (wavelen < high_wavelen) return inv;
    if (wavelen > low_wavelen) return inv / factor;
    double smooth = (orig / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
    return (1 - smooth) * inv / factor + smooth * inv;
  }
  if (scaling == RopeScaling::kLinear) return inv / factor;
  if (scaling == RopeScaling::kLongRope) {
    // The long factors when the context window is past the original one (as llama.cpp and
    // MLC decide it once for the model), else the short ones.
    const std::vector<double>& f = context_window_size > original_max_position ? long_factor : short_factor;
    return inv / f[static_cast<size_t>(j)];
  }
  return inv;
}

double Rope::Magnitude() const {
  if (scaling != RopeScaling::kLongRope || max_position <= original_max_position) return 1.0;
  double scale = static_cast<double>(max_position) / static_cast<double>(original_max_position);
  return std::sqrt(1 + std::log(scale) / std::log(static_cast<double>(original_max_position)));
}

int64_t ModelConfig::max_q_size() const {
  int64_t m = 0;
  for (const LayerPlan& p : layers) m = std::max(m, p.q_size());
  return m;
}

int64_t ModelConfig::max_qkv_size() const {
  int64_t m = 0;
  for (const LayerPlan& p : layers) m = std::max(m, p.qkv_size());
  return m;
}

int64_t ModelConfig::max_intermediate_size() const {
  int64_t m = 0;
  for (const LayerPlan& p : layers) m = std::max(m, p.intermediate_size);
  return m;
}

std::string FamilyList() {
  std::vector<std::string> names;
  for (const FamilySpec* f : Families()) names.push_back(f->model_type);
  return JoinNames(names);
}

const FamilySpec* FindFamily(std::string_view model_type) {
  for (const FamilySpec* f : Families()) {
    if (model_type == f->model_type) return f;
  }
  return nullptr;
}

Result<ModelConfig> ParseModelConfig(const ChatConfig& chat) {
  ModelConfig c;
  c.model_type = chat.model_type;
  c.quantization = chat.quantization;
  const FamilySpec* family = FindFamily(chat.model_type);
  auto q = QuantNames().find(chat.quantization);
  Errors errors;
  if (!family) {
    errors.push_back(Error{ErrorCode::kUnsupported, "/model_type",
                           "model_type \"" + chat.model_type +
                               "\" has no built-in CPU program (supported: " + FamilyList() + ")"});
  }
  if (q == QuantNames().end()) {
    errors.push_back(Error{ErrorCode::kUnsupported, "/quantization",
                           "quantization \"" + chat.quantization +
                               "\" is not supported by the CPU program (supported: " +
                               JoinNames(CpuQuantizations()) + ")"});
  }
  if (!errors.empty()) return errors;
  c.family = family;
  c.quant = q->second;
  if (!chat.model_config.is_object()) return Invalid("/model_config", "expected an object");

  ConfigReader r(chat, &errors, family->text_config);
  ReadCommonFields(r, *family, c);
  if (!r.failed() && family->configure) family->configure(r, c);
  CheckLayers(r, c);
  ReadContextFields(chat, c, errors);
  CheckQuantGroups(r, c);
  if (!errors.empty()) return InDocument(std::move(errors), kChatConfigFileName);
  return c;
}

void ParamListBuilder::Vector(const std::string& name, int64_t size) {
  params_.push_back(ParamSpec{name, {size}, c_.float_dtype()});
}

void ParamListBuilder::Matrix(const std::string& base, int64_t out, int64_t in) {
  if (c_.quantized()) {
    const int64_t groups = (in + kGroup - 1) / kGroup;  // a partial last group is stored whole
    params_.push_back(ParamSpec{base + ".q_weight", {out, groups * (kGroup / 8)}, "uint32"});
    params_.push_back(ParamSpec{base + ".q_scale", {out, groups}, c_.float_dtype()});
  } else {
    params_.push_back(ParamSpec{base + ".weight", {out, in}, c_.float_dtype()});
  }
}

void ParamListBuilder::Float(const std::string& name, std::vector<int64_t> shape) {
  Add(name, std::move(shape), c_.float_dtype());
}

void ParamListBuilder::Add(const std::string& name, std::vector<int64_t> shape, const std::string& dtype) {
  ParamSpec p{name, {}, dtype};
  for (int64_t d : shape) p.shape.emplace_back(d);
  params_.push_back(std::move(p));
}

void ParamListBuilder::Linear(const std::string& base, int64_t out, int64_t in, bool bias, bool quantize) {
  if (quantize) {
    Matrix(base, out, in);
  } else {
    Float(base + ".weight", {out, in});
  }
  if (bias) Vector(base + ".bias", out);
}

std::vector<ParamSpec> DecoderParams(const ModelConfig& c) {
  const Names& n = c.family->names;
  const int64_t hs = c.hidden_size;
  ParamListBuilder b(c);
  b.Matrix(n.embed, c.vocab_size, hs);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerPlan& p = c.layers[static_cast<size_t>(l)];
    std::string pre = n.Layer(l);
    if (n.norm_first) b.Vector(pre + n.attn_norm + ".weight", hs);
    if (n.qkv.empty()) {  // unfused projections (Gemma 3)
      b.Matrix(pre + n.q, p.q_size(), hs);
      b.Matrix(pre + n.k, p.kv_size(), hs);
      b.Matrix(pre + n.v, p.kv_size(), hs);
    } else {
      b.Matrix(pre + n.qkv, p.qkv_size(), hs);
      if (n.qkv_bias) b.Vector(pre + n.qkv + ".bias", p.qkv_size());
    }
    b.Matrix(pre + n.o, hs, p.q_size());
    if (!n.q_norm.empty()) b.Vector(pre + n.q_norm + ".weight", p.head_dim);
    if (!n.k_norm.empty()) b.Vector(pre + n.k_norm + ".weight", p.head_dim);
    b.Matrix(pre + n.gate_up, 2 * p.intermediate_size, hs);
    b.Matrix(pre + n.down, hs, p.intermediate_size);
    for (const std::string* norm : {&n.attn_norm, &n.attn_out_norm, &n.mlp_norm, &n.mlp_out_norm}) {
      if (!norm->empty() && !(n.norm_first && norm == &n.attn_norm)) b.Vector(pre + *norm + ".weight", hs);
    }
  }
  b.Vector(n.final_norm + ".weight", hs);
  if (!c.tie_word_embeddings) b.Matrix(n.lm_head, c.vocab_size, hs);
  return b.Take();
}

std::vector<ParamSpec> ParamSpecs(const ModelConfig& c) { return c.family->params(c); }

std::vector<MatrixSpec> Matrices(const ModelConfig& c) {
  // Read back from the float form of the parameter list, where every matrix is a two-dimensional
  // "<base>.weight" [out, in] (a q_weight's width is padded to whole groups, so it cannot say in).
  ModelConfig unquantized = c;
  unquantized.quant = Quant::kQ0F32;
  std::vector<MatrixSpec> out;
  for (const ParamSpec& p : ParamSpecs(unquantized)) {
    if (p.shape.size() != 2) continue;
    size_t dot = p.name.rfind('.');
    std::string base = p.name.substr(0, dot), leaf = p.name.substr(dot + 1);
    int64_t rows = std::get<int64_t>(p.shape[0]), cols = std::get<int64_t>(p.shape[1]);
    if (leaf == "weight") out.push_back({base, rows, cols});
  }
  return out;
}

Tasks TasksOf(const ModelConfig& c) {
  Task task;
  task.executor = "generation";
  task.output = "text";
  task.inputs["text"] = TaskInput{std::string("tokenizer"), std::nullopt, std::nullopt};
  for (const auto& tower : c.towers) task.inputs[tower->adapter()] = tower->Input();
  return {{"chat.completions", task}};
}

}  // namespace mlc::cpu

namespace mlc {

const std::vector<std::string>& CpuModelTypes() {
  static const std::vector<std::string> kTypes = [] {
    std::vector<std::string> types;
    for (const cpu::FamilySpec* f : cpu::Families()) types.push_back(f->model_type);
    return types;
  }();
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
