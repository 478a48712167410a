// The CLI's subcommand registry: each src/cli/cmd_*.cc registers itself with a static
// Registration, so adding a subcommand touches no other file. Also the output helpers every
// subcommand shares (--json objects, error lists, exit codes).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc::cli {

// Exit codes (documented in the README): 0 ok, 1 problems found, 2 usage, 3 I/O.
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIo = 3;

// Adds the subcommand and its options to app; returns the action to run once parsed.
using Setup = std::function<std::function<int()>(CLI::App& app)>;

struct Registration {
  Registration(int order, Setup setup);
};

// The exit code for a failure: I/O -> 3, usage -> 2, anything else -> 1.
int ExitCodeFor(const Errors& errors);

// {"code", "document", "path", "message"} for each error (document: the error's own, else `document`).
OrderedJson ErrorsJson(const Errors& errors, const std::string& document = "");

// Prints {"ok": false, "errors": [...]} (json) or "error: path: message" lines to stderr;
// returns ExitCodeFor(errors). `context` (a file name, say) prefixes human lines.
int ReportFailure(const Errors& errors, bool json, const std::string& context = "");

// Prints a JSON object on one line of stdout.
void PrintJson(const OrderedJson& value);

}  // namespace mlc::cli
