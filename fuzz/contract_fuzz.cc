// libFuzzer target: arbitrary bytes through the strict JSON reader, both document parsers,
// the writers and binding. Nothing may crash, hang or leak; a document that parses must
// survive a write/parse round trip unchanged.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/bind.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/explain.h"
#include "mlc_manifest/package.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = mlc::fuzz::JsonInput(data, size, 0, 1 << 20);
  if (!doc) return 0;
  (void)mlc::CanonicalJson(*doc);
  (void)mlc::ParseChatConfig(*doc);
  (void)mlc::ParamSpecsOfDocument(*doc);
  auto pkg = mlc::ParseModelPackage(*doc);
  if (pkg.ok()) {
    std::string once = mlc::WriteModelPackage(*pkg);
    auto again = mlc::ParseJson(once);
    if (!again.ok()) std::abort();
    auto pkg2 = mlc::ParseModelPackage(*again);
    if (!pkg2.ok() || mlc::WriteModelPackage(*pkg2) != once) std::abort();
  }
  if (doc->is_object() && doc->contains("tasks")) {
    auto tasks = mlc::ParseTasks((*doc)["tasks"], "/tasks");
    if (tasks.ok()) {
      auto iid = mlc::ComputeInterfaceId(*tasks);
      // Explaining an id: against a known task set when one has it, else a note.
      auto e = mlc::ExplainInterfaceId(iid.ok() ? *iid : "", *tasks);
      if (e.lines.empty()) std::abort();
    }
  }
  // Earlier drafts: recognised anywhere in the document; an upgrade that succeeds is no longer one.
  if (auto draft = mlc::DetectEarlierDraft(*doc)) {
    (void)draft->Message("d");
    (void)draft->ToJson("d");
    auto up = mlc::UpgradeEarlierDraft(*doc);
    if (up.ok() && mlc::DetectEarlierDraft(*up)) std::abort();
    if (up.ok()) (void)mlc::ParseModelPackage(*up);
  }
  if (doc->is_object() && doc->contains("a") && doc->contains("b")) {
    mlc::OrderedJson a = (*doc)["a"], b = (*doc)["b"];
    if (!mlc::JsonDiff(a, a).empty() || (a != b && mlc::JsonDiff(a, b).empty())) std::abort();
  }
  auto prog = mlc::ParseCompiledProgram(*doc);
  if (prog.ok()) {
    std::string once = mlc::WriteCompiledProgram(*prog, true);
    auto again = mlc::ParseJson(once);
    if (!again.ok()) std::abort();
    auto prog2 = mlc::ParseCompiledProgram(*again);
    if (!prog2.ok() || mlc::WriteCompiledProgram(*prog2, true) != once) std::abort();
  }
  // A document holding both halves under "package" and "program" exercises binding.
  if (doc->is_object() && doc->contains("package") && doc->contains("program")) {
    auto p = mlc::ParseTasks((*doc)["package"], "/package");
    auto c = mlc::ParseCompiledProgram((*doc)["program"]);
    if (p.ok() && c.ok()) {
      auto iid = mlc::ComputeInterfaceId(*p);
      if (!iid.ok()) std::abort();  // the crypto module is part of the build
      mlc::ModelPackage mp{*iid, c->parameter_schema_id, *p};
      mlc::BindOptions o;
      o.device = mlc::DeviceLimits{"d", {"shader-f16"}, 1 << 27};
      auto b = mlc::Bind(mp, *c, o);
      if (b.ok()) (void)mlc::BoundContractJson(*b);
    }
  }
  return 0;
}
