// The names module_loader.h's rule gives a module (its file, variable and entry). Opening a
// module is base/module_open.cc's job (dlopen), or in the WebAssembly build wasm/module_static.cc's
// (the modules linked in).
#include "base/module_loader.h"

#include <cctype>
#include <string>

namespace mlc {

std::string ModuleFile(const ModuleSpec& spec) {
  return std::string("libmlc_manifest_") + spec.purpose + ".so";
}

std::string ModuleVariable(const ModuleSpec& spec) {
  std::string name = std::string("MLC_MANIFEST_") + spec.purpose + "_MODULE";
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string ModuleEntry(const ModuleSpec& spec) {
  return std::string("mlc_manifest_") + spec.purpose + "_backend";
}

}  // namespace mlc
