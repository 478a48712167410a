// The runtime boundary of the native frontend, in four parts: tensors (tensor.h), a model
// library's functions, binding and parameters (library.h), sampling (sampler.h), and sessions
// that generate turn by turn (session.h). This header includes them all.
#pragma once

#include "mlc_manifest/library.h"
#include "mlc_manifest/sampler.h"
#include "mlc_manifest/session.h"
#include "mlc_manifest/tensor.h"
