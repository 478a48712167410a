// Extracts the seed's JSON examples (balanced braces at the start of a line) and fills the
// "sha256:<64 lowercase hex digits>" placeholders: interface_id recomputed from the tasks, the
// parameter schema id a fixed stand-in shared by both documents.
#include "support/seed_docs.h"

#include <gtest/gtest.h>

#include <vector>

#include "mlc_manifest/contract.h"
#include "support/test_util.h"

namespace mlc::test {
namespace {

std::vector<std::string> JsonBlocks(const std::string& text) {
  std::vector<std::string> blocks;
  size_t i = 0;
  while ((i = text.find('{', i)) != std::string::npos) {
    if (i > 0 && text[i - 1] != '\n') {
      ++i;
      continue;
    }
    int depth = 0;
    bool in_string = false;
    size_t j = i;
    for (; j < text.size(); ++j) {
      char c = text[j];
      if (in_string) {
        if (c == '\\') ++j;
        else if (c == '"') in_string = false;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{') {
        ++depth;
      } else if (c == '}' && --depth == 0) {
        break;
      }
    }
    blocks.push_back(text.substr(i, j - i + 1));
    i = j + 1;
  }
  return blocks;
}

}  // namespace

std::string SeedText() { return ReadText(SharedPath("seed/model-artifact-manifest.txt")); }

std::string FakeId(const std::string& label) { return *Sha256Id(label); }

SeedDocs LoadSeedDocs() {
  SeedDocs docs;
  std::vector<std::string> blocks = JsonBlocks(SeedText());
  if (blocks.size() < 3) {
    ADD_FAILURE() << "expected three JSON examples in the seed, found " << blocks.size();
    return docs;
  }
  auto parse = [](const std::string& s) {
    auto r = ParseJson(s);
    if (!r.ok()) {
      ADD_FAILURE() << "seed example does not parse: " << FormatErrors(r.errors());
      return Json();
    }
    return *r;
  };
  docs.gemma_package = parse(blocks[0]);
  docs.gemma_program = parse(blocks[1]);
  docs.llava_input = parse(blocks[2]);
  auto tasks = ParseTasks(docs.gemma_package["tasks"], "/tasks");
  if (!tasks.ok()) {
    ADD_FAILURE() << FormatErrors(tasks.errors());
    return docs;
  }
  std::string iid = *ComputeInterfaceId(*tasks);
  std::string pid = FakeId("gemma-4 parameters");
  docs.gemma_package["interface_id"] = iid;
  docs.gemma_package["weights"]["parameter_schema_id"] = pid;
  docs.gemma_program["interface_id"] = iid;
  docs.gemma_program["parameter_schema_id"] = pid;
  return docs;
}

}  // namespace mlc::test
