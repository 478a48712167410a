// Parsers of the two contract documents (SPEC 1). Every rule that fails is reported, each at the
// JSON Pointer of the offending value, rather than stopping at the first.
#include <algorithm>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

class Parser {
 public:
  explicit Parser(Errors* errors) : c_(errors) {}

  // {"name": value, ...} with at least one entry unless allow_empty; keys non-empty.
  template <class F>
  void Entries(const Json& v, const std::string& path, bool allow_empty, const char* what,
               F&& each) {
    if (!c_.Object(v, path)) return;
    if (v.empty() && !allow_empty) c_.Fail(path, std::string("expected at least one ") + what);
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string p = PointerAppend(path, it.key());
      if (it.key().empty()) {
        c_.Fail(p, std::string(what) + " names must be non-empty strings");
        continue;
      }
      each(it.key(), it.value(), p);
    }
  }

  std::map<std::string, std::string> StringMap(const Json& v, const std::string& path,
                                               bool allow_empty) {
    std::map<std::string, std::string> out;
    Entries(v, path, allow_empty, "entry", [&](const std::string& k, const Json& val,
                                               const std::string& p) {
      if (auto s = c_.String(val, p)) out[k] = *s;
    });
    return out;
  }

  std::vector<int64_t> IntegerArray(const Json& v, const std::string& path, int64_t minimum) {
    std::vector<int64_t> out;
    if (!v.is_array()) {
      c_.Fail(path, "expected an array of integers, got " + JsonTypeName(v));
      return out;
    }
    for (size_t i = 0; i < v.size(); ++i) {
      if (auto n = c_.Integer(v[i], PointerAppend(path, i), minimum)) out.push_back(*n);
    }
    return out;
  }

  PromptInsertion Prompt(const Json& v, const std::string& path) {
    PromptInsertion out;
    if (!c_.Object(v, path)) return out;
    c_.Keys(v, path, {"prefix_token_ids", "placeholder_token_id", "suffix_token_ids"},
            {"placeholder_token_id"});
    if (v.contains("prefix_token_ids")) {
      out.prefix_token_ids = IntegerArray(v["prefix_token_ids"], path + "/prefix_token_ids", 0);
    }
    if (v.contains("placeholder_token_id")) {
      out.placeholder_token_id =
          c_.Integer(v["placeholder_token_id"], path + "/placeholder_token_id", 0).value_or(0);
    }
    if (v.contains("suffix_token_ids")) {
      out.suffix_token_ids = IntegerArray(v["suffix_token_ids"], path + "/suffix_token_ids", 0);
    }
    return out;
  }

  AudioDecode Audio(const Json& v, const std::string& path) {
    AudioDecode a;
    c_.Keys(v, path,
            {"kind", "format", "sample_rate_hz", "channels", "min_samples", "max_samples"},
            {"kind", "format", "sample_rate_hz", "channels", "max_samples"});
    if (v.contains("format")) c_.Literal(v["format"], path + "/format", "pcm_f32");
    if (v.contains("sample_rate_hz")) {
      a.sample_rate_hz = c_.Integer(v["sample_rate_hz"], path + "/sample_rate_hz", 1).value_or(0);
    }
    if (v.contains("channels")) {
      std::optional<int64_t> ch = c_.Integer(v["channels"], path + "/channels", 1);
      if (ch && *ch != 1) {
        c_.Fail(path + "/channels", "expected 1 (the decoder downmixes to mono), got " +
                                        std::to_string(*ch));
      }
    }
    std::optional<int64_t> lo = 1, hi;
    if (v.contains("min_samples")) lo = c_.Integer(v["min_samples"], path + "/min_samples", 1);
    if (v.contains("max_samples")) hi = c_.Integer(v["max_samples"], path + "/max_samples", 1);
    if (lo && hi && *lo > *hi) {
      c_.Fail(path + "/min_samples", "min_samples (" + std::to_string(*lo) +
                                         ") must not exceed max_samples (" + std::to_string(*hi) +
                                         ")");
    }
    a.min_samples = lo.value_or(1);
    a.max_samples = hi.value_or(0);
    return a;
  }

  ImageDecode Image(const Json& v, const std::string& path) {
    ImageDecode im;
    c_.Keys(v, path, {"kind", "format", "layout", "resize", "num_embeddings"},
            {"kind", "format", "layout", "resize", "num_embeddings"});
    if (v.contains("format")) c_.Literal(v["format"], path + "/format", "rgb_u8");
    if (v.contains("layout")) c_.Literal(v["layout"], path + "/layout", "nhwc");
    if (v.contains("resize")) {
      const Json& r = v["resize"];
      std::string rp = path + "/resize";
      if (c_.Object(r, rp)) {
        c_.Keys(r, rp, {"mode", "height", "width"}, {"mode", "height", "width"});
        if (r.contains("mode")) {
          const Json& m = r["mode"];
          if (m == "stretch") {
            im.mode = ResizeMode::kStretch;
          } else if (m == "center_crop") {
            im.mode = ResizeMode::kCenterCrop;
          } else {
            c_.Fail(rp + "/mode", "expected \"stretch\" or \"center_crop\", got " +
                                      (m.is_string() ? "\"" + m.get<std::string>() + "\""
                                                     : JsonTypeName(m)));
          }
        }
        if (r.contains("height")) im.height = c_.Integer(r["height"], rp + "/height", 1).value_or(0);
        if (r.contains("width")) im.width = c_.Integer(r["width"], rp + "/width", 1).value_or(0);
      }
    }
    if (v.contains("num_embeddings")) {
      im.num_embeddings = c_.Integer(v["num_embeddings"], path + "/num_embeddings", 1).value_or(0);
    }
    return im;
  }

  Processor ProcessorOf(const Json& v, const std::string& path) {
    if (v.is_string()) return c_.String(v, path).value_or("");
    if (!v.is_object()) {
      c_.Fail(path, "expected a processor name or an object with \"kind\", got " +
                        JsonTypeName(v));
      return std::string();
    }
    if (!v.contains("kind")) {
      c_.Fail(path + "/kind", "missing required field (expected \"audio_decode\" or \"image_decode\")");
      return std::string();
    }
    const Json& kind = v["kind"];
    if (kind == "audio_decode") return Audio(v, path);
    if (kind == "image_decode") return Image(v, path);
    c_.Fail(path + "/kind", "expected \"audio_decode\" or \"image_decode\", got " +
                                (kind.is_string() ? "\"" + kind.get<std::string>() + "\" (a processor kind this frontend cannot honor)"
                                                  : JsonTypeName(kind)));
    return std::string();
  }

  TaskInput Input(const Json& v, const std::string& path) {
    TaskInput in;
    if (!c_.Object(v, path)) return in;
    c_.Keys(v, path, {"processor", "adapter", "prompt"}, {"processor"});
    if (v.contains("processor")) in.processor = ProcessorOf(v["processor"], path + "/processor");
    if (v.contains("adapter")) in.adapter = c_.String(v["adapter"], path + "/adapter").value_or("");
    if (v.contains("prompt")) in.prompt = Prompt(v["prompt"], path + "/prompt");
    if (v.contains("adapter") != v.contains("prompt")) {
      c_.Fail(path, std::string("adapter and prompt must be declared together (only ") +
                        (v.contains("adapter") ? "adapter" : "prompt") + " is present)");
    }
    return in;
  }

  Task TaskOf(const Json& v, const std::string& path) {
    Task t;
    if (!c_.Object(v, path)) return t;
    c_.Keys(v, path, {"executor", "inputs", "output"}, {"executor", "inputs", "output"});
    if (v.contains("executor")) t.executor = c_.String(v["executor"], path + "/executor").value_or("");
    if (v.contains("inputs")) {
      Entries(v["inputs"], path + "/inputs", false, "input",
              [&](const std::string& k, const Json& val, const std::string& p) {
                t.inputs[k] = Input(val, p);
              });
    }
    if (v.contains("output")) t.output = c_.String(v["output"], path + "/output").value_or("");
    return t;
  }

  Tasks TasksOf(const Json& v, const std::string& path) {
    Tasks tasks;
    Entries(v, path, false, "task", [&](const std::string& k, const Json& val,
                                        const std::string& p) { tasks[k] = TaskOf(val, p); });
    return tasks;
  }

  void SchemaHeader(const Json& doc, const std::string& path, const char* schema) {
    if (doc.contains("schema")) c_.Literal(doc["schema"], path + "/schema", schema);
    if (doc.contains("schema_version")) {
      std::optional<int64_t> ver = c_.Integer(doc["schema_version"], path + "/schema_version", 1);
      if (ver && *ver != 1) {
        c_.Fail(path + "/schema_version",
                "unsupported schema_version " + std::to_string(*ver) + " (this tool reads 1)");
      }
    }
  }

  std::string Id(const Json& doc, const std::string& key, const std::string& path) {
    if (!doc.contains(key)) return "";
    return c_.Sha256(doc[key], PointerAppend(path, key)).value_or("");
  }

  Program ProgramOf(const Json& v, const std::string& path) {
    Program p;
    if (!c_.Object(v, path)) return p;
    c_.Keys(v, path, {"kind", "exports", "adapters", "adapter_dtypes"}, {"kind", "exports"});
    if (v.contains("kind")) p.kind = c_.String(v["kind"], path + "/kind").value_or("");
    if (v.contains("exports")) p.exports = StringMap(v["exports"], path + "/exports", false);
    if (v.contains("adapters")) p.adapters = StringMap(v["adapters"], path + "/adapters", true);
    if (v.contains("adapter_dtypes")) {
      p.adapter_dtypes = StringMap(v["adapter_dtypes"], path + "/adapter_dtypes", true);
      for (const auto& [name, dtype] : *p.adapter_dtypes) {
        if (!p.adapters || !p.adapters->count(name)) {
          c_.Fail(PointerAppend(path + "/adapter_dtypes", name),
                  "\"" + name + "\" is not a key of adapters");
        }
      }
    }
    return p;
  }

  Resources ResourcesOf(const Json& v, const std::string& path) {
    Resources r;
    if (!c_.Object(v, path)) return r;
    c_.Keys(v, path,
            {"required_features", "max_storage_buffer_binding_size",
             "estimated_device_memory_bytes"},
            {"required_features", "max_storage_buffer_binding_size",
             "estimated_device_memory_bytes"});
    if (v.contains("required_features")) {
      const Json& f = v["required_features"];
      std::string fp = path + "/required_features";
      if (!f.is_array()) {
        c_.Fail(fp, "expected an array of non-empty strings, got " + JsonTypeName(f));
      } else {
        for (size_t i = 0; i < f.size(); ++i) {
          if (auto s = c_.String(f[i], PointerAppend(fp, i))) r.required_features.push_back(*s);
        }
      }
    }
    if (v.contains("max_storage_buffer_binding_size")) {
      r.max_storage_buffer_binding_size =
          c_.Integer(v["max_storage_buffer_binding_size"], path + "/max_storage_buffer_binding_size", 0)
              .value_or(0);
    }
    if (v.contains("estimated_device_memory_bytes")) {
      r.estimated_device_memory_bytes =
          c_.Integer(v["estimated_device_memory_bytes"], path + "/estimated_device_memory_bytes", 0)
              .value_or(0);
    }
    return r;
  }

  FieldChecker& checker() { return c_; }

 private:
  FieldChecker c_;
};

}  // namespace

Result<Tasks> ParseTasks(const Json& value, const std::string& path) {
  Errors errors;
  Parser p(&errors);
  Tasks tasks = p.TasksOf(value, path);
  if (!errors.empty()) return errors;
  return tasks;
}

Result<std::map<std::string, Program>> ParsePrograms(const Json& value, const std::string& path) {
  Errors errors;
  Parser p(&errors);
  std::map<std::string, Program> out;
  p.Entries(value, path, false, "program",
            [&](const std::string& k, const Json& v, const std::string& at) {
              out[k] = p.ProgramOf(v, at);
            });
  if (!errors.empty()) return errors;
  return out;
}

Result<ModelPackage> ParseModelPackageFields(const Json& doc) {
  Errors errors;
  Parser p(&errors);
  FieldChecker& c = p.checker();
  ModelPackage pkg;
  if (!c.Object(doc, "")) return errors;
  c.Keys(doc, "", {"schema", "schema_version", "chat_config", "interface_id", "weights", "tasks"},
         {"schema", "schema_version", "interface_id", "weights", "tasks"});
  p.SchemaHeader(doc, "", kModelPackageSchema);
  if (doc.contains("chat_config")) c.Literal(doc["chat_config"], "/chat_config", kChatConfigFileName);
  pkg.interface_id = p.Id(doc, "interface_id", "");
  if (doc.contains("weights") && c.Object(doc["weights"], "/weights")) {
    const Json& w = doc["weights"];
    c.Keys(w, "/weights", {"manifest", "parameter_schema_id"}, {"manifest", "parameter_schema_id"});
    if (w.contains("manifest")) c.Literal(w["manifest"], "/weights/manifest", kTensorCacheFileName);
    pkg.parameter_schema_id = p.Id(w, "parameter_schema_id", "/weights");
  }
  if (doc.contains("tasks")) pkg.tasks = p.TasksOf(doc["tasks"], "/tasks");
  if (!errors.empty()) return errors;
  return pkg;
}

Status CheckInterfaceId(const ModelPackage& pkg) {
  Result<std::string> computed = ComputeInterfaceId(pkg.tasks);
  MLC_RETURN_IF_ERROR(computed);
  if (*computed != pkg.interface_id) {
    return Invalid("/interface_id", "does not match the tasks: declared " + pkg.interface_id +
                                        ", computed " + *computed);
  }
  return Status::Ok();
}

Result<ModelPackage> ParseModelPackage(const Json& doc) {
  Result<ModelPackage> pkg = ParseModelPackageFields(doc);
  MLC_RETURN_IF_ERROR(pkg);
  MLC_RETURN_IF_ERROR(CheckInterfaceId(*pkg));
  return pkg;
}

DocumentKind DetectDocument(const Json& doc) {
  if (!doc.is_object()) return DocumentKind::kUnknown;
  if (doc.contains("schema")) {
    if (doc["schema"] == kModelPackageSchema) return DocumentKind::kModelPackage;
    if (doc["schema"] == kCompiledProgramSchema) return DocumentKind::kCompiledProgram;
    return DocumentKind::kUnknown;
  }
  if (doc.contains("artifact")) return DocumentKind::kMetadata;
  return DocumentKind::kUnknown;
}

Result<CompiledProgram> ParseCompiledProgram(const Json& whole) {
  Errors errors;
  Parser p(&errors);
  FieldChecker& c = p.checker();
  CompiledProgram out;
  const Json* doc = &whole;
  std::string base;
  if (DetectDocument(whole) == DocumentKind::kMetadata) {
    // A library's _metadata: ours is the "artifact" member; the rest belongs to MLC.
    doc = &whole["artifact"];
    base = "/artifact";
    if (whole.contains("kv_state_kind")) {
      const Json& k = whole["kv_state_kind"];
      if (k.is_string()) {
        out.kv_state_kind = k.get<std::string>();
      } else if (!k.is_null()) {
        c.Fail("/kv_state_kind", "expected a string, got " + JsonTypeName(k));
      }
    }
  }
  if (!c.Object(*doc, base)) return errors;
  c.Keys(*doc, base,
         {"schema", "schema_version", "interface_id", "parameter_schema_id", "programs", "resources"},
         {"schema", "schema_version", "interface_id", "parameter_schema_id", "programs", "resources"});
  p.SchemaHeader(*doc, base, kCompiledProgramSchema);
  out.interface_id = p.Id(*doc, "interface_id", base);
  out.parameter_schema_id = p.Id(*doc, "parameter_schema_id", base);
  if (doc->contains("programs")) {
    p.Entries((*doc)["programs"], base + "/programs", false, "program",
              [&](const std::string& k, const Json& v, const std::string& at) {
                out.programs[k] = p.ProgramOf(v, at);
              });
  }
  if (doc->contains("resources")) out.resources = p.ResourcesOf((*doc)["resources"], base + "/resources");
  if (!errors.empty()) return errors;
  return out;
}

Result<ModelPackage> ReadModelPackage(const std::string& path) {
  // A package file lies inside its folder; "-" is standard input.
  Result<Json> doc = ReadJsonFile(path, {}, path == "-" ? "" : FolderOf(path));
  MLC_RETURN_IF_ERROR(doc);
  return InDocument(ParseModelPackage(*doc), DocumentName(path));
}

Result<CompiledProgram> ReadCompiledProgram(const std::string& path) {
  Result<Json> doc = ReadJsonFile(path);
  MLC_RETURN_IF_ERROR(doc);
  return InDocument(ParseCompiledProgram(*doc), DocumentName(path));
}

const TaskInput* FindInput(const Task& task, const std::string& name, bool want_audio) {
  if (!name.empty()) {
    auto it = task.inputs.find(name);
    return it == task.inputs.end() ? nullptr : &it->second;
  }
  for (const auto& [n, in] : task.inputs) {
    if (want_audio && std::holds_alternative<AudioDecode>(in.processor)) return &in;
    if (!want_audio && std::holds_alternative<ImageDecode>(in.processor)) return &in;
  }
  return nullptr;
}

}  // namespace mlc

namespace mlc {

Result<TaskAndInput> FindMediaInput(const ModelPackage& pkg, const std::string& task,
                                    const std::string& input, bool want_audio) {
  auto it = pkg.tasks.find(task);
  if (it == pkg.tasks.end()) {
    std::string names;
    for (const auto& [name, t] : pkg.tasks) names += (names.empty() ? "" : ", ") + name;
    return Error{ErrorCode::kUsage, "",
                 "the package has no task \"" + task + "\" (it has: " + names + ")"};
  }
  const TaskInput* in = FindInput(it->second, input, want_audio);
  bool right_kind = in && (want_audio ? std::holds_alternative<AudioDecode>(in->processor)
                                      : std::holds_alternative<ImageDecode>(in->processor));
  if (!right_kind) {
    return Error{ErrorCode::kUsage, "",
                 "task \"" + task + "\" has no " + (want_audio ? "audio_decode" : "image_decode") +
                     " input" + (input.empty() ? "" : " named \"" + input + "\"")};
  }
  return TaskAndInput{&it->second, in};
}

}  // namespace mlc
