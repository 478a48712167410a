// The library keeps its heaviest dependencies in modules of their own (shared objects it opens
// on first use), so that a command pays only for the libraries it calls: the image decoder
// (libvips), the audio codecs and resampler (libsndfile, soxr), the HTTP server (cpp-httplib
// with OpenSSL), the digests (libcrypto: base/crypto_backend.h) and SentencePiece
// (libsentencepiece with protobuf-lite: text/sp_backend.h). Each module exports one C function
// returning a plain C table whose first member is its interface version.
//
// One rule names a module from its purpose (image, audio, resampler, http, crypto,
// sentencepiece): its sources are src/modules/<purpose>/, its file libmlc_manifest_<purpose>.so
// (CMake target mlc_manifest_<purpose>), the environment variable naming a file to open instead
// $MLC_MANIFEST_<PURPOSE>_MODULE, and its exported function mlc_manifest_<purpose>_backend.
// A table's header ties it to its module (MLC_MODULE_TABLE), the module exports it
// (MLC_MODULE_ENTRY) and the library opens it with LoadModule<Table>().
#pragma once

#include <mutex>
#include <string>

#include "mlc_manifest/error.h"

namespace mlc {

struct ModuleSpec {
  const char* purpose;  // e.g. "audio": names the file, the variable and the entry (above)
  const char* what;     // what it is, for the error, e.g. "the audio module (libsndfile)"
  int abi;              // the interface version the table must start with
};

// The names the rule gives: "libmlc_manifest_audio.so", "MLC_MANIFEST_AUDIO_MODULE",
// "mlc_manifest_audio_backend".
std::string ModuleFile(const ModuleSpec& spec);
std::string ModuleVariable(const ModuleSpec& spec);
std::string ModuleEntry(const ModuleSpec& spec);

// Calls a module's entry (the symbol found by dlsym) through its own type, returning its table.
using ModuleEntryCall = const void* (*)(void* entry);
template <class Table>
const void* CallModuleEntry(void* entry) {
  return reinterpret_cast<const Table* (*)()>(entry)();
}

// Opens the module and returns its table (call: CallModuleEntry<TheTable>): the file named by
// its variable alone when that is set, else, in order, the running executable's folder, the
// folder of the code loading it (an installed libmlc_manifest.so.1 or the Python module) and
// its mlc_manifest/ subfolder, the build's output folder and the install folder. Missing
// everywhere: an I/O error naming every place tried and why it failed. Not cached: callers
// keep the table (the module stays loaded).
Result<const void*> OpenModule(const ModuleSpec& spec, ModuleEntryCall call);

// The module each table comes from: ModuleOf<Table>::kSpec, declared by MLC_MODULE_TABLE.
template <class Table>
struct ModuleOf;

// OpenModule for Table's module, once for the life of the process (thread-safe): every later
// call returns the first call's table or error.
template <class Table>
Result<const Table*> LoadModule() {
  static std::once_flag once;
  static Result<const Table*> loaded = Errors{};
  std::call_once(once, [] {
    auto table = OpenModule(ModuleOf<Table>::kSpec, &CallModuleEntry<Table>);
    if (table) {
      loaded = static_cast<const Table*>(*table);
    } else {
      loaded = table.errors();
    }
  });
  return loaded;
}

}  // namespace mlc

// In a table's header, at file scope: Table is the table of the module for `purpose` (a string,
// e.g. "audio"), described as `what`, with interface version `abi`.
#define MLC_MODULE_TABLE(Table, purpose, what, abi) \
  template <>                                       \
  struct mlc::ModuleOf<Table> {                     \
    static constexpr mlc::ModuleSpec kSpec{purpose, what, abi}; \
  }

// In a module, at file scope and followed by the function's body returning the module's table:
// the one exported symbol, for `purpose` (an identifier, e.g. audio).
#define MLC_MODULE_ENTRY(purpose, Table) \
  extern "C" __attribute__((visibility("default"))) const Table* mlc_manifest_##purpose##_backend()
