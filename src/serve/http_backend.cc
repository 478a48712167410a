// The library's side of the HTTP module: finds and opens libmlc_manifest_http.so when a server
// starts.
#include "serve/http_backend.h"

#include "base/module_loader.h"

namespace mlc {

Result<const MlcHttpBackend*> LoadHttpBackend() {
  return LoadModuleOnce<MlcHttpBackend>({kHttpModuleFile, "MLC_MANIFEST_HTTP_MODULE", "mlc_manifest_http_backend",
                                         "the HTTP server module (cpp-httplib)", MLC_HTTP_BACKEND_ABI});
}

}  // namespace mlc
