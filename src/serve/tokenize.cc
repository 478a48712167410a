// POST /tokenize and POST /detokenize, in llama-server's shapes: {"content", "add_special",
// "with_pieces"} -> {"tokens": [id, ...]}, or with pieces [{"id", "piece"}, ...] (a piece as text
// when its bytes are UTF-8, else the list of its byte values); {"tokens": [id, ...]} ->
// {"content"}. add_special puts the template's system prefix ids (BOS) first, as /v1/completions
// does. Every id is checked against the tokenizer's vocabulary (400 at /tokens/N). With several
// models, the body's `model` picks the tokenizer. The body was bounded by the body size limit
// before it was read.
#include <optional>

#include "serve/request_fields.h"
#include "serve/server_impl.h"
#include "text/token_pieces.h"
#include "text/unicode.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts
namespace {

// An optional boolean field: false when absent or null.
Result<bool> Flag(const Json& doc, const char* key) {
  if (!Present(doc, key)) return false;
  if (!doc[key].is_boolean()) return Invalid(std::string("/") + key, "expected true or false");
  return doc[key].get<bool>();
}

struct TokenizeRequest {
  std::string content;
  bool add_special = false;
  bool with_pieces = false;
};

Result<TokenizeRequest> ParseTokenizeRequest(const Json& doc) {
  if (!doc.is_object()) return Invalid("", "expected an object with content");
  Errors errors;
  TokenizeRequest r;
  if (!doc.contains("content") || !doc["content"].is_string()) {
    AddError(errors, Invalid("/content", "expected the text to tokenize, a string"));
  } else {
    r.content = doc["content"].get<std::string>();
  }
  Keep(errors, Flag(doc, "add_special"), r.add_special);
  Keep(errors, Flag(doc, "with_pieces"), r.with_pieces);
  if (!errors.empty()) return errors;
  return r;
}

// The ids of {"tokens": [...]}, each one the tokenizer knows.
Result<std::vector<int32_t>> ParseDetokenizeRequest(const Json& doc, const Tokenizer& tokenizer) {
  if (!doc.is_object() || !doc.contains("tokens") || !doc["tokens"].is_array()) {
    return Invalid("/tokens", "expected an array of token ids");
  }
  const Json& tokens = doc["tokens"];
  std::vector<int32_t> ids;
  ids.reserve(tokens.size());
  Errors errors;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const Json& t = tokens[i];
    const std::string path = "/tokens/" + std::to_string(i);
    if (!t.is_number_integer()) {
      AddError(errors, Invalid(path, "expected a token id, an integer"));
      continue;
    }
    const int64_t id = t.is_number_unsigned() && t.get<uint64_t>() > INT32_MAX ? -1 : t.get<int64_t>();
    if (id < 0 || id > INT32_MAX || tokenizer.IdToToken(static_cast<int32_t>(id)).empty()) {
      AddError(errors, Invalid(path, "token id " + t.dump() + " is not in this model's vocabulary (" +
                                         std::to_string(tokenizer.VocabSize()) + " tokens)"));
      continue;
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  if (!errors.empty()) return errors;
  return ids;
}

// llama-server's piece: the token's text, or its bytes when they are not UTF-8 on their own.
OrderedJson Piece(const text::TokenPieces& pieces, const Tokenizer& tokenizer, int32_t id) {
  std::string bytes = pieces.Bytes(id).value_or(tokenizer.Decode({&id, 1}));
  if (text::IsValidUtf8(bytes)) return bytes;
  OrderedJson values = OrderedJson::array();
  for (unsigned char b : bytes) values.push_back(static_cast<int>(b));
  return values;
}

}  // namespace

ServedModel* Server::Impl::BodyAndModel(std::string_view body, const Reply& res, Json& doc) {
  auto parsed = ParseBody(body);
  if (!parsed) {
    SendError(res, 400, OpenAiError(parsed.errors()));
    return nullptr;
  }
  doc = std::move(*parsed);
  return Pick(doc, res, /*count=*/false);
}

void Server::Impl::Tokenize(std::string_view body, const Reply& res) {
  Json doc;
  ServedModel* model = BodyAndModel(body, res, doc);
  if (!model) return;
  const OpenedPackage& package = model->package;
  auto r = ParseTokenizeRequest(doc);
  if (!r) {
    SendError(res, 400, OpenAiError(r.errors()));
    return;
  }
  if (!package.tokenizer) {
    SendError(res, 400, OpenAiError("this package has no tokenizer", "invalid_request_error", "/content"));
    return;
  }
  const Tokenizer& tokenizer = *package.tokenizer;
  std::vector<int32_t> ids;
  if (r->add_special && package.tmpl && package.tmpl->system_prefix_token_ids) {
    ids = *package.tmpl->system_prefix_token_ids;
  }
  tokenizer.EncodeEach(r->content, [&ids](int32_t id) { ids.push_back(id); });
  OrderedJson tokens = OrderedJson::array();
  if (r->with_pieces) {
    const text::TokenPieces pieces(tokenizer);
    for (int32_t id : ids) tokens.push_back({{"id", id}, {"piece", Piece(pieces, tokenizer, id)}});
  } else {
    for (int32_t id : ids) tokens.push_back(id);
  }
  SendJson(res, 200, {{"tokens", std::move(tokens)}});
}

void Server::Impl::Detokenize(std::string_view body, const Reply& res) {
  Json doc;
  ServedModel* model = BodyAndModel(body, res, doc);
  if (!model) return;
  const OpenedPackage& package = model->package;
  if (!package.tokenizer) {
    SendError(res, 400, OpenAiError("this package has no tokenizer", "invalid_request_error", "/tokens"));
    return;
  }
  auto ids = ParseDetokenizeRequest(doc, *package.tokenizer);
  if (!ids) {
    SendError(res, 400, OpenAiError(ids.errors()));
    return;
  }
  SendJson(res, 200, {{"content", package.tokenizer->Decode(*ids)}});
}

}  // namespace mlc
