// The reference package generator: weights drawn from a seed, encoded as the converter does
// (float32 records stored as bfloat16 in params_shard_*.bin with md5sums in tensor-cache.json),
// mlc-chat-config.json, mlc-model-manifest.json (WriteModelPackage), the compiled-program
// document (WriteCompiledProgram), the library's _metadata (reference-lib.json) and a byte-level
// BPE tokenizer.json.
#include <cmath>
#include <cstdio>

#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "base/hash.h"
#include "mlc_manifest/package.h"
#include "runtime/reference/reference_internal.h"
#include "runtime/reference_tokenizer.h"
#include "runtime/splitmix.h"

namespace mlc {
namespace {

using Rng = SplitMix64;

int64_t Elements(const ParamSpec& p) {
  int64_t n = 1;
  for (const auto& d : p.shape) n *= std::get<int64_t>(d);
  return n;
}

// Values of one parameter: norms near 1, matrices scaled by 1/sqrt(fan_in), embeddings N(0, 1).
std::vector<float> Draw(const ParamSpec& p, Rng& rng) {
  std::vector<float> v(static_cast<size_t>(Elements(p)));
  bool norm = p.name.find("norm") != std::string::npos;
  bool bias = p.name.find("bias") != std::string::npos;
  double scale = 1.0;
  if (norm || bias) {
    scale = 0.1;
  } else if (p.shape.size() == 2 && p.name.find("embed") == std::string::npos) {
    scale = 1.0 / std::sqrt(static_cast<double>(std::get<int64_t>(p.shape[1])));
  }
  for (float& x : v) x = static_cast<float>((norm ? 1.0 : 0.0) + scale * rng.Normal());
  return v;
}

reference::Config ConfigOf(const ReferenceModelOptions& o) {
  reference::Config c;
  c.vocab_size = o.vocab_size;
  c.hidden_size = o.hidden_size;
  c.num_layers = o.num_layers;
  c.num_heads = o.num_heads;
  c.intermediate_size = o.intermediate_size;
  c.audio_frame_size = o.audio ? o.audio_frame_size : 0;
  c.image_size = o.image ? o.image_size : 0;
  c.modality_embedding = o.pairs == ReferencePairs::kTokens ? "prefill" : "inputs";
  return c;
}

Tasks ReferenceTasks(const ReferenceModelOptions& o, const reference::Config& c) {
  Task task;
  task.executor = "generation";
  task.output = "text";
  task.inputs["text"] = TaskInput{std::string("tokenizer"), std::nullopt, std::nullopt};
  if (o.audio) {
    AudioDecode a;
    a.sample_rate_hz = o.sample_rate_hz;
    a.min_samples = 1;
    a.max_samples = o.max_audio_samples;
    task.inputs["audio"] = TaskInput{a, std::string("audio"),
                                     PromptInsertion{{ReferenceTokens::kAudioStart},
                                                     ReferenceTokens::kAudioPlaceholder,
                                                     {ReferenceTokens::kAudioEnd}}};
  }
  if (o.image) {
    ImageDecode i;
    i.mode = ResizeMode::kCenterCrop;
    i.height = i.width = o.image_size;
    i.num_embeddings = c.num_patches();
    task.inputs["image"] = TaskInput{i, std::string("image"),
                                     PromptInsertion{{ReferenceTokens::kImageStart},
                                                     ReferenceTokens::kImagePlaceholder,
                                                     {ReferenceTokens::kImageEnd}}};
  }
  return {{"chat.completions", task}};
}

Program ReferenceProgram(const ReferenceModelOptions& o) {
  Program p;
  p.kind = "token_generation";
  p.exports = {{"embed_tokens", "embed"}, {"create_kv_cache", "create_tir_paged_kv_cache"}};
  if (o.pairs != ReferencePairs::kEmbeds) {
    p.exports["prefill_tokens"] = "prefill_tokens";
    p.exports["decode_tokens"] = "decode_tokens";
  }
  if (o.pairs != ReferencePairs::kTokens) {
    p.exports["prefill_embeds"] = "prefill";
    p.exports["decode_embeds"] = "decode";
  }
  if (o.audio || o.image) {
    p.adapters.emplace();
    if (o.audio) (*p.adapters)["audio"] = "audio_embed";
    if (o.image) (*p.adapters)["image"] = "image_embed";
  }
  if (o.image && o.image_dtype != "uint8") p.adapter_dtypes = {{{"image", o.image_dtype}}};
  return p;
}

Json ChatConfigJson(const ReferenceModelOptions& o, const reference::Config& c) {
  Json mc = reference::ConfigJson(c);
  mc["context_window_size"] = o.context_window_size;
  mc["prefill_chunk_size"] = o.prefill_chunk_size;
  return {{"version", "0.1.0"},
          {"model_type", kReferenceModelType},
          {"quantization", "q0f32"},
          {"model_config", mc},
          {"vocab_size", o.vocab_size},
          {"context_window_size", o.context_window_size},
          {"sliding_window_size", -1},
          {"prefill_chunk_size", o.prefill_chunk_size},
          {"attention_sink_size", -1},
          {"tensor_parallel_shards", 1},
          {"temperature", 0.7},
          {"top_p", 0.95},
          {"conv_template", reference::ConvTemplateJson()},
          {"bos_token_id", ReferenceTokens::kBos},
          {"eos_token_id", ReferenceTokens::kEos}};
}

OrderedJson ParamSpecJson(const ParamSpec& p) {
  OrderedJson shape = OrderedJson::array();
  for (const auto& d : p.shape) shape.push_back(std::get<int64_t>(d));
  return {{"name", p.name}, {"shape", shape}, {"dtype", p.dtype}};
}

struct Shards {
  std::vector<std::pair<std::string, std::string>> files;  // name, bytes
  OrderedJson records = OrderedJson::array();
  int64_t bytes = 0;
};

// Packs bf16-encoded parameters into shards of at most shard_bytes (one oversized parameter
// gets a shard of its own).
Result<Shards> PackShards(const std::vector<ParamSpec>& specs, uint64_t seed, uint64_t shard_bytes) {
  Rng rng(seed ^ 0x6d6c632d6d616e69ull);
  Shards out;
  std::string data;
  OrderedJson records = OrderedJson::array();
  auto flush = [&]() -> Status {
    if (data.empty()) return Status::Ok();
    Result<std::string> md5 = Md5Hex(data);
    MLC_RETURN_IF_ERROR(md5);
    std::string name = "params_shard_" + std::to_string(out.files.size()) + ".bin";
    out.records.push_back({{"dataPath", name},
                           {"format", "raw-shard"},
                           {"nbytes", data.size()},
                           {"records", records},
                           {"md5sum", *md5}});
    out.bytes += static_cast<int64_t>(data.size());
    out.files.emplace_back(name, std::move(data));
    data.clear();
    records = OrderedJson::array();
    return Status::Ok();
  };
  for (const ParamSpec& p : specs) {
    std::vector<float> values = Draw(p, rng);
    size_t nbytes = values.size() * 2;
    if (!data.empty() && data.size() + nbytes > shard_bytes) MLC_RETURN_IF_ERROR(flush());
    OrderedJson rec = ParamSpecJson(p);
    rec["format"] = "f32-to-bf16";
    rec["nbytes"] = nbytes;
    rec["byteOffset"] = data.size();
    records.push_back(rec);
    for (float v : values) {
      uint16_t b = FloatToBf16(v);
      data.push_back(static_cast<char>(b & 0xff));
      data.push_back(static_cast<char>(b >> 8));
    }
  }
  MLC_RETURN_IF_ERROR(flush());
  return out;
}

Status CheckOptions(const ReferenceModelOptions& o) {
  auto bad = [](const std::string& what) { return Error{ErrorCode::kUsage, "", what}; };
  if (o.vocab_size < 16 || o.hidden_size < 2 || o.num_layers < 1 || o.num_heads < 1 ||
      o.intermediate_size < 1) {
    return bad("the reference model needs vocab_size >= 16 and positive dimensions");
  }
  if (o.hidden_size % o.num_heads || (o.hidden_size / o.num_heads) % 2) {
    return bad("hidden_size must split into heads of an even size");
  }
  if (o.context_window_size < 1 || o.prefill_chunk_size < 1) {
    return bad("context_window_size and prefill_chunk_size must be >= 1");
  }
  if (o.image && (o.patch_size < 1 || o.image_size < o.patch_size || o.image_size % o.patch_size)) {
    return bad("image_size must be a positive multiple of patch_size");
  }
  if (o.image_dtype != "uint8" && o.image_dtype != "uint32") {
    return bad("the image dtype must be uint8 or uint32");
  }
  if (o.audio && (o.audio_frame_size < 1 || o.sample_rate_hz < 1 || o.max_audio_samples < 1)) {
    return bad("audio sizes must be >= 1");
  }
  return Status::Ok();
}

}  // namespace

const char* ReferencePairsName(ReferencePairs pairs) {
  switch (pairs) {
    case ReferencePairs::kTokens: return "tokens";
    case ReferencePairs::kEmbeds: return "embeds";
    default: return "both";
  }
}

Result<ReferenceModelReport> WriteReferenceModel(const std::string& dir,
                                                 const ReferenceModelOptions& o) {
  MLC_RETURN_IF_ERROR(CheckOptions(o));
  reference::Config c = ConfigOf(o);
  std::vector<ParamSpec> specs = reference::ParamSpecs(c);
  Json chat_json = ChatConfigJson(o, c);
  auto chat = ParseChatConfig(chat_json);
  MLC_RETURN_IF_ERROR(chat);
  auto estimate = EstimateResources(specs, &*chat);
  MLC_RETURN_IF_ERROR(estimate);
  auto schema_id = ComputeParameterSchemaId(specs);
  MLC_RETURN_IF_ERROR(schema_id);

  ReferenceModelReport report;
  report.parameter_count = estimate->parameter_count;
  report.parameter_bytes = estimate->total_bytes;
  report.parameter_schema_id = *schema_id;

  ModelPackage package;
  package.tasks = ReferenceTasks(o, c);
  Result<std::string> interface_id = ComputeInterfaceId(package.tasks);
  MLC_RETURN_IF_ERROR(interface_id);
  package.interface_id = *interface_id;
  package.parameter_schema_id = *schema_id;
  report.interface_id = package.interface_id;

  CompiledProgram program;
  program.interface_id = package.interface_id;
  program.parameter_schema_id = *schema_id;
  program.programs["generation"] = ReferenceProgram(o);
  program.resources = MakeResources(*estimate, {});
  std::string program_text = WriteCompiledProgram(program);

  Result<Shards> packed = PackShards(specs, o.seed, o.shard_bytes);
  MLC_RETURN_IF_ERROR(packed);
  Shards& shards = *packed;
  OrderedJson cache = {{"metadata",
                        {{"ParamSize", specs.size()},
                         {"ParamBytes", static_cast<double>(estimate->total_bytes)},
                         {"BitsPerParam", 32.0}}},
                       {"records", shards.records}};
  report.shard_bytes = shards.bytes;

  OrderedJson lib = {{"model_type", kReferenceModelType}, {"kv_state_kind", "kv_cache"}};
  OrderedJson functions = OrderedJson::array();
  for (const auto& [role, fn] : program.programs["generation"].exports) functions.push_back(fn);
  if (o.audio) functions.push_back("audio_embed");
  if (o.image) functions.push_back("image_embed");
  lib["functions"] = functions;
  OrderedJson params = OrderedJson::array();
  for (const ParamSpec& p : specs) params.push_back(ParamSpecJson(p));
  lib["params"] = params;
  lib["artifact"] = OrderedJson::parse(program_text);

  std::vector<std::pair<std::string, std::string>> files = std::move(shards.files);
  files.emplace_back(kTensorCacheFileName, PythonIndentJson(cache, 4));
  files.emplace_back(kChatConfigFileName, PythonIndentJson(OrderedJson::parse(chat_json.dump()), 2));
  if (o.manifest) files.emplace_back(kManifestFileName, WriteModelPackage(package));
  files.emplace_back(kReferenceProgramFile, program_text);
  files.emplace_back(kReferenceLibraryFile, PythonIndentJson(lib, 2));
  if (auto tokenizer = reference::TokenizerJson(o.vocab_size)) {
    files.emplace_back("tokenizer.json", std::move(*tokenizer));
  }

  Env& env = *DefaultEnv();
  if (Status made = env.CreateDirs(dir); !made) {
    return IoError(dir, "cannot create the folder: " + made.error().message);
  }
  if (!o.force) {
    Errors errors;
    for (const auto& [name, bytes] : files) {
      if (FileExists(JoinPath(dir, name))) {
        errors.push_back(FileError(ErrorCode::kExists, JoinPath(dir, name), "exists; not replaced"));
      }
    }
    if (!errors.empty()) return errors;
  }
  if (o.force && !o.manifest && FileExists(JoinPath(dir, kManifestFileName))) {
    MLC_RETURN_IF_ERROR(env.RemoveFile(JoinPath(dir, kManifestFileName)));
  }
  for (const auto& [name, bytes] : files) {
    MLC_RETURN_IF_ERROR(WriteFileAtomic(JoinPath(dir, name), bytes, o.force));
    report.files.push_back(name);
  }
  return report;
}

}  // namespace mlc
