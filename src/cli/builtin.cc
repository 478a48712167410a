// The built-in CPU programs as evidence for `check`, `inspect` and `bind`.
#include "cli/builtin.h"

#include "mlc_manifest/cpu_model.h"

namespace mlc::cli {

BuiltinProgramFn CpuBuiltinPrograms() {
  return [](const ChatConfig& config) -> Result<BuiltinProgram> {
    Result<CompiledProgram> doc = CpuCompiledProgram(config);
    MLC_RETURN_IF_ERROR(doc);
    Result<std::vector<ParamSpec>> params = CpuParamSpecs(config);
    MLC_RETURN_IF_ERROR(params);
    return BuiltinProgram{"the built-in CPU program for " + config.model_type + " " + config.quantization,
                          std::move(*doc), std::move(*params)};
  };
}

}  // namespace mlc::cli
