// The body of POST /v1/embeddings (serve/embeddings_request.h): every field checked at its JSON
// Pointer, the input count before any input is read, token ids against the vocabulary.
#include "serve/embeddings_request.h"

#include "serve/request_fields.h"

namespace mlc::serve {
namespace {

// An input of token ids at path: integers the vocabulary holds, at least one.
Result<std::vector<int32_t>> TokenInput(const Json& ids, const std::string& path, int64_t vocab_size) {
  if (ids.empty()) return Invalid(path, "expected at least one token id");
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t j = 0; j < ids.size(); ++j) {
    const Json& t = ids[j];
    const bool small = t.is_number_integer() && !(t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX);
    const int64_t id = small ? t.get<int64_t>() : -1;
    if (id < 0 || id >= vocab_size) {
      return Invalid(path + "/" + std::to_string(j),
                     "expected a token id in [0, " + std::to_string(vocab_size) + "), got " + t.dump());
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

// One element of `input`'s array: a non-empty string or a list of token ids.
Result<EmbeddingInput> OneInput(const Json& v, const std::string& path, int64_t vocab_size) {
  EmbeddingInput in;
  if (v.is_string()) {
    if (v.get_ref<const std::string&>().empty()) return Invalid(path, "expected a non-empty string");
    in.text = v.get<std::string>();
    return in;
  }
  if (!v.is_array()) return Invalid(path, "expected a string or an array of token ids");
  auto ids = TokenInput(v, path, vocab_size);
  MLC_RETURN_IF_ERROR(ids);
  in.ids = std::move(*ids);
  return in;
}

Result<std::vector<EmbeddingInput>> ParseInputs(const Json& doc, int64_t vocab_size, size_t max_inputs) {
  if (!doc.contains("input")) return Invalid("/input", "expected the text (or token ids) to embed");
  const Json& input = doc["input"];
  std::vector<EmbeddingInput> out;
  // A string, or one list of token ids: a single input.
  if (input.is_string() || (input.is_array() && !input.empty() && input[0].is_number())) {
    auto one = OneInput(input, "/input", vocab_size);
    MLC_RETURN_IF_ERROR(one);
    out.push_back(std::move(*one));
    return out;
  }
  if (!input.is_array() || input.empty()) {
    return Invalid("/input", "expected a string, an array of strings, an array of token ids or an array of those");
  }
  if (input.size() > max_inputs) {
    return Error{ErrorCode::kLimit, "/input",
                 std::to_string(input.size()) + " inputs; this server takes at most " + std::to_string(max_inputs) +
                     " in one request"};
  }
  for (size_t i = 0; i < input.size(); ++i) {
    auto one = OneInput(input[i], "/input/" + std::to_string(i), vocab_size);
    MLC_RETURN_IF_ERROR(one);
    out.push_back(std::move(*one));
  }
  return out;
}

}  // namespace

Result<EmbeddingsRequest> ParseEmbeddingsRequest(const Json& doc, int64_t vocab_size, size_t max_inputs) {
  if (!doc.is_object()) return Invalid("", "expected an object with input");
  EmbeddingsRequest r;
  auto inputs = ParseInputs(doc, vocab_size, max_inputs);
  MLC_RETURN_IF_ERROR(inputs);
  r.inputs = std::move(*inputs);
  if (Present(doc, "encoding_format")) {
    const Json& f = doc["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64")) {
      return Invalid("/encoding_format", "expected \"float\" or \"base64\"");
    }
    r.base64 = f == "base64";
  }
  if (Present(doc, "dimensions")) {
    auto d = Integer(doc, "dimensions", 1, INT32_MAX);
    MLC_RETURN_IF_ERROR(d);
    r.dimensions = *d;
  }
  return r;
}

}  // namespace mlc::serve
