// POST /v1/embeddings in OpenAI's shape: `input` a string, an array of strings, an array of token
// ids or an array of such arrays; `encoding_format` float (default) or base64 (the float32 values'
// little-endian bytes); `dimensions` only when it equals the model's width. Each input is the
// template's system prefix ids (BOS) and its text's tokens (token arrays as given), run through the
// engine as an embedding request (batched with every other prefill, at most --max-batch-size of
// one request's inputs queued at once); the answer lists each input's pooled, L2-normalised final
// hidden state in order, with usage.prompt_tokens. Sizes are checked before any work: inputs
// (--max-embedding-inputs), tokens over all inputs (--max-embedding-tokens), ids in the vocabulary.
#include <cstring>
#include <deque>

#include "serve/request_fields.h"
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts
namespace {

struct EmbeddingsRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids, one list per input
  bool base64 = false;
  std::optional<int64_t> dimensions;
};

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

// What `input` holds, as token id lists: texts tokenized after the template's system prefix.
Result<std::vector<std::vector<int32_t>>> ParseInputs(const Json& doc, const OpenedPackage& package,
                                                      const ServeOptions& limits) {
  if (!doc.contains("input")) return Invalid("/input", "expected the text (or token ids) to embed");
  const Json& input = doc["input"];
  const int64_t vocab = package.tokenizer->VocabSize();  // serve opens every package with one
  auto text = [&](const Json& s, const std::string& path) -> Result<std::vector<int32_t>> {
    if (s.get_ref<const std::string&>().empty()) return Invalid(path, "expected a non-empty string");
    std::vector<int32_t> ids;
    if (package.tmpl && package.tmpl->system_prefix_token_ids) ids = *package.tmpl->system_prefix_token_ids;
    package.tokenizer->EncodeEach(s.get_ref<const std::string&>(), [&ids](int32_t id) { ids.push_back(id); });
    return ids;
  };
  std::vector<std::vector<int32_t>> out;
  if (input.is_string()) {
    auto ids = text(input, "/input");
    MLC_RETURN_IF_ERROR(ids);
    out.push_back(std::move(*ids));
  } else if (input.is_array() && !input.empty() && input[0].is_number()) {  // one list of token ids
    auto ids = TokenInput(input, "/input", vocab);
    MLC_RETURN_IF_ERROR(ids);
    out.push_back(std::move(*ids));
  } else if (input.is_array() && !input.empty()) {
    if (input.size() > limits.max_embedding_inputs) {
      return Error{ErrorCode::kLimit, "/input",
                   std::to_string(input.size()) + " inputs; this server takes at most " +
                       std::to_string(limits.max_embedding_inputs) + " in one request"};
    }
    for (size_t i = 0; i < input.size(); ++i) {
      const std::string path = "/input/" + std::to_string(i);
      auto ids = input[i].is_string()  ? text(input[i], path)
                 : input[i].is_array() ? TokenInput(input[i], path, vocab)
                                       : Result<std::vector<int32_t>>(Invalid(path, "expected a string or an array of token ids"));
      MLC_RETURN_IF_ERROR(ids);
      out.push_back(std::move(*ids));
    }
  } else {
    return Invalid("/input", "expected a string, an array of strings, an array of token ids or an array of those");
  }
  uint64_t total = 0;
  for (const auto& ids : out) total += ids.size();
  if (total > limits.max_embedding_tokens) {
    return Error{ErrorCode::kLimit, "/input",
                 std::to_string(total) + " tokens over all inputs; this server takes at most " +
                     std::to_string(limits.max_embedding_tokens) + " in one request"};
  }
  return out;
}

Result<EmbeddingsRequest> ParseEmbeddingsRequest(const Json& doc, const OpenedPackage& package,
                                                 const ServeOptions& limits) {
  if (!doc.is_object()) return Invalid("", "expected an object with input");
  EmbeddingsRequest r;
  auto inputs = ParseInputs(doc, package, limits);
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

std::string Base64(const unsigned char* bytes, size_t n) {
  static constexpr char kDigits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    const uint32_t v = (uint32_t{bytes[i]} << 16) | (i + 1 < n ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < n ? uint32_t{bytes[i + 2]} : 0);
    out.push_back(kDigits[(v >> 18) & 63]);
    out.push_back(kDigits[(v >> 12) & 63]);
    out.push_back(i + 1 < n ? kDigits[(v >> 6) & 63] : '=');
    out.push_back(i + 2 < n ? kDigits[v & 63] : '=');
  }
  return out;
}

// An embedding as OpenAI sends it: the floats, or base64 of their little-endian float32 bytes.
OrderedJson Vector(const std::vector<float>& v, bool base64) {
  if (!base64) return v;
  std::vector<unsigned char> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + static_cast<size_t>(b)] = static_cast<unsigned char>(u >> (8 * b));
  }
  return Base64(bytes.data(), bytes.size());
}

GenerationRequest EmbeddingRequest(std::vector<int32_t> ids, EmbeddingPooling pooling) {
  GenerationRequest g;
  g.input.pieces.push_back(PromptPiece{TextPiece{std::move(ids)}, ""});
  g.input.media.emplace_back();
  g.embedding = pooling;
  return g;
}

}  // namespace

void Server::Impl::Embeddings(std::string_view body, const Reply& res) {
  const auto start = Clock::now();
  auto in = Admit(body, res);
  if (!in) return;
  ServedModel& model = *in->model;
  auto r = ParseEmbeddingsRequest(in->doc, model.package, options);
  if (!r) {
    Refuse(res, StatusFor(r.errors()), OpenAiError(r.errors()));
    return;
  }
  const std::optional<int64_t>& width = model.package.model.hidden_size;
  if (r->dimensions && width && *r->dimensions != *width) {
    Refuse(res, 400, OpenAiError("this model's embeddings have " + std::to_string(*width) +
                                     " dimensions; it cannot give " + std::to_string(*r->dimensions),
                                 "invalid_request_error", "/dimensions"));
    return;
  }
  // The inputs go to the engine a window at a time (the batch size), the oldest awaited first.
  struct Queued {
    size_t index;
    uint64_t id;
    std::shared_ptr<Channel> channel;
  };
  const size_t n = r->inputs.size();
  const size_t window = static_cast<size_t>(std::max<int64_t>(1, options.engine.batch.max_batch_size));
  const auto deadline = Clock::now() + std::chrono::seconds(options.request_timeout_s);
  std::vector<StreamEvent> done(n);
  std::deque<Queued> queued;
  auto cancel_all = [&] {
    for (const Queued& q : queued) model.engine->Cancel(q.id);
  };
  size_t next = 0;
  while (next < n || !queued.empty()) {
    while (next < n && queued.size() < window) {
      auto channel = std::make_shared<Channel>(RequestTimer(&model.metrics, start));
      auto id = model.engine->Submit(EmbeddingRequest(std::move(r->inputs[next]), options.embedding_pooling),
                                     channel->Sink());
      if (!id && id.error().code == ErrorCode::kLimit && !queued.empty()) break;  // the queue is full: wait
      if (!id) {
        cancel_all();
        RefuseSubmit(res, id.error());
        return;
      }
      queued.push_back({next++, *id, std::move(channel)});
    }
    const Queued q = queued.front();
    queued.pop_front();
    const Waited waited = Await(model, q.id, *q.channel, res, deadline, [&](StreamEvent& e) {
      if (e.done) done[q.index] = std::move(e);
    });
    const StreamEvent& last = done[q.index];
    if (waited != Waited::kDone || last.finish_reason != "length") {
      cancel_all();
      if (!EndFailed(waited, last, res)) {  // cancelled: the server is stopping
        SendError(res, 503, OpenAiError("the request was cancelled: the server is shutting down", "server_error"));
      }
      return;
    }
  }
  if (r->dimensions && !width && done[0].embedding.size() != static_cast<size_t>(*r->dimensions)) {
    Refuse(res, 400, OpenAiError("this model's embeddings have " + std::to_string(done[0].embedding.size()) +
                                     " dimensions; it cannot give " + std::to_string(*r->dimensions),
                                 "invalid_request_error", "/dimensions"));
    return;
  }
  OrderedJson data = OrderedJson::array();
  int64_t tokens = 0;
  for (size_t i = 0; i < n; ++i) {
    tokens += done[i].prompt_tokens;
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", Vector(done[i].embedding, r->base64)}});
  }
  metrics.Count(Outcome::kCompleted);
  SendJson(res, 200,
           {{"object", "list"},
            {"data", std::move(data)},
            {"model", model.name},
            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

}  // namespace mlc
