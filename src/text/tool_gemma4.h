// Gemma 4's own tool format (its published chat template): declarations, calls, results and the
// model's text, and the reply's arguments read back into JSON (tool_gemma4.cc).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/json.h"

namespace mlc {

// A tool object's declaration: declaration:NAME{description:...,parameters:{...}}.
std::string Gemma4Declaration(const OrderedJson& tool);
// A value as the template's format_argument writes it (keys quoted or bare).
std::string Gemma4Value(const OrderedJson& value, bool escape_keys);
// A call written back: <|tool_call>call:NAME{key:value,...}<tool_call|>.
std::string Gemma4Call(const ToolCall& call, const OrderedJson& arguments);
// A tool's result: <|tool_response>response:NAME{value:<|"|>TEXT<|"|>}<tool_response|>.
std::string Gemma4Response(const std::string& name, const std::string& text);
// An assistant's text as the template writes it: thoughts left out, trimmed.
std::string Gemma4ModelText(const std::string& content);
// Python's str.strip() over ASCII white space (the template's trim).
std::string JinjaTrim(const std::string& s);
// A call's arguments in the dialect read into a JSON object; nullopt when they are not one.
std::optional<OrderedJson> ReadGemma4Arguments(std::string_view text);

}  // namespace mlc
