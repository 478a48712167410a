// Binding (SPEC 5): package x compiled program -> the resolved contract, or every rule that fails.
#include "mlc_manifest/bind.h"

#include <algorithm>

namespace mlc {
namespace {

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// Rules 3 and 7: the roles of a token_generation program.
void BindExports(const Program& program, const std::string& path, BoundContract& out,
                 Errors& errors) {
  const auto& ex = program.exports;
  auto find = [&](const char* role) -> std::optional<std::string> {
    auto it = ex.find(role);
    if (it == ex.end()) return std::nullopt;
    return it->second;
  };
  for (const char* role : {"embed_tokens", "create_kv_cache"}) {
    if (!find(role)) {
      AddError(errors, Invalid(path + "/exports",
                               std::string("a token_generation program must export role \"") +
                                   role + "\""));
    }
  }
  out.embed_function = find("embed_tokens").value_or("");
  out.create_kv_cache_function = find("create_kv_cache").value_or("");
  bool have_pair = false;
  for (GenerationPair pair : {GenerationPair::kTokens, GenerationPair::kEmbeds}) {
    std::string suffix = GenerationPairName(pair);
    auto prefill = find(("prefill_" + suffix).c_str());
    auto decode = find(("decode_" + suffix).c_str());
    if (prefill && decode) {
      if (!have_pair) {  // the token pair wins when both are declared
        out.pair = pair;
        out.prefill_function = *prefill;
        out.decode_function = *decode;
      }
      have_pair = true;
    } else if (prefill || decode) {
      AddError(errors, Invalid(path + "/exports",
                               "half a pair: prefill_" + suffix + " and decode_" + suffix +
                                   " must be declared together (only " +
                                   (prefill ? "prefill_" : "decode_") + suffix + " is)"));
    }
  }
  if (!have_pair) {
    AddError(errors, Invalid(path + "/exports",
                             "expected a complete pair of roles: prefill_tokens with "
                             "decode_tokens, or prefill_embeds with decode_embeds"));
  }
  out.create_rnn_state_function = find("create_rnn_state");
  out.kv_state_kind = KvStateKind(program);
}

// Rules 5 and 6: one media input bound to its adapter.
template <class Bound, class Proc>
void BindMedia(const std::string& name, const TaskInput& in, const Proc& proc,
               const Program& program, const std::string& in_path, const std::string& prog_path,
               const char* kind, std::optional<Bound>& slot, Errors& errors) {
  if (slot) {
    AddError(errors, Invalid(in_path, std::string("at most one ") + kind +
                                          " input per task (already bound \"" + slot->input +
                                          "\")"));
    return;
  }
  if (!in.adapter || !in.prompt) {
    AddError(errors, Invalid(in_path, std::string("a ") + kind +
                                          " input must declare an adapter and a prompt"));
    return;
  }
  Bound b;
  b.input = name;
  b.adapter = *in.adapter;
  b.prompt = *in.prompt;
  b.processor = proc;
  if (!program.adapters || !program.adapters->count(*in.adapter)) {
    AddError(errors, Invalid(in_path + "/adapter",
                             "adapter " + Quoted(*in.adapter) +
                                 " is not among the compiled program's adapters (" + prog_path +
                                 "/adapters)"));
    return;
  }
  b.function = program.adapters->at(*in.adapter);
  bool audio = std::string(kind) == "audio";
  b.dtype = audio ? "float32" : "uint8";
  if (program.adapter_dtypes && program.adapter_dtypes->count(*in.adapter)) {
    const std::string& dt = program.adapter_dtypes->at(*in.adapter);
    bool ok = audio ? dt == "float32" : (dt == "uint8" || dt == "uint32");
    if (!ok) {
      AddError(errors, Invalid(PointerAppend(prog_path + "/adapter_dtypes", *in.adapter),
                               std::string(kind) + " adapter " + Quoted(*in.adapter) +
                                   (audio ? " must take float32" : " must take uint8 or uint32") +
                                   ", not " + Quoted(dt)));
    }
    b.dtype = dt;
  }
  slot = std::move(b);
}

}  // namespace

DeviceFit FitDevice(const DeviceLimits& device, const std::vector<std::string>& required_features,
                    int64_t max_storage_buffer_binding_size) {
  DeviceFit fit;
  for (const std::string& f : required_features) {
    if (std::find(device.features.begin(), device.features.end(), f) == device.features.end()) {
      fit.missing_features.push_back(f);
    }
  }
  fit.binding_fits = max_storage_buffer_binding_size <= device.max_storage_buffer_binding_size;
  return fit;
}

std::string KvStateKind(const Program& program) {
  return program.exports.count("create_rnn_state") ? "hybrid" : "kv_cache";
}

std::string KvStateKind(const std::map<std::string, Program>& programs) {
  for (const auto& [name, program] : programs) {
    if (KvStateKind(program) == "hybrid") return "hybrid";
  }
  return "kv_cache";
}

const char* GenerationPairName(GenerationPair pair) {
  return pair == GenerationPair::kTokens ? "tokens" : "embeds";
}

// Each error given the document its path points into: /tasks and /weights are the package's,
// everything else (ids, programs, kv_state_kind, resources) the compiled program's.
namespace {
Errors InDocuments(Errors errors, const BindOptions& options) {
  for (Error& e : errors) {
    bool package = e.path.rfind("/tasks", 0) == 0 || e.path.rfind("/weights", 0) == 0;
    if (e.document.empty()) e.document = package ? options.package_document : options.program_document;
  }
  return errors;
}
}  // namespace

Result<BoundContract> Bind(const ModelPackage& package, const CompiledProgram& compiled,
                           const BindOptions& options) {
  Errors errors;
  BoundContract out;
  out.task_name = options.task;
  // Rule 1: identifiers.
  if (package.interface_id != compiled.interface_id) {
    AddError(errors, Invalid("/interface_id", "the package's interface_id " +
                                                  package.interface_id +
                                                  " differs from the compiled program's " +
                                                  compiled.interface_id));
  }
  if (package.parameter_schema_id != compiled.parameter_schema_id) {
    AddError(errors, Invalid("/parameter_schema_id",
                             "the package's weights.parameter_schema_id " +
                                 package.parameter_schema_id +
                                 " differs from the compiled program's " +
                                 compiled.parameter_schema_id));
  }
  if (options.weights_parameter_schema_id &&
      *options.weights_parameter_schema_id != package.parameter_schema_id) {
    AddError(errors, Invalid("/weights/parameter_schema_id",
                             "the weights hash to " + *options.weights_parameter_schema_id +
                                 ", not the declared " + package.parameter_schema_id));
  }
  // Rule 2: the task, its output and its executor.
  std::string task_path = PointerAppend("/tasks", options.task);
  auto task_it = package.tasks.find(options.task);
  if (task_it == package.tasks.end()) {
    std::string names;
    for (const auto& [n, t] : package.tasks) names += (names.empty() ? "" : ", ") + Quoted(n);
    AddError(errors, Invalid(task_path, "task " + Quoted(options.task) +
                                            " is not declared (the package declares " + names +
                                            ")"));
    return errors;
  }
  const Task& task = task_it->second;
  if (task.output != "text") {
    AddError(errors, Invalid(task_path + "/output",
                             "expected \"text\" (the only output a generation frontend "
                             "produces), got " + Quoted(task.output)));
  }
  out.executor = task.executor;
  std::string prog_path = PointerAppend("/programs", task.executor);
  auto prog_it = compiled.programs.find(task.executor);
  if (prog_it == compiled.programs.end()) {
    AddError(errors, Invalid(task_path + "/executor",
                             "executor " + Quoted(task.executor) +
                                 " is not a program of the compiled program document"));
    return errors;
  }
  const Program& program = prog_it->second;
  out.program = program;
  if (program.kind != "token_generation") {
    AddError(errors, Invalid(prog_path + "/kind", "expected \"token_generation\", got " +
                                                      Quoted(program.kind)));
  } else {
    BindExports(program, prog_path, out, errors);
  }
  // Rule 7: the library's kv_state_kind, where known, agrees with the roles.
  if (compiled.kv_state_kind && !out.kv_state_kind.empty() &&
      *compiled.kv_state_kind != out.kv_state_kind) {
    AddError(errors, Invalid("/kv_state_kind",
                             "the roles imply kv_state_kind " + Quoted(out.kv_state_kind) +
                                 " but the library reports " + Quoted(*compiled.kv_state_kind)));
  }
  // Rule 4: the text input.
  auto text = task.inputs.find("text");
  if (text == task.inputs.end()) {
    AddError(errors, Invalid(task_path + "/inputs",
                             "expected an input \"text\" with processor \"tokenizer\""));
  } else {
    const auto* proc = std::get_if<std::string>(&text->second.processor);
    if (!proc || *proc != "tokenizer") {
      AddError(errors, Invalid(task_path + "/inputs/text/processor", "expected \"tokenizer\""));
    }
    if (text->second.adapter || text->second.prompt) {
      AddError(errors, Invalid(task_path + "/inputs/text",
                               "the tokenizer input cannot declare an adapter or a prompt"));
    }
  }
  // Rules 5 and 6: media inputs.
  for (const auto& [name, in] : task.inputs) {
    std::string in_path = PointerAppend(task_path + "/inputs", name);
    if (const auto* a = std::get_if<AudioDecode>(&in.processor)) {
      BindMedia(name, in, *a, program, in_path, prog_path, "audio", out.audio, errors);
    } else if (const auto* im = std::get_if<ImageDecode>(&in.processor)) {
      BindMedia(name, in, *im, program, in_path, prog_path, "image", out.image, errors);
    }
  }
  // Rule 8: the device.
  if (options.device) {
    const DeviceLimits& dev = *options.device;
    const Resources& r = compiled.resources;
    DeviceFit fit = FitDevice(dev, r.required_features, r.max_storage_buffer_binding_size);
    for (const std::string& f : fit.missing_features) {
      AddError(errors, Invalid("/resources/required_features",
                               "the program requires feature " + Quoted(f) + ", which device " +
                                   Quoted(dev.name) + " does not support"));
    }
    if (!fit.binding_fits) {
      AddError(errors, Invalid(
          "/resources/max_storage_buffer_binding_size",
          "the program needs a storage buffer binding of " +
              std::to_string(r.max_storage_buffer_binding_size) + " bytes; device " +
              Quoted(dev.name) + " allows " + std::to_string(dev.max_storage_buffer_binding_size)));
    }
  }
  if (!errors.empty()) return InDocuments(std::move(errors), options);
  return out;
}

std::vector<std::string> RequiredFunctions(const BoundContract& b) {
  std::vector<std::string> fns;
  for (const auto& [role, fn] : b.program.exports) fns.push_back(fn);
  if (b.audio) fns.push_back(b.audio->function);
  if (b.image) fns.push_back(b.image->function);
  std::sort(fns.begin(), fns.end());
  fns.erase(std::unique(fns.begin(), fns.end()), fns.end());
  return fns;
}

OrderedJson BoundContractJson(const BoundContract& b) {
  OrderedJson o;
  o["task"] = b.task_name;
  o["executor"] = b.executor;
  o["pair"] = GenerationPairName(b.pair);
  OrderedJson fns;
  fns["embed_tokens"] = b.embed_function;
  fns["create_kv_cache"] = b.create_kv_cache_function;
  std::string suffix = GenerationPairName(b.pair);
  fns["prefill_" + suffix] = b.prefill_function;
  fns["decode_" + suffix] = b.decode_function;
  if (b.create_rnn_state_function) fns["create_rnn_state"] = *b.create_rnn_state_function;
  o["functions"] = fns;
  o["kv_state_kind"] = b.kv_state_kind;
  o["text_input"] = b.text_input;
  auto media = [](const BoundMedia& m, OrderedJson processor) {
    OrderedJson j;
    j["input"] = m.input;
    j["adapter"] = m.adapter;
    j["function"] = m.function;
    j["dtype"] = m.dtype;
    j["processor"] = std::move(processor);
    OrderedJson pr;
    pr["prefix_token_ids"] = m.prompt.prefix_token_ids;
    pr["placeholder_token_id"] = m.prompt.placeholder_token_id;
    pr["suffix_token_ids"] = m.prompt.suffix_token_ids;
    j["prompt"] = pr;
    return j;
  };
  if (b.audio) {
    OrderedJson p;
    p["sample_rate_hz"] = b.audio->processor.sample_rate_hz;
    p["min_samples"] = b.audio->processor.min_samples;
    p["max_samples"] = b.audio->processor.max_samples;
    o["audio"] = media(*b.audio, p);
  } else {
    o["audio"] = nullptr;
  }
  if (b.image) {
    OrderedJson p;
    p["mode"] = ResizeModeName(b.image->processor.mode);
    p["height"] = b.image->processor.height;
    p["width"] = b.image->processor.width;
    p["num_embeddings"] = b.image->processor.num_embeddings;
    o["image"] = media(*b.image, p);
  } else {
    o["image"] = nullptr;
  }
  return o;
}

}  // namespace mlc
