// The C API over the documents: the model package and compiled-program documents (SPEC 1, 2),
// binding them (SPEC 5) and checking a whole package folder (the report of `check --json`).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capi/capi_internal.h"
#include "mlc_manifest/bind.h"
#include "mlc_manifest/check.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/device.h"
#include "mlc_manifest/package.h"

using mlc::capi::CStr;
using mlc::capi::Fail;
using mlc::capi::FailWith;
using mlc::capi::Guard;
using mlc::capi::Str;

struct mlc_package {
  mlc_errors errors;
  std::optional<mlc::ModelPackage> doc;
  std::string json;  // the producer's bytes
};

struct mlc_program {
  mlc_errors errors;
  std::optional<mlc::CompiledProgram> doc;
  std::string json;
};

struct mlc_binding {
  mlc_errors errors;
  std::optional<mlc::BoundContract> bound;
  std::string json;
  std::string pair;
  std::vector<std::string> functions;
};

struct mlc_report {
  mlc_errors errors;
  std::optional<mlc::CheckReport> report;
  std::string json;
};

namespace {

// The name errors of a document held in memory carry.
constexpr const char* kMemoryDocument = "<memory>";

// Keeps a parsed document and its normalized bytes, or the errors.
template <class H, class T, class W>
int Keep(H* h, mlc::Result<T> parsed, const std::string& document, W write) {
  h->doc.reset();
  h->json.clear();
  if (!parsed) return Fail(h->errors, parsed.take_errors(), document);
  h->doc = std::move(*parsed);
  h->json = write(*h->doc);
  return MLC_OK;
}

// Parses JSON text with the strict reader, then the document.
template <class Parse>
auto ParseText(const char* json, size_t length, Parse parse) -> decltype(parse(mlc::Json())) {
  auto doc = mlc::ParseJson(std::string_view(json, length));
  MLC_RETURN_IF_ERROR(doc);
  return parse(*doc);
}

std::string WritePackage(const mlc::ModelPackage& p) { return mlc::WriteModelPackage(p); }
std::string WriteProgram(const mlc::CompiledProgram& p) { return mlc::WriteCompiledProgram(p); }

// A device profile by name, or a usage error listing none (the CLI lists them).
const mlc::DeviceProfile* Device(const char* name, mlc_errors& errors, int* status) {
  const mlc::DeviceProfile* profile = mlc::FindDeviceProfile(name);
  if (!profile) {
    *status = FailWith(errors, MLC_ERR_USAGE, "", std::string("no device profile named \"") +
                                                      name + "\"");
  }
  return profile;
}

}  // namespace

extern "C" {

MLC_CAPI_HANDLE(package)
MLC_CAPI_HANDLE(program)
MLC_CAPI_HANDLE(binding)
MLC_CAPI_HANDLE(report)

int mlc_package_read(mlc_package* h, const char* path) {
  if (!h || !path) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    std::string file = mlc::ManifestPath(path);
    return Keep(h, mlc::ReadModelPackage(file), file, WritePackage);
  });
}

int mlc_package_parse(mlc_package* h, const char* json, size_t length) {
  if (!h || (!json && length)) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    return Keep(h, ParseText(json, length, mlc::ParseModelPackage), kMemoryDocument, WritePackage);
  });
}

const char* mlc_package_interface_id(const mlc_package* h) {
  return h && h->doc ? h->doc->interface_id.c_str() : nullptr;
}
const char* mlc_package_parameter_schema_id(const mlc_package* h) {
  return h && h->doc ? h->doc->parameter_schema_id.c_str() : nullptr;
}
const char* mlc_package_json(const mlc_package* h) { return h ? CStr(h->json) : nullptr; }

int mlc_program_read(mlc_program* h, const char* path) {
  if (!h || !path) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    return Keep(h, mlc::ReadCompiledProgram(path), path, WriteProgram);
  });
}

int mlc_program_parse(mlc_program* h, const char* json, size_t length) {
  if (!h || (!json && length)) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    return Keep(h, ParseText(json, length, mlc::ParseCompiledProgram), kMemoryDocument,
                WriteProgram);
  });
}

const char* mlc_program_interface_id(const mlc_program* h) {
  return h && h->doc ? h->doc->interface_id.c_str() : nullptr;
}
const char* mlc_program_parameter_schema_id(const mlc_program* h) {
  return h && h->doc ? h->doc->parameter_schema_id.c_str() : nullptr;
}
const char* mlc_program_json(const mlc_program* h) { return h ? CStr(h->json) : nullptr; }

mlc_bind_params mlc_bind_params_default(void) {
  return mlc_bind_params{"chat.completions", nullptr, nullptr};
}

int mlc_bind(mlc_binding* h, const mlc_package* package, const mlc_program* program,
             const mlc_bind_params* params) {
  if (!h || !package || !program) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->bound.reset();
    h->json.clear();
    h->functions.clear();
    if (!package->doc || !program->doc) {
      return FailWith(h->errors, MLC_ERR_STATE, "", "both documents must be read before binding");
    }
    mlc_bind_params p = params ? *params : mlc_bind_params_default();
    mlc::BindOptions options;
    if (p.task) options.task = p.task;
    if (p.weights_parameter_schema_id) options.weights_parameter_schema_id = p.weights_parameter_schema_id;
    if (p.device) {
      int status = MLC_OK;
      const mlc::DeviceProfile* profile = Device(p.device, h->errors, &status);
      if (!profile) return status;
      options.device = profile->limits;
    }
    auto bound = mlc::Bind(*package->doc, *program->doc, options);
    if (!bound) return Fail(h->errors, bound.take_errors());
    h->json = mlc::BoundContractJson(*bound).dump();
    h->pair = mlc::GenerationPairName(bound->pair);
    h->functions = mlc::RequiredFunctions(*bound);
    h->bound = std::move(*bound);
    return static_cast<int>(MLC_OK);
  });
}

const char* mlc_binding_json(const mlc_binding* h) { return h ? CStr(h->json) : nullptr; }
const char* mlc_binding_executor(const mlc_binding* h) {
  return h && h->bound ? h->bound->executor.c_str() : nullptr;
}
const char* mlc_binding_pair(const mlc_binding* h) { return h ? CStr(h->pair) : nullptr; }
size_t mlc_binding_function_count(const mlc_binding* h) { return h ? h->functions.size() : 0; }
const char* mlc_binding_function(const mlc_binding* h, size_t i) {
  return h && i < h->functions.size() ? h->functions[i].c_str() : nullptr;
}

mlc_check_params mlc_check_params_default(void) {
  return mlc_check_params{nullptr, nullptr, "chat.completions", nullptr, 0, 0};
}

int mlc_check(mlc_report* h, const char* dir, const mlc_check_params* params) {
  if (!h || !dir) return MLC_ERR_ARGUMENT;
  return Guard(h->errors, [&] {
    h->report.reset();
    h->json.clear();
    mlc_check_params p = params ? *params : mlc_check_params_default();
    if (p.threads < 0) return FailWith(h->errors, MLC_ERR_ARGUMENT, "", "threads must be >= 0");
    mlc::CheckOptions options;
    if (p.program_path) options.program_path = p.program_path;
    if (p.params_path) options.params_path = p.params_path;
    if (p.task) options.task = p.task;
    options.verify_shards = p.verify_shards != 0;
    options.shard_options.threads = p.threads;
    if (p.device) {
      int status = MLC_OK;
      const mlc::DeviceProfile* profile = Device(p.device, h->errors, &status);
      if (!profile) return status;
      options.device = *profile;
    }
#ifndef __EMSCRIPTEN__
    // As the CLI's check. The WebAssembly build has no CPU program to ask (cmake/wasm.cmake
    // leaves src/runtime out), so its check has no runtime_config verdict.
    options.runtime_config = mlc::CheckPackageRuntimeConfig;
#endif
    h->report = mlc::CheckPackage(dir, options);
    h->json = h->report->ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return static_cast<int>(MLC_OK);
  });
}

int mlc_report_ok(const mlc_report* h) { return h && h->report && h->report->ok() ? 1 : 0; }
size_t mlc_report_count(const mlc_report* h) {
  return h && h->report ? h->report->items.size() : 0;
}

int mlc_report_item(const mlc_report* h, size_t i, mlc_check_item* out) {
  if (!h || !out || !h->report || i >= h->report->items.size()) return MLC_ERR_ARGUMENT;
  const mlc::CheckItem& item = h->report->items[i];
  out->name = item.name.c_str();
  out->verdict = static_cast<int>(item.verdict);
  out->verdict_name = mlc::VerdictName(item.verdict);
  out->message = item.message.c_str();
  return MLC_OK;
}

const char* mlc_report_json(const mlc_report* h) { return h ? CStr(h->json) : nullptr; }

}  // extern "C"
