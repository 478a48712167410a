// The checks of embed and adapter results shared by Session and BatchModel.
#include "runtime/call_checks.h"

namespace mlc {
namespace {

std::string Hidden(const std::optional<int64_t>& hidden_size) {
  return hidden_size ? std::to_string(*hidden_size) : "hidden";
}

const NDArray* FirstTensor(const std::vector<Value>& out) {
  return out.empty() ? nullptr : std::get_if<NDArray>(&out.front());
}

std::string Got(const NDArray* e) { return e ? e->Describe() : std::string("no tensor"); }

}  // namespace

Result<NDArray> CheckEmbedOutput(const std::vector<Value>& out, int64_t n, const std::string& fn,
                                 std::optional<int64_t>* hidden_size) {
  const NDArray* e = FirstTensor(out);
  if (!e || !e->defined() || e->ndim() != 2 || e->shape()[0] != n ||
      !SameDtype(e->dtype(), DlFloat32()) || (*hidden_size && e->shape()[1] != **hidden_size)) {
    return Invalid("", fn + ": embed_tokens returned " + Got(e) + ", expected [" +
                           std::to_string(n) + ", " + Hidden(*hidden_size) + "] float32");
  }
  *hidden_size = e->shape()[1];
  return *e;
}

Result<const PackedFunction*> AdapterFor(const BoundModel& model, const MediaPiece& media) {
  const PackedFunction* fn =
      media.kind == MediaKind::kAudio ? model.audio_adapter : model.image_adapter;
  if (fn) return fn;
  return Invalid("", "input \"" + media.input + "\": no adapter function is bound for " +
                         AdapterName(media));
}

Result<NDArray> CheckAdapterOutput(const std::vector<Value>& out, const MediaPiece& media,
                                   std::optional<int64_t>* hidden_size) {
  const NDArray* e = FirstTensor(out);
  const bool audio = media.kind == MediaKind::kAudio;
  bool ok = e && e->defined() && e->ndim() == 2 && SameDtype(e->dtype(), DlFloat32()) &&
            (!*hidden_size || e->shape()[1] == **hidden_size) &&
            (audio ? e->shape()[0] >= 1 : e->shape()[0] == media.rows.value_or(-1));
  if (!ok) {
    std::string rows = audio ? "n >= 1" : std::to_string(media.rows.value_or(-1));
    return Invalid("", "input \"" + media.input + "\": " + AdapterName(media) + " returned " +
                           Got(e) + ", expected [" + rows + ", " + Hidden(*hidden_size) +
                           "] float32");
  }
  *hidden_size = e->shape()[1];
  return *e;
}

}  // namespace mlc
