// The models of a server: their names (given, else the folder's base name; two alike refused),
// what /v1/models says of each, and which one a request's `model` picks.
#include <filesystem>

#include "serve/served_model.h"

namespace mlc {

std::string ModelSourceName(const ModelSource& source) {
  if (!source.name.empty()) return source.name;
  const std::filesystem::path dir = std::filesystem::path(source.dir).lexically_normal();
  std::string name = dir.filename().string();
  if (name.empty()) name = dir.parent_path().filename().string();  // "dir/" ends in an empty name
  return name;
}

Result<std::vector<std::string>> ModelNames(const std::vector<ModelSource>& sources) {
  if (sources.empty()) return Invalid("/models", "expected at least one package to serve");
  Errors errors;
  std::vector<std::string> names;
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::string path = "/models/" + std::to_string(i);
    std::string name = ModelSourceName(sources[i]);
    if (name.empty()) {
      errors.push_back(Invalid(path + "/name", "the package folder " + sources[i].dir +
                                                   " gives no name: name the model"));
    }
    for (unsigned char c : name) {
      if (c < 0x20 || c == 0x7f) {
        errors.push_back(Invalid(path + "/name", "a model's name has no control characters"));
        break;
      }
    }
    for (size_t j = 0; j < i; ++j) {
      if (!name.empty() && names[j] == name) {
        errors.push_back(Invalid(path + "/name", "two packages are both named \"" + name + "\": " +
                                                     sources[j].dir + " and " + sources[i].dir +
                                                     "; give one of them another name"));
      }
    }
    names.push_back(std::move(name));
  }
  if (!errors.empty()) return errors;
  return names;
}

namespace serve {
namespace {

std::string NameList(const std::vector<std::unique_ptr<ServedModel>>& models) {
  std::string out;
  for (const auto& m : models) out += (out.empty() ? "" : ", ") + m->name;
  return out;
}

}  // namespace

std::vector<std::string> ServedModel::Inputs() const {
  std::vector<std::string> inputs = {"text"};
  const BoundContract& bound = package.model.bound.contract;
  if (bound.audio) inputs.push_back("audio");
  if (bound.image) inputs.push_back("image");
  return inputs;
}

OrderedJson ServedModel::Describe() const {
  return {{"id", name}, {"object", "model"}, {"created", 0}, {"owned_by", "mlc-manifest"}, {"inputs", Inputs()}};
}

Result<ServedModel*> PickModel(const std::vector<std::unique_ptr<ServedModel>>& models, const Json& doc) {
  if (models.size() == 1) return models.front().get();
  if (!doc.is_object() || !doc.contains("model") || doc["model"].is_null()) {
    return Invalid("/model", "this server serves several models: name one (available: " + NameList(models) + ")");
  }
  if (!doc["model"].is_string()) {
    return Invalid("/model", "expected a model's name, a string (available: " + NameList(models) + ")");
  }
  const std::string name = doc["model"].get<std::string>();
  for (const auto& m : models) {
    if (m->name == name) return m.get();
  }
  return Error{ErrorCode::kUsage, "/model",
               "the model \"" + name + "\" is not served here; available: " + NameList(models)};
}

int PickStatus(const Error& e) { return e.code == ErrorCode::kUsage ? 404 : 400; }

OrderedJson PickError(const Error& e) {
  return OpenAiError(e.message, "invalid_request_error", e.path,
                     PickStatus(e) == 404 ? "model_not_found" : "");
}

}  // namespace serve
}  // namespace mlc
