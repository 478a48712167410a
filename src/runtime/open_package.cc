// OpenPackage: the library, the model loaded against it, and the package's text side (tokenizer,
// conversation template, stop ids and strings), from one reading of mlc-chat-config.json.
#include "mlc_manifest/open_package.h"

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

// The model loaded against the library, and the text side, from the chat config read once.
Result<OpenedPackage> Assemble(const std::string& dir, std::unique_ptr<ModelLibrary> library,
                               ChatConfig config, const OpenOptions& options) {
  OpenedPackage p;
  p.library = std::move(library);
  auto model = LoadModel(dir, std::move(config), *p.library, options.program);
  MLC_RETURN_IF_ERROR(model);
  p.model = std::move(*model);
  p.stop_ids = StopTokenIds(p.model.config);
  if (options.tokenizer || options.chat) {
    auto tokenizer = Tokenizer::FromDirectory(dir);
    if (tokenizer) {
      p.tokenizer = std::move(*tokenizer);
    } else if (options.chat) {
      return tokenizer.take_errors();
    }
  }
  if (options.chat) {
    auto tmpl = ConvTemplateFromChatConfig(p.model.config.raw);
    MLC_RETURN_IF_ERROR(tmpl);
    p.stop_strings = tmpl->stop_str;
    p.tmpl = std::move(*tmpl);
  }
  return p;
}

}  // namespace

Result<OpenedPackage> OpenPackage(const std::string& dir, const OpenOptions& options) {
  auto config = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(config);
  auto library = OpenPackageLibrary(dir, *config);
  MLC_RETURN_IF_ERROR(library);
  return Assemble(dir, std::move(*library), std::move(*config), options);
}

Result<OpenedPackage> OpenPackage(const std::string& dir, std::unique_ptr<ModelLibrary> library,
                                  const OpenOptions& options) {
  auto config = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(config);
  return Assemble(dir, std::move(library), std::move(*config), options);
}

}  // namespace mlc
