/* The C API of libmlc_manifest: the MLC model artifact manifest for programs in any language.
 *
 * C99, every symbol prefixed mlc_. Objects are opaque handles made by *_init and released by
 * *_free (free(NULL) does nothing). Every handle keeps the errors of its last failed call: read
 * them with mlc_*_errors and mlc_errors_count / mlc_errors_get (code, document, JSON Pointer or
 * file position, message). Functions return an mlc_status (0 is success). Strings are UTF-8 and
 * NUL-terminated; strings and buffers a handle returns stay valid until the next call that
 * changes that handle, or its *_free.
 *
 * Thread safety: unless a function says otherwise, a handle may be used by one thread at a time;
 * distinct handles may be used from different threads at once. Functions marked "const" (taking
 * a const pointer) may be called from several threads at once on the same handle.
 *
 * The C++ wrappers (namespace mlc::c) follow the C block: header-only RAII classes.
 */
#ifndef MLC_MANIFEST_MLC_MANIFEST_H_
#define MLC_MANIFEST_MLC_MANIFEST_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#if defined(MLC_MANIFEST_BUILDING)
#define MLC_API __attribute__((visibility("default")))
#else
#define MLC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Status codes and errors ---- */

typedef enum mlc_status {
  MLC_OK = 0,
  MLC_ERR_INVALID = 1,      /* the input breaks a rule (malformed, mismatched, out of range) */
  MLC_ERR_USAGE = 2,        /* asked for something that cannot be done as asked */
  MLC_ERR_IO = 3,           /* a file could not be read or written */
  MLC_ERR_UNSUPPORTED = 4,  /* well-formed, but outside what this implementation handles */
  MLC_ERR_LIMIT = 5,        /* over a size, depth, pixel or sample limit */
  MLC_ERR_EXISTS = 6,       /* a write refused because the target exists */
  MLC_ERR_ARGUMENT = 7,     /* a NULL handle or pointer, or an argument out of range */
  MLC_ERR_BUFFER = 8,       /* a caller's buffer is too small (the size needed is returned) */
  MLC_ERR_STATE = 9,        /* the handle holds no result of the kind asked for yet */
  MLC_ERR_INTERNAL = 10     /* out of memory or an unexpected failure */
} mlc_status;

/* "ok", "invalid", "usage", "io", "unsupported", "limit", "exists", "argument", "buffer",
 * "state", "internal"; "unknown" otherwise. Thread-safe; the string is static. */
MLC_API const char* mlc_status_name(int status);

/* The library version ("MAJOR.MINOR.PATCH", from project(VERSION)). Thread-safe, static. */
MLC_API const char* mlc_version(void);

/* One error: the strings belong to the handle the list came from. */
typedef struct mlc_error {
  int code;               /* an mlc_status */
  const char* code_name;  /* mlc_status_name(code) */
  const char* document;   /* the file or document the path points into ("" when unknown) */
  const char* path;       /* a JSON Pointer ("" is the whole document) or a file position */
  const char* message;    /* what was expected / what went wrong */
} mlc_error;

/* The errors of a handle's last failed call (empty after a success). Owned by the handle. */
typedef struct mlc_errors mlc_errors;
MLC_API size_t mlc_errors_count(const mlc_errors* errors);
/* Fills *out with error i; MLC_ERR_ARGUMENT when i is out of range. */
MLC_API int mlc_errors_get(const mlc_errors* errors, size_t i, mlc_error* out);

/* ---- Documents: the model package (mlc-model-manifest.json) and the compiled program ---- */

typedef struct mlc_package mlc_package;
MLC_API mlc_package* mlc_package_init(void);
MLC_API void mlc_package_free(mlc_package* package);
MLC_API const mlc_errors* mlc_package_errors(const mlc_package* package);
/* Reads and validates a manifest file, or DIR/mlc-model-manifest.json of a package folder
 * (every rule of SPEC 1, the interface_id recomputed and compared). */
MLC_API int mlc_package_read(mlc_package* package, const char* path);
/* The same from JSON text in memory. */
MLC_API int mlc_package_parse(mlc_package* package, const char* json, size_t length);
/* After a successful read/parse (NULL before): "sha256:..." ids, and the normalized document
 * as the producer writes it (json.dump(doc, indent=2) + "\n"). */
MLC_API const char* mlc_package_interface_id(const mlc_package* package);
MLC_API const char* mlc_package_parameter_schema_id(const mlc_package* package);
MLC_API const char* mlc_package_json(const mlc_package* package);

typedef struct mlc_program mlc_program;
MLC_API mlc_program* mlc_program_init(void);
MLC_API void mlc_program_free(mlc_program* program);
MLC_API const mlc_errors* mlc_program_errors(const mlc_program* program);
/* A compiled-program document, or a library's _metadata object holding it under "artifact". */
MLC_API int mlc_program_read(mlc_program* program, const char* path);
MLC_API int mlc_program_parse(mlc_program* program, const char* json, size_t length);
MLC_API const char* mlc_program_interface_id(const mlc_program* program);
MLC_API const char* mlc_program_parameter_schema_id(const mlc_program* program);
MLC_API const char* mlc_program_json(const mlc_program* program);

/* ---- Binding a package to a compiled program (SPEC 5) ---- */

typedef struct mlc_bind_params {
  const char* task;                        /* default "chat.completions" */
  const char* weights_parameter_schema_id; /* NULL: not checked against the weights */
  const char* device;                      /* a device profile name (NULL: none) */
} mlc_bind_params;
MLC_API mlc_bind_params mlc_bind_params_default(void);

typedef struct mlc_binding mlc_binding;
MLC_API mlc_binding* mlc_binding_init(void);
MLC_API void mlc_binding_free(mlc_binding* binding);
MLC_API const mlc_errors* mlc_binding_errors(const mlc_binding* binding);
/* Checks every rule of SPEC 5; each failing rule is one error. params may be NULL (defaults).
 * The documents are only read (they may be shared with other threads doing the same). */
MLC_API int mlc_bind(mlc_binding* binding, const mlc_package* package, const mlc_program* program,
                     const mlc_bind_params* params);
/* After a successful mlc_bind: the resolved contract as JSON (as `mlc-manifest bind --json`),
 * the program name, "tokens" or "embeds", and the functions the runtime must export. */
MLC_API const char* mlc_binding_json(const mlc_binding* binding);
MLC_API const char* mlc_binding_executor(const mlc_binding* binding);
MLC_API const char* mlc_binding_pair(const mlc_binding* binding);
MLC_API size_t mlc_binding_function_count(const mlc_binding* binding);
MLC_API const char* mlc_binding_function(const mlc_binding* binding, size_t i);

/* ---- Checking a whole package (the report of `mlc-manifest check --json`) ---- */

typedef enum mlc_verdict {
  MLC_VERDICT_PASS = 0,
  MLC_VERDICT_FAIL = 1,
  MLC_VERDICT_WARN = 2,
  MLC_VERDICT_SKIP = 3
} mlc_verdict;

typedef struct mlc_check_params {
  const char* program_path; /* compiled-program document or _metadata JSON (NULL: none) */
  const char* params_path;  /* parameter list with symbolic dimensions (NULL: none) */
  const char* task;         /* default "chat.completions" */
  const char* device;       /* a device profile name (NULL: none) */
  int verify_shards;        /* nonzero: read every shard byte and compare md5sum */
  int threads;              /* hashing threads, 0: one per core */
} mlc_check_params;
MLC_API mlc_check_params mlc_check_params_default(void);

typedef struct mlc_check_item {
  const char* name;         /* "manifest", "interface_id", "binding", ... */
  int verdict;              /* an mlc_verdict */
  const char* verdict_name; /* "pass", "fail", "warn", "skip" */
  const char* message;      /* one line for people */
} mlc_check_item;

typedef struct mlc_report mlc_report;
MLC_API mlc_report* mlc_report_init(void);
MLC_API void mlc_report_free(mlc_report* report);
MLC_API const mlc_errors* mlc_report_errors(const mlc_report* report);
/* Checks the package folder. Returns MLC_OK when the report was made (whatever its verdicts);
 * the verdicts are read with the accessors below. */
MLC_API int mlc_check(mlc_report* report, const char* dir, const mlc_check_params* params);
MLC_API int mlc_report_ok(const mlc_report* report); /* 1: no item failed */
MLC_API size_t mlc_report_count(const mlc_report* report);
MLC_API int mlc_report_item(const mlc_report* report, size_t i, mlc_check_item* out);
/* The whole report as JSON, byte for byte what `mlc-manifest check --json` prints:
 * {"ok", "checks": [{"check", "verdict", "message", "details"?}]}. */
MLC_API const char* mlc_report_json(const mlc_report* report);

/* ---- Audio (SPEC 6.1): a recording to mono float32 PCM at the processor's rate ---- */

typedef struct mlc_audio_params {
  int64_t sample_rate_hz; /* default 16000 */
  int64_t min_samples;    /* default 1 */
  int64_t max_samples;    /* default 480000 */
  int very_high_quality;  /* nonzero: soxr VHQ resampling instead of HQ */
} mlc_audio_params;
MLC_API mlc_audio_params mlc_audio_params_default(void);

typedef struct mlc_audio_info {
  const char* container;     /* "WAV", "FLAC", "OGG", "MP3", ... */
  const char* sample_format; /* "pcm_s16", "f32", ... */
  int64_t source_rate_hz;
  int64_t channels;
  int64_t frames;            /* source frames decoded */
} mlc_audio_info;

typedef struct mlc_audio mlc_audio;
MLC_API mlc_audio* mlc_audio_init(void);
MLC_API void mlc_audio_free(mlc_audio* audio);
MLC_API const mlc_errors* mlc_audio_errors(const mlc_audio* audio);
MLC_API int mlc_audio_decode_file(mlc_audio* audio, const char* path, const mlc_audio_params* params);
MLC_API int mlc_audio_decode_memory(mlc_audio* audio, const void* bytes, size_t length,
                                    const mlc_audio_params* params);
/* The library's buffer of the last decode (NULL, *count 0 before one). */
MLC_API const float* mlc_audio_samples(const mlc_audio* audio, size_t* count);
/* Copies the samples into the caller's buffer; MLC_ERR_BUFFER when capacity (in samples) is too
 * small. *count receives the number of samples in either case. */
MLC_API int mlc_audio_copy(const mlc_audio* audio, float* out, size_t capacity, size_t* count);
MLC_API int mlc_audio_get_info(const mlc_audio* audio, mlc_audio_info* out);

/* ---- Images (SPEC 6.2): decode and resize to a [1, H, W, 3] NHWC tensor ---- */

typedef enum mlc_resize_mode { MLC_RESIZE_STRETCH = 0, MLC_RESIZE_CENTER_CROP = 1 } mlc_resize_mode;
typedef enum mlc_pixel_dtype { MLC_PIXEL_UINT8 = 0, MLC_PIXEL_UINT32 = 1 } mlc_pixel_dtype;
typedef enum mlc_resize_filter {
  MLC_FILTER_BICUBIC = 0,
  MLC_FILTER_BILINEAR = 1,
  MLC_FILTER_LANCZOS = 2
} mlc_resize_filter;

typedef struct mlc_image_params {
  int64_t height;        /* required, >= 1 */
  int64_t width;         /* required, >= 1 */
  int mode;              /* an mlc_resize_mode (default stretch) */
  int dtype;             /* an mlc_pixel_dtype (default uint8) */
  int filter;            /* an mlc_resize_filter (default bicubic) */
  int64_t max_pixels;    /* default 100000000 */
  int colour_manage;     /* 1: convert through an embedded ICC profile to sRGB, as browsers do;
                            0 (default): ignore the profile, as Pillow's convert("RGB") (SPEC 6.2) */
} mlc_image_params;
MLC_API mlc_image_params mlc_image_params_default(void);

typedef struct mlc_image mlc_image;
MLC_API mlc_image* mlc_image_init(void);
MLC_API void mlc_image_free(mlc_image* image);
MLC_API const mlc_errors* mlc_image_errors(const mlc_image* image);
MLC_API int mlc_image_decode_file(mlc_image* image, const char* path, const mlc_image_params* params);
MLC_API int mlc_image_decode_memory(mlc_image* image, const void* bytes, size_t length,
                                    const mlc_image_params* params);
/* A view of the library's tensor (shape [1, H, W, 3], uint8 or uint32, CPU, compact): valid
 * until the next decode or mlc_image_free. MLC_ERR_STATE before a decode. */
/* The same resize over pixels already decoded (a browser's ImageData): rgba holds width x height
 * x 4 bytes, row-major; alpha is dropped. The result is read as after a decode. */
MLC_API int mlc_image_resize_rgba(mlc_image* image, const uint8_t* rgba, int64_t width, int64_t height,
                                  const mlc_image_params* params);
MLC_API int mlc_image_tensor(const mlc_image* image, DLTensor* out);
/* Copies the tensor's bytes; MLC_ERR_BUFFER when capacity (bytes) is too small. *nbytes gets
 * the size either way. */
MLC_API int mlc_image_copy(const mlc_image* image, void* out, size_t capacity, size_t* nbytes);

/* ---- Tokenizer (SPEC 8) ---- */

typedef struct mlc_tokenizer mlc_tokenizer;
MLC_API mlc_tokenizer* mlc_tokenizer_init(void);
MLC_API void mlc_tokenizer_free(mlc_tokenizer* tokenizer);
MLC_API const mlc_errors* mlc_tokenizer_errors(const mlc_tokenizer* tokenizer);
/* DIR/tokenizer.json, else DIR/tokenizer.model. Not thread-safe. */
MLC_API int mlc_tokenizer_load(mlc_tokenizer* tokenizer, const char* dir);
/* Token ids of text (no special tokens added) into the caller's buffer; MLC_ERR_BUFFER when
 * capacity is too small (*count: the number needed). Thread-safe (const). */
MLC_API int mlc_tokenize(const mlc_tokenizer* tokenizer, const char* text, size_t length,
                         int32_t* ids, size_t capacity, size_t* count);
/* The text of ids into the caller's buffer, NUL-terminated; *length excludes the NUL;
 * MLC_ERR_BUFFER when capacity (bytes, NUL included) is too small. Thread-safe (const). */
MLC_API int mlc_detokenize(const mlc_tokenizer* tokenizer, const int32_t* ids, size_t count,
                           char* text, size_t capacity, size_t* length);
MLC_API size_t mlc_tokenizer_vocab_size(const mlc_tokenizer* tokenizer);

/* ---- The prompt of chat messages (SPEC 7) and the prefill plan (SPEC 6) ---- */

typedef struct mlc_prompt mlc_prompt;
MLC_API mlc_prompt* mlc_prompt_init(void);
MLC_API void mlc_prompt_free(mlc_prompt* prompt);
MLC_API const mlc_errors* mlc_prompt_errors(const mlc_prompt* prompt);
/* Builds the first-round prompt of OpenAI-style messages (an array, or {"messages": [...]})
 * under the package's conversation template and tokenizer; with "tools" (and "tool_choice") beside
 * "messages", the tools, calls and tool results written the family's way. */
MLC_API int mlc_prompt_build(mlc_prompt* prompt, const char* package_dir, const char* messages_json,
                             size_t length);
/* The prompt text (media as "<image>" / "<audio>"), and
 * {"template", "prompt", "segments": [{"text", "token_ids"} | {"media", "part"}], "stop_token_ids",
 *  "stop_str"}. */
MLC_API const char* mlc_prompt_text(const mlc_prompt* prompt);
MLC_API const char* mlc_prompt_json(const mlc_prompt* prompt);

typedef struct mlc_plan_params {
  const char* program_path; /* compiled-program document (packages with a manifest) */
  const char* task;         /* default "chat.completions" */
  const char* base_dir;     /* relative media paths of the request resolve here (NULL: as is) */
  int64_t kv_length;        /* positions the KV cache already holds */
} mlc_plan_params;
MLC_API mlc_plan_params mlc_plan_params_default(void);

typedef struct mlc_plan mlc_plan;
MLC_API mlc_plan* mlc_plan_init(void);
MLC_API void mlc_plan_free(mlc_plan* plan);
MLC_API const mlc_errors* mlc_plan_errors(const mlc_plan* plan);
/* Plans a request ([{"tokens": [..]}, {"audio_rows": N}, {"image": F}] or {"turns": [...]})
 * for the package folder: the chunks prefill_tokens / prefill_embeds are fed with. */
MLC_API int mlc_plan_compute(mlc_plan* plan, const char* package_dir, const char* request_json,
                             size_t length, const mlc_plan_params* params);
/* {"prompt_length", "kv_length", "prefill_chunk_size", "context_window_size", "chunks": [...]} */
MLC_API const char* mlc_plan_json(const mlc_plan* plan);
MLC_API int64_t mlc_plan_prompt_length(const mlc_plan* plan);
MLC_API size_t mlc_plan_chunk_count(const mlc_plan* plan);

/* ---- Generation sessions ---- */

/* A value passed to or returned from a role function. */
typedef enum mlc_value_kind {
  MLC_VALUE_NONE = 0,
  MLC_VALUE_INT = 1,
  MLC_VALUE_FLOAT = 2,
  MLC_VALUE_SHAPE = 3,   /* shape/ndim */
  MLC_VALUE_TENSOR = 4,  /* arguments: tensor (a view valid during the call);
                            results: managed (the library takes ownership and calls its deleter) */
  MLC_VALUE_OBJECT = 5,  /* a caller's object (e.g. the KV cache a create function returned) */
  MLC_VALUE_PARAMS = 6   /* arguments only: the model parameters (params) */
} mlc_value_kind;

/* The parameters, in the order of the library's metadata "params". */
typedef struct mlc_param_list {
  size_t count;
  const char* const* names;
  const DLTensor* tensors;
} mlc_param_list;

typedef struct mlc_value {
  int kind; /* an mlc_value_kind */
  int64_t i;
  double f;
  const int64_t* shape;
  int32_t ndim;
  DLTensor* tensor;
  DLManagedTensor* managed;
  void* object;
  const mlc_param_list* params;
} mlc_value;

/* A caller's runtime: the library calls `call` for every role (embed_tokens, create_kv_cache,
 * prefill_*, decode_*, the adapters) with the names the compiled program binds. */
typedef struct mlc_function_table {
  void* user;
  /* The library's _metadata as JSON: {"model_type", "kv_state_kind", "params": [{name, shape,
   * dtype}], "artifact"?: compiled-program document}. Parameters are loaded from the package's
   * tensor-cache.json in this order. */
  const char* metadata_json;
  size_t num_functions;
  const char* const* function_names;
  /* Runs `function`; writes up to max_results results and their number. Returns 0, or nonzero
   * with a NUL-terminated reason in message (capacity message_capacity). Called from the thread
   * that drives the session. */
  int (*call)(void* user, const char* function, const mlc_value* args, size_t num_args,
              mlc_value* results, size_t max_results, size_t* num_results, char* message,
              size_t message_capacity);
  /* Positions an object (a KV cache) holds. */
  int64_t (*object_length)(void* user, void* object);
  /* Releases an object returned in a result (may be NULL). */
  void (*object_free)(void* user, void* object);
} mlc_function_table;

typedef struct mlc_session_params {
  const char* program_path; /* compiled-program document (NULL: the library's _metadata.artifact) */
  int64_t max_tokens;       /* default 32 */
  double temperature;       /* default 0 (greedy) */
  double top_p;             /* default 1 */
  int64_t top_k;            /* default 0 (all) */
  uint64_t seed;            /* default 0 */
  int prefix_cache;         /* default 1: reuse the KV pages of an earlier prompt's start */
  /* Structured output: an OpenAI response_format object as JSON ({"type": "json_schema",
   * "json_schema": {"name", "schema"}} or {"type": "json_object"}); NULL: free text. Needs the
   * package's tokenizer. */
  const char* response_format;
  int logprobs;             /* default -1 (none); 0..20: each token's and this many alternatives */
  /* Tool calling: an object with OpenAI's "tools" (and "tool_choice", "parallel_tool_calls") as
   * JSON; NULL: none. While active, each reply's calls are written in the family's format and
   * constrained to the tools' schemas (mlc_session_tool_reply splits them out); the prompt with
   * the tools comes from mlc_prompt_build given the same "tools" beside "messages". Needs the
   * package's tokenizer and conversation template. */
  const char* tools;
} mlc_session_params;
MLC_API mlc_session_params mlc_session_params_default(void);

/* Called with each generated token; return 0 to end the turn there. */
typedef int (*mlc_token_callback)(void* user, int32_t token);

typedef struct mlc_session mlc_session;
MLC_API mlc_session* mlc_session_init(void);
MLC_API void mlc_session_free(mlc_session* session);
MLC_API const mlc_errors* mlc_session_errors(const mlc_session* session);
/* Opens the package with the built-in programs (as `mlc-manifest run`: the reference runtime for
 * a reference package, else the CPU program chosen by model_type), binds it and loads its
 * parameters. */
MLC_API int mlc_session_open(mlc_session* session, const char* package_dir,
                             const mlc_session_params* params);
/* The same with a caller's runtime. The table (and what it points to) must outlive the session. */
MLC_API int mlc_session_open_functions(mlc_session* session, const char* package_dir,
                                       const mlc_function_table* table,
                                       const mlc_session_params* params);
/* Runs one request ({"tokens"}, {"audio"}, {"image"} segments, or {"turns"}: each turn in order)
 * over the session's KV cache, generating after each turn; relative media paths resolve against
 * base_dir (NULL: as given). on_token may be NULL. */
MLC_API int mlc_session_generate(mlc_session* session, const char* request_json, size_t length,
                                 const char* base_dir, mlc_token_callback on_token, void* user);
/* The tokens of the last turn generated, its stop reason ("stop_token", "stop_str", "length")
 * and the positions the KV cache holds. */
MLC_API const int32_t* mlc_session_tokens(const mlc_session* session, size_t* count);
MLC_API const char* mlc_session_stop_reason(const mlc_session* session);
MLC_API int64_t mlc_session_kv_length(const mlc_session* session);
/* Of the last turn: the prompt positions taken from the prefix cache, and its text (with the
 * package's tokenizer, which response_format loads; else ""). */
MLC_API int64_t mlc_session_cached_tokens(const mlc_session* session);
MLC_API const char* mlc_session_text(const mlc_session* session);
/* With params.tools: the last turn's reply split as {"content": TEXT, "tool_calls": [{"id",
 * "type": "function", "function": {"name", "arguments"}}]} (ids "call_TURN_INDEX", TURN counting
 * the session's turns from 0); "" without tools. */
MLC_API const char* mlc_session_tool_reply(const mlc_session* session);
/* A generated token's log-probability and its most likely alternatives (params.logprobs >= 0). */
typedef struct mlc_token_logprob {
  int32_t token;
  double logprob;
  size_t num_top;
  const int32_t* top_tokens;
  const double* top_logprobs;
} mlc_token_logprob;
/* One per token of the last turn (valid until the next call on the session). */
MLC_API const mlc_token_logprob* mlc_session_logprobs(const mlc_session* session, size_t* count);

/* How mlc_session_embed pools the final-normed hidden states of the input's positions. */
enum { MLC_POOLING_MEAN = 0, MLC_POOLING_LAST = 1 };
/* The embedding of a request of one turn (as mlc_session_generate takes it): its positions run
 * through the model in a sequence of their own (the session's conversation is untouched), their
 * final-normed hidden states pooled and L2-normalised. MLC_ERR_UNSUPPORTED when the library has no
 * prefill_to_last_hidden_states. */
MLC_API int mlc_session_embed(mlc_session* session, const char* request_json, size_t length,
                              const char* base_dir, int pooling);
/* The last embedding (valid until the next call on the session), its width in *dim, and the
 * positions it pooled in *prompt_tokens (may be NULL). */
MLC_API const float* mlc_session_embedding(const mlc_session* session, size_t* dim, int64_t* prompt_tokens);

#ifdef __cplusplus
}  /* extern "C" */

/* ---- C++ wrappers: RAII owners of the handles above (header-only) ---- */
#include <memory>
#include <string>
#include <vector>

namespace mlc::c {

/* An error list copied out of a handle. */
struct Error {
  int code = 0;
  std::string code_name, document, path, message;
};
inline std::vector<Error> CopyErrors(const mlc_errors* list) {
  std::vector<Error> out;
  for (size_t i = 0; i < mlc_errors_count(list); ++i) {
    mlc_error e;
    if (mlc_errors_get(list, i, &e) == MLC_OK) {
      out.push_back({e.code, e.code_name, e.document, e.path, e.message});
    }
  }
  return out;
}

/* A handle type T with its free and errors functions. */
template <class T, void (*Free)(T*), const mlc_errors* (*Errors)(const T*)>
class Handle {
 public:
  explicit Handle(T* h) : h_(h) {}
  Handle(Handle&&) noexcept = default;
  Handle& operator=(Handle&&) noexcept = default;
  T* get() const { return h_.get(); }
  operator T*() const { return h_.get(); }  // NOLINT(implicit): pass straight to the C API
  std::vector<Error> errors() const { return CopyErrors(Errors(h_.get())); }

 private:
  struct Deleter {
    void operator()(T* h) const { Free(h); }
  };
  std::unique_ptr<T, Deleter> h_;
};

struct Package : Handle<mlc_package, mlc_package_free, mlc_package_errors> {
  Package() : Handle(mlc_package_init()) {}
};
struct Program : Handle<mlc_program, mlc_program_free, mlc_program_errors> {
  Program() : Handle(mlc_program_init()) {}
};
struct Binding : Handle<mlc_binding, mlc_binding_free, mlc_binding_errors> {
  Binding() : Handle(mlc_binding_init()) {}
};
struct Report : Handle<mlc_report, mlc_report_free, mlc_report_errors> {
  Report() : Handle(mlc_report_init()) {}
};
struct Audio : Handle<mlc_audio, mlc_audio_free, mlc_audio_errors> {
  Audio() : Handle(mlc_audio_init()) {}
};
struct Image : Handle<mlc_image, mlc_image_free, mlc_image_errors> {
  Image() : Handle(mlc_image_init()) {}
};
struct Tokenizer : Handle<mlc_tokenizer, mlc_tokenizer_free, mlc_tokenizer_errors> {
  Tokenizer() : Handle(mlc_tokenizer_init()) {}
  /* Token ids of text (empty on failure). */
  std::vector<int32_t> Encode(const std::string& text) const {
    size_t n = 0;
    std::vector<int32_t> ids(text.size() + 1);
    int rc = mlc_tokenize(get(), text.data(), text.size(), ids.data(), ids.size(), &n);
    if (rc == MLC_ERR_BUFFER) {
      ids.resize(n);
      rc = mlc_tokenize(get(), text.data(), text.size(), ids.data(), ids.size(), &n);
    }
    ids.resize(rc == MLC_OK ? n : 0);
    return ids;
  }
  std::string Decode(const std::vector<int32_t>& ids) const {
    size_t n = 0;
    std::string text(64, '\0');
    int rc = mlc_detokenize(get(), ids.data(), ids.size(), text.data(), text.size(), &n);
    if (rc == MLC_ERR_BUFFER) {
      text.resize(n + 1);
      rc = mlc_detokenize(get(), ids.data(), ids.size(), text.data(), text.size(), &n);
    }
    text.resize(rc == MLC_OK ? n : 0);
    return text;
  }
};
struct Prompt : Handle<mlc_prompt, mlc_prompt_free, mlc_prompt_errors> {
  Prompt() : Handle(mlc_prompt_init()) {}
};
struct Plan : Handle<mlc_plan, mlc_plan_free, mlc_plan_errors> {
  Plan() : Handle(mlc_plan_init()) {}
};
struct Session : Handle<mlc_session, mlc_session_free, mlc_session_errors> {
  Session() : Handle(mlc_session_init()) {}
  std::vector<int32_t> Tokens() const {
    size_t n = 0;
    const int32_t* p = mlc_session_tokens(get(), &n);
    return p ? std::vector<int32_t>(p, p + n) : std::vector<int32_t>();
  }
  std::vector<float> Embedding() const {
    size_t n = 0;
    const float* p = mlc_session_embedding(get(), &n, nullptr);
    return p ? std::vector<float>(p, p + n) : std::vector<float>();
  }
};

}  // namespace mlc::c
#endif /* __cplusplus */

#endif /* MLC_MANIFEST_MLC_MANIFEST_H_ */
