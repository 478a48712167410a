// Reads the fields of model_config in mlc-chat-config.json (or of an object nested in it, such as
// text_config or vision_config) for the CPU families, each checked, with errors recorded at their
// JSON Pointer in the file (/model_config/<key>, /model_config/vision_config/<key>).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/package.h"

namespace mlc::cpu {

class ConfigReader {
 public:
  // Over model_config, or over model_config[scope] when scope is given (an error when that is
  // not an object).
  ConfigReader(const ChatConfig& chat, Errors* errors, const char* scope = nullptr);

  // A reader of the object at `key` of this one (an error when it is not an object).
  ConfigReader Sub(const char* key);
  // A reader of model_config itself, recording into the same errors.
  ConfigReader Top() const { return ConfigReader(chat_, errors_, &chat_.model_config, "/model_config"); }

  const ChatConfig& chat() const { return chat_; }
  bool Has(const char* key) const;
  const Json& Get(const char* key) const { return (*root_)[key]; }

  // An integer in [minimum, maximum]; `fallback` when absent (nullopt: required).
  int64_t Int(const char* key, int64_t minimum, int64_t maximum,
              std::optional<int64_t> fallback = std::nullopt);
  // A finite number >= minimum; fallback when absent.
  double Number(const char* key, double minimum, double fallback);
  bool Bool(const char* key, bool fallback);
  // The first of `keys` that holds a string, else "".
  std::string String(std::initializer_list<const char*> keys) const;

  // model_config.rope_scaling: nullptr when absent (an error when not an object); *type is its
  // rope_type (or type), "" when it names none.
  const Json* RopeScaling(std::string* type);
  // A rope_scaling the family does not implement: an error naming the ones it does.
  void RejectRopeScaling(const std::string& type, const std::string& model_type,
                         const std::string& supported);

  void Fail(const std::string& path, std::string message);
  void Unsupported(const std::string& path, std::string message);
  bool failed() const { return !errors_->empty(); }
  // The JSON Pointer of a field of this reader's object.
  std::string Path(const std::string& key) const { return prefix_ + "/" + key; }

 private:
  ConfigReader(const ChatConfig& chat, Errors* errors, const Json* root, std::string prefix)
      : chat_(chat), errors_(errors), root_(root), prefix_(std::move(prefix)) {}

  const ChatConfig& chat_;
  Errors* errors_;
  const Json* root_;
  std::string prefix_;
};

}  // namespace mlc::cpu
