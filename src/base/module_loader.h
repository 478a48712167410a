// The library keeps its heaviest dependencies in modules of their own (shared objects it opens
// on first use), so that a command pays only for the libraries it calls: the image decoder
// (libvips), the audio codecs and resampler (libsndfile, soxr), the HTTP server (cpp-httplib
// with OpenSSL), the digests (libcrypto: base/crypto_backend.h) and SentencePiece
// (libsentencepiece with protobuf-lite: text/sp_backend.h). Each module exports one C function
// returning a plain C table whose first member is its interface version. This finds and opens one.
#pragma once

#include <mutex>

#include "mlc_manifest/error.h"

namespace mlc {

struct ModuleSpec {
  const char* file;   // the module's file name, e.g. "libmlc_manifest_audio.so"
  const char* env;    // an environment variable naming the file to open instead of searching
  const char* entry;  // the exported function returning the table
  const char* what;   // what it is, for the error, e.g. "the audio module (libsndfile, soxr)"
  int abi;            // the interface version the table must start with
};

// Calls a module's entry (the symbol found by dlsym) through its own type, returning its table.
using ModuleEntryCall = const void* (*)(void* entry);
template <class Table>
const void* CallModuleEntry(void* entry) {
  return reinterpret_cast<const Table* (*)()>(entry)();
}

// Opens the module and returns its table (call: CallModuleEntry<TheTable>): $<env> (a file)
// alone when set, else, in order, the running executable's folder, the folder of the code
// loading it (an installed libmlc_manifest.so.1 or the Python module) and its mlc_manifest/
// subfolder, the build's output folder and the install folder. Missing everywhere: an I/O error
// naming every place tried and why it failed. Not cached: callers keep the table (the module
// stays loaded).
Result<const void*> OpenModule(const ModuleSpec& spec, ModuleEntryCall call);

// OpenModule for the table type Table, once per Table for the life of the process (thread-safe):
// every later call returns the first call's table or error.
template <class Table>
Result<const Table*> LoadModuleOnce(const ModuleSpec& spec) {
  static std::once_flag once;
  static Result<const Table*> loaded = Errors{};
  std::call_once(once, [&spec] {
    auto table = OpenModule(spec, &CallModuleEntry<Table>);
    if (table) {
      loaded = static_cast<const Table*>(*table);
    } else {
      loaded = table.errors();
    }
  });
  return loaded;
}

}  // namespace mlc
