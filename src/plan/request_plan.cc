// A whole request planned turn by turn (PlanRequest) and its report, shared by `mlc-manifest
// plan` and the C API's mlc_plan_compute.
#include "mlc_manifest/request.h"

namespace mlc {

Result<std::vector<PrefillPlan>> PlanRequest(const BoundContract& bound, const PlanLimits& limits,
                                             int64_t kv_length, const Request& request) {
  std::vector<PrefillPlan> plans;
  int64_t kv = kv_length;
  for (const RequestTurn& turn : request.turns) {
    auto pieces = PiecesForTurn(bound, turn);
    MLC_RETURN_IF_ERROR(pieces);
    for (const PromptPiece& p : *pieces) {
      if (!p.Known()) {
        return Error{ErrorCode::kUsage, p.path,
                     "an audio clip's row count is known only once its adapter runs; plan with "
                     "{\"audio_rows\": N}"};
      }
    }
    auto plan = PlanPrefill(limits, kv, *pieces);
    MLC_RETURN_IF_ERROR(plan);
    kv += plan->prompt_length;
    plans.push_back(std::move(*plan));
  }
  return plans;
}

OrderedJson RequestPlanJson(const std::vector<PrefillPlan>& plans, const PlanLimits& limits,
                            int64_t kv_length) {
  OrderedJson chunks = OrderedJson::array(), turns = OrderedJson::array();
  int64_t total = 0;
  for (const PrefillPlan& p : plans) {
    OrderedJson one = PrefillPlanJson(p);
    for (auto& c : one["chunks"]) chunks.push_back(std::move(c));
    total += p.prompt_length;
    turns.push_back({{"kv_length", p.kv_length}, {"prompt_length", p.prompt_length},
                     {"chunks", p.chunks.size()}});
  }
  OrderedJson out = {{"prompt_length", total},
                     {"kv_length", kv_length},
                     {"prefill_chunk_size", limits.prefill_chunk_size},
                     {"context_window_size", limits.context_window_size},
                     {"chunks", std::move(chunks)}};
  if (plans.size() > 1) out["turns"] = std::move(turns);
  return out;
}

}  // namespace mlc
