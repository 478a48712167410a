// The Python module mlc_manifest._core (pybind11): documents as dicts in and out, the ids,
// binding, check, emit, the audio and image frontends as numpy arrays (sharing the decoded
// buffer), the tokenizer, and, through the C API compiled into the module, prompts, prefill
// plans and generation sessions. Failures raise mlc_manifest.Error carrying the error list.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/bind.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/device.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/mlc_manifest.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/presets.h"
#include "mlc_manifest/tokenizer.h"
#include "mlc_manifest/version.h"

namespace py = pybind11;

namespace mlc::python {
namespace {

// A failure with its errors, raised in Python as mlc_manifest.Error.
struct Failure {
  Errors errors;
  std::string document;
};

[[noreturn]] void Raise(Errors errors, const std::string& document = "") {
  throw Failure{std::move(errors), document};
}

template <class T>
T Take(Result<T> r, const std::string& document = "") {
  if (!r) Raise(r.take_errors(), document);
  return std::move(*r);
}

// The error list of a C API handle (its C API status names as codes).
[[noreturn]] void RaiseC(const mlc_errors* list) {
  Errors errors;
  for (const c::Error& e : c::CopyErrors(list)) {
    errors.push_back(Error{static_cast<ErrorCode>(e.code), e.path, e.message, e.document});
  }
  Raise(std::move(errors));
}

void Translate(std::exception_ptr p) {
  try {
    if (p) std::rethrow_exception(p);
  } catch (const Failure& f) {
    py::list errors;
    for (const Error& e : f.errors) {
      py::dict d;
      int code = static_cast<int>(e.code);
      d["code"] = code <= 6 ? ErrorCodeName(e.code) : mlc_status_name(code);
      d["document"] = e.document.empty() ? f.document : e.document;
      d["path"] = e.path;
      d["message"] = e.message;
      errors.append(d);
    }
    std::string text;
    for (const Error& e : f.errors) {
      std::string doc = e.document.empty() ? f.document : e.document;
      text += (text.empty() ? "" : "\n") + (doc.empty() ? "" : doc + ": ") + e.ToString();
    }
    py::object cls = py::module_::import("mlc_manifest").attr("Error");
    py::object error = cls(text, errors);
    PyErr_SetObject(cls.ptr(), error.ptr());
  }
}

// ---- JSON <-> Python objects (through the json module: exact for every JSON value) ----

Json ToJson(const py::object& obj) {
  if (py::isinstance<py::str>(obj)) return Take(ParseJson(obj.cast<std::string>()), "<str>");
  std::string text = py::module_::import("json").attr("dumps")(obj, py::arg("ensure_ascii") = false).cast<std::string>();
  return Take(ParseJson(text), "<object>");
}

py::object ToPython(const OrderedJson& value) {
  return py::module_::import("json").attr("loads")(
      value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// A document given as a dict, JSON text, or (a str naming an existing file or package folder) a path.
Json Document(const py::object& doc) {
  if (py::isinstance<py::str>(doc)) {
    std::string s = doc.cast<std::string>();
    if (FileExists(s)) {
      std::string file = ManifestPath(s);  // a package folder: its manifest
      return Take(ReadJsonFile(file), file);
    }
  }
  return ToJson(doc);
}

// ---- documents ----

py::object ValidatePackage(const py::object& doc) {
  return ToPython(ModelPackageJson(Take(ParseModelPackage(Document(doc)))));
}

py::object ValidateProgram(const py::object& doc) {
  return ToPython(CompiledProgramJson(Take(ParseCompiledProgram(Document(doc)))));
}

py::object ReadPackage(const std::string& path) {
  std::string file = ManifestPath(path);
  return ToPython(ModelPackageJson(Take(ReadModelPackage(file), file)));
}

py::object ReadProgram(const std::string& path) {
  return ToPython(CompiledProgramJson(Take(ReadCompiledProgram(path), path)));
}

// A package, a tasks object, or a compiled program (its recorded id).
std::string InterfaceId(const py::object& obj) {
  Json doc = Document(obj);
  switch (DetectDocument(doc)) {
    case DocumentKind::kModelPackage:
      return Take(ComputeInterfaceId(Take(ParseTasks(doc.value("tasks", Json()), "/tasks"))));
    case DocumentKind::kCompiledProgram:
    case DocumentKind::kMetadata:
      return Take(ParseCompiledProgram(doc)).interface_id;
    default:
      return Take(ComputeInterfaceId(Take(ParseTasks(doc))));
  }
}

// A parameter list ([{name, shape, dtype}]) or a tensor cache.
std::string ParameterSchemaId(const py::object& obj) {
  return Take(ComputeParameterSchemaId(Take(ParamSpecsOfDocument(Document(obj)))));
}

std::string Emit(const py::object& obj, bool as_metadata) {
  Json doc = Document(obj);
  if (DetectDocument(doc) == DocumentKind::kModelPackage) {
    return WriteModelPackage(Take(ParseModelPackage(doc)));
  }
  return WriteCompiledProgram(Take(ParseCompiledProgram(doc)), as_metadata);
}

// The package document for tasks (a tasks object, a package, or a preset name) and parameters.
std::string EmitPackage(const py::object& tasks_obj, const py::object& params) {
  Tasks tasks;
  if (py::isinstance<py::str>(tasks_obj) && !FileExists(tasks_obj.cast<std::string>()) &&
      tasks_obj.cast<std::string>().find('{') == std::string::npos) {
    tasks = Take(PresetTasks(tasks_obj.cast<std::string>()));
  } else {
    Json doc = Document(tasks_obj);
    tasks = DetectDocument(doc) == DocumentKind::kModelPackage
                ? Take(ParseTasks(doc.value("tasks", Json()), "/tasks"))
                : Take(ParseTasks(doc));
  }
  std::string pid = Take(ComputeParameterSchemaId(Take(ParamSpecsOfDocument(Document(params)))));
  return WriteModelPackage(ModelPackage{Take(ComputeInterfaceId(tasks)), pid, tasks});
}

py::object BindDocs(const py::object& package, const py::object& program, const std::string& task,
                    const std::optional<std::string>& weights_id,
                    const std::optional<std::string>& device) {
  ModelPackage pkg = Take(ParseModelPackage(Document(package)));
  CompiledProgram prog = Take(ParseCompiledProgram(Document(program)));
  BindOptions options;
  options.task = task;
  options.weights_parameter_schema_id = weights_id;
  if (device) {
    const DeviceProfile* profile = FindDeviceProfile(*device);
    if (!profile) Raise({Error{ErrorCode::kUsage, "", "no device profile named \"" + *device + "\""}});
    options.device = profile->limits;
  }
  return ToPython(BoundContractJson(Take(Bind(pkg, prog, options))));
}

// ---- check ----

struct PyReport {
  CheckReport report;
  bool ok() const { return report.ok(); }
  py::list items() const {
    py::list out;
    for (const CheckItem& i : report.items) {
      out.append(py::make_tuple(i.name, VerdictName(i.verdict), i.message, ToPython(i.details)));
    }
    return out;
  }
  py::object to_dict() const { return ToPython(report.ToJson()); }
  std::string json() const {
    return report.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
};

PyReport Check(const std::string& dir, const std::optional<std::string>& program,
               const std::optional<std::string>& params, const std::string& task,
               bool verify_shards, const std::optional<std::string>& device, int threads) {
  CheckOptions options;
  options.program_path = program;
  options.params_path = params;
  options.task = task;
  options.verify_shards = verify_shards;
  options.shard_options.threads = threads;
  options.runtime_config = CheckPackageRuntimeConfig;  // as the CLI's check
  if (device) {
    const DeviceProfile* profile = FindDeviceProfile(*device);
    if (!profile) Raise({Error{ErrorCode::kUsage, "", "no device profile named \"" + *device + "\""}});
    options.device = *profile;
  }
  PyReport out;
  {
    py::gil_scoped_release release;
    out.report = CheckPackage(dir, options);
  }
  return out;
}

// ---- media: numpy arrays over the decoded buffers (no copy; a capsule owns them) ----

// bytes -> their contents; str / os.PathLike -> a path.
struct Source {
  std::optional<std::string> path;
  std::string bytes;
};

Source SourceOf(const py::object& obj) {
  Source s;
  if (py::isinstance<py::bytes>(obj) || py::isinstance<py::bytearray>(obj) ||
      py::isinstance<py::memoryview>(obj)) {
    s.bytes = py::bytes(obj.attr("__bytes__")()).cast<std::string>();
    return s;
  }
  s.path = py::module_::import("os").attr("fspath")(obj).cast<std::string>();
  return s;
}

py::array DecodeAudioPy(const py::object& source, int64_t sample_rate_hz, int64_t min_samples,
                        int64_t max_samples, const std::string& quality) {
  AudioDecode processor{sample_rate_hz, 1, min_samples, max_samples};
  if (Status st = CheckAudioProcessor(processor); !st) Raise(st.errors());
  AudioOptions options;
  if (quality == "very-high") {
    options.quality = ResampleQuality::kVeryHigh;
  } else if (quality != "high") {
    Raise({Error{ErrorCode::kUsage, "", "quality is \"high\" or \"very-high\""}});
  }
  Source s = SourceOf(source);
  auto decoded = std::make_unique<DecodedAudio>();
  {
    py::gil_scoped_release release;
    *decoded = Take(s.path ? DecodeAudioFile(*s.path, processor, options)
                           : DecodeAudioMemory(s.bytes, processor, options),
                    s.path.value_or("<bytes>"));
  }
  DecodedAudio* raw = decoded.release();
  py::capsule owner(raw, [](void* p) { delete static_cast<DecodedAudio*>(p); });
  std::vector<py::ssize_t> shape = {static_cast<py::ssize_t>(raw->samples.size())};
  return py::array_t<float>(shape, raw->samples.data(), owner);
}

py::array DecodeImagePy(const py::object& source, int64_t height, int64_t width,
                        const std::string& mode, const std::string& dtype,
                        const std::string& filter, bool colour_manage) {
  ImageDecode processor;
  processor.height = height;
  processor.width = width;
  if (mode == "center_crop") {
    processor.mode = ResizeMode::kCenterCrop;
  } else if (mode != "stretch") {
    Raise({Error{ErrorCode::kUsage, "", "mode is \"stretch\" or \"center_crop\""}});
  }
  if (height < 1 || width < 1) Raise({Error{ErrorCode::kUsage, "", "height and width must be >= 1"}});
  auto pixel = ParsePixelDtype(dtype);
  if (!pixel) Raise({Error{ErrorCode::kUsage, "", "dtype is \"uint8\" or \"uint32\""}});
  ImageOptions options;
  auto f = ParseResizeFilter(filter);
  if (!f) Raise({Error{ErrorCode::kUsage, "", "filter is \"bicubic\", \"bilinear\" or \"lanczos\""}});
  options.filter = *f;
  options.colour_manage = colour_manage;
  Source s = SourceOf(source);
  auto tensor = std::make_unique<NpyArray>();
  {
    py::gil_scoped_release release;
    PreparedImage prepared = Take(s.path ? PrepareImageFile(*s.path, processor, options)
                                         : PrepareImage(s.bytes, processor, options),
                                  s.path.value_or("<bytes>"));
    *tensor = ImageTensor(prepared.rgb, *pixel);
  }
  NpyArray* raw = tensor.release();
  py::capsule owner(raw, [](void* p) { delete static_cast<NpyArray*>(p); });
  std::vector<py::ssize_t> shape(raw->shape.begin(), raw->shape.end());
  if (*pixel == PixelDtype::kUint32) {
    return py::array_t<uint32_t>(shape, reinterpret_cast<const uint32_t*>(raw->data.data()), owner);
  }
  return py::array_t<uint8_t>(shape, reinterpret_cast<const uint8_t*>(raw->data.data()), owner);
}

// ---- tokenizer ----

struct PyTokenizer {
  std::shared_ptr<Tokenizer> tokenizer;
  explicit PyTokenizer(const std::string& dir) : tokenizer(Take(Tokenizer::FromDirectory(dir), dir)) {}
  std::vector<int32_t> Encode(const std::string& text) const { return tokenizer->Encode(text); }
  py::str Decode(const std::vector<int32_t>& ids) const {
    std::string text = tokenizer->Decode(ids);
    return py::reinterpret_steal<py::str>(PyUnicode_DecodeUTF8(text.data(), static_cast<py::ssize_t>(text.size()), "replace"));
  }
};

// ---- prompt, plan and sessions through the C API ----

std::string JsonText(const py::object& obj) {
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  return py::module_::import("json").attr("dumps")(obj, py::arg("ensure_ascii") = false).cast<std::string>();
}

py::object Prompt(const std::string& dir, const py::object& messages) {
  c::Prompt prompt;
  std::string text = JsonText(messages);
  if (mlc_prompt_build(prompt, dir.c_str(), text.data(), text.size()) != MLC_OK) {
    RaiseC(mlc_prompt_errors(prompt));
  }
  return py::module_::import("json").attr("loads")(mlc_prompt_json(prompt));
}

py::object PlanPy(const std::string& dir, const py::object& request,
                  const std::optional<std::string>& program, const std::string& task,
                  const std::optional<std::string>& base_dir, int64_t kv_length) {
  c::Plan plan;
  std::string text = JsonText(request);
  mlc_plan_params params = mlc_plan_params_default();
  params.program_path = program ? program->c_str() : nullptr;
  params.task = task.c_str();
  params.base_dir = base_dir ? base_dir->c_str() : nullptr;
  params.kv_length = kv_length;
  if (mlc_plan_compute(plan, dir.c_str(), text.data(), text.size(), &params) != MLC_OK) {
    RaiseC(mlc_plan_errors(plan));
  }
  return py::module_::import("json").attr("loads")(mlc_plan_json(plan));
}

class PySession {
 public:
  PySession(const std::string& dir, const std::optional<std::string>& program, int64_t max_tokens,
            double temperature, double top_p, int64_t top_k, uint64_t seed, bool prefix_cache,
            const std::optional<py::object>& response_format, int logprobs, const std::optional<py::object>& tools)
      : program_(program.value_or("")),
        response_format_(response_format ? JsonText(*response_format) : std::string()),
        tools_(tools ? JsonText(*tools) : std::string()) {
    mlc_session_params params = mlc_session_params_default();
    params.program_path = program ? program_.c_str() : nullptr;
    params.prefix_cache = prefix_cache ? 1 : 0;
    params.response_format = response_format ? response_format_.c_str() : nullptr;
    params.logprobs = logprobs;
    params.tools = tools ? tools_.c_str() : nullptr;
    params.max_tokens = max_tokens;
    params.temperature = temperature;
    params.top_p = top_p;
    params.top_k = top_k;
    params.seed = seed;
    if (mlc_session_open(session_, dir.c_str(), &params) != MLC_OK) RaiseC(mlc_session_errors(session_));
  }

  // Generates after each turn of the request; returns the last turn's tokens and stop reason.
  py::dict Generate(const py::object& request, const std::optional<std::string>& base_dir) {
    std::string text = JsonText(request);
    int rc;
    {
      py::gil_scoped_release release;
      rc = mlc_session_generate(session_, text.data(), text.size(), base_dir ? base_dir->c_str() : nullptr,
                                nullptr, nullptr);
    }
    if (rc != MLC_OK) RaiseC(mlc_session_errors(session_));
    py::dict out;
    out["tokens"] = session_.Tokens();
    const char* reason = mlc_session_stop_reason(session_);
    out["stop_reason"] = reason ? reason : "";
    out["kv_length"] = mlc_session_kv_length(session_);
    out["cached_tokens"] = mlc_session_cached_tokens(session_);
    out["text"] = mlc_session_text(session_);
    if (const char* reply = mlc_session_tool_reply(session_); reply && *reply) {
      py::dict split = py::module_::import("json").attr("loads")(reply);
      out["content"] = split["content"];
      out["tool_calls"] = split["tool_calls"];
    }
    size_t n = 0;
    const mlc_token_logprob* lp = mlc_session_logprobs(session_, &n);
    if (n > 0) {
      py::list all;
      for (size_t i = 0; i < n; ++i) {
        py::list top;
        for (size_t k = 0; k < lp[i].num_top; ++k) {
          top.append(py::make_tuple(lp[i].top_tokens[k], lp[i].top_logprobs[k]));
        }
        py::dict one;
        one["token"] = lp[i].token;
        one["logprob"] = lp[i].logprob;
        one["top_logprobs"] = top;
        all.append(one);
      }
      out["logprobs"] = all;
    }
    return out;
  }
  int64_t KvLength() const { return mlc_session_kv_length(session_); }

  // The pooled, L2-normalised final hidden state of a one-turn request (its own sequence).
  std::vector<float> Embed(const py::object& request, const std::string& pooling,
                           const std::optional<std::string>& base_dir) {
    if (pooling != "mean" && pooling != "last") throw py::value_error("pooling must be \"mean\" or \"last\"");
    std::string text = JsonText(request);
    int rc;
    {
      py::gil_scoped_release release;
      rc = mlc_session_embed(session_, text.data(), text.size(), base_dir ? base_dir->c_str() : nullptr,
                             pooling == "last" ? MLC_POOLING_LAST : MLC_POOLING_MEAN);
    }
    if (rc != MLC_OK) RaiseC(mlc_session_errors(session_));
    return session_.Embedding();
  }

 private:
  std::string program_;
  std::string response_format_;  // JSON text, kept while the session lives
  std::string tools_;            // likewise
  c::Session session_;
};

}  // namespace
}  // namespace mlc::python

PYBIND11_MODULE(_core, m) {
  using namespace mlc::python;
  namespace a = pybind11;
  m.doc() = "The MLC model artifact manifest (mlc-manifest) for Python";
  py::register_exception_translator(Translate);
  m.attr("__version__") = MLC_MANIFEST_VERSION;

  m.def("read_package", &ReadPackage, "The normalized model package of a manifest file or package folder",
        a::arg("path"));
  m.def("read_program", &ReadProgram, "The normalized compiled-program document of a file", a::arg("path"));
  m.def("validate_package", &ValidatePackage, "Validates a model package (dict, JSON text or path); returns it normalized",
        a::arg("doc"));
  m.def("validate_program", &ValidateProgram, "Validates a compiled program (dict, JSON text or path); returns it normalized",
        a::arg("doc"));
  m.def("interface_id", &InterfaceId, "The interface_id of a package or tasks object (recomputed), or a program's",
        a::arg("doc"));
  m.def("parameter_schema_id", &ParameterSchemaId,
        "The parameter_schema_id of a parameter list or tensor cache", a::arg("doc"));
  m.def("emit", &Emit, "The producer's bytes of a document (json.dump(doc, indent=2) + newline)",
        a::arg("doc"), a::arg("as_metadata") = false);
  m.def("emit_package", &EmitPackage, "The model package document for tasks (or a preset name) and parameters",
        a::arg("tasks"), a::arg("params"));
  m.def("bind", &BindDocs, "Binds a package to a compiled program (SPEC 5); the resolved contract",
        a::arg("package"), a::arg("program"), a::arg("task") = "chat.completions",
        a::arg("weights_parameter_schema_id") = py::none(), a::arg("device") = py::none());

  py::class_<PyReport>(m, "CheckReport")
      .def_property_readonly("ok", &PyReport::ok)
      .def_property_readonly("items", &PyReport::items, "(check, verdict, message, details) tuples")
      .def("to_dict", &PyReport::to_dict)
      .def_property_readonly("json", &PyReport::json, "What `mlc-manifest check --json` prints");
  m.def("check", &Check, "Checks a package folder (the report of `mlc-manifest check`)", a::arg("dir"),
        a::arg("program") = py::none(), a::arg("params") = py::none(),
        a::arg("task") = "chat.completions", a::arg("verify_shards") = false,
        a::arg("device") = py::none(), a::arg("threads") = 0);

  m.def("decode_audio", &DecodeAudioPy, "Mono float32 PCM of a recording (a path or bytes)",
        a::arg("source"), a::arg("sample_rate_hz") = 16000, a::arg("min_samples") = 1,
        a::arg("max_samples") = 480000, a::arg("quality") = "high");
  m.def("decode_image", &DecodeImagePy, "A [1, H, W, 3] tensor of an image (a path or bytes)",
        a::arg("source"), a::arg("height"), a::arg("width"), a::arg("mode") = "stretch",
        a::arg("dtype") = "uint8", a::arg("filter") = "bicubic", a::arg("colour_manage") = false);

  py::class_<PyTokenizer>(m, "Tokenizer")
      .def(py::init<const std::string&>(), a::arg("dir"))
      .def("encode", &PyTokenizer::Encode, a::arg("text"))
      .def("decode", &PyTokenizer::Decode, a::arg("ids"))
      .def_property_readonly("vocab_size", [](const PyTokenizer& t) { return t.tokenizer->VocabSize(); });

  m.def("prompt", &Prompt, "The prompt segments and token ids of chat messages", a::arg("dir"),
        a::arg("messages"));
  m.def("plan", &PlanPy, "The prefill plan of a request", a::arg("dir"), a::arg("request"),
        a::arg("program") = py::none(), a::arg("task") = "chat.completions",
        a::arg("base_dir") = py::none(), a::arg("kv_length") = 0);

  py::class_<PySession>(m, "Session")
      .def(py::init<const std::string&, const std::optional<std::string>&, int64_t, double, double,
                    int64_t, uint64_t, bool, const std::optional<py::object>&, int,
                    const std::optional<py::object>&>(),
           a::arg("dir"), a::arg("program") = py::none(), a::arg("max_tokens") = 32,
           a::arg("temperature") = 0.0, a::arg("top_p") = 1.0, a::arg("top_k") = 0, a::arg("seed") = 0,
           a::arg("prefix_cache") = true, a::arg("response_format") = py::none(), a::arg("logprobs") = -1,
           a::arg("tools") = py::none())
      .def("generate", &PySession::Generate, a::arg("request"), a::arg("base_dir") = py::none())
      .def("embed", &PySession::Embed, a::arg("request"), a::arg("pooling") = "mean",
           a::arg("base_dir") = py::none())
      .def_property_readonly("kv_length", &PySession::KvLength);
}
