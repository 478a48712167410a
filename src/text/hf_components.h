// The normalizers, pre-tokenizers and decoders of a Hugging Face tokenizer.json that SPEC 8
// lists, parsed from their JSON objects and applied as Hugging Face tokenizers applies them.
// Only ids matter here, so pieces carry no offsets: just their text and whether they begin the
// original input (Metaspace's prepend_scheme "first").
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc::text {

struct Piece {
  std::string text;
  bool at_start = false;  // starts at offset 0 of the original input
};

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string Normalize(std::string s) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) pieces; empty pieces are dropped afterwards by the caller.
  virtual std::vector<Piece> Split(std::vector<Piece> pieces) const = 0;
  // Split of one piece with each resulting piece handed to emit as it is made, in Split's order
  // (every pre-tokenizer treats pieces independently, so a sequence can run depth first). The
  // regex splitters and Sequence stream: a long text never becomes a list of millions of pieces.
  virtual void SplitEach(Piece piece, const std::function<void(Piece)>& emit) const;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual std::vector<std::string> DecodeChain(std::vector<std::string> tokens) const = 0;
};

// Each parser reads the component object at `path` (null is "none": a nullptr result).
// An unknown "type" is ErrorCode::kUnsupported at path + "/type".
Result<std::unique_ptr<Normalizer>> ParseNormalizer(const Json& j, const std::string& path);
Result<std::unique_ptr<PreTokenizer>> ParsePreTokenizer(const Json& j, const std::string& path);
Result<std::unique_ptr<Decoder>> ParseDecoder(const Json& j, const std::string& path);

// The GPT-2 byte <-> visible character table behind ByteLevel.
const std::string& ByteToChar(unsigned char b);
// Byte of a ByteLevel character, or -1.
int CharToByte(char32_t cp);

}  // namespace mlc::text
