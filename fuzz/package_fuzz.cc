// libFuzzer target: the package readers (tensor-cache.json, mlc-chat-config.json) and what is
// computed from them (parameter ids, resources, KV estimate, layout and its writer).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/device.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/package.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = mlc::fuzz::JsonInput(data, size, 0, 1 << 20);
  if (!doc) return 0;
  auto config = mlc::ParseChatConfig(*doc);
  if (config.ok()) {
    (void)mlc::EstimateKvCache(*config);
    (void)config->Dimension("vocab_size");
  }
  // Any parameter list (or _metadata params) against itself and against itself without its first.
  auto listed = mlc::ParamSpecsOfDocument(*doc);
  auto meta = mlc::MetadataParams(*doc);
  if (meta) listed = *meta;
  if (listed.ok()) {
    auto same = mlc::DiffParams(*listed, *listed, config.ok() ? &*config : nullptr, "a", "b");
    if (!same.empty() && mlc::ComputeParameterSchemaId(*listed).ok()) std::abort();  // unique names
    std::vector<mlc::ParamSpec> fewer(listed->begin() + (listed->empty() ? 0 : 1), listed->end());
    auto d = mlc::DiffParams(*listed, fewer, config.ok() ? &*config : nullptr, "a", "b");
    (void)d.Lines();
    (void)d.ToJson().dump();
    (void)d.Summary();
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
