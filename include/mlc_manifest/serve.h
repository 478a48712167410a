// The OpenAI-compatible HTTP front of the engine: POST /v1/chat/completions (plain JSON or
// server-sent events with stream: true; text, input_audio and image_url content parts; logprobs),
// POST /v1/completions, GET /v1/models, POST /tokenize and /detokenize (llama-server's shapes),
// one package or several side by side (each with its own engine, picked by the body's `model`),
// GET /health, GET /metrics (Prometheus) and a chat page at /, with limits on body size,
// concurrent requests and time, API keys, every bad request answered with an OpenAI-style error
// object. Also the parser of a chat completion request, usable on its own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/engine.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/tools.h"

namespace mlc {

// ---- The request document ----

struct ChatCompletionLimits {
  int64_t max_tokens = 4096;     // a larger max_tokens is an error
  int64_t default_max_tokens = 256;
  size_t max_stop_strings = 4;   // as OpenAI
  size_t max_messages = 256;
};

struct ChatCompletionRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  int64_t max_tokens = 0;
  SamplerConfig sampler;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  std::shared_ptr<const JsonGrammar> json;  // response_format json_object / json_schema
  ToolSet tools;  // tools, tool_choice, parallel_tool_calls (read with ParseToolSet)
  int top_logprobs = -1;       // logprobs: -1 off; else top_logprobs (0..20)
  // The thinking switch: chat_template_kwargs.enable_thinking, or reasoning_effort ("none" off,
  // "minimal" .. "xhigh" on); none: the template's default. Ignored by a model without one.
  std::optional<bool> thinking;
};

// Parses the body of POST /v1/chat/completions (OpenAI's schema; unknown fields are ignored).
// `defaults` gives temperature and top_p when the request leaves them out. Errors carry the
// JSON Pointer of the field.
Result<ChatCompletionRequest> ParseChatCompletionRequest(const Json& doc,
                                                         const ChatCompletionLimits& limits,
                                                         const SamplerConfig& defaults);

// The grammar of the body's response_format (the body parsed again in key order, so that object
// properties come in the schema's order): nullptr for none or {"type": "text"}, any JSON object
// for {"type": "json_object"}, the schema for {"type": "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}}. A schema keyword outside the subset is kUnsupported at
// /response_format/json_schema/schema/..., its message naming the keyword.
Result<std::shared_ptr<const JsonGrammar>> ParseResponseFormat(const OrderedJson& body,
                                                              const JsonGrammarOptions& options);

// The body of POST /v1/completions (the legacy API): one prompt, a string or token ids; echo and
// several prompts are refused (400 naming the field); logprobs 0..20. The server reads its
// response_format with ParseResponseFormat, as for chat; logit_bias (on both routes) is refused.
struct CompletionRequest {
  std::string model;
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  int64_t max_tokens = 16;  // OpenAI's default here
  SamplerConfig sampler;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int top_logprobs = -1;  // logprobs: -1 off; else the alternatives per token (0..20)
};
Result<CompletionRequest> ParseCompletionRequest(const Json& doc, const ChatCompletionLimits& limits,
                                                 const SamplerConfig& defaults);

// {"error": {"message", "type", "param", "code"}}: type "invalid_request_error" for kInvalid /
// kUsage / kUnsupported, "rate_limit_error"-style names are given by the caller.
OrderedJson OpenAiError(const std::string& message, const std::string& type,
                        const std::string& param = "", const std::string& code = "");
OrderedJson OpenAiError(const Errors& errors);

// ---- The server ----

// Every request is framed by the server's own reader before any handler sees it (src/serve/
// http_framing.h, docs/security.md): limits on the request line, the header block and the body
// on the wire, no compressed bodies (415), no ambiguous framing (400), the Host allow-list and
// Origin check (403), the API key where keys are set (401) and application/json POST bodies only
// (415).

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;             // 0: any free port (see Server::port)
  size_t max_body_bytes = 32u << 20;
  int max_concurrent = 64;     // requests in flight; more get 429
  int request_timeout_s = 600; // a non-streamed reply not done by then is cancelled (504)
  int idle_timeout_s = 30;     // a connection silent this long is closed
  int request_read_timeout_s = 30;  // a request's line, headers and body must arrive within this
  size_t max_request_line = 8 << 10;   // bytes; 414 beyond
  size_t max_header_bytes = 64 << 10;  // bytes of the header block; 431 beyond
  size_t max_headers = 100;            // header fields; 431 beyond
  size_t max_connections = 1024;       // open connections; more are answered 503 and closed
  // Request bodies held at once (being read, waiting for a worker or being answered), all
  // connections together; a body that would pass it is answered 503 as its head or bytes arrive.
  size_t max_buffered_bytes = 256u << 20;
  // JSON values in a request body (each costs tens of bytes parsed); 400 beyond.
  uint64_t max_json_values = 1u << 20;
  // Host / Origin names answered besides localhost, 127.0.0.1, [::1] and the bind address
  // ("*": any); other Hosts and browser Origins get 403.
  std::vector<std::string> allowed_hosts;
  // With any key, every route but /health, /metrics and the chat page at / needs the header
  // "Authorization: Bearer KEY" naming one of them (else 401 with WWW-Authenticate: Bearer, from
  // the request's head, compared in constant time). Keys are visible ASCII (IsApiKey).
  std::vector<std::string> api_keys;
  bool metrics_need_key = false;  // /metrics needs a key too
  bool allow_local_files = false;  // image_url / input_audio naming a file on this machine
  ChatCompletionLimits request_limits;
  int64_t json_max_string_length = 0;  // structured output: strings without maxLength; 0: unbounded
  // /v1/embeddings: how each input's final hidden states are pooled, and the most inputs and
  // tokens (over all inputs) one request may hold (OpenAI's limits).
  EmbeddingPooling embedding_pooling = EmbeddingPooling::kMean;
  size_t max_embedding_inputs = 2048;
  uint64_t max_embedding_tokens = 300000;
  // /v1/audio/transcriptions and /translations: the longest recording taken, and the tokens
  // generated for each window at most.
  int64_t max_audio_seconds = 600;
  int64_t max_transcript_tokens = 256;
  EngineOptions engine;
};

// ---- API keys ----

// A key a request can send as "Authorization: Bearer KEY": at least one byte, all visible ASCII.
bool IsApiKey(std::string_view key);

// The keys of a key file's text: one a line, blanks around it trimmed, blank lines and lines
// starting with '#' skipped, CRLF line ends taken. An error (document: `document`) at "line N"
// for a line that is not a key, and at "" when the text holds no key.
Result<std::vector<std::string>> ParseApiKeys(std::string_view text, const std::string& document);
// ParseApiKeys of a file (at most 1 MiB); one that cannot be read is an I/O error.
Result<std::vector<std::string>> ReadApiKeyFile(const std::string& path);

// ---- Several models ----

// A package to serve and the name requests give for it as `model` ("": the folder's base name).
struct ModelSource {
  std::string name;
  std::string dir;
};
// Its name: the given one, else the folder's base name.
std::string ModelSourceName(const ModelSource& source);
// The names of the sources, in their order. Two alike are an error at /models/N/name naming both
// folders; so are an empty name and one with control characters.
Result<std::vector<std::string>> ModelNames(const std::vector<ModelSource>& sources);

class Server {
 public:
  // Opens the package with OpenPackageLibrary (a registered library such as the reference
  // runtime's, else the built-in CPU program of its model_type), loads the model and starts the
  // engine.
  static Result<std::unique_ptr<Server>> Create(const std::string& package_dir,
                                                const ServeOptions& options);
  // Several packages, each opened as above with its own engine (options.engine each: the KV
  // budget is per model), named by ModelNames. With one, any `model` a request gives is taken;
  // with several, a request's `model` picks the package (/v1/chat/completions, /v1/completions,
  // /tokenize, /detokenize): a name not served is a 404 (code model_not_found), none a 400, both
  // listing the names. GET /v1/models lists them all with their inputs; GET /v1/models/NAME
  // answers one.
  static Result<std::unique_ptr<Server>> Create(const std::vector<ModelSource>& models,
                                                const ServeOptions& options);
  ~Server();

  // Binds (the port is known from then on) and serves until Stop; an error when it cannot bind.
  Status Bind();
  void Run();
  // Stops taking connections; with drain, requests in flight finish first (on every engine).
  void Stop(bool drain);
  int port() const;
  const std::string& model_id() const;  // the first model's name
  const std::vector<std::string>& model_ids() const;

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlc
