// Fuzzes tokenizer.json loading and encoding: the input is a small tokenizer document, a NUL
// byte, then a text to encode (and decode back) when the document loads.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "mlc_manifest/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t split = input.find('\0');
  std::string_view doc = input.substr(0, split);
  std::string_view text = split == std::string_view::npos ? std::string_view() : input.substr(split + 1);
  mlc::TokenizerLimits limits;
  limits.max_file_bytes = 1 << 20;
  limits.max_json_depth = 64;
  auto tok = mlc::Tokenizer::FromJsonText(doc, limits);
  if (!tok.ok()) return 0;
  std::vector<int32_t> ids = (*tok)->Encode(text);
  (void)(*tok)->Decode(ids);
  ids.push_back(-1);
  ids.push_back(1 << 30);
  (void)(*tok)->Decode(ids);
  for (int32_t id : ids) (void)(*tok)->IdToToken(id);
  (void)(*tok)->VocabSize();
  return 0;
}
