// Binding a package to a loaded library: the manifest path (SPEC 5, every function resolved
// before any call), the legacy path for packages without a manifest (its contract:
// contract/bind_folder.cc), and LoadModel.
#include <chrono>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/runtime.h"

namespace mlc {
namespace {

// Looks up a function, recording an error naming it (and its role) when missing.
const PackedFunction* Resolve(const ModelLibrary& library, const std::string& function,
                              const std::string& role, const std::string& path, Errors& errors) {
  if (function.empty()) return nullptr;
  const PackedFunction* f = library.GetFunction(function);
  if (!f) {
    errors.push_back(Invalid(path, "the library has no function \"" + function + "\" (" + role +
                                       ")"));
  }
  return f;
}

Status ResolveFunctions(const ModelLibrary& library, const std::string& program_path,
                        BoundModel& out) {
  Errors errors;
  const BoundContract& c = out.contract;
  std::string exports = program_path + "/exports";
  std::string prefill_role = std::string("prefill_") + GenerationPairName(c.pair);
  std::string decode_role = std::string("decode_") + GenerationPairName(c.pair);
  out.embed = Resolve(library, c.embed_function, "role embed_tokens",
                      PointerAppend(exports, "embed_tokens"), errors);
  out.create_kv_cache = Resolve(library, c.create_kv_cache_function, "role create_kv_cache",
                                PointerAppend(exports, "create_kv_cache"), errors);
  out.prefill = Resolve(library, c.prefill_function, "role " + prefill_role,
                        PointerAppend(exports, prefill_role), errors);
  out.decode = Resolve(library, c.decode_function, "role " + decode_role,
                       PointerAppend(exports, decode_role), errors);
  // Every other export the program names must exist too, even those this frontend does not call.
  for (const auto& [role, function] : c.program.exports) {
    if (role == "embed_tokens" || role == "create_kv_cache" || role == prefill_role ||
        role == decode_role) {
      continue;
    }
    Resolve(library, function, "role " + role, PointerAppend(exports, role), errors);
  }
  if (c.program.adapters) {
    for (const auto& [adapter, function] : *c.program.adapters) {
      const PackedFunction* f = Resolve(library, function, "adapter " + adapter,
                                        PointerAppend(program_path + "/adapters", adapter), errors);
      if (c.audio && c.audio->adapter == adapter) out.audio_adapter = f;
      if (c.image && c.image->adapter == adapter) out.image_adapter = f;
    }
  }
  if (!errors.empty()) return errors;
  return Status::Ok();
}

Result<BoundModel> BindLegacy(const ModelLibrary& library) {
  BoundModel out;
  out.legacy = true;
  out.contract = LegacyContract(&library);
  Errors errors;
  out.embed = Resolve(library, "embed", "legacy embed", "", errors);
  out.prefill = Resolve(library, out.contract.prefill_function, "legacy prefill", "", errors);
  out.decode = Resolve(library, out.contract.decode_function, "legacy decode", "", errors);
  out.create_kv_cache = library.GetFunction(out.contract.create_kv_cache_function);
  out.hidden_states = library.GetFunction(kHiddenStatesFunction);
  if (!out.create_kv_cache) {
    errors.push_back(Invalid("", "the library has neither create_tir_paged_kv_cache nor "
                                 "create_flashinfer_paged_kv_cache (legacy KV cache creation)"));
  }
  if (!errors.empty()) return errors;
  out.note = std::string("no ") + kManifestFileName + ": bound as MLC libraries always were (embed, " +
             out.contract.prefill_function + ", " + out.contract.decode_function + ", " +
             out.contract.create_kv_cache_function + "; the " +
             (out.contract.pair == GenerationPair::kTokens ? "token" : "embed") + " pair, text only)";
  return out;
}

}  // namespace

Result<BoundModel> BindModel(const std::string& package_dir, const ModelLibrary& library,
                             const std::optional<CompiledProgram>& program) {
  std::string manifest_path = JoinPath(package_dir, kManifestFileName);
  if (!FileExists(manifest_path)) {
    auto legacy = BindLegacy(library);
    if (legacy && program) legacy->note += " (the compiled-program document is not used)";
    return legacy;
  }
  auto package = ReadModelPackage(manifest_path);  // its errors name the manifest
  MLC_RETURN_IF_ERROR(package);
  std::optional<CompiledProgram> compiled = program;
  std::string program_path;
  if (!compiled) compiled = library.Metadata().program;
  if (!compiled) {
    const auto& artifact = library.Metadata().artifact;
    if (!artifact) {
      return Error{ErrorCode::kInvalid, "/artifact",
                   std::string(kManifestFileName) +
                       " is present but the library carries no "
                       "_metadata.artifact (and no program document was given)",
                   "_metadata"};
    }
    auto parsed = ParseCompiledProgram(*artifact);
    if (!parsed) {
      Errors errors = parsed.take_errors();
      for (Error& e : errors) e.path = "_metadata.artifact#" + e.path;
      return errors;
    }
    compiled = *parsed;
  }
  BindOptions options;
  options.package_document = manifest_path;
  options.program_document = program ? "compiled program" : "_metadata";
  if (auto cache = ReadTensorCache(package_dir)) {
    auto id = ComputeParameterSchemaId(ParamSpecsOf(*cache));
    if (id) options.weights_parameter_schema_id = *id;
  }
  auto bound = Bind(*package, *compiled, options);
  MLC_RETURN_IF_ERROR(bound);
  if (compiled->kv_state_kind && library.Metadata().kv_state_kind != *compiled->kv_state_kind) {
    return Invalid("/kv_state_kind", "the program says kv_state_kind \"" +
                                         *compiled->kv_state_kind + "\" but the library has \"" +
                                         library.Metadata().kv_state_kind + "\"");
  }
  BoundModel out;
  out.contract = std::move(*bound);
  program_path = PointerAppend("/programs", out.contract.executor);
  MLC_RETURN_IF_ERROR(ResolveFunctions(library, program_path, out));
  out.hidden_states = library.GetFunction(kHiddenStatesFunction);
  out.note = std::string(kManifestFileName) + ": task \"" + out.contract.task_name +
             "\" bound to program \"" + out.contract.executor + "\" with the " +
             GenerationPairName(out.contract.pair) + " pair";
  return out;
}

namespace {

// A library whose layers carry their own windows (some slide, some see everything) reads the chat
// config's sliding_window_size as the sliding layers' window: the KV cache then keeps the whole
// context window for the full layers instead of sliding for all of them.
Status ApplyLayerWindows(const LibraryMetadata& metadata, PlanLimits& limits) {
  if (metadata.layer_sliding_window <= 0 || !limits.HasSlidingWindow()) return Status::Ok();
  limits.sliding_window_size = -1;
  if (limits.context_window_size <= 0) {
    return Invalid("/context_window_size",
                   "mlc-chat-config.json must give context_window_size >= 1: the model's full-attention "
                   "layers see the whole context, so sliding_window_size (" +
                       std::to_string(metadata.layer_sliding_window) +
                       ", the sliding layers' window) does not bound it");
  }
  return Status::Ok();
}

}  // namespace

Result<LoadedModel> LoadModel(const std::string& package_dir, const ModelLibrary& library,
                              const std::optional<CompiledProgram>& program) {
  auto start = std::chrono::steady_clock::now();
  auto config = ReadChatConfig(JoinPath(package_dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(config);
  auto model = LoadModel(package_dir, std::move(*config), library, program);
  MLC_RETURN_IF_ERROR(model);
  // The config's reading counts too.
  model->load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             start).count();
  return model;
}

Result<LoadedModel> LoadModel(const std::string& package_dir, ChatConfig config,
                              const ModelLibrary& library,
                              const std::optional<CompiledProgram>& program) {
  auto start = std::chrono::steady_clock::now();
  LoadedModel model;
  model.config = std::move(config);
  auto limits = PlanLimitsFromChatConfig(model.config);
  MLC_RETURN_IF_ERROR(limits);
  model.limits = *limits;
  model.hidden_size = model.config.Dimension("hidden_size");
  auto bound = BindModel(package_dir, library, program);
  MLC_RETURN_IF_ERROR(bound);
  model.bound = std::move(*bound);
  MLC_RETURN_IF_ERROR(ApplyLayerWindows(library.Metadata(), model.limits));
  auto params = LoadParameters(package_dir, library.Metadata().params);
  MLC_RETURN_IF_ERROR(params);
  model.params = *params;
  model.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            start).count();
  return model;
}

}  // namespace mlc
