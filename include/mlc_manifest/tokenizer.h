// Tokenizers as MLC runs them (SPEC 8): a package's `tokenizer.json` (Hugging Face format) or,
// failing that, its `tokenizer.model` (SentencePiece). Encoding adds no special tokens and
// decoding skips none, so ids and text equal what @mlc-ai/web-tokenizers 0.1.6 gives WebLLM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc {

// Size bounds for loading tokenizer files.
struct TokenizerLimits {
  uint64_t max_file_bytes = 256ull << 20;  // tokenizer.json / tokenizer.model size
  int max_json_depth = 128;                // nesting of the tokenizer.json document
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // `dir/tokenizer.json` when present, else `dir/tokenizer.model`; neither is an I/O error.
  static Result<std::unique_ptr<Tokenizer>> FromDirectory(const std::string& dir,
                                                          const TokenizerLimits& limits = {});
  // A Hugging Face tokenizer.json file, or its bytes. A component outside SPEC 8's list is an
  // error (kUnsupported) whose path is the JSON Pointer of the component's "type".
  static Result<std::unique_ptr<Tokenizer>> FromJsonFile(const std::string& path,
                                                         const TokenizerLimits& limits = {});
  static Result<std::unique_ptr<Tokenizer>> FromJsonText(std::string_view json,
                                                         const TokenizerLimits& limits = {});
  // A SentencePiece model file (serialized ModelProto), or its bytes.
  static Result<std::unique_ptr<Tokenizer>> FromSentencePieceFile(
      const std::string& path, const TokenizerLimits& limits = {});
  static Result<std::unique_ptr<Tokenizer>> FromSentencePieceBytes(std::string_view model);

  // Token ids of text, without special tokens added. Never fails: invalid UTF-8 is first
  // replaced as a lossy UTF-8 decode does (each maximal bad subsequence -> U+FFFD).
  // Safe to call from several threads at once.
  virtual std::vector<int32_t> Encode(std::string_view text) const = 0;
  // Encode's ids handed to emit one at a time, in order, as they are made, so that a long text
  // is never held as one list of ids (the default runs Encode).
  virtual void EncodeEach(std::string_view text, const std::function<void(int32_t)>& emit) const;
  // Text of ids, special tokens kept. Unknown ids are skipped (Hugging Face) or make the
  // result empty (SentencePiece), as the reference does.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
  // The id of a token string (added tokens included), if it has one.
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  // The token string of an id; "" when the id has none (as web-tokenizers' idToToken).
  virtual std::string IdToToken(int32_t id) const = 0;
  // Distinct tokens, added tokens included (web-tokenizers' getVocabSize).
  virtual size_t VocabSize() const = 0;
  // "huggingface" or "sentencepiece".
  virtual std::string_view Kind() const = 0;
};

}  // namespace mlc
