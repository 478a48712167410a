// libFuzzer target: arbitrary bytes as the body of a chat completion request through the
// response_format parser and the JSON Schema compiler (src/serve/response_format.cc,
// src/text/json_schema.cc), then the compiled automaton run over the same bytes and over a prefix
// of them (src/text/json_grammar.cc). The first byte is a knob (the string length cap). Nothing
// may crash; a refusal carries an error that renders as an OpenAI error.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/json_grammar.h"
#include "mlc_manifest/serve.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  if (!mlc::fuzz::JsonInput(data, size, 1, 1 << 16)) return 0;  // the server reads the body strictly first
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  mlc::OrderedJson ordered = mlc::OrderedJson::parse(body, nullptr, false);
  if (ordered.is_discarded()) return 0;
  mlc::JsonGrammarOptions options;
  options.max_string_length = data[0] & 15;
  auto grammar = mlc::ParseResponseFormat(ordered, options);
  if (!grammar) {
    if (grammar.errors().empty()) std::abort();
    (void)mlc::OpenAiError(grammar.errors()).dump();
    return 0;
  }
  if (!*grammar) return 0;  // text: no constraint
  const mlc::JsonGrammar& g = **grammar;
  (void)g.Matches(body);
  mlc::JsonGrammar::State state = g.Start();
  for (char c : body.substr(0, body.size() / 2)) {
    if (!g.Step(state, static_cast<uint8_t>(c))) break;
    (void)g.StringRoom(state);
    (void)g.Accepting(state);
  }
  return 0;
}
