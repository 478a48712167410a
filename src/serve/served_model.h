// One package a server serves: its name (what requests give as `model`), folder, opened package,
// sampling defaults, engine (its own KV budget) and metrics; and how a request picks one
// (serve/served_models.cc).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/serve.h"
#include "serve/metrics.h"

namespace mlc::serve {

struct ServedModel {
  std::string name;
  std::string dir;
  OpenedPackage package;  // library, model, tokenizer, template, stop ids and strings
  SamplerConfig defaults;
  ModelMetrics metrics;  // before the engine, whose thread records into it
  std::unique_ptr<Engine> engine;
  std::once_flag vocabulary_once;
  std::shared_ptr<const TokenVocabulary> vocabulary;  // structured output; built on first use
  std::once_flag tool_vocabulary_once;
  std::shared_ptr<const TokenVocabulary> tool_vocabulary;  // tool calls: with the format's special marks

  // What its prompts take, from the package's bound contract: "text", then "audio", "image".
  std::vector<std::string> Inputs() const;
  // The /v1/models entry: OpenAI's model object with its inputs.
  OrderedJson Describe() const;
};

// The model a request names in its body's `model`. With one model, that one whatever the body
// says (as a single-model server always did). With several: a body without `model` is kInvalid at
// /model, a name not served is kUsage at /model (answered 404, model_not_found); both messages
// list the names.
Result<ServedModel*> PickModel(const std::vector<std::unique_ptr<ServedModel>>& models, const Json& doc);
// The HTTP status and OpenAI error object of PickModel's error.
int PickStatus(const Error& e);
OrderedJson PickError(const Error& e);

}  // namespace mlc::serve
