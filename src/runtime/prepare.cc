// From a request turn to a runnable turn: planner pieces plus the media tensors the adapters
// take, decoded by the audio and image frontends into the bound dtypes.
#include <cstring>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/runtime.h"

namespace mlc {
namespace {

// Where a segment's media comes from, for error paths: its file, or "inline" bytes.
std::string Source(const RequestSegment& seg) { return seg.bytes ? "inline" : seg.file; }

Result<NDArray> AudioTensor(const BoundAudio& audio, const RequestSegment& seg) {
  auto decoded = seg.bytes ? DecodeAudioMemory(*seg.bytes, audio.processor)
                           : DecodeAudioFile(seg.file, audio.processor);
  if (!decoded) {
    Errors errors = decoded.take_errors();
    for (Error& e : errors) e.path = seg.path + " (" + Source(seg) + (e.path.empty() ? "" : ", " + e.path) + ")";
    return errors;
  }
  int64_t n = static_cast<int64_t>(decoded->samples.size());
  NDArray pcm = NDArray::Empty({n}, DlFloat32());
  std::memcpy(pcm.data<float>(), decoded->samples.data(), static_cast<size_t>(n) * sizeof(float));
  return pcm;
}

Result<NDArray> ImagePixels(const BoundImage& image, const RequestSegment& seg) {
  auto prepared = seg.bytes ? PrepareImage(*seg.bytes, image.processor)
                            : PrepareImageFile(seg.file, image.processor);
  if (!prepared) {
    Errors errors = prepared.take_errors();
    for (Error& e : errors) e.path = seg.path + " (" + Source(seg) + (e.path.empty() ? "" : ", " + e.path) + ")";
    return errors;
  }
  const RgbImage& rgb = prepared->rgb;
  std::vector<int64_t> shape = {1, rgb.height, rgb.width, 3};
  if (image.dtype == "uint32") {
    NDArray out = NDArray::Empty(shape, DlUInt32());
    uint32_t* dst = out.data<uint32_t>();
    for (size_t i = 0; i < rgb.pixels.size(); ++i) dst[i] = rgb.pixels[i];
    return out;
  }
  NDArray out = NDArray::Empty(shape, DlUInt8());
  std::memcpy(out.data<uint8_t>(), rgb.pixels.data(), rgb.pixels.size());
  return out;
}

}  // namespace

Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn, const PlanLimits& limits,
                              int64_t kv_length) {
  auto pieces = PiecesForTurn(bound, turn);
  MLC_RETURN_IF_ERROR(pieces);
  MLC_RETURN_IF_ERROR(CheckContext(limits, kv_length, *pieces));
  return PrepareTurn(bound, turn);
}

Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn) {
  auto pieces = PiecesForTurn(bound, turn);
  MLC_RETURN_IF_ERROR(pieces);
  TurnInput input;
  input.pieces = std::move(*pieces);
  input.media.resize(turn.size());
  Errors errors;
  for (size_t i = 0; i < turn.size(); ++i) {
    const RequestSegment& seg = turn[i];
    Result<NDArray> tensor = NDArray();
    if (seg.kind == SegmentKind::kAudio) {
      tensor = AudioTensor(*bound.audio, seg);
    } else if (seg.kind == SegmentKind::kImage) {
      tensor = ImagePixels(*bound.image, seg);
    } else if (seg.kind == SegmentKind::kAudioRows) {
      errors.push_back(Error{ErrorCode::kUsage, seg.path + "/audio_rows",
                             "a row count is for planning only; a run needs {\"audio\": FILE}"});
      continue;
    }
    if (!tensor) {
      for (const Error& e : tensor.errors()) errors.push_back(e);
      continue;
    }
    input.media[i] = *tensor;
  }
  if (!errors.empty()) return errors;
  return input;
}

}  // namespace mlc
