// The kinds of library a package folder may name by a marker file, registered by the targets
// that implement them (the reference runtime, outside the core library).
#include <mutex>
#include <utility>
#include <vector>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/library.h"

namespace mlc {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<std::string, LibraryOpener>> openers;
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: used from static initializers
  return *registry;
}

}  // namespace

void RegisterLibraryOpener(const std::string& marker_file, LibraryOpener open) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.openers.emplace_back(marker_file, open);
}

LibraryOpener FindLibraryOpener(const std::string& package_dir) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const auto& [marker, open] : r.openers) {
    if (FileExists(JoinPath(package_dir, marker))) return open;
  }
  return nullptr;
}

}  // namespace mlc
