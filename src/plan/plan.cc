// The prefill planner (SPEC 6): context checks over input pieces and the cut into prefill chunks.
#include "mlc_manifest/plan.h"

#include <algorithm>

namespace mlc {
namespace {

int64_t InsertionSize(const PromptInsertion& p) {
  return static_cast<int64_t>(p.prefix_token_ids.size() + p.suffix_token_ids.size());
}

std::string Describe(const PromptPiece& piece) {
  if (const auto* m = std::get_if<MediaPiece>(&piece.value)) {
    return std::string(MediaKindName(m->kind)) + " input \"" + m->input + "\"";
  }
  return "text";
}

// Builds chunks one position at a time, flushing text when a chunk is full.
class ChunkBuilder {
 public:
  explicit ChunkBuilder(int64_t chunk_size) : chunk_size_(chunk_size) {}

  void AddText(std::span<const int32_t> ids) {
    for (int32_t id : ids) {
      pending_.token_ids.push_back(id);
      pending_.modality_ids.push_back(kModalityText);
      if (pending_.size() == chunk_size_) FlushText();
    }
  }
  void AddText(const std::vector<int64_t>& ids) {
    for (int64_t id : ids) {
      int32_t v = static_cast<int32_t>(id);
      AddText(std::span<const int32_t>(&v, 1));
    }
  }

  void AddRows(const MediaPiece& media, size_t piece_index, int64_t rows) {
    FlushText();
    for (int64_t start = 0; start < rows; start += chunk_size_) {
      int64_t count = std::min(chunk_size_, rows - start);
      PrefillChunk chunk;
      chunk.token_ids.assign(count, static_cast<int32_t>(media.prompt.placeholder_token_id));
      chunk.modality_ids.assign(count, kModalityAdapter);
      chunk.rows = AdapterRows{media.input, piece_index, start, count};
      chunks_.push_back(std::move(chunk));
    }
  }

  std::vector<PrefillChunk> Finish() {
    FlushText();
    return std::move(chunks_);
  }

 private:
  void FlushText() {
    if (pending_.token_ids.empty()) return;
    chunks_.push_back(std::move(pending_));
    pending_ = PrefillChunk{};
  }

  int64_t chunk_size_;
  PrefillChunk pending_;
  std::vector<PrefillChunk> chunks_;
};

// Ids fed as text (a text piece's, a media piece's prefix and suffix) must be below vocab_size.
Status CheckVocabulary(const PromptPiece& piece, int64_t vocab_size) {
  auto bad = [&](int64_t id, size_t index, const char* where) {
    return Invalid(piece.path, "token id " + std::to_string(id) + " (" + where + ", index " +
                                   std::to_string(index) + ") is not below vocab_size " +
                                   std::to_string(vocab_size));
  };
  if (const auto* t = std::get_if<TextPiece>(&piece.value)) {
    for (size_t i = 0; i < t->token_ids.size(); ++i) {
      if (t->token_ids[i] >= vocab_size) return bad(t->token_ids[i], i, "this text");
    }
    return Status::Ok();
  }
  const auto& m = std::get<MediaPiece>(piece.value);
  for (size_t i = 0; i < m.prompt.prefix_token_ids.size(); ++i) {
    if (m.prompt.prefix_token_ids[i] >= vocab_size) {
      return bad(m.prompt.prefix_token_ids[i], i, "prefix_token_ids");
    }
  }
  for (size_t i = 0; i < m.prompt.suffix_token_ids.size(); ++i) {
    if (m.prompt.suffix_token_ids[i] >= vocab_size) {
      return bad(m.prompt.suffix_token_ids[i], i, "suffix_token_ids");
    }
  }
  return Status::Ok();
}

Status CheckLimitsUsable(const PlanLimits& limits) {
  if (limits.prefill_chunk_size < 1) {
    return Error{ErrorCode::kUsage, "/prefill_chunk_size",
                 "expected prefill_chunk_size >= 1, got " +
                     std::to_string(limits.prefill_chunk_size)};
  }
  if (!limits.HasSlidingWindow() && limits.context_window_size < 1) {
    return Error{ErrorCode::kUsage, "/context_window_size",
                 "expected context_window_size >= 1 (or a sliding window), got " +
                     std::to_string(limits.context_window_size)};
  }
  return Status::Ok();
}

}  // namespace

const char* MediaKindName(MediaKind kind) { return kind == MediaKind::kAudio ? "audio" : "image"; }

std::string AdapterName(const MediaPiece& m) {
  return "adapter \"" + m.adapter + "\" of " + MediaKindName(m.kind) + " input \"" + m.input + "\"";
}

Result<PlanLimits> PlanLimitsFromChatConfig(const ChatConfig& config) {
  PlanLimits limits;
  auto window = config.context_window_size ? config.context_window_size
                                           : config.Dimension("context_window_size");
  auto chunk = config.prefill_chunk_size ? config.prefill_chunk_size
                                         : config.Dimension("prefill_chunk_size");
  limits.sliding_window_size = config.sliding_window_size.value_or(-1);
  auto vocab = config.vocab_size ? config.vocab_size : config.Dimension("vocab_size");
  if (vocab && *vocab > 0) limits.vocab_size = *vocab;
  Errors errors;
  if (!chunk || *chunk < 1) {
    AddError(errors, Invalid("/prefill_chunk_size",
                             "mlc-chat-config.json must give prefill_chunk_size >= 1"));
  } else {
    limits.prefill_chunk_size = *chunk;
  }
  if (window && *window > 0) {
    limits.context_window_size = *window;
  } else if (!limits.HasSlidingWindow()) {
    AddError(errors, Invalid("/context_window_size",
                             "mlc-chat-config.json must give context_window_size >= 1 "
                             "(or a sliding_window_size)"));
  }
  if (!errors.empty()) return errors;
  return limits;
}

int64_t PromptPiece::MinPositions() const {
  if (const auto* t = std::get_if<TextPiece>(&value)) {
    return static_cast<int64_t>(t->token_ids.size());
  }
  const auto& m = std::get<MediaPiece>(value);
  return InsertionSize(m.prompt) + m.rows.value_or(1);
}

bool PromptPiece::Known() const {
  const auto* m = std::get_if<MediaPiece>(&value);
  return !m || m->rows.has_value();
}

Status CheckContext(const PlanLimits& limits, int64_t kv_length,
                    std::span<const PromptPiece> pieces) {
  if (Status s = CheckLimitsUsable(limits); !s) return s;
  int64_t total = 0;
  for (const PromptPiece& piece : pieces) {
    if (const auto* m = std::get_if<MediaPiece>(&piece.value); m && m->rows && *m->rows < 1) {
      return Invalid(piece.path, std::string(MediaKindName(m->kind)) + " input \"" + m->input +
                                     "\" has " + std::to_string(*m->rows) +
                                     " adapter rows; expected at least 1");
    }
    if (limits.vocab_size) MLC_RETURN_IF_ERROR(CheckVocabulary(piece, *limits.vocab_size));
    total += piece.MinPositions();
    if (total > limits.max_prompt_positions) {
      return Error{ErrorCode::kLimit, piece.path,
                   "the prompt exceeds the limit of " +
                       std::to_string(limits.max_prompt_positions) + " positions at this " +
                       Describe(piece)};
    }
  }
  if (total == 0) {
    return Error{ErrorCode::kUsage, pieces.empty() ? "" : pieces.front().path,
                 "the prompt is empty: there is nothing to generate from"};
  }
  if (limits.HasSlidingWindow()) return Status::Ok();
  // The prompt may take every free position but one: the first generated token's.
  int64_t available = limits.context_window_size - kv_length - 1;
  if (total <= available) return Status::Ok();
  // Find the first piece at which the running total no longer fits.
  int64_t running = 0;
  const PromptPiece* culprit = &pieces.front();
  for (const PromptPiece& piece : pieces) {
    running += piece.MinPositions();
    if (running > available) {
      culprit = &piece;
      break;
    }
  }
  bool partial = std::any_of(pieces.begin(), pieces.end(),
                             [](const PromptPiece& p) { return !p.Known(); });
  return Invalid(culprit->path,
                 "the prompt does not fit the context window: it needs " +
                     std::string(partial ? "at least " : "") + std::to_string(total) +
                     " positions and one for the reply, the KV cache holds " +
                     std::to_string(kv_length) + " and context_window_size is " +
                     std::to_string(limits.context_window_size) + ", so it overflows by " +
                     std::to_string(total - available) + " positions (first at this " +
                     Describe(*culprit) + ")");
}

Result<PrefillPlan> PlanPrefill(const PlanLimits& limits, int64_t kv_length,
                                std::span<const PromptPiece> pieces) {
  for (const PromptPiece& piece : pieces) {
    if (!piece.Known()) {
      return Error{ErrorCode::kUsage, piece.path,
                   "the row count of " + Describe(piece) +
                       " is known only once its adapter has run"};
    }
  }
  MLC_RETURN_IF_ERROR(CheckContext(limits, kv_length, pieces));
  ChunkBuilder builder(limits.prefill_chunk_size);
  PrefillPlan plan;
  plan.kv_length = kv_length;
  for (size_t i = 0; i < pieces.size(); ++i) {
    const PromptPiece& piece = pieces[i];
    plan.prompt_length += piece.MinPositions();
    if (const auto* t = std::get_if<TextPiece>(&piece.value)) {
      builder.AddText(std::span<const int32_t>(t->token_ids));
      continue;
    }
    const auto& m = std::get<MediaPiece>(piece.value);
    builder.AddText(m.prompt.prefix_token_ids);
    builder.AddRows(m, i, *m.rows);
    builder.AddText(m.prompt.suffix_token_ids);
  }
  plan.chunks = builder.Finish();
  return plan;
}

OrderedJson PrefillPlanJson(const PrefillPlan& plan) {
  OrderedJson chunks = OrderedJson::array();
  for (const PrefillChunk& c : plan.chunks) {
    OrderedJson rows = nullptr;
    if (c.rows) rows = {{"input", c.rows->input}, {"start", c.rows->start}, {"count", c.rows->count}};
    chunks.push_back({{"token_ids", c.token_ids}, {"modality_ids", c.modality_ids}, {"rows", rows}});
  }
  return {{"prompt_length", plan.prompt_length}, {"chunks", std::move(chunks)}};
}

MediaPiece AudioPiece(const BoundAudio& audio, std::optional<int64_t> rows) {
  return MediaPiece{MediaKind::kAudio, audio.input, audio.adapter, audio.prompt, rows};
}

MediaPiece ImagePiece(const BoundImage& image) {
  return MediaPiece{MediaKind::kImage, image.input, image.adapter, image.prompt,
                    image.processor.num_embeddings};
}

}  // namespace mlc
