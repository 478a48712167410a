// libFuzzer target: the package readers (tensor-cache.json, mlc-chat-config.json) and what is
// computed from them (parameter ids, resources, KV estimate, layout and its writer).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/device.h"
#include "mlc_manifest/package.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = mlc::fuzz::JsonInput(data, size, 0, 1 << 20);
  if (!doc) return 0;
  auto config = mlc::ParseChatConfig(*doc);
  if (config.ok()) {
    (void)mlc::EstimateKvCache(*config);
    (void)config->Dimension("vocab_size");
  }
  auto cache = mlc::ParseTensorCache(*doc);
  if (cache.ok()) {
    auto specs = mlc::ParamSpecsOf(*cache);
    (void)mlc::ComputeParameterSchemaId(specs);
    (void)mlc::EstimateResources(specs, config.ok() ? &*config : nullptr);
    // Laying out the same parameters and reading the result back must give the same records.
    auto layout = mlc::LayoutTensorCache(specs, 1 << 10);
    if (layout.ok()) {
      auto back = mlc::ParseJson(mlc::WriteTensorCache(*layout));
      if (!back.ok() || !mlc::ParseTensorCache(*back).ok()) std::abort();
    }
  }
  return 0;
}
