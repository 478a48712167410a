// Random-weight packages of the CPU families, written as MLC's converter writes real ones:
// mlc-chat-config.json (model_type, quantization, model_config, conversation template, sampling
// defaults), tensor-cache.json with records sorted by name in 32 MiB params_shard_*.bin files
// ("f32-to-bf16": float32 values stored as bfloat16, other dtypes raw), 4-bit weights quantised
// with MLC's group rule, the reference tokenizer.json, and the manifest unless asked for a
// legacy package. For tests, the llama.cpp comparison and the benchmark: the weights are random.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "base/hash.h"
#include "mlc_manifest/reference_model.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/kernels.h"
#include "runtime/cpu/towers/tower.h"
#include "runtime/reference_tokenizer.h"
#include "runtime/splitmix.h"

namespace mlc {
namespace {

// Weights are drawn with a splitmix64 stream seeded per parameter, so a value does not depend
// on the shard layout.
using Rng = SplitMix64;

uint64_t NameSeed(const std::string& name, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// The float value of a parameter: norms near 1 (Gemma's stored norms already hold the 1 the
// converter adds), biases small, matrices uniform with variance 1 / fan_in, embeddings
// uniform with variance 1.
std::vector<float> Draw(const std::string& base, bool norm, bool bias, int64_t rows, int64_t cols,
                        uint64_t seed) {
  Rng rng(NameSeed(base, seed));
  std::vector<float> v(static_cast<size_t>(rows * cols));
  const float kSqrt3 = 1.7320508f;
  // An embedding table (not a projection into the embedding space, such as embed_audio's).
  const bool embedding = (base.find("embed") != std::string::npos || base.find("embd") != std::string::npos) &&
                         base.find("projection") == std::string::npos;
  float scale = norm || bias ? 0.1f : embedding ? kSqrt3 : kSqrt3 / std::sqrt(static_cast<float>(cols));
  for (float& x : v) x = (norm ? 1.0f : 0.0f) + scale * rng.Symmetric();
  return v;
}

void Put16(std::string& out, uint16_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>(v >> 8));
}
void Put32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// A float in the record's declared dtype as the converter stores it.
void PutFloat(std::string& out, float v, const std::string& dtype) {
  if (dtype == "float16") {
    Put16(out, cpu::FloatToHalf(v));
  } else {  // float32 records are "f32-to-bf16"
    Put16(out, FloatToBf16(v));
  }
}

// The value the device will hold for a stored float (what quantisation must divide by).
float StoredFloat(float v, const std::string& dtype) {
  return dtype == "float16" ? cpu::HalfToFloat(cpu::FloatToHalf(v)) : Bf16ToFloat(FloatToBf16(v));
}

// MLC's group quantisation of a [rows, cols] matrix: per group of 32 along a row,
// scale = max|w| / 7, q = clamp(round(w / scale) + 7, 0, 14), eight values per uint32; a partial
// last group takes the scale of its own values and is stored whole, its missing values as 0.
void Quantize(const std::vector<float>& w, int64_t rows, int64_t cols, const std::string& scale_dtype,
              std::string* q_weight, std::string* q_scale) {
  const int64_t groups = (cols + 31) / 32;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w.data() + r * cols;
    std::vector<uint32_t> words(static_cast<size_t>(groups * 4), 0);
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t len = std::min<int64_t>(32, cols - g * 32);
      float max_abs = 0;
      for (int64_t i = 0; i < len; ++i) max_abs = std::max(max_abs, std::fabs(row[g * 32 + i]));
      float scale = StoredFloat(max_abs / 7.0f, scale_dtype);
      PutFloat(*q_scale, max_abs / 7.0f, scale_dtype);
      for (int64_t i = 0; i < len; ++i) {
        int64_t col = g * 32 + i;
        float q = scale > 0 ? std::nearbyint(row[col] / scale) + 7.0f : 7.0f;
        uint32_t qi = static_cast<uint32_t>(std::clamp(q, 0.0f, 14.0f));
        words[static_cast<size_t>(col / 8)] |= qi << (4 * (col % 8));
      }
    }
    for (uint32_t word : words) Put32(*q_weight, word);
  }
}

struct Shape {
  int64_t vocab, hidden, intermediate, layers, heads, kv_heads, head_dim, context, prefill;
};

Shape ShapeOf(const FamilyModelOptions& o, const cpu::FamilySpec& family) {
  if (o.shape == "qwen2.5-0.5b") return {151936, 896, 4864, 24, 14, 2, 64, 4096, 512};
  // LLaVA 1.5 7B's decoder (Llama 2 7B with LLaVA's padded vocabulary).
  if (o.shape == "llava-1.5-7b") return {32064, 4096, 11008, 32, 32, 32, 128, 4096, 2048};
  // Gemma 4 E2B's decoder (the family lays out its 35 layers).
  if (o.shape == "e2b") return {262144, 1536, 6144, 35, 8, 1, 256, 4096, 1024};
  // Gemma 3 1B's decoder (the family lays out its sliding and full layers).
  if (o.shape == "gemma-3-1b") return {262144, 1152, 6912, 26, 4, 1, 256, 4096, 1024};
  // Gemma 3 4B's decoder (gemma3_v: with its SigLIP tower).
  if (o.shape == "gemma-3-4b") return {262208, 2560, 10240, 34, 8, 4, 256, 4096, 1024};
  // tiny: the family's KV heads and head_dim (GQA where the family has it).
  return {512, 128, 256, 2, 4, family.writer.tiny_kv_heads, family.writer.tiny_head_dim, 512, 64};
}

Json ModelConfigJson(const FamilyModelOptions& o, const cpu::FamilySpec& family, const Shape& s,
                     int64_t context, int64_t prefill) {
  Json mc = {{"hidden_size", s.hidden},
             {"intermediate_size", s.intermediate},
             {"num_attention_heads", s.heads},
             {"num_hidden_layers", s.layers},
             {"num_key_value_heads", s.kv_heads},
             {"head_dim", s.head_dim},
             {"rms_norm_eps", 1e-6},
             {"vocab_size", s.vocab},
             {"context_window_size", context},
             {"prefill_chunk_size", prefill},
             {"tensor_parallel_shards", 1},
             {"max_batch_size", 1}};
  if (family.writer.model_config) {
    family.writer.model_config(cpu::WriterShape{o.shape, o.shape == "tiny", context, o.audio}, mc);
  }
  return mc;
}

Json ChatConfigJson(const FamilyModelOptions& o, const cpu::FamilySpec& family, const Shape& s) {
  int64_t context = o.context_window_size > 0 ? o.context_window_size : s.context;
  int64_t prefill = o.prefill_chunk_size > 0 ? o.prefill_chunk_size : s.prefill;
  Json mc = ModelConfigJson(o, family, s, context, prefill);
  // MLC's gen_config copies a model_config's sliding_window_size (Gemma 3's) to the chat config.
  int64_t window = o.sliding_window_size;
  if (window <= 0 && mc.contains("sliding_window_size") && mc["sliding_window_size"].is_number_integer()) {
    window = mc["sliding_window_size"].get<int64_t>();
  }
  return {{"version", "0.1.0"},
          {"model_type", o.family},
          {"quantization", o.quantization},
          {"model_config", std::move(mc)},
          {"vocab_size", s.vocab},
          {"context_window_size", context},
          {"sliding_window_size", window},
          {"prefill_chunk_size", prefill},
          {"attention_sink_size", o.attention_sink_size},
          {"tensor_parallel_shards", 1},
          {"temperature", 0.7},
          {"top_p", 0.95},
          {"repetition_penalty", 1.0},
          {"presence_penalty", 0.0},
          {"frequency_penalty", 0.0},
          {"tokenizer_files", {"tokenizer.json"}},
          {"conv_template", family.writer.conv_template ? family.writer.conv_template()
                                                         : reference::ConvTemplateJson()},
          {"bos_token_id", ReferenceTokens::kBos},
          {"eos_token_id", ReferenceTokens::kEos},
          {"random_weights", true}};
}

// The fixed values a tower stores for a parameter (nullopt: a learned one).
std::optional<std::vector<float>> TowerValues(const cpu::ModelConfig& c, const std::string& name) {
  for (const auto& tower : c.towers) {
    if (auto values = tower->StoredValues(name)) return values;
  }
  return std::nullopt;
}

// The bytes of every record of one shard, in layout order.
std::string ShardBytes(const TensorShard& shard, const cpu::ModelConfig& c, uint64_t seed) {
  std::map<std::string, cpu::MatrixSpec> matrices;
  for (const cpu::MatrixSpec& m : cpu::Matrices(c)) matrices[m.base] = m;
  std::string data;
  data.reserve(shard.nbytes);
  for (const TensorRecord& r : shard.records) {
    if (std::optional<std::vector<float>> stored = TowerValues(c, r.name)) {
      for (float v : *stored) PutFloat(data, v, r.dtype);
      continue;
    }
    size_t dot = r.name.rfind('.');
    std::string base = r.name.substr(0, dot), leaf = r.name.substr(dot + 1);
    auto m = matrices.find(base);
    if (m != matrices.end() && leaf == "q_weight") {
      std::vector<float> w = Draw(base, false, false, m->second.out, m->second.in, seed);
      std::string q_scale;
      Quantize(w, m->second.out, m->second.in, c.float_dtype(), &data, &q_scale);
    } else if (m != matrices.end() && leaf == "q_scale") {
      std::vector<float> w = Draw(base, false, false, m->second.out, m->second.in, seed);
      std::string q_weight;
      Quantize(w, m->second.out, m->second.in, c.float_dtype(), &q_weight, &data);
    } else {
      // Norm gains and Gemma 4's layer scalars near 1.
      bool norm = r.name.find("norm") != std::string::npos || (leaf == "weight" && r.shape.size() == 1) ||
                  leaf == "layer_scalar";
      bool bias = leaf == "bias";
      // [out, ...] as [out, fan-in] (a convolution's [out, c, h, w] included); a vector as one row.
      int64_t rows = r.shape.size() >= 2 ? r.shape[0] : 1;
      int64_t cols = 1;
      for (size_t i = r.shape.size() >= 2 ? 1 : 0; i < r.shape.size(); ++i) cols *= r.shape[i];
      for (float v : Draw(m != matrices.end() ? base : r.name, norm && !bias, bias, rows, cols, seed)) {
        PutFloat(data, v, r.dtype);
      }
    }
  }
  return data;
}

Status CheckOptions(const FamilyModelOptions& o) {
  auto member = [](const std::vector<std::string>& names, const std::string& v) {
    return std::find(names.begin(), names.end(), v) != names.end();
  };
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
    return out;
  };
  if (!member(CpuModelTypes(), o.family)) {
    return Error{ErrorCode::kUsage, "", "unknown family \"" + o.family + "\" (supported: " + join(CpuModelTypes()) + ")"};
  }
  if (!member(CpuQuantizations(), o.quantization)) {
    return Error{ErrorCode::kUsage, "", "unknown quantization \"" + o.quantization +
                                            "\" (supported: " + join(CpuQuantizations()) + ")"};
  }
  if (o.audio && !cpu::FindFamily(o.family)->writer.audio_tower) {
    return Error{ErrorCode::kUsage, "", "family \"" + o.family + "\" has no audio tower (--audio)"};
  }
  if (!member(FamilyShapes(), o.shape)) {
    return Error{ErrorCode::kUsage, "", "unknown shape \"" + o.shape + "\" (supported: " + join(FamilyShapes()) + ")"};
  }
  return Status::Ok();
}

}  // namespace

const std::vector<std::string>& FamilyShapes() {
  static const std::vector<std::string> kShapes = {"tiny", "qwen2.5-0.5b", "llava-1.5-7b", "e2b", "gemma-3-1b", "gemma-3-4b"};
  return kShapes;
}

Result<ChatConfig> FamilyChatConfig(const FamilyModelOptions& o) {
  MLC_RETURN_IF_ERROR(CheckOptions(o));
  const cpu::FamilySpec& family = *cpu::FindFamily(o.family);
  return ParseChatConfig(ChatConfigJson(o, family, ShapeOf(o, family)));
}

Result<FamilyModelReport> WriteFamilyModel(const std::string& dir, const FamilyModelOptions& o) {
  MLC_RETURN_IF_ERROR(CheckOptions(o));
  const cpu::FamilySpec& family = *cpu::FindFamily(o.family);
  Shape shape = ShapeOf(o, family);
  Json chat_json = ChatConfigJson(o, family, shape);
  auto chat = ParseChatConfig(chat_json);
  MLC_RETURN_IF_ERROR(chat);
  auto config = cpu::ParseModelConfig(*chat);
  MLC_RETURN_IF_ERROR(config);
  std::vector<ParamSpec> specs = cpu::ParamSpecs(*config);
  auto estimate = EstimateResources(specs, &*chat);
  MLC_RETURN_IF_ERROR(estimate);
  auto schema_id = ComputeParameterSchemaId(specs);
  MLC_RETURN_IF_ERROR(schema_id);
  std::vector<ParamSpec> sorted = specs;
  std::sort(sorted.begin(), sorted.end(),
            [](const ParamSpec& a, const ParamSpec& b) { return a.name < b.name; });
  auto cache = LayoutTensorCache(sorted);
  MLC_RETURN_IF_ERROR(cache);
  cache->param_size = static_cast<int64_t>(specs.size());
  cache->param_bytes = estimate->total_bytes;

  FamilyModelReport report;
  report.parameter_count = estimate->parameter_count;
  report.parameter_bytes = estimate->total_bytes;
  report.parameter_schema_id = *schema_id;
  ModelPackage package;
  package.tasks = cpu::TasksOf(*config);
  Result<std::string> interface_id = ComputeInterfaceId(package.tasks);
  MLC_RETURN_IF_ERROR(interface_id);
  package.interface_id = *interface_id;
  package.parameter_schema_id = *schema_id;
  report.interface_id = package.interface_id;

  std::vector<std::string> names;
  for (const TensorShard& s : cache->shards) names.push_back(s.data_path);
  for (const char* f : {kTensorCacheFileName, kChatConfigFileName, "tokenizer.json"}) names.push_back(f);
  if (o.manifest) names.push_back(kManifestFileName);

  Env& env = *DefaultEnv();
  if (Status made = env.CreateDirs(dir); !made) {
    return IoError(dir, "cannot create the folder: " + made.error().message);
  }
  if (!o.force) {
    Errors errors;
    for (const std::string& name : names) {
      if (FileExists(JoinPath(dir, name))) {
        errors.push_back(FileError(ErrorCode::kExists, JoinPath(dir, name), "exists; not replaced"));
      }
    }
    if (!errors.empty()) return errors;
  }
  if (o.force && !o.manifest && FileExists(JoinPath(dir, kManifestFileName))) {
    MLC_RETURN_IF_ERROR(env.RemoveFile(JoinPath(dir, kManifestFileName)));
  }
  for (TensorShard& s : cache->shards) {  // one shard in memory at a time
    std::string bytes = ShardBytes(s, *config, o.seed);
    Result<std::string> md5 = Md5Hex(bytes);
    MLC_RETURN_IF_ERROR(md5);
    s.md5sum = *md5;
    report.shard_bytes += static_cast<int64_t>(bytes.size());
    MLC_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(dir, s.data_path), bytes, o.force));
    report.files.push_back(s.data_path);
  }
  std::vector<std::pair<std::string, std::string>> files;
  files.emplace_back(kTensorCacheFileName, WriteTensorCache(*cache));
  files.emplace_back(kChatConfigFileName, PythonIndentJson(OrderedJson::parse(chat_json.dump()), 2));
  if (auto tokenizer = reference::TokenizerJson(std::min<int64_t>(shape.vocab, 512))) {
    files.emplace_back("tokenizer.json", std::move(*tokenizer));
  }
  if (o.manifest) files.emplace_back(kManifestFileName, WriteModelPackage(package));
  for (const auto& [name, bytes] : files) {
    MLC_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(dir, name), bytes, o.force));
    report.files.push_back(name);
  }
  return report;
}

}  // namespace mlc
