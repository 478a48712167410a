// The C API's generation sessions: a package opened with the built-in programs (the reference
// runtime or the CPU program) or with a caller's function table, whose role calls receive DLPack tensors; each
// request turn is prepared, prefilled and decoded over one KV cache.
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capi/capi_internal.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/request.h"
#include "mlc_manifest/runtime.h"

using mlc::capi::CStr;
using mlc::capi::Fail;
using mlc::capi::FailWith;
using mlc::capi::Guard;

namespace {

constexpr const char* kMemoryDocument = "<memory>";
constexpr size_t kMaxResults = 8;

// An object a caller's function returned (the KV cache): released through the table.
class CallerObject : public mlc::KvState {
 public:
  CallerObject(const mlc_function_table* table, void* object) : table_(table), object_(object) {}
  ~CallerObject() override {
    if (table_->object_free) table_->object_free(table_->user, object_);
  }
  CallerObject(const CallerObject&) = delete;
  CallerObject& operator=(const CallerObject&) = delete;
  std::string TypeName() const override { return "caller object"; }
  int64_t TotalLength() const override {
    return table_->object_length ? table_->object_length(table_->user, object_) : 0;
  }
  void* object() const { return object_; }

 private:
  const mlc_function_table* table_;
  void* object_;
};

// The parameters as the caller sees them: names and DLTensor views, made once per set.
struct ParamView {
  std::vector<const char*> names;
  std::vector<DLTensor> tensors;
  mlc_param_list list{};
};

// A DLPack tensor the caller returned, as an NDArray that calls its deleter when released.
mlc::Result<mlc::NDArray> FromManaged(DLManagedTensor* managed, const std::string& where) {
  std::shared_ptr<DLManagedTensor> owner(managed, [](DLManagedTensor* m) {
    if (m && m->deleter) m->deleter(m);
  });
  if (!managed) return mlc::Invalid(where, "a tensor result without a tensor");
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU) return mlc::Invalid(where, "a tensor result not on the CPU");
  if (t.ndim < 0 || t.ndim > 8 || (t.ndim > 0 && !t.shape)) {
    return mlc::Invalid(where, "a tensor result with a bad shape");
  }
  std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  if (t.strides) {
    int64_t expected = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expected) {
        return mlc::Invalid(where, "a tensor result that is not compact (row-major)");
      }
      expected *= shape[i];
    }
  }
  const char* data = static_cast<const char*>(t.data) + t.byte_offset;
  return mlc::NDArray::View(std::shared_ptr<const void>(owner, data), data, std::move(shape),
                            t.dtype);
}

// A model library whose functions are the caller's.
class TableLibrary : public mlc::ModelLibrary {
 public:
  TableLibrary(const mlc_function_table* table, mlc::LibraryMetadata metadata)
      : table_(table), metadata_(std::move(metadata)) {
    for (size_t i = 0; i < table->num_functions; ++i) {
      std::string name = table->function_names[i];
      functions_[name] = [this, name](std::span<const mlc::Value> args) { return Call(name, args); };
    }
  }
  const mlc::PackedFunction* GetFunction(const std::string& name) const override {
    auto it = functions_.find(name);
    return it == functions_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> FunctionNames() const override {
    std::vector<std::string> names;
    for (const auto& [name, f] : functions_) names.push_back(name);
    return names;
  }
  const mlc::LibraryMetadata& Metadata() const override { return metadata_; }

 private:
  mlc::Result<std::vector<mlc::Value>> Call(const std::string& name,
                                            std::span<const mlc::Value> args) const {
    std::vector<mlc_value> in(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      MLC_RETURN_IF_ERROR(ToC(args[i], &in[i]));
    }
    std::array<mlc_value, kMaxResults> out{};
    size_t n = 0;
    std::array<char, 512> message{};
    int rc = table_->call(table_->user, name.c_str(), in.data(), in.size(), out.data(), out.size(),
                          &n, message.data(), message.size());
    message.back() = '\0';
    n = std::min(n, out.size());
    // Take ownership of every result first, so nothing leaks when one is rejected.
    std::vector<mlc::Value> results;
    mlc::Errors errors;
    for (size_t i = 0; i < n; ++i) {
      auto value = FromC(out[i], name + " result " + std::to_string(i));
      if (value) {
        results.push_back(std::move(*value));
      } else {
        for (const mlc::Error& e : value.errors()) errors.push_back(e);
      }
    }
    if (rc != 0) {
      return mlc::Error{mlc::ErrorCode::kInvalid, name,
                        std::string("the caller's function failed: ") + message.data()};
    }
    if (!errors.empty()) return errors;
    return results;
  }

  mlc::Status ToC(const mlc::Value& v, mlc_value* out) const {
    *out = mlc_value{};
    if (const auto* i = std::get_if<int64_t>(&v)) {
      out->kind = MLC_VALUE_INT;
      out->i = *i;
    } else if (const auto* f = std::get_if<double>(&v)) {
      out->kind = MLC_VALUE_FLOAT;
      out->f = *f;
    } else if (const auto* s = std::get_if<mlc::ShapeTuple>(&v)) {
      out->kind = MLC_VALUE_SHAPE;
      out->shape = s->dims.data();
      out->ndim = static_cast<int32_t>(s->dims.size());
    } else if (const auto* t = std::get_if<mlc::NDArray>(&v)) {
      out->kind = MLC_VALUE_TENSOR;
      out->tensor = const_cast<DLTensor*>(&t->dl());
    } else if (const auto* o = std::get_if<mlc::ObjectRef>(&v)) {
      if (auto caller = std::dynamic_pointer_cast<CallerObject>(*o)) {
        out->kind = MLC_VALUE_OBJECT;
        out->object = caller->object();
      } else if (auto params = std::dynamic_pointer_cast<mlc::ParameterSet>(*o)) {
        out->kind = MLC_VALUE_PARAMS;
        out->params = &Params(*params);
      } else {
        return mlc::Error{mlc::ErrorCode::kUnsupported, "", "an argument of type " +
                                                                 (*o ? (*o)->TypeName() : "null")};
      }
    }
    return mlc::Status::Ok();
  }

  mlc::Result<mlc::Value> FromC(const mlc_value& v, const std::string& where) const {
    switch (v.kind) {
      case MLC_VALUE_NONE: return mlc::Value{};
      case MLC_VALUE_INT: return mlc::Value{v.i};
      case MLC_VALUE_FLOAT: return mlc::Value{v.f};
      case MLC_VALUE_SHAPE:
        if (v.ndim < 0 || (v.ndim > 0 && !v.shape)) return mlc::Invalid(where, "a bad shape");
        return mlc::Value{mlc::ShapeTuple{std::vector<int64_t>(v.shape, v.shape + v.ndim)}};
      case MLC_VALUE_TENSOR: {
        auto nd = FromManaged(v.managed, where);
        MLC_RETURN_IF_ERROR(nd);
        return mlc::Value{std::move(*nd)};
      }
      case MLC_VALUE_OBJECT:
        return mlc::Value{mlc::ObjectRef(std::make_shared<CallerObject>(table_, v.object))};
      default:
        return mlc::Invalid(where, "a result of unknown kind " + std::to_string(v.kind));
    }
  }

  const mlc_param_list& Params(const mlc::ParameterSet& set) const {
    auto& view = params_[&set];
    if (view.names.size() != set.names.size()) {
      view.names.clear();
      view.tensors.clear();
      for (size_t i = 0; i < set.names.size(); ++i) {
        view.names.push_back(set.names[i].c_str());
        view.tensors.push_back(set.tensors[i].dl());
      }
      view.list = mlc_param_list{view.names.size(), view.names.data(), view.tensors.data()};
    }
    return view.list;
  }

  const mlc_function_table* table_;
  mlc::LibraryMetadata metadata_;
  std::map<std::string, mlc::PackedFunction> functions_;
  mutable std::map<const mlc::ParameterSet*, ParamView> params_;
};

// The table's metadata_json: {"model_type", "kv_state_kind"?, "params", "artifact"?}.
mlc::Result<mlc::LibraryMetadata> ParseMetadata(const char* text) {
  auto doc = mlc::ParseJson(text ? std::string_view(text) : std::string_view("null"));
  MLC_RETURN_IF_ERROR(doc);
  const mlc::Json& m = *doc;
  if (!m.is_object()) return mlc::Invalid("", "expected the library's _metadata object");
  mlc::LibraryMetadata meta;
  if (m.contains("model_type")) {
    if (!m["model_type"].is_string()) return mlc::Invalid("/model_type", "expected a string");
    meta.model_type = m["model_type"];
  }
  if (m.contains("kv_state_kind")) {
    if (!m["kv_state_kind"].is_string()) return mlc::Invalid("/kv_state_kind", "expected a string");
    meta.kv_state_kind = m["kv_state_kind"];
  }
  if (!m.contains("params")) return mlc::Invalid("/params", "expected the parameter list");
  auto params = mlc::ParseParamSpecs(m["params"], "/params");
  MLC_RETURN_IF_ERROR(params);
  meta.params = std::move(*params);
  if (m.contains("artifact")) meta.artifact = m["artifact"];
  return meta;
}

}  // namespace

struct mlc_session {
  mlc_errors errors;
  // Declared before the session: it points into the package's library, so it goes last.
  std::optional<mlc::OpenedPackage> package;
  std::optional<mlc::Session> session;
  mlc_session_params params{};
  std::vector<int32_t> tokens;
  std::string stop_reason;
};

namespace {

void Reset(mlc_session* h) {
  h->session.reset();
  h->package.reset();
  h->tokens.clear();
  h->stop_reason.clear();
}

// Opens the package with `library` (null: the built-in programs), then starts the session.
int Load(mlc_session* h, const std::string& dir, std::unique_ptr<mlc::ModelLibrary> library,
         const mlc_session_params* params) {
  h->params = params ? *params : mlc_session_params_default();
  const mlc_session_params& p = h->params;
  if (p.max_tokens < 0) return FailWith(h->errors, MLC_ERR_ARGUMENT, "", "max_tokens must be >= 0");
  mlc::SamplerConfig sampler{p.temperature, p.top_p, p.top_k, p.seed};
  if (mlc::Status st = mlc::CheckSamplerConfig(sampler); !st) return Fail(h->errors, st.errors());
  mlc::OpenOptions open;
  open.tokenizer = false;  // the C API's requests are token ids
  if (p.program_path) {
    auto read = mlc::ReadCompiledProgram(p.program_path);
    if (!read) return Fail(h->errors, read.take_errors(), p.program_path);
    open.program = std::move(*read);
  }
  auto package = library ? mlc::OpenPackage(dir, std::move(library), open)
                         : mlc::OpenPackage(dir, open);
  if (!package) return Fail(h->errors, package.take_errors(), dir);
  h->package = std::move(*package);
  h->session.emplace(h->package->model.NewSession());
  return MLC_OK;
}

int Generate(mlc_session* h, std::string_view text, const std::string& base_dir,
             mlc_token_callback on_token, void* user) {
  auto doc = mlc::ParseJson(text);
  if (!doc) return Fail(h->errors, doc.take_errors(), kMemoryDocument);
  auto request = mlc::ParseRequest(*doc, base_dir);
  if (!request) return Fail(h->errors, request.take_errors(), kMemoryDocument);
  mlc::GenerationOptions options;
  options.max_tokens = h->params.max_tokens;
  options.sampler = {h->params.temperature, h->params.top_p, h->params.top_k, h->params.seed};
  options.stop_token_ids = h->package->stop_ids;
  if (on_token) {
    options.on_token = [on_token, user](int32_t token) { return on_token(user, token) != 0; };
  }
  for (const mlc::RequestTurn& turn : request->turns) {
    auto input = mlc::PrepareTurn(h->package->model.bound.contract, turn);
    if (!input) return Fail(h->errors, input.take_errors(), kMemoryDocument);
    auto result = h->session->Generate(*input, options);
    if (!result) return Fail(h->errors, result.take_errors());
    h->tokens = std::move(result->tokens);
    h->stop_reason = std::move(result->stop_reason);
  }
  return MLC_OK;
}

}  // namespace

extern "C" {

MLC_CAPI_HANDLE(session)

mlc_session_params mlc_session_params_default(void) {
  return mlc_session_params{nullptr, 32, 0.0, 1.0, 0, 0};
}

int mlc_session_open(mlc_session* h, const char* package_dir, const mlc_session_params* params) {
  if (!h || !package_dir) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    Reset(h);
    // The built-in programs: the reference runtime for a reference package, else the CPU
    // program chosen by model_type (as `mlc-manifest run`).
    int rc = Load(h, package_dir, nullptr, params);
    if (rc != MLC_OK) Reset(h);
    return rc;
  });
}

int mlc_session_open_functions(mlc_session* h, const char* package_dir,
                               const mlc_function_table* table, const mlc_session_params* params) {
  if (!h || !package_dir || !table || !table->call || (!table->function_names && table->num_functions)) {
    return MLC_ERR_ARGUMENT;
  }
  return Guard(h->errors, [&] {
    Reset(h);
    auto metadata = ParseMetadata(table->metadata_json);
    if (!metadata) return Fail(h->errors, metadata.take_errors(), "metadata_json");
    int rc = Load(h, package_dir, std::make_unique<TableLibrary>(table, std::move(*metadata)),
                  params);
    if (rc != MLC_OK) Reset(h);
    return rc;
  });
}

int mlc_session_generate(mlc_session* h, const char* request_json, size_t length,
                         const char* base_dir, mlc_token_callback on_token, void* user) {
  if (!h || (!request_json && length)) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->tokens.clear();
    h->stop_reason.clear();
    if (!h->session) return FailWith(h->errors, MLC_ERR_STATE, "", "the session is not open");
    return Generate(h, std::string_view(request_json ? request_json : "", length),
                    mlc::capi::Str(base_dir), on_token, user);
  });
}

const int32_t* mlc_session_tokens(const mlc_session* h, size_t* count) {
  if (count) *count = h ? h->tokens.size() : 0;
  return h ? h->tokens.data() : nullptr;
}

const char* mlc_session_stop_reason(const mlc_session* h) { return h ? CStr(h->stop_reason) : nullptr; }
int64_t mlc_session_kv_length(const mlc_session* h) {
  return h && h->session ? h->session->KvLength() : 0;
}

}  // extern "C"
