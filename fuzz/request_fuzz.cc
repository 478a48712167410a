// libFuzzer target: arbitrary bytes as a request document through the strict JSON reader, the
// request parser and the prefill planner (with small, varying chunk and window sizes). Nothing
// may crash or blow up; a plan that succeeds must obey the chunk rules.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_input.h"
#include "mlc_manifest/plan.h"
#include "mlc_manifest/request.h"

namespace {

mlc::BoundContract Contract() {
  mlc::BoundContract c;
  c.task_name = "chat.completions";
  mlc::BoundAudio a;
  a.input = a.adapter = "audio";
  a.prompt = mlc::PromptInsertion{{3}, 4, {5}};
  c.audio = a;
  mlc::BoundImage i;
  i.input = i.adapter = "image";
  i.prompt = mlc::PromptInsertion{{6}, 7, {}};
  i.processor.num_embeddings = 9;
  c.image = i;
  return c;
}

void CheckPlan(const mlc::PrefillPlan& plan, int64_t chunk) {
  int64_t total = 0;
  for (const auto& c : plan.chunks) {
    if (c.size() < 1 || c.size() > chunk || c.token_ids.size() != c.modality_ids.size()) std::abort();
    if (c.rows && (c.rows->count != c.size() || c.rows->start < 0)) std::abort();
    total += c.size();
  }
  if (total != plan.prompt_length) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto doc = mlc::fuzz::JsonInput(data, size, 1, 1 << 16);
  if (!doc) return 0;
  mlc::RequestLimits rl;
  rl.max_audio_rows = 1 << 12;
  auto request = mlc::ParseRequest(*doc, "base", rl);
  if (!request.ok()) return 0;
  static const mlc::BoundContract contract = Contract();
  mlc::PlanLimits limits;
  limits.prefill_chunk_size = 1 + data[0] % 16;
  limits.context_window_size = 8 + (data[0] >> 4) * 64;
  if (data[0] & 1) limits.sliding_window_size = 32;
  limits.max_prompt_positions = 1 << 16;
  int64_t kv = 0;
  for (const auto& turn : request->turns) {
    auto pieces = mlc::PiecesForTurn(contract, turn);
    if (!pieces.ok()) return 0;
    for (auto& p : *pieces) {
      if (auto* m = std::get_if<mlc::MediaPiece>(&p.value); m && !m->rows) m->rows = 2;
    }
    auto plan = mlc::PlanPrefill(limits, kv, *pieces);
    if (!plan.ok()) return 0;
    CheckPlan(*plan, limits.prefill_chunk_size);
    kv += plan->prompt_length;
  }
  return 0;
}
