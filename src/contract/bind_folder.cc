// The contract of a package folder without a runtime (include/mlc_manifest/library.h): its
// manifest bound to a compiled-program document, or the legacy contract of a package without a
// manifest. Planning and prompts use it; so does the runtime's binding (runtime/bind_model.cc).
#include "mlc_manifest/fs.h"
#include "mlc_manifest/library.h"

namespace mlc {
namespace {

constexpr const char* kLegacyKvCreators[] = {"create_tir_paged_kv_cache",
                                             "create_flashinfer_paged_kv_cache"};

}  // namespace

Result<BoundContract> BindPackageFolder(const std::string& dir, const std::string& program_path,
                                        const std::string& task, bool* legacy) {
  std::string manifest = JoinPath(dir, kManifestFileName);
  *legacy = !FileExists(manifest);
  if (*legacy) return LegacyContract(nullptr);
  if (program_path.empty()) {
    return FileError(ErrorCode::kUsage, manifest,
                     "the package has a manifest; the compiled-program document is needed to bind it");
  }
  auto package = ReadModelPackage(manifest);
  MLC_RETURN_IF_ERROR(package);
  auto program = ReadCompiledProgram(program_path);
  MLC_RETURN_IF_ERROR(program);
  BindOptions options;
  options.task = task;
  options.package_document = manifest;
  options.program_document = DocumentName(program_path);
  return Bind(*package, *program, options);
}

BoundContract LegacyContract(const ModelLibrary* library) {
  BoundContract c;
  c.task_name = "chat.completions";
  c.executor = "legacy";
  c.pair = GenerationPair::kEmbeds;
  c.embed_function = "embed";
  c.prefill_function = "prefill";
  c.decode_function = "decode";
  // A library without the embeddings pair but with the token pair (Gemma 4's programs, whose layers
  // look token ids up) is fed through the token pair under its usual names.
  if (library && !library->GetFunction("prefill") && library->GetFunction("prefill_tokens") &&
      library->GetFunction("decode_tokens")) {
    c.pair = GenerationPair::kTokens;
    c.prefill_function = "prefill_tokens";
    c.decode_function = "decode_tokens";
  }
  c.create_kv_cache_function = kLegacyKvCreators[0];
  for (const char* name : kLegacyKvCreators) {
    if (library && library->GetFunction(name)) {
      c.create_kv_cache_function = name;
      break;
    }
  }
  c.program.kind = "token_generation";
  const std::string pair = GenerationPairName(c.pair);
  c.program.exports = {{"embed_tokens", c.embed_function},
                       {"prefill_" + pair, c.prefill_function},
                       {"decode_" + pair, c.decode_function},
                       {"create_kv_cache", c.create_kv_cache_function}};
  c.kv_state_kind = KvStateKind(c.program);
  return c;
}

}  // namespace mlc
