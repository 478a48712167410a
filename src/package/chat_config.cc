// mlc-chat-config.json: not our document, so unknown fields are kept and ignored; the fields we
// use are type-checked, each error at its JSON Pointer.
#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"

namespace mlc {

std::optional<int64_t> ChatConfig::Dimension(const std::string& name) const {
  if (raw.is_object() && raw.contains(name)) {
    if (auto v = SafeInteger(raw[name])) return v;
  }
  if (model_config.is_object() && model_config.contains(name)) {
    if (auto v = SafeInteger(model_config[name])) return v;
  }
  return std::nullopt;
}

Result<ChatConfig> ParseChatConfig(const Json& doc) {
  Errors errors;
  FieldChecker c(&errors);
  ChatConfig cfg;
  if (!c.Object(doc, "")) return errors;
  cfg.raw = doc;
  auto text = [&](const char* key, std::string& out) {
    if (!doc.contains(key)) return;
    if (auto s = c.String(doc[key], PointerAppend("", key))) out = *s;
  };
  text("model_type", cfg.model_type);
  text("quantization", cfg.quantization);
  if (doc.contains("model_config")) {
    if (c.Object(doc["model_config"], "/model_config")) cfg.model_config = doc["model_config"];
  }
  // Integers; -1 means "not set" for the window and sink sizes, as MLC writes them.
  auto integer = [&](const char* key, std::optional<int64_t>& out, int64_t minimum) {
    if (!doc.contains(key) || doc[key].is_null()) return;
    out = c.Integer(doc[key], PointerAppend("", key), minimum);
  };
  integer("vocab_size", cfg.vocab_size, 1);
  integer("context_window_size", cfg.context_window_size, -1);
  integer("prefill_chunk_size", cfg.prefill_chunk_size, 1);
  integer("sliding_window_size", cfg.sliding_window_size, -1);
  integer("attention_sink_size", cfg.attention_sink_size, -1);
  integer("tensor_parallel_shards", cfg.tensor_parallel_shards, 1);
  auto number = [&](const char* key, std::optional<double>& out) {
    if (!doc.contains(key) || doc[key].is_null()) return;
    if (!doc[key].is_number()) return c.Fail(PointerAppend("", key), "expected a number");
    out = doc[key].get<double>();
  };
  number("temperature", cfg.sampling.temperature);
  number("top_p", cfg.sampling.top_p);
  number("repetition_penalty", cfg.sampling.repetition_penalty);
  number("presence_penalty", cfg.sampling.presence_penalty);
  number("frequency_penalty", cfg.sampling.frequency_penalty);
  if (!errors.empty()) return errors;
  return cfg;
}

Result<ChatConfig> ReadChatConfig(const std::string& path) {
  Result<Json> doc = ReadJsonFile(path, {}, FolderOf(path));  // a package file: inside its folder
  MLC_RETURN_IF_ERROR(doc);
  return InDocument(ParseChatConfig(*doc), path);
}

}  // namespace mlc
