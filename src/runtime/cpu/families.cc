// The table of CPU families: one row per model_type, each defined in decoders/<family>.cc. The
// supported-families list of errors, help text and reference-model comes from here.
#include "runtime/cpu/decoders/decoders.h"

namespace mlc::cpu {

const std::vector<const FamilySpec*>& Families() {
  static const std::vector<const FamilySpec*> kFamilies = {
      &LlamaFamily(), &Qwen2Family(), &GemmaFamily(), &Gemma2Family(), &Phi3Family(), &LlavaFamily(), &Gemma4Family(),
      &Gemma3Family(), &Gemma3TextFamily(), &Gemma3VFamily(),
  };
  return kFamilies;
}

}  // namespace mlc::cpu
