// The body of POST /v1/embeddings, parsed before any work (serve/embeddings_request.cc): its
// inputs (texts, or token ids checked against the vocabulary), at most max_inputs of them,
// encoding_format and dimensions, each error at its JSON Pointer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc::serve {

// One input: a text to tokenize (not empty), or token ids (at least one).
struct EmbeddingInput {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

struct EmbeddingsRequest {
  std::vector<EmbeddingInput> inputs;  // at least one
  bool base64 = false;                 // encoding_format "base64"
  std::optional<int64_t> dimensions;
};

// `input` (a string, an array of strings, an array of token ids, or an array of such arrays;
// kLimit past max_inputs before any is read), `encoding_format` (float | base64), `dimensions`
// (an integer >= 1). Token ids must be in [0, vocab_size).
Result<EmbeddingsRequest> ParseEmbeddingsRequest(const Json& doc, int64_t vocab_size, size_t max_inputs);

}  // namespace mlc::serve
