// One way to open a package for generation, shared by `run`, `serve`, the C API and the Python
// module: its library (the registered runtime or the built-in CPU program, or one the caller
// gives), the bound model and parameters, and what text generation takes from the package
// (tokenizer, conversation template, stop ids and strings), mlc-chat-config.json read once.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc {

struct OpenOptions {
  std::optional<CompiledProgram> program;  // else the library's _metadata.artifact
  bool tokenizer = true;  // load the package's tokenizer when it has one
  bool chat = false;      // the tokenizer and conversation template are required
};

// Members are in the order they are made, so the model (which borrows the library's functions)
// goes before the library. Moving it keeps the model valid (the library stays where it is).
struct OpenedPackage {
  std::unique_ptr<ModelLibrary> library;
  LoadedModel model;                      // config (sampling defaults in config.sampling), binding
  std::unique_ptr<Tokenizer> tokenizer;   // null without one (options.tokenizer or chat unset)
  std::optional<ConvTemplate> tmpl;       // with options.chat
  std::vector<int32_t> stop_ids;          // conv_template.stop_token_ids
  std::vector<std::string> stop_strings;  // the template's stop_str (with options.chat)
};

// Opens DIR with OpenPackageLibrary (cpu_model.h) and loads it.
Result<OpenedPackage> OpenPackage(const std::string& dir, const OpenOptions& options = {});
// The same over a library the caller opened.
Result<OpenedPackage> OpenPackage(const std::string& dir, std::unique_ptr<ModelLibrary> library,
                                  const OpenOptions& options = {});

}  // namespace mlc
