// The library's side of the HTTP module: finds and opens libmlc_manifest_http.so when a server
// starts.
#include "serve/http_backend.h"

#include <mutex>

#include "base/module_loader.h"

namespace mlc {

Result<const MlcHttpBackend*> LoadHttpBackend() {
  static std::once_flag once;
  static Result<const MlcHttpBackend*> loaded = Errors{};
  std::call_once(once, [] {
    auto table = OpenModule({kHttpModuleFile, "MLC_MANIFEST_HTTP_MODULE", "mlc_manifest_http_backend",
                             "the HTTP server module (cpp-httplib)", MLC_HTTP_BACKEND_ABI},
                             &CallModuleEntry<MlcHttpBackend>);
    if (table) {
      loaded = static_cast<const MlcHttpBackend*>(*table);
    } else {
      loaded = table.errors();
    }
  });
  return loaded;
}

}  // namespace mlc
