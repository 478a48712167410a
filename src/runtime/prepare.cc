// From a request turn to a runnable turn: planner pieces plus the media tensors the adapters
// take, decoded by the audio and image frontends into the bound dtypes; a recording longer than
// the processor's max_samples cut into windows at its pauses, one audio piece each.
#include <algorithm>
#include <cstring>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/runtime.h"

namespace mlc {
namespace {

// Where a segment's media comes from, for error paths: its file, or "inline" bytes.
std::string Source(const RequestSegment& seg) { return seg.bytes ? "inline" : seg.file; }

// The float32 [n] tensor of each window of a windowed recording.
std::vector<NDArray> WindowTensors(const WindowedAudio& audio) {
  std::vector<NDArray> windows;
  int64_t start = 0;
  for (int64_t end : audio.ends) {
    NDArray pcm = NDArray::Empty({end - start}, DlFloat32());
    std::memcpy(pcm.data<float>(), audio.samples.data() + start, static_cast<size_t>(end - start) * sizeof(float));
    windows.push_back(std::move(pcm));
    start = end;
  }
  return windows;
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

// The turn's pieces and media; a recording longer than max_samples becomes that many audio
// pieces in a row (at most max_windows windows' worth of it is decoded).
Result<TurnInput> Prepare(const BoundContract& bound, const RequestTurn& turn, std::vector<PromptPiece> pieces,
                          int64_t max_windows) {
  TurnInput input;
  Errors errors;
  for (size_t i = 0; i < turn.size(); ++i) {
    const RequestSegment& seg = turn[i];
    if (seg.kind == SegmentKind::kAudio) {
      auto decoded = DecodeWindowedAudio(*bound.audio, seg, max_windows);
      if (!decoded) {
        for (const Error& e : decoded.errors()) errors.push_back(e);
        continue;
      }
      for (NDArray& w : WindowTensors(*decoded)) {
        input.pieces.push_back(pieces[i]);
        input.media.push_back(std::move(w));
      }
      continue;
    }
    Result<NDArray> tensor = NDArray();
    if (seg.kind == SegmentKind::kImage) {
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
    input.pieces.push_back(pieces[i]);
    input.media.push_back(*tensor);
  }
  if (!errors.empty()) return errors;
  return input;
}

// A recording at the processor's rate with its windows' ends (AudioWindowEnds).
WindowedAudio Windowed(std::vector<float> samples, const AudioDecode& processor) {
  WindowedAudio out;
  out.ends = AudioWindowEnds(samples, processor);
  out.samples = std::move(samples);
  out.sample_rate_hz = processor.sample_rate_hz;
  return out;
}

}  // namespace

Result<WindowedAudio> DecodeWindowedAudio(const BoundAudio& audio, const RequestSegment& seg, int64_t max_windows) {
  AudioDecode processor = audio.processor;
  processor.max_samples = audio.processor.max_samples * std::clamp<int64_t>(max_windows, 1, int64_t{1} << 20);
  if (seg.samples) {  // decoded by the caller: only its length is checked
    const auto n = static_cast<int64_t>(seg.samples->size());
    if (n < processor.min_samples || n > processor.max_samples) {
      return Error{ErrorCode::kLimit, seg.path, std::to_string(n) + " samples: expected " + std::to_string(processor.min_samples) +
                                                    " to " + std::to_string(processor.max_samples)};
    }
    return Windowed(*seg.samples, audio.processor);
  }
  auto decoded = seg.bytes ? DecodeAudioMemory(*seg.bytes, processor) : DecodeAudioFile(seg.file, processor);
  if (!decoded) {
    Errors errors = decoded.take_errors();
    for (Error& e : errors) {
      e.path = seg.path + " (" + Source(seg) + (e.path.empty() ? "" : ", " + e.path) + ")";
      if (max_windows > 1 && e.message.rfind("recording too long", 0) == 0) {
        const double seconds = static_cast<double>(processor.max_samples) / static_cast<double>(processor.sample_rate_hz);
        e.message += " (" + std::to_string(max_windows) + " windows of " + std::to_string(audio.processor.max_samples) +
                     " samples, " + std::to_string(static_cast<int64_t>(seconds)) + " s, fit the context window)";
      }
    }
    return errors;
  }
  return Windowed(std::move(decoded->samples), audio.processor);
}

int64_t MaxAudioWindows(const PlanLimits& limits, int64_t kv_length, const std::vector<PromptPiece>& pieces) {
  // As many windows as could fit what the context has left, each at its least (prefix, one row,
  // suffix); the plan checks the real rows once the adapter ran. Without a context window (a
  // sliding window only), an hour at 30 s a window.
  constexpr int64_t kUnboundedWindows = 120;
  int64_t max_windows = 1;
  for (const PromptPiece& p : pieces) {
    if (const auto* m = std::get_if<MediaPiece>(&p.value); m && m->kind == MediaKind::kAudio) {
      max_windows = limits.context_window_size <= 0
                        ? kUnboundedWindows
                        : std::max<int64_t>(1, (limits.context_window_size - kv_length) / std::max<int64_t>(1, p.MinPositions()));
    }
  }
  return max_windows;
}

Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn, const PlanLimits& limits,
                              int64_t kv_length) {
  auto pieces = PiecesForTurn(bound, turn);
  MLC_RETURN_IF_ERROR(pieces);
  MLC_RETURN_IF_ERROR(CheckContext(limits, kv_length, *pieces));
  const int64_t max_windows = MaxAudioWindows(limits, kv_length, *pieces);
  return Prepare(bound, turn, std::move(*pieces), max_windows);
}

Result<TurnInput> PrepareTurn(const BoundContract& bound, const RequestTurn& turn) {
  auto pieces = PiecesForTurn(bound, turn);
  MLC_RETURN_IF_ERROR(pieces);
  return Prepare(bound, turn, std::move(*pieces), 1);
}

}  // namespace mlc
