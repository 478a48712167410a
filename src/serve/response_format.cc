// The response_format of a chat completion request: "text", "json_object" or "json_schema",
// turned into the grammar that constrains the reply's sampling.
#include "mlc_manifest/serve.h"

namespace mlc {
namespace {

constexpr const char* kFormat = "/response_format";
constexpr const char* kSchemaAt = "/response_format/json_schema";

Result<std::shared_ptr<const JsonGrammar>> SchemaFormat(const OrderedJson& format,
                                                        const JsonGrammarOptions& options) {
  if (!format.contains("json_schema") || !format["json_schema"].is_object()) {
    return Invalid(kSchemaAt, "expected an object with the schema's name and schema");
  }
  const OrderedJson& js = format["json_schema"];
  Errors errors;
  if (!js.contains("name") || !js["name"].is_string() || js["name"].get<std::string>().empty()) {
    errors.push_back(Invalid(std::string(kSchemaAt) + "/name", "expected the schema's name"));
  }
  if (js.contains("strict") && !js["strict"].is_null() && !js["strict"].is_boolean()) {
    errors.push_back(Invalid(std::string(kSchemaAt) + "/strict", "expected true or false"));
  }
  if (js.contains("description") && !js["description"].is_string()) {
    errors.push_back(Invalid(std::string(kSchemaAt) + "/description", "expected a string"));
  }
  if (!errors.empty()) return errors;
  if (!js.contains("schema") || js["schema"].is_null()) return JsonGrammar::AnyObject(options);
  auto grammar = JsonGrammar::FromSchema(js["schema"], options);
  if (!grammar) {
    Errors inside = grammar.take_errors();
    for (Error& e : inside) e.path = std::string(kSchemaAt) + "/schema" + e.path;
    return inside;
  }
  return *grammar;
}

}  // namespace

Result<std::shared_ptr<const JsonGrammar>> ParseResponseFormat(const OrderedJson& body,
                                                              const JsonGrammarOptions& options) {
  if (!body.is_object() || !body.contains("response_format") || body["response_format"].is_null()) {
    return std::shared_ptr<const JsonGrammar>();
  }
  const OrderedJson& format = body["response_format"];
  if (!format.is_object()) return Invalid(kFormat, "expected an object with a type");
  const OrderedJson& type = format.contains("type") ? format["type"] : OrderedJson();
  if (!type.is_string()) {
    return Invalid(std::string(kFormat) + "/type",
                   "expected \"text\", \"json_object\" or \"json_schema\"");
  }
  const std::string name = type.get<std::string>();
  if (name == "text") return std::shared_ptr<const JsonGrammar>();
  if (name == "json_object") return JsonGrammar::AnyObject(options);
  if (name == "json_schema") return SchemaFormat(format, options);
  return Error{ErrorCode::kUnsupported, std::string(kFormat) + "/type",
               "the response format \"" + name + "\" is not supported (\"text\", \"json_object\", "
               "\"json_schema\")"};
}

}  // namespace mlc
