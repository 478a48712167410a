// Shared parts of the C API's implementation: the error list every handle carries, the status
// an error list maps to, and the guard that keeps C++ exceptions from crossing the C boundary.
#pragma once

#include <new>
#include <string>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/mlc_manifest.h"

struct mlc_errors {
  std::vector<mlc::Error> list;
};

namespace mlc::capi {

// The status of a failure: io when any error is an I/O error, else usage when any is, else the
// first error's code (the CLI's rule).
int StatusOf(const Errors& errors);

// Stores the errors (naming `document` where they name none) and returns their status.
int Fail(mlc_errors& out, Errors errors, const std::string& document = "");
// One error with a C API status of its own (argument, buffer, state, internal).
int FailWith(mlc_errors& out, int status, std::string path, std::string message);

// Clears the list, then runs f; an exception becomes MLC_ERR_INTERNAL with its message.
template <class F>
int Guard(mlc_errors& out, F&& f) {
  out.list.clear();
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return FailWith(out, MLC_ERR_INTERNAL, "", "out of memory");
  } catch (const std::exception& e) {
    return FailWith(out, MLC_ERR_INTERNAL, "", e.what());
  }
}

// "" for NULL.
inline std::string Str(const char* s) { return s ? std::string(s) : std::string(); }
// NULL for "" (accessors of results not made yet).
inline const char* CStr(const std::string& s) { return s.empty() ? nullptr : s.c_str(); }

}  // namespace mlc::capi

// The _init / _free / _errors functions of a handle type `mlc_<name>` (a struct with `errors`).
#define MLC_CAPI_HANDLE(name)                                                                \
  mlc_##name* mlc_##name##_init(void) { return new (std::nothrow) mlc_##name(); }            \
  void mlc_##name##_free(mlc_##name* handle) { delete handle; }                              \
  const mlc_errors* mlc_##name##_errors(const mlc_##name* handle) {                          \
    return handle ? &handle->errors : nullptr;                                               \
  }
