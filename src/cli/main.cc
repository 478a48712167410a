// mlc-manifest: parse the command line and run the chosen subcommand.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string_view>
#include <vector>

#include "cli/command.h"
#include "mlc_manifest/version.h"

namespace mlc::cli {
namespace {

struct Entry {
  int order;
  Setup setup;
};

std::vector<Entry>& Entries() {
  static std::vector<Entry> entries;
  return entries;
}

}  // namespace

Registration::Registration(int order, Setup setup) {
  Entries().push_back(Entry{order, std::move(setup)});
}

int ExitCodeFor(const Errors& errors) {
  int code = kExitProblems;
  for (const Error& e : errors) {
    if (e.code == ErrorCode::kIo) return kExitIo;
    if (e.code == ErrorCode::kUsage) code = kExitUsage;
  }
  return code;
}

OrderedJson ErrorsJson(const Errors& errors, const std::string& document) {
  OrderedJson list = OrderedJson::array();
  for (const Error& e : CapErrors(errors)) {
    list.push_back({{"code", ErrorCodeName(e.code)},
                    {"document", e.document.empty() ? document : e.document},
                    {"path", e.path},
                    {"message", e.message}});
  }
  return list;
}

int ReportFailure(const Errors& errors, bool json, const std::string& context) {
  if (json) {
    PrintJson({{"ok", false}, {"errors", ErrorsJson(errors, context)}});
  } else {
    // Control characters from the input are escaped: a message never drives the terminal.
    for (const Error& e : CapErrors(errors)) {
      std::cerr << "error: " << EscapeControl((context.empty() ? "" : context + ": ") + e.ToString())
                << "\n";
    }
  }
  return ExitCodeFor(errors);
}

void PrintJson(const OrderedJson& value) {
  std::cout << value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace mlc::cli

namespace {

// The last resort: an exception that escaped a command (a bug, never expected from input) becomes
// exit 3 with a message instead of an abort. The hostile-input test proves none reaches it.
int Uncaught(const char* what, int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) json = json || std::string_view(argv[i]) == "--json";
  mlc::Errors errors{mlc::Error{mlc::ErrorCode::kIo, "", std::string("internal: uncaught exception: ") + what}};
  return mlc::cli::ReportFailure(errors, json, "");
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
  app.set_help_all_flag("--help-all", "Every subcommand's help");
  app.set_version_flag("--version", std::string("mlc-manifest ") + MLC_MANIFEST_VERSION);
  std::vector<Entry> entries = Entries();
  std::stable_sort(entries.begin(), entries.end(),
                   [](const Entry& a, const Entry& b) { return a.order < b.order; });
  // Each setup adds one subcommand; remember which action belongs to it.
  std::vector<std::pair<CLI::App*, std::function<int()>>> actions;
  for (Entry& e : entries) {
    std::function<int()> action = e.setup(app);
    auto subs = app.get_subcommands([](CLI::App*) { return true; });
    actions.emplace_back(subs.back(), std::move(action));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  auto chosen = app.get_subcommands();
  for (auto& [sub, action] : actions) {
    if (!chosen.empty() && sub == chosen.front()) return action();
  }
  return kExitUsage;
}

}  // namespace
