// The built-in CPU programs as `check`, `inspect` and `bind` consult them: for a chat config,
// the program's name, document and parameter list (evidence for explanations and legacy advice).
#pragma once

#include "mlc_manifest/check.h"

namespace mlc::cli {

BuiltinProgramFn CpuBuiltinPrograms();

}  // namespace mlc::cli
