// The C API's status names, version and error lists.
#include "capi/capi_internal.h"
#include "mlc_manifest/version.h"

namespace mlc::capi {

int StatusOf(const Errors& errors) {
  if (errors.empty()) return MLC_ERR_INTERNAL;
  int status = static_cast<int>(errors.front().code);
  for (const Error& e : errors) {
    if (e.code == ErrorCode::kIo) return MLC_ERR_IO;
    if (e.code == ErrorCode::kUsage) status = MLC_ERR_USAGE;
  }
  return status;
}

int Fail(mlc_errors& out, Errors errors, const std::string& document) {
  if (errors.empty()) errors.push_back(Error{ErrorCode::kInvalid, "", "failed without a reason"});
  for (Error& e : errors) {
    if (e.document.empty()) e.document = document;
  }
  out.list = std::move(errors);
  return StatusOf(out.list);
}

int FailWith(mlc_errors& out, int status, std::string path, std::string message) {
  // Statuses past ErrorCode's range are kept in the code field as the C API numbers them.
  out.list = {Error{static_cast<ErrorCode>(status), std::move(path), std::move(message)}};
  return status;
}

}  // namespace mlc::capi

extern "C" {

const char* mlc_status_name(int status) {
  switch (status) {
    case MLC_OK: return "ok";
    case MLC_ERR_INVALID: return "invalid";
    case MLC_ERR_USAGE: return "usage";
    case MLC_ERR_IO: return "io";
    case MLC_ERR_UNSUPPORTED: return "unsupported";
    case MLC_ERR_LIMIT: return "limit";
    case MLC_ERR_EXISTS: return "exists";
    case MLC_ERR_ARGUMENT: return "argument";
    case MLC_ERR_BUFFER: return "buffer";
    case MLC_ERR_STATE: return "state";
    case MLC_ERR_INTERNAL: return "internal";
    default: return "unknown";
  }
}

const char* mlc_version(void) { return MLC_MANIFEST_VERSION; }

size_t mlc_errors_count(const mlc_errors* errors) { return errors ? errors->list.size() : 0; }

int mlc_errors_get(const mlc_errors* errors, size_t i, mlc_error* out) {
  if (!errors || !out || i >= errors->list.size()) return MLC_ERR_ARGUMENT;
  const mlc::Error& e = errors->list[i];
  out->code = static_cast<int>(e.code);
  out->code_name = mlc_status_name(out->code);
  out->document = e.document.c_str();
  out->path = e.path.c_str();
  out->message = e.message.c_str();
  return MLC_OK;
}

}  // extern "C"
