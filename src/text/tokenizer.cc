// Choosing and loading a package's tokenizer as MLC does: tokenizer.json first, else
// tokenizer.model (see mlc_manifest/tokenizer.h).
#include "mlc_manifest/tokenizer.h"

#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"
#include "text/tokenizers_internal.h"

namespace mlc {
namespace {

JsonLimits LimitsFor(const TokenizerLimits& limits) {
  JsonLimits j;
  j.max_bytes = limits.max_file_bytes;
  j.max_depth = limits.max_json_depth;
  return j;
}


}  // namespace

void Tokenizer::EncodeEach(std::string_view text, const std::function<void(int32_t)>& emit) const {
  for (int32_t id : Encode(text)) emit(id);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromDirectory(const std::string& dir,
                                                            const TokenizerLimits& limits) {
  std::string json = JoinPath(dir, "tokenizer.json");
  if (FileExists(json)) return FromJsonFile(json, limits);
  std::string model = JoinPath(dir, "tokenizer.model");
  if (FileExists(model)) return FromSentencePieceFile(model, limits);
  return IoError(dir, "expected tokenizer.json or tokenizer.model in the folder");
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonFile(const std::string& path,
                                                           const TokenizerLimits& limits) {
  // A package file lies inside its folder; "-" is standard input.
  auto doc = ReadJsonFile(path, LimitsFor(limits), path == "-" ? "" : FolderOf(path));
  if (!doc.ok()) return doc.errors();
  auto tok = text::ParseHfTokenizer(*doc);
  if (!tok.ok()) return InDocument(tok.take_errors(), DocumentName(path));
  return tok;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonText(std::string_view json,
                                                           const TokenizerLimits& limits) {
  auto doc = ParseJson(json, LimitsFor(limits));
  if (!doc.ok()) return doc.errors();
  return text::ParseHfTokenizer(*doc);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSentencePieceFile(
    const std::string& path, const TokenizerLimits& limits) {
  auto bytes = ReadFile(path, limits.max_file_bytes, path == "-" ? "" : FolderOf(path));
  if (!bytes.ok()) return bytes.errors();
  auto tok = text::LoadSentencePiece(*bytes);
  if (!tok.ok()) return InDocument(tok.take_errors(), DocumentName(path));
  return tok;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromSentencePieceBytes(std::string_view model) {
  return text::LoadSentencePiece(model);
}

}  // namespace mlc
