// The seed's example documents (../shared/seed/model-artifact-manifest.txt), extracted at test
// time, with their abbreviated identifiers filled in consistently.
#pragma once

#include <string>

#include "mlc_manifest/json.h"

namespace mlc::test {

struct SeedDocs {
  Json gemma_package;   // the Gemma 4 text+audio mlc.model-package, ids filled
  Json gemma_program;   // the matching mlc.compiled-program
  Json llava_input;     // the LLaVA image input object
};

// Reads and fills the seed documents; aborts the test (gtest ADD_FAILURE) if it cannot.
SeedDocs LoadSeedDocs();

// The JSON object texts found in the seed file, in order.
std::string SeedText();

// A valid sha256 identifier derived from a label.
std::string FakeId(const std::string& label);

}  // namespace mlc::test
