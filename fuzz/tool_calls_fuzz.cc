// libFuzzer target: arbitrary bytes as the body of a chat completion request through tool
// calling's request side (src/text/tool_calls.cc: the tool set, the messages rewritten with
// tools, calls and results, the call grammar) and its reply side (src/text/tool_stream.cc: the
// same bytes split into text and calls, fed in pieces the first byte sizes), in the family's
// format the first byte picks (generic, Hermes, Llama 3.1, Gemma 4, whose arguments' syntax is
// also read back directly). Nothing may crash; a refusal carries an error that renders as an
// OpenAI error.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/conversation.h"
#include "mlc_manifest/serve.h"
#include "mlc_manifest/tools.h"
#include "text/tool_gemma4.h"

namespace {

void Refused(const mlc::Errors& errors) {
  if (errors.empty()) std::abort();
  (void)mlc::OpenAiError(errors).dump();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (!mlc::fuzz::JsonInput(data, size, 1, 1 << 16)) return 0;  // the server reads the body strictly first
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  mlc::OrderedJson ordered = mlc::OrderedJson::parse(body, nullptr, false);
  if (ordered.is_discarded()) return 0;
  mlc::JsonGrammarOptions options;
  options.max_string_length = data[0] & 15;
  // The family (bits 4-5): the generic format, Hermes (ChatML), Llama 3.1, Gemma 4.
  mlc::ConvTemplate tmpl;
  switch ((data[0] >> 4) & 3) {
    case 1: tmpl.roles = {{"user", "<|im_start|>user"}, {"assistant", "<|im_start|>assistant"}}; break;
    case 2:
      tmpl.roles = {{"user", "<|start_header_id|>user"}, {"assistant", "<|start_header_id|>assistant"},
                    {"tool", "<|start_header_id|>ipython"}};
      break;
    case 3: tmpl.roles = {{"user", "<|turn>user"}, {"assistant", "<|turn>model"}}; break;
    default: break;
  }
  const mlc::ToolFormat format = mlc::ToolFormatFor(tmpl);
  (void)mlc::ReadGemma4Arguments(body);  // a Gemma 4 call's arguments read back
  auto set = mlc::ParseToolSet(ordered, options);
  if (!set) {
    Refused(set.errors());
    return 0;
  }
  mlc::Json doc = mlc::Json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("messages")) {
    auto messages = mlc::ParseMessages(doc["messages"], "/messages");
    if (messages) {
      auto written = mlc::WriteToolMessages(format, tmpl, *set, *messages);
      if (!written) Refused(written.errors());
    }
  }
  if (set->Active()) {
    auto grammar = mlc::ToolCallGrammar(format, *set, options);
    if (!grammar) {
      Refused(grammar.errors());
      return 0;
    }
    const mlc::JsonGrammar& g = **grammar;
    mlc::JsonGrammar::State state = g.Start();
    for (char c : body) {
      if (!g.Step(state, static_cast<uint8_t>(c))) break;
      (void)g.Accepting(state);
      (void)g.InFreeText(state);
    }
  }
  mlc::ToolCallStream stream(format, "call_");
  const size_t piece = 1 + (data[0] >> 6);
  for (size_t i = 0; i < body.size(); i += piece) (void)stream.Push(body.substr(i, piece));
  (void)stream.Finish();
  return 0;
}
