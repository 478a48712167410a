// `mlc-manifest version`: the tool's version and the contract schema version it implements.
#include <iostream>

#include "cli/command.h"
#include "mlc_manifest/version.h"

namespace mlc::cli {
namespace {

const Registration kVersion(100, "version",
                            "Print the tool version and the schema version",
                            [](CLI::App* cmd) {
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "One JSON object on stdout");
  return [json]() {
    if (*json) {
      PrintJson({{"ok", true}, {"version", MLC_MANIFEST_VERSION}, {"schema_version", 1}});
    } else {
      std::cout << "mlc-manifest " MLC_MANIFEST_VERSION " (artifact schema_version 1)\n";
    }
    return kExitOk;
  };
});

}  // namespace
}  // namespace mlc::cli
