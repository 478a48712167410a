// The checked reads of model_config fields (config_reader.h).
#include "runtime/cpu/config_reader.h"

#include <cmath>

namespace mlc::cpu {

namespace {

const Json& EmptyObject() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

}  // namespace

ConfigReader::ConfigReader(const ChatConfig& chat, Errors* errors, const char* scope)
    : chat_(chat), errors_(errors), root_(&chat.model_config), prefix_("/model_config") {
  if (!scope) return;
  const std::string path = Path(scope);
  if (!Has(scope) || !Get(scope).is_object()) {
    Fail(path, "expected an object");
    root_ = &EmptyObject();
  } else {
    root_ = &Get(scope);
  }
  prefix_ = path;
}

ConfigReader ConfigReader::Sub(const char* key) {
  if (!Has(key) || !Get(key).is_object()) {
    Fail(Path(key), "expected an object");
    return ConfigReader(chat_, errors_, &EmptyObject(), Path(key));
  }
  return ConfigReader(chat_, errors_, &Get(key), Path(key));
}

bool ConfigReader::Has(const char* key) const {
  return root_->is_object() && root_->contains(key) && !(*root_)[key].is_null();
}

int64_t ConfigReader::Int(const char* key, int64_t minimum, int64_t maximum,
                          std::optional<int64_t> fallback) {
  if (!Has(key)) {
    if (fallback) return *fallback;
    Fail(Path(key), "required: an integer");
    return minimum;
  }
  auto v = SafeInteger(Get(key));
  if (!v || *v < minimum || *v > maximum) {
    Fail(Path(key), "expected an integer in [" + std::to_string(minimum) + ", " +
                        std::to_string(maximum) + "]");
    return minimum;
  }
  return *v;
}

double ConfigReader::Number(const char* key, double minimum, double fallback) {
  if (!Has(key)) return fallback;
  if (!Get(key).is_number() || !(Get(key).get<double>() >= minimum) ||
      !std::isfinite(Get(key).get<double>())) {
    Fail(Path(key), "expected a finite number >= " + std::to_string(minimum));
    return fallback;
  }
  return Get(key).get<double>();
}

bool ConfigReader::Bool(const char* key, bool fallback) {
  if (!Has(key)) return fallback;
  if (!Get(key).is_boolean()) {
    Fail(Path(key), "expected true or false");
    return fallback;
  }
  return Get(key).get<bool>();
}

std::string ConfigReader::String(std::initializer_list<const char*> keys) const {
  for (const char* key : keys) {
    if (Has(key) && Get(key).is_string()) return Get(key).get<std::string>();
  }
  return "";
}

const Json* ConfigReader::RopeScaling(std::string* type) {
  type->clear();
  if (!Has("rope_scaling")) return nullptr;
  const Json& s = Get("rope_scaling");
  if (!s.is_object()) {
    Fail(Path("rope_scaling"), "expected an object");
    return nullptr;
  }
  for (const char* key : {"rope_type", "type"}) {
    if (s.contains(key) && s[key].is_string()) *type = s[key].get<std::string>();
  }
  return &s;
}

void ConfigReader::RejectRopeScaling(const std::string& type, const std::string& model_type,
                                     const std::string& supported) {
  Unsupported(Path("rope_scaling"), "rope scaling type \"" + type + "\" is not supported for " +
                                        model_type + " (supported: " + supported + ")");
}

void ConfigReader::Fail(const std::string& path, std::string message) {
  errors_->push_back(Invalid(path, std::move(message)));
}

void ConfigReader::Unsupported(const std::string& path, std::string message) {
  errors_->push_back(Error{ErrorCode::kUnsupported, path, std::move(message)});
}

}  // namespace mlc::cpu
