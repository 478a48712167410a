// mlc-manifest: parse the command line and run the chosen subcommand.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "mlc_manifest/version.h"

namespace mlc::cli {
namespace {

struct Entry {
  int order;
  const char* name;
  const char* description;
  Setup setup;
};

std::vector<Entry>& Entries() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

Registration::Registration(int order, const char* name, const char* description, Setup setup) {
  Entries().push_back(Entry{order, name, description, std::move(setup)});
}

int ExitCodeFor(const Errors& errors) {
  int code = kExitProblems;
  for (const Error& e : errors) {
    if (e.code == ErrorCode::kIo) return kExitIo;
    if (e.code == ErrorCode::kUsage) code = kExitUsage;
  }
  return code;
}


// The library's words for the command line's: a target that exists is replaced with --force.
Errors InCommandLineTerms(const Errors& errors, const std::string& context) {
  Errors out = InDocument(CapErrors(errors), context);
  for (Error& e : out) {
    if (e.code == ErrorCode::kExists) e.message += " (pass --force to replace it)";
  }
  return out;
}

int ReportFailure(const Errors& errors, bool json, const std::string& context) {
  Errors shown = InCommandLineTerms(errors, context);
  if (json) {
    PrintJson({{"ok", false}, {"errors", ErrorsJson(shown)}});
  } else {
    // Control characters from the input are escaped: a message never drives the terminal.
    for (const Error& e : shown) std::cerr << "error: " << EscapeControl(e.ToString()) << "\n";
  }
  return ExitCodeFor(errors);
}

Error UsageError(std::string message) { return Error{ErrorCode::kUsage, "", std::move(message)}; }

void PrintJson(const OrderedJson& value) {
  std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintField(const std::string& key, const OrderedJson& value) {
  auto ends_with = [&](std::string_view suffix) {
    return key.size() >= suffix.size() && key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  std::string text = value.is_string() ? value.get<std::string>() : value.dump();
  if ((ends_with("_bytes") || ends_with("_binding_size")) && value.is_number_integer() &&
      value.get<int64_t>() >= 0) {
    text = HumanBytes(value.get<uint64_t>());
  }
  std::string padded = key;
  if (padded.size() < 20) padded.resize(20, ' ');
  std::cout << "  " << padded << (key.size() >= 20 ? " " : "") << EscapeControl(text) << "\n";
}

}  // namespace mlc::cli

namespace {

// True when the command line asks for --json output (then every failure is one JSON object).
bool WantsJson(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--json") return true;
  }
  return false;
}

// The last resort: an exception that escaped a command (a bug, never expected from input) becomes
// exit 3 with a message instead of an abort. The hostile-input test proves none reaches it.
int Uncaught(const char* what, int argc, char** argv) {
  mlc::Errors errors{mlc::Error{mlc::ErrorCode::kIo, "", std::string("internal: uncaught exception: ") + what}};
  return mlc::cli::ReportFailure(errors, WantsJson(argc, argv), "");
}

// The nearest of the names to `given` when one is close enough to suggest, else "".
std::string NearestName(const std::string& given, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const std::string& name : names) {
    size_t d = mlc::cli::EditDistance(given, name);
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best_distance <= std::max<size_t>(2, given.size() / 3) ? best : "";
}

// The first word of the command line that should name a subcommand and names none: "unknown
// subcommand", with the nearest name when one is close ("did you mean"). Walks nested
// subcommands (`emit pakage`) as long as the words name them; stops at the first option.
std::optional<mlc::Error> UnknownSubcommand(const CLI::App& app, int argc, char** argv) {
  const CLI::App* level = &app;
  std::string parents;
  for (int i = 1; i < argc && argv[i][0] != '-'; ++i) {
    const std::string given = argv[i];
    std::vector<std::string> names;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : level->get_subcommands([](const CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
      if (sub->get_name() == given) next = sub;
    }
    if (names.empty()) return std::nullopt;  // a leaf command: the rest are its arguments
    if (next == nullptr) {
      std::string message = "unknown subcommand \"" + mlc::EscapeControl(given) + "\"";
      if (!parents.empty()) message += " of \"" + parents + "\"";
      std::string best = NearestName(given, names);
      message += best.empty() ? " (see " + (parents.empty() ? "" : parents + " ") + "--help for the subcommands)"
                              : "; did you mean \"" + best + "\"?";
      return mlc::cli::UsageError(message);
    }
    parents += (parents.empty() ? "" : " ") + given;
    level = next;
  }
  return std::nullopt;
}

// The subcommands a command line needs, in help order: the one its first word names (options,
// help and errors are the subcommand's own), none for --version alone, else all of them (the
// list in --help, "did you mean" for a misspelt name).
std::vector<mlc::cli::Entry> SubcommandsToSetUp(int argc, char** argv) {
  std::vector<mlc::cli::Entry> entries = mlc::cli::Entries();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const mlc::cli::Entry& a, const mlc::cli::Entry& b) { return a.order < b.order; });
  const std::string_view first = argc > 1 ? argv[1] : "";
  if (first == "--version" && argc == 2) return {};
  for (const mlc::cli::Entry& e : entries) {
    if (first == e.name) return {e};
  }
  return entries;
}

int RunMain(int argc, char** argv);

}  // namespace

int main(int argc, char** argv) {
  // libvips loads every optional module it has (ImageMagick, HEIF, ...: 40 ms) when it starts
  // unless VIPSHOME names a folder without them; the image module opens the two it needs on
  // demand. Set here, before any thread, as a library may not (a VIPSHOME already set stays).
  setenv("VIPSHOME", "/proc/self/mlc-manifest-no-vips-modules", 0);
  try {
    return RunMain(argc, argv);
  } catch (const std::exception& e) {
    return Uncaught(e.what(), argc, argv);
  } catch (...) {
    return Uncaught("unknown", argc, argv);
  }
}

namespace {

int RunMain(int argc, char** argv) {
  using namespace mlc::cli;
  CLI::App app{"mlc-manifest: read, check, write and drive the MLC model artifact manifest"};
  app.require_subcommand(1);
  // Every command's --help shows each option's default (subcommands inherit this).
  app.option_defaults()->always_capture_default();
  app.set_help_all_flag("--help-all", "Every subcommand's help");
  app.set_version_flag("--version", std::string("mlc-manifest ") + MLC_MANIFEST_VERSION);
  std::vector<Entry> entries = SubcommandsToSetUp(argc, argv);
  // Each setup fills one subcommand; remember which action belongs to it.
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  for (Entry& e : entries) {
    CLI::App* cmd = app.add_subcommand(e.name, e.description);
    actions.emplace_back(cmd, e.setup(cmd));
  }
  const bool json = WantsJson(argc, argv);
  if (auto unknown = UnknownSubcommand(app, argc, argv)) return ReportFailure({*unknown}, json);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse with exit code 0; everything else is a usage error,
    // reported like any other failure (one JSON object with --json).
    if (e.get_exit_code() == 0) return app.exit(e);
    return ReportFailure({UsageError(e.what())}, json);
  }
  auto chosen = app.get_subcommands();
  for (auto& [sub, action] : actions) {
    if (!chosen.empty() && sub == chosen.front()) return action();
  }
  return kExitUsage;
}

}  // namespace
