// The conv_template of mlc-chat-config.json (SPEC 7): its fields read and type-checked.
#include "mlc_manifest/conversation.h"

#include <limits.h>

#include "json/optional_fields.h"

namespace mlc {
namespace {

// ---- conv_template fields ----

std::optional<std::vector<int32_t>> ReadIds(FieldChecker& check, const Json& obj, const char* key,
                                            const std::string& base) {
  const Json* v = FindField(obj, key);
  if (!v) return std::nullopt;
  std::string path = PointerAppend(base, key);
  if (!v->is_array()) {
    check.Fail(path, "expected an array of token ids, got " + JsonTypeName(*v));
    return std::nullopt;
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i < v->size(); ++i) {
    std::optional<int64_t> id = SafeInteger((*v)[i]);
    if (!id || *id < 0 || *id > INT32_MAX) {
      check.Fail(PointerAppend(path, i), "expected a token id (integer 0..2^31-1)");
      continue;
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  return ids;
}

// The "thinking" object: its four strings (system_marker and skip may be empty, open and close
// may not) and "default".
std::optional<ThinkingMode> ReadThinking(FieldChecker& check, const Json& obj, const std::string& base) {
  const Json* v = FindField(obj, "thinking");
  if (!v) return std::nullopt;
  std::string path = PointerAppend(base, "thinking");
  if (!v->is_object()) {
    check.Fail(path, "expected a thinking object, got " + JsonTypeName(*v));
    return std::nullopt;
  }
  ThinkingMode m;
  ReadOptional(check, *v, "system_marker", path, &m.system_marker);
  ReadOptional(check, *v, "skip", path, &m.skip);
  ReadOptional(check, *v, "open", path, &m.open);
  ReadOptional(check, *v, "close", path, &m.close);
  ReadOptional(check, *v, "default", path, &m.default_on);
  for (auto [key, value] : {std::pair{"open", &m.open}, {"close", &m.close}}) {
    if (value->empty()) check.Fail(PointerAppend(path, key), "expected a non-empty marker");
  }
  return m;
}

// Gemma 4's thinking mode, for templates that use its turn markers.
std::optional<ThinkingMode> InferredThinking(const ConvTemplate& t) {
  auto it = t.roles.find("assistant");
  if (it == t.roles.end() || it->second != "<|turn>model") return std::nullopt;
  return ThinkingMode{"<|think|>\n", "<|channel>thought\n<channel|>", "<|channel>thought", "<channel|>", false};
}

}  // namespace

Result<ConvTemplate> ParseConvTemplate(const Json& obj, const std::string& base) {
  if (!obj.is_object()) return Invalid(base, "expected a conv_template object, got " + JsonTypeName(obj));
  ConvTemplate t;
  Errors errors;
  FieldChecker check(&errors);
  ReadOptional(check, obj, "name", base, &t.name);
  ReadOptional(check, obj, "system_template", base, &t.system_template);
  ReadOptional(check, obj, "system_message", base, &t.system_message);
  t.system_prefix_token_ids = ReadIds(check, obj, "system_prefix_token_ids", base);
  ReadOptional(check, obj, "add_role_after_system_message", base, &t.add_role_after_system_message);
  ReadOptional(check, obj, "roles", base, &t.roles);
  ReadOptional(check, obj, "role_templates", base, &t.role_templates);
  ReadOptional(check, obj, "seps", base, &t.seps);
  ReadOptional(check, obj, "role_content_sep", base, &t.role_content_sep);
  ReadOptional(check, obj, "role_empty_sep", base, &t.role_empty_sep);
  ReadOptional(check, obj, "stop_str", base, &t.stop_str);
  t.stop_token_ids = ReadIds(check, obj, "stop_token_ids", base).value_or(std::vector<int32_t>{});
  ReadOptional(check, obj, "function_string", base, &t.function_string);
  ReadOptional(check, obj, "use_function_calling", base, &t.use_function_calling);
  ReadOptional(check, obj, "render_empty_system_message", base, &t.render_empty_system_message);
  t.thinking = ReadThinking(check, obj, base);
  if (!t.thinking) t.thinking = InferredThinking(t);
  if (errors.empty() && t.seps.empty()) AddError(errors, Invalid(PointerAppend(base, "seps"), "expected at least one separator"));
  if (!errors.empty()) return errors;
  return t;
}

Result<ConvTemplate> ConvTemplateFromChatConfig(const Json& chat_config) {
  if (!chat_config.is_object() || !chat_config.contains("conv_template")) {
    return Invalid("/conv_template", "the chat config has no conv_template object");
  }
  return ParseConvTemplate(chat_config["conv_template"], "/conv_template");
}

}  // namespace mlc
