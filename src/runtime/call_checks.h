// What a model library's embed and adapter functions return, checked one way for a Session and
// for the engine's BatchModel: [rows, hidden] float32, hidden the same on every call.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/library.h"
#include "mlc_manifest/plan.h"

namespace mlc {

// The embeddings `fn` (the embed_tokens role) returned for n ids: [n, hidden] float32 with hidden
// equal to *hidden_size when set; sets *hidden_size.
Result<NDArray> CheckEmbedOutput(const std::vector<Value>& out, int64_t n, const std::string& fn,
                                 std::optional<int64_t>* hidden_size);

// The adapter function bound for the media piece, or an error naming its input.
Result<const PackedFunction*> AdapterFor(const BoundModel& model, const MediaPiece& media);

// What the media piece's adapter returned: [rows, hidden] float32 (audio: any rows >= 1), hidden
// equal to *hidden_size when set; sets *hidden_size.
Result<NDArray> CheckAdapterOutput(const std::vector<Value>& out, const MediaPiece& media,
                                   std::optional<int64_t>* hidden_size);

}  // namespace mlc
