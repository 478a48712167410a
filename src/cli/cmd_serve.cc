// `mlc-manifest serve DIR [DIR...] [--model NAME=DIR]... [--host 127.0.0.1] [--port 8000]`: the
// OpenAI-compatible server over packages run by the reference library or the built-in CPU program
// (POST /v1/chat/completions, GET /v1/models, POST /tokenize, GET /health, ...), each package with
// its own engine, picked by a request's `model`. SIGTERM or SIGINT stops taking requests,
// lets the ones in flight finish and exits 0. The HTTP limits (--max-request-line,
// --max-header-bytes, --max-headers, --max-connections, --allowed-host) and the API keys
// (--api-key, --api-key-file, --metrics-need-key) are listed with their defaults in
// docs/security.md.
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <thread>

#include "cli/command.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/serve.h"

namespace mlc::cli {
namespace {

struct ServeArgs {
  std::vector<std::string> dirs;
  std::vector<std::string> named;  // --model NAME=DIR
  ServeOptions options;
  int64_t max_batch_size = 8;
  int64_t kv_positions = 0;
  int64_t max_queue = 64;
  std::vector<std::string> api_key_files;
  bool json = false;  // failures to start as one JSON object on stdout
};

// Each open connection takes a file descriptor: the soft limit (often 1024) is raised to the
// hard one. A warning when --max-connections cannot all be open at once.
void RaiseDescriptorLimit(size_t max_connections) {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return;
  if (r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
    getrlimit(RLIMIT_NOFILE, &r);
  }
  constexpr rlim_t kReserve = 64;  // package files, the listening socket, the engine's
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < max_connections + kReserve) {
    std::cerr << "warning: --max-connections " << max_connections << " but only " << r.rlim_cur
              << " file descriptors may be open (ulimit -n)" << std::endl;
  }
}

int Serve(ServeArgs a) {
  ServeOptions& o = a.options;
  if (a.max_batch_size < 1 || a.max_batch_size > 1024) {
    return ReportFailure({UsageError("--max-batch-size: expected 1..1024")}, a.json);
  }
  if (a.max_queue < 1 || o.max_concurrent < 1 || o.request_timeout_s < 1 || o.idle_timeout_s < 1 ||
      o.request_read_timeout_s < 1) {
    return ReportFailure({UsageError("queue, concurrency and timeouts must be >= 1")}, a.json);
  }
  if (o.max_request_line < 16 || o.max_header_bytes < 64 || o.max_headers < 1 || o.max_connections < 1) {
    return ReportFailure({UsageError("--max-request-line >= 16, --max-header-bytes >= 64, --max-headers and "
                                     "--max-connections >= 1")},
                         a.json);
  }
  for (const std::string& key : o.api_keys) {
    if (!IsApiKey(key)) {
      return ReportFailure({UsageError("--api-key: a key is visible ASCII, without spaces or control characters")},
                           a.json);
    }
  }
  for (const std::string& file : a.api_key_files) {
    auto keys = ReadApiKeyFile(file);
    if (!keys) return ReportFailure(keys.errors(), a.json);
    o.api_keys.insert(o.api_keys.end(), keys->begin(), keys->end());
  }
  if (o.metrics_need_key && o.api_keys.empty()) {
    return ReportFailure({UsageError("--metrics-need-key needs --api-key or --api-key-file")}, a.json);
  }
  std::vector<ModelSource> models;
  for (const std::string& dir : a.dirs) models.push_back({"", dir});
  for (const std::string& spec : a.named) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return ReportFailure({UsageError("--model: expected NAME=DIR, got '" + spec + "'")}, a.json);
    }
    models.push_back({spec.substr(0, eq), spec.substr(eq + 1)});
  }
  if (models.empty()) return ReportFailure({UsageError("serve: give a package folder (DIR or --model NAME=DIR)")}, a.json);
  for (const ModelSource& m : models) {
    if (Status s = CheckFolder(m.dir); !s) return ReportFailure(s.errors(), a.json);
  }
  RaiseDescriptorLimit(o.max_connections);
  o.engine.batch.max_batch_size = a.max_batch_size;
  o.engine.batch.kv_positions = a.kv_positions;
  o.engine.max_queue = static_cast<size_t>(a.max_queue);
  // Signals are taken by one thread with sigwait; every other thread inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  auto server = Server::Create(models, o);
  if (!server) return ReportFailure(server.errors(), a.json);
  if (Status s = (*server)->Bind(); !s) return ReportFailure(s.errors(), a.json);
  std::string names;
  for (const std::string& name : (*server)->model_ids()) names += (names.empty() ? "" : ", ") + name;
  std::cerr << "serving " << names << " on http://" << o.host << ":" << (*server)->port() << std::endl;
  std::atomic<bool> stopping{false};
  std::thread waiter([&server, &signals, &stopping] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (stopping.exchange(true)) return;
    std::cerr << "draining: finishing the requests in flight" << std::endl;
    (*server)->Stop(true);
  });
  (*server)->Run();
  if (!stopping.exchange(true)) kill(getpid(), SIGTERM);  // wakes the waiter when Run ended alone
  waiter.join();
  return kExitOk;
}

const Registration kServe(620, "serve",
                          "Serve a package over an OpenAI-compatible HTTP API",
                          [](CLI::App* cmd) {
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("DIR", a->dirs,
                  "Package folders (reference model or a CPU-program family), each served under its "
                  "folder's base name");
  cmd->add_option("--model", a->named,
                  "NAME=DIR: a package served under NAME (repeatable); with several models a request's "
                  "`model` picks one (404 for a name not served)")
      ->allow_extra_args(false);
  cmd->add_option("--host", a->options.host, "Address to bind (default loopback)")->capture_default_str();
  cmd->add_option("--port", a->options.port, "Port (0: any free port, printed on stderr)")
      ->capture_default_str();
  cmd->add_flag("--allow-local-files", a->options.allow_local_files,
                "Let image_url / input_audio name files on this machine");
  cmd->add_option("--max-batch-size", a->max_batch_size, "Sequences decoded together")
      ->capture_default_str();
  cmd->add_option("--kv-positions", a->kv_positions,
                  "KV cache positions over all sequences, per model: each package has its own engine "
                  "and cache (0: context window x batch size)");
  cmd->add_option("--max-queue", a->max_queue, "Requests waiting for a batch slot")->capture_default_str();
  cmd->add_option_function<std::string>(
         "--embedding-pooling",
         [a](const std::string& name) { a->options.embedding_pooling = *ParsePooling(name); },
         "How /v1/embeddings pools an input's final hidden states: mean (default) or last")
      ->check(CLI::IsMember({"mean", "last"}));
  cmd->add_option("--max-embedding-inputs", a->options.max_embedding_inputs,
                  "Most inputs in one /v1/embeddings request (400 beyond)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-embedding-tokens", a->options.max_embedding_tokens,
                  "Most tokens over all inputs of one /v1/embeddings request (400 beyond)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-audio-seconds", a->options.max_audio_seconds,
                  "Longest recording /v1/audio/transcriptions and /translations take (400 beyond)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-transcript-tokens", a->options.max_transcript_tokens,
                  "Most tokens a transcript generates for one window of a recording")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-prefix-cache{false}", a->options.engine.prefix_cache,
                "Prefill every prompt whole (by default a prompt reuses the KV pages of an earlier one "
                "that starts the same)");
  cmd->add_option("--max-concurrent", a->options.max_concurrent, "Requests in flight (more get 429)")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", a->options.max_body_bytes,
                  "Largest request body (413 beyond; bytes, or with a unit: 16MiB)")
      ->capture_default_str()
      ->transform(ByteSize());
  cmd->add_option("--request-timeout", a->options.request_timeout_s, "Seconds a reply may take")
      ->capture_default_str();
  cmd->add_option("--idle-timeout", a->options.idle_timeout_s, "Seconds a connection may stay silent")
      ->capture_default_str();
  cmd->add_option("--json-max-string-length", a->options.json_max_string_length,
                  "Structured output: longest string where the schema sets no maxLength (0: unbounded)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--allowed-host", a->options.allowed_hosts,
                  "A Host (and browser Origin) this server answers besides localhost, 127.0.0.1, [::1] and "
                  "--host; repeatable; * for any (others get 403)");
  cmd->add_option("--max-request-line", a->options.max_request_line, "Longest request line (414 beyond; bytes)")
      ->capture_default_str()
      ->transform(ByteSize());
  cmd->add_option("--max-header-bytes", a->options.max_header_bytes,
                  "Largest header block (431 beyond; bytes, or with a unit)")
      ->capture_default_str()
      ->transform(ByteSize());
  cmd->add_option("--max-headers", a->options.max_headers, "Most header fields in a request (431 beyond)")
      ->capture_default_str();
  cmd->add_option("--max-connections", a->options.max_connections,
                  "Open connections (idle ones included); more are answered 503 and closed")
      ->capture_default_str();
  cmd->add_option("--max-buffered-bytes", a->options.max_buffered_bytes,
                  "Request bodies held at once, all connections together (503 beyond; bytes, or with a unit)")
      ->capture_default_str()
      ->transform(ByteSize());
  cmd->add_option("--api-key", a->options.api_keys,
                  "A key clients must send as 'Authorization: Bearer KEY' on /v1/*, /tokenize and "
                  "/detokenize (401 otherwise); repeatable")
      ->allow_extra_args(false);
  cmd->add_option("--api-key-file", a->api_key_files,
                  "A file of API keys, one a line (blank lines and # comments skipped); repeatable")
      ->allow_extra_args(false);
  cmd->add_flag("--metrics-need-key", a->options.metrics_need_key,
                "/metrics needs an API key too (/health stays open)");
  cmd->add_flag("--json", a->json, "A failure to start as one JSON object on stdout");
  cmd->add_option("--read-timeout", a->options.request_read_timeout_s,
                  "Seconds a request's headers and body may take to arrive")
      ->capture_default_str();
  return [a]() { return Serve(*a); };
});

}  // namespace
}  // namespace mlc::cli
