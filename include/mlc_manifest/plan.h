// Prompt planning (SPEC 6): a request's segments (text token ids, audio clips, images) become
// explicit input pieces that carry their position counts (like llama.cpp's mtmd chunks), are
// checked against the context window and are cut into the prefill chunks a runtime feeds to
// prefill_tokens / prefill_embeds: token ids, modality ids and, for adapter positions, which rows
// of which adapter output fill them.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/package.h"

namespace mlc {

inline constexpr int32_t kModalityText = 0;
inline constexpr int32_t kModalityAdapter = 1;

// The sizes that shape a prefill (from mlc-chat-config.json).
struct PlanLimits {
  int64_t context_window_size = 0;   // <= 0: unknown (only valid with a sliding window)
  int64_t prefill_chunk_size = 0;    // >= 1
  int64_t sliding_window_size = -1;  // > 0: the context check does not apply
  std::optional<int64_t> vocab_size;  // when known, every text id must be below it
  // A hard bound on one prompt, so an untrusted row count cannot exhaust memory.
  int64_t max_prompt_positions = int64_t{1} << 22;

  bool HasSlidingWindow() const { return sliding_window_size > 0; }
};

// context_window_size and prefill_chunk_size (top level, then model_config), sliding_window_size,
// vocab_size.
Result<PlanLimits> PlanLimitsFromChatConfig(const ChatConfig& config);

enum class MediaKind { kAudio, kImage };
const char* MediaKindName(MediaKind kind);  // "audio" / "image"

// ---- Input pieces: what a prompt is made of, each knowing how many positions it takes ----

struct TextPiece {
  std::vector<int32_t> token_ids;
};

// A media input: prefix ids, one placeholder position per adapter row, suffix ids.
struct MediaPiece {
  MediaKind kind = MediaKind::kAudio;
  std::string input;    // the task input's name
  std::string adapter;  // the adapter's name (for messages)
  PromptInsertion prompt;
  // Adapter rows: fixed for an image (num_embeddings); for audio known once its adapter ran.
  std::optional<int64_t> rows;
};

// "adapter \"a\" of audio input \"x\"", for messages.
std::string AdapterName(const MediaPiece& m);

struct PromptPiece {
  std::variant<TextPiece, MediaPiece> value;
  std::string path;  // where it came from (a JSON Pointer into the request), for errors

  // Positions taken; an audio piece whose rows are unknown counts its least possible size
  // (prefix + 1 row + suffix).
  int64_t MinPositions() const;
  bool Known() const;  // false for media without a row count yet
};

// ---- Prefill chunks ----

// Which rows of which adapter output fill an adapter chunk.
struct AdapterRows {
  std::string input;
  size_t piece = 0;   // index of the media piece in the prompt
  int64_t start = 0;  // first row
  int64_t count = 0;
};

struct PrefillChunk {
  std::vector<int32_t> token_ids;
  std::vector<int32_t> modality_ids;  // 0 text, 1 adapter
  std::optional<AdapterRows> rows;    // set exactly for adapter chunks (all positions modality 1)

  int64_t size() const { return static_cast<int64_t>(token_ids.size()); }
};

struct PrefillPlan {
  int64_t kv_length = 0;      // positions the KV cache held before this prompt
  int64_t prompt_length = 0;  // positions this prompt adds
  std::vector<PrefillChunk> chunks;
};

// The context check over pieces whose sizes may still be partly unknown: the prompt takes at
// least one position; the prompt (least sizes) plus kv_length plus one position for the first
// generated token must fit context_window_size unless a sliding window is set (a prompt that
// fills the window leaves nothing to generate: `plan` and `run` both refuse it, as llama.cpp's
// server does). The error names the first piece that does not fit and says by how many positions
// the prompt overflows. With vocab_size known, a text id (prefix and suffix ids included) that
// is not below it is refused at its piece.
Status CheckContext(const PlanLimits& limits, int64_t kv_length,
                    std::span<const PromptPiece> pieces);

// Cuts the prompt into chunks (every media piece's rows must be known): text is packed into
// chunks of at most prefill_chunk_size; before a media span the pending text, its prefix ids
// included, is flushed; the span is cut into chunks of at most prefill_chunk_size rows carrying
// the placeholder id and modality 1; the suffix ids start the next text chunk. Runs CheckContext.
Result<PrefillPlan> PlanPrefill(const PlanLimits& limits, int64_t kv_length,
                                std::span<const PromptPiece> pieces);

// {"prompt_length": N, "chunks": [{"token_ids", "modality_ids", "rows": null | {...}}]}
OrderedJson PrefillPlanJson(const PrefillPlan& plan);

// A media piece for the bound audio / image input (image rows = num_embeddings).
MediaPiece AudioPiece(const BoundAudio& audio, std::optional<int64_t> rows);
MediaPiece ImagePiece(const BoundImage& image);

}  // namespace mlc
