// libFuzzer target: arbitrary bytes as the body of POST /v1/chat/completions or POST
// /v1/embeddings through the strict JSON reader and the server's request parsers, and as an
// mlc-chat-config.json through the CPU program's model-config parser and parameter list (the first
// byte chooses which). Nothing may crash; what parses must respect the limits, and every error must
// render as an OpenAI error.
#include <cstdint>
#include <cstdlib>

#include "fuzz_input.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/package.h"
#include "mlc_manifest/serve.h"
#include "runtime/cpu/family.h"
#include "serve/embeddings_request.h"

namespace {

void Request(const mlc::Json& doc) {
  mlc::ChatCompletionLimits limits;
  limits.max_tokens = 64;
  limits.default_max_tokens = 16;
  limits.max_messages = 8;
  mlc::SamplerConfig defaults;
  auto r = mlc::ParseChatCompletionRequest(doc, limits, defaults);
  if (!r) {
    if (r.errors().empty()) std::abort();
    (void)mlc::OpenAiError(r.errors()).dump();
    return;
  }
  if (r->max_tokens < 0 || r->max_tokens > limits.max_tokens) std::abort();
  if (r->stop.size() > limits.max_stop_strings || r->messages.size() > limits.max_messages) std::abort();
}

void Embeddings(const mlc::Json& doc) {
  constexpr int64_t kVocab = 300;
  constexpr size_t kMaxInputs = 4;
  auto r = mlc::serve::ParseEmbeddingsRequest(doc, kVocab, kMaxInputs);
  if (!r) {
    if (r.errors().empty()) std::abort();
    (void)mlc::OpenAiError(r.errors()).dump();
    return;
  }
  if (r->inputs.empty() || r->inputs.size() > kMaxInputs) std::abort();
  for (const mlc::serve::EmbeddingInput& in : r->inputs) {
    if (in.text ? in.text->empty() || !in.ids.empty() : in.ids.empty()) std::abort();
    for (int32_t id : in.ids) {
      if (id < 0 || id >= kVocab) std::abort();
    }
  }
  if (r->dimensions && *r->dimensions < 1) std::abort();
}

void ModelConfig(const mlc::Json& doc) {
  auto chat = mlc::ParseChatConfig(doc);
  if (!chat) return;
  auto config = mlc::cpu::ParseModelConfig(*chat);
  if (!config) return;
  auto specs = mlc::CpuParamSpecs(*chat);
  if (specs && specs->empty()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  auto doc = mlc::fuzz::JsonInput(data, size, 1, 1 << 20);
  if (!doc) return 0;
  if (data[0] & 1) {
    ModelConfig(*doc);
  } else if (data[0] & 2) {
    Embeddings(*doc);
  } else {
    Request(*doc);
  }
  return 0;
}
