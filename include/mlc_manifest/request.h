// A generation request as the CLI and tests give it: a JSON array of segments
// ({"tokens": [ids]}, {"audio": "clip.wav"}, {"image": "photo.jpg"}, {"audio_rows": N}) or
// {"turns": [[segments], ...]} for a multi-turn conversation over one KV cache. Parsed with the
// strict JSON reader; every fault is reported at its JSON Pointer. Also the step that turns
// segments into the planner's input pieces for a bound contract.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/plan.h"

namespace mlc {

enum class SegmentKind { kTokens, kAudio, kAudioRows, kImage };

struct RequestSegment {
  SegmentKind kind = SegmentKind::kTokens;
  std::vector<int32_t> token_ids;  // kTokens
  std::string file;                // kAudio / kImage: the path, resolved against the request's folder
  std::shared_ptr<const std::string> bytes;  // kAudio / kImage: inline media (then file is "")
  // kAudio: samples already decoded at the processor's rate (then file and bytes are not read).
  std::shared_ptr<const std::vector<float>> samples;
  int64_t rows = 0;                // kAudioRows
  std::string path;                // JSON Pointer of the segment in the request
};

using RequestTurn = std::vector<RequestSegment>;

struct Request {
  std::vector<RequestTurn> turns;  // one for a plain segment array
};

struct RequestLimits {
  size_t max_turns = 256;
  size_t max_segments = 4096;          // over all turns
  int64_t max_audio_rows = int64_t{1} << 24;
};

// Parses a request document. Relative media paths are resolved against base_dir (the request
// file's folder; "" leaves them as given).
Result<Request> ParseRequest(const Json& doc, const std::string& base_dir,
                             const RequestLimits& limits = {});
// ReadJsonFile + ParseRequest with the file's folder as base_dir.
Result<Request> ReadRequestFile(const std::string& path, const RequestLimits& limits = {});

// The planner's pieces for one turn. A media segment needs the matching input in the bound
// contract (else an error at the segment). An audio file's rows stay unknown (its adapter
// decides); {"audio_rows": N} gives them.
Result<std::vector<PromptPiece>> PiecesForTurn(const BoundContract& bound,
                                               const RequestTurn& turn);

// The prefill plan of each turn of a request, the first from kv_length on, each later one
// continuing the KV cache the turn before filled. Every audio clip needs its row count
// ({"audio_rows": N}); one given as a file is a usage error at its segment.
Result<std::vector<PrefillPlan>> PlanRequest(const BoundContract& bound, const PlanLimits& limits,
                                             int64_t kv_length, const Request& request);

// {"prompt_length", "kv_length", "prefill_chunk_size", "context_window_size", "chunks": every
// turn's, in order, and with more than one turn "turns": [{"kv_length", "prompt_length",
// "chunks": count}]}: the report of PlanRequest's plans that began at kv_length.
OrderedJson RequestPlanJson(const std::vector<PrefillPlan>& plans, const PlanLimits& limits,
                            int64_t kv_length);

}  // namespace mlc
