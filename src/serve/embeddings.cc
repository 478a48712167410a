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

#include "serve/embeddings_request.h"
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts
namespace {

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

// Each input's token ids: a text's are the template's system prefix (BOS) and its tokens; the
// total over all inputs is bounded.
Result<std::vector<std::vector<int32_t>>> InputIds(std::vector<EmbeddingInput> inputs, const OpenedPackage& package,
                                                   uint64_t max_tokens) {
  std::vector<std::vector<int32_t>> out;
  uint64_t total = 0;
  for (EmbeddingInput& in : inputs) {
    std::vector<int32_t> ids = std::move(in.ids);
    if (in.text) {
      if (package.tmpl && package.tmpl->system_prefix_token_ids) ids = *package.tmpl->system_prefix_token_ids;
      package.tokenizer->EncodeEach(*in.text, [&ids](int32_t id) { ids.push_back(id); });
    }
    total += ids.size();
    out.push_back(std::move(ids));
  }
  if (total > max_tokens) {
    return Error{ErrorCode::kLimit, "/input",
                 std::to_string(total) + " tokens over all inputs; this server takes at most " +
                     std::to_string(max_tokens) + " in one request"};
  }
  return out;
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
  // serve opens every package with its tokenizer.
  auto r = ParseEmbeddingsRequest(in->doc, model.package.tokenizer->VocabSize(), options.max_embedding_inputs);
  if (!r) {
    Refuse(res, StatusFor(r.errors()), OpenAiError(r.errors()));
    return;
  }
  auto inputs = InputIds(std::move(r->inputs), model.package, options.max_embedding_tokens);
  if (!inputs) {
    Refuse(res, StatusFor(inputs.errors()), OpenAiError(inputs.errors()));
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
  const size_t n = inputs->size();
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
      auto id = model.engine->Submit(EmbeddingRequest(std::move((*inputs)[next]), options.embedding_pooling),
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
