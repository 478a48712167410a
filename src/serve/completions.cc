// POST /v1/completions (the legacy API): the prompt as text (after the conversation template's
// system prefix ids, e.g. BOS, as llama.cpp adds them) or as token ids, no chat template, with
// the package's stop ids and stop strings and the request's response_format; answered by
// serve/chat_completions.cc's shared path.
#include "serve/server_impl.h"

namespace mlc {

using namespace serve;  // NOLINT: the server files' own parts

Result<Job> Server::Impl::CompletionJob(ServedModel& model, std::string_view body, const Json& doc) {
  const OpenedPackage& package = model.package;
  auto parsed = ParseCompletionRequest(doc, options.request_limits, model.defaults);
  MLC_RETURN_IF_ERROR(parsed);
  std::shared_ptr<const JsonGrammar> grammar;
  MLC_RETURN_IF_ERROR(ReadResponseFormat(body, doc, grammar));
  std::vector<int32_t> ids;
  if (parsed->prompt_is_ids) {
    ids = std::move(parsed->prompt_ids);
  } else {
    if (!package.tokenizer) return Invalid("/prompt", "this package has no tokenizer: send token ids");
    if (package.tmpl && package.tmpl->system_prefix_token_ids) ids = *package.tmpl->system_prefix_token_ids;
    package.tokenizer->EncodeEach(parsed->prompt, [&ids](int32_t id) { ids.push_back(id); });
    if (ids.empty()) return Invalid("/prompt", "the prompt is empty");
  }
  Job job;
  job.gen.input.pieces.push_back(PromptPiece{TextPiece{std::move(ids)}, "/prompt"});
  job.gen.input.media.emplace_back();
  SetOptions(package, job.gen, *parsed);
  MLC_RETURN_IF_ERROR(Constrain(model, job.gen, std::move(grammar)));
  job.stream = parsed->stream;
  job.include_usage = parsed->include_usage;
  job.format.wire = Wire::kCompletion;
  job.format.top_logprobs = parsed->top_logprobs;
  return job;
}

}  // namespace mlc
