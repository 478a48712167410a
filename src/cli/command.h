// The CLI's subcommand registry: each src/cli/cmd_*.cc registers itself with a static
// Registration, so adding a subcommand touches no other file. Also the output helpers every
// subcommand shares (--json objects, error lists, exit codes).
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

#include "base/units.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc::cli {

// Exit codes (the README's table): 0 ok; 1 the input breaks a rule (invalid, unsupported, over a
// limit, a target that exists); 2 usage (the command line asks for something that cannot be
// done); 3 I/O (a file or folder cannot be read or written).
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitIo = 3;

// Adds a subcommand's options (and nested subcommands) to it; returns the action to run once
// parsed.
using Setup = std::function<std::function<int()>(CLI::App* cmd)>;

// A subcommand: its place in the help list, its name, its one-line description and its setup.
// Only the subcommand a command line names is set up (the others' options cost start-up).
struct Registration {
  Registration(int order, const char* name, const char* description, Setup setup);
};

// The exit code for a failure: I/O -> 3, usage -> 2, anything else -> 1.
int ExitCodeFor(const Errors& errors);


// Prints {"ok": false, "errors": [...]} (json) or "error: document: path: message" lines to
// stderr; returns ExitCodeFor(errors). `context` (a file name, say) is the document of errors
// that name none. Library wording is mapped to the command line's (a target that exists: pass
// --force).
int ReportFailure(const Errors& errors, bool json, const std::string& context = "");

// A usage error (exit 2) about the command line.
Error UsageError(std::string message);

// A binding that failed for want of the compiled-program document, in the command line's words
// (pass --program FILE) when none was given.
template <class T>
Result<T> WithProgramHint(Result<T> r, const std::string& program) {
  if (r || !program.empty()) return r;
  Errors errors = r.take_errors();
  for (Error& e : errors) {
    if (e.code == ErrorCode::kUsage) e.message += " (pass --program FILE)";
  }
  return errors;
}

// Prints a JSON object on one line of stdout.
void PrintJson(const OrderedJson& value);

// One "  key                 value" line of human output on stdout: the one layout of ids and
// other named values across commands. A byte count (a key ending in "_bytes" or
// "_binding_size") is shown in readable units.
void PrintField(const std::string& key, const OrderedJson& value);

// A CLI11 transform giving ParseByteSize's value to an integer option ("8GiB" -> "8589934592").
CLI::Validator ByteSize();

// Edit distance (insertions, deletions, substitutions) between a and b.
size_t EditDistance(std::string_view a, std::string_view b);

}  // namespace mlc::cli
