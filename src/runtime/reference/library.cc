// The reference model as a ModelLibrary: named functions with the seed's argument shapes
// (embed, prefill_tokens/decode_tokens, prefill/decode, create_tir_paged_kv_cache, audio_embed,
// image_embed), each checking its arguments and returning errors, never crashing.
#include <cstring>
#include <set>

#include "mlc_manifest/fs.h"
#include "runtime/function_table.h"
#include "runtime/reference/reference_internal.h"

namespace mlc {
namespace reference {
namespace {

// The weights in the parameter set of argument i.
Result<Weights> WeightsArg(const Config& c, const ArgReader& r, size_t i) {
  auto params = r.Object<ParameterSet>(i, "a parameter set");
  MLC_RETURN_IF_ERROR(params);
  return Weights::From(c, **params);
}

Status CheckIds(const std::string& fn, const Config& c, std::span<const int32_t> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= c.vocab_size) {
      return Invalid("", fn + ": token id " + std::to_string(ids[i]) + " at position " +
                             std::to_string(i) + " is outside the vocabulary [0, " +
                             std::to_string(c.vocab_size) + ")");
    }
  }
  return Status::Ok();
}

NDArray FloatTensor(const std::vector<float>& v, std::vector<int64_t> shape) {
  NDArray a = NDArray::Empty(std::move(shape), DlFloat32());
  std::memcpy(a.data<float>(), v.data(), v.size() * sizeof(float));
  return a;
}

// Logits of each sequence of the call: [1, n_seq, vocab] for prefill, [n_seq, 1, vocab] for
// decode_tokens (one row per batch entry).
std::vector<Value> LogitsAndKv(const Config& c, const std::vector<float>& logits, const ObjectRef& kv,
                               bool batch_major = false) {
  int64_t n = static_cast<int64_t>(logits.size()) / c.vocab_size;
  std::vector<int64_t> shape = batch_major ? std::vector<int64_t>{n, 1, c.vocab_size}
                                           : std::vector<int64_t>{1, n, c.vocab_size};
  return {FloatTensor(logits, std::move(shape)), kv};
}

class Library : public FunctionTableLibrary {
 public:
  Library(Config config, LibraryMetadata metadata, const std::vector<std::string>& exported)
      : FunctionTableLibrary(std::move(metadata)), c_(std::move(config)) {
    for (const std::string& name : exported) {
      if (auto f = Make(name)) functions_[name] = std::move(*f);
    }
  }

  static bool Known(const std::string& name) {
    static const std::set<std::string> kNames = {
        "embed",  "prefill_tokens", "decode_tokens", "prefill", "decode",
        "create_tir_paged_kv_cache", "audio_embed", "image_embed"};
    return kNames.count(name) > 0;
  }

 private:
  std::optional<PackedFunction> Make(const std::string& name) {
    const Config* c = &c_;
    if (name == "embed") return [c](Args a) { return Embed(*c, a); };
    if (name == "prefill_tokens") return [c](Args a) { return PrefillTokens(*c, a); };
    if (name == "decode_tokens") return [c](Args a) { return DecodeTokens(*c, a); };
    if (name == "prefill") return [c](Args a) { return PrefillEmbeds(*c, a, "prefill"); };
    if (name == "decode") return [c](Args a) { return PrefillEmbeds(*c, a, "decode"); };
    if (name == "create_tir_paged_kv_cache") return [c](Args a) { return CreateKv(*c, a); };
    if (name == "audio_embed" && c_.audio_frame_size) return [c](Args a) { return Audio(*c, a); };
    if (name == "image_embed" && c_.image_size) return [c](Args a) { return Image(*c, a); };
    return std::nullopt;
  }

  static Result<std::vector<Value>> Embed(const Config& c, Args args) {
    ArgReader r("embed", args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    auto ids = r.Tensor(0, DlInt32(), {-1});
    MLC_RETURN_IF_ERROR(ids);
    auto w = WeightsArg(c, r, 1);
    MLC_RETURN_IF_ERROR(w);
    std::span<const int32_t> span(ids->data<int32_t>(), static_cast<size_t>(ids->Elements()));
    MLC_RETURN_IF_ERROR(CheckIds("embed", c, span));
    NDArray out = NDArray::Empty({ids->Elements(), c.hidden_size}, DlFloat32());
    EmbedTokens(c, *w, span, out.data<float>());
    if (c.modality_in_inputs()) {
      for (int64_t i = 0; i < ids->Elements(); ++i) {
        AddModality(c, *w, kModalityText, out.data<float>() + i * c.hidden_size);
      }
    }
    return std::vector<Value>{out};
  }

  static Result<std::vector<Value>> PrefillTokens(const Config& c, Args args) {
    ArgReader r("prefill_tokens", args);
    MLC_RETURN_IF_ERROR(r.Count(5));
    auto e = r.Tensor(0, DlFloat32(), {1, -1, c.hidden_size});
    MLC_RETURN_IF_ERROR(e);
    int64_t n = e->shape()[1];
    auto ids = r.Tensor(1, DlInt32(), {1, n});
    MLC_RETURN_IF_ERROR(ids);
    auto mods = r.Tensor(2, DlInt32(), {1, n});
    MLC_RETURN_IF_ERROR(mods);
    auto kv = r.Object<KvCache>(3, "a reference KV cache");
    MLC_RETURN_IF_ERROR(kv);
    auto w = WeightsArg(c, r, 4);
    MLC_RETURN_IF_ERROR(w);
    std::span<const int32_t> id_span(ids->data<int32_t>(), static_cast<size_t>(n));
    MLC_RETURN_IF_ERROR(CheckIds("prefill_tokens", c, id_span));
    const int32_t* m = mods->data<int32_t>();
    std::vector<float> x(e->data<float>(), e->data<float>() + n * c.hidden_size);
    for (int64_t i = 0; i < n; ++i) {
      if (m[i] != kModalityText && m[i] != kModalityAdapter) {
        return Invalid("", "prefill_tokens: modality id " + std::to_string(m[i]) + " at position " +
                                             std::to_string(i) + "; expected 0 or 1");
      }
      float* row = x.data() + i * c.hidden_size;
      if (!c.modality_in_inputs()) {
        AddModality(c, *w, m[i], row);
      } else if (m[i] == kModalityText) {  // text positions are looked up from their ids
        EmbedTokens(c, *w, id_span.subspan(static_cast<size_t>(i), 1), row);
        AddModality(c, *w, kModalityText, row);
      }
    }
    auto logits = Forward(c, *w, **kv, std::move(x), n, "prefill_tokens");
    MLC_RETURN_IF_ERROR(logits);
    return LogitsAndKv(c, *logits, r.Ref(3));
  }

  static Result<std::vector<Value>> DecodeTokens(const Config& c, Args args) {
    ArgReader r("decode_tokens", args);
    MLC_RETURN_IF_ERROR(r.Count(3));
    auto ids = r.Tensor(0, DlInt32(), {-1, 1});  // [batch_size, 1]
    MLC_RETURN_IF_ERROR(ids);
    auto kv = r.Object<KvCache>(1, "a reference KV cache");
    MLC_RETURN_IF_ERROR(kv);
    auto w = WeightsArg(c, r, 2);
    MLC_RETURN_IF_ERROR(w);
    int64_t batch = ids->shape()[0];
    std::span<const int32_t> id_span(ids->data<int32_t>(), static_cast<size_t>(batch));
    MLC_RETURN_IF_ERROR(CheckIds("decode_tokens", c, id_span));
    std::vector<float> x(static_cast<size_t>(batch * c.hidden_size));
    EmbedTokens(c, *w, id_span, x.data());
    for (int64_t b = 0; b < batch; ++b) AddModality(c, *w, kModalityText, x.data() + b * c.hidden_size);
    // Each batch entry is one position of its own sequence (as begin_forward named them).
    auto logits = Forward(c, *w, **kv, std::move(x), batch, "decode_tokens");
    MLC_RETURN_IF_ERROR(logits);
    if (static_cast<int64_t>(logits->size()) != batch * c.vocab_size) {
      return Invalid("", "decode_tokens: each batch entry must be a sequence of its own, appending one position");
    }
    return LogitsAndKv(c, *logits, r.Ref(1), true);
  }

  // prefill (embeddings [1, n, hidden]) and decode (embeddings [1, 1, hidden]).
  static Result<std::vector<Value>> PrefillEmbeds(const Config& c, Args args, const char* fn) {
    ArgReader r(fn, args);
    MLC_RETURN_IF_ERROR(r.Count(3));
    bool decode = std::string(fn) == "decode";
    auto e = r.Tensor(0, DlFloat32(), {1, decode ? 1 : -1, c.hidden_size});
    MLC_RETURN_IF_ERROR(e);
    auto kv = r.Object<KvCache>(1, "a reference KV cache");
    MLC_RETURN_IF_ERROR(kv);
    auto w = WeightsArg(c, r, 2);
    MLC_RETURN_IF_ERROR(w);
    int64_t n = e->shape()[1];
    std::vector<float> x(e->data<float>(), e->data<float>() + n * c.hidden_size);
    auto logits = Forward(c, *w, **kv, std::move(x), n, fn);
    MLC_RETURN_IF_ERROR(logits);
    return LogitsAndKv(c, *logits, r.Ref(1));
  }

  // (max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window)
  static Result<std::vector<Value>> CreateKv(const Config& c, Args args) {
    ArgReader r("create_tir_paged_kv_cache", args);
    MLC_RETURN_IF_ERROR(r.Count(5));
    std::vector<int64_t> v;
    for (size_t i = 0; i < 5; ++i) {
      auto x = r.Integer(i);
      MLC_RETURN_IF_ERROR(x);
      v.push_back(*x);
    }
    if (v[0] < 1 || v[0] > 1024 || v[1] < 1 || v[1] > (int64_t{1} << 20) || v[2] < 1 ||
        v[3] < 1 || v[3] > 4096) {
      return Invalid("",
                     "create_tir_paged_kv_cache: expected 1 <= max_batch_size <= 1024, 1 <= max_total_seq_len <= 1048576, "
                     "prefill_chunk_size >= 1 and 1 <= page_size <= 4096");
    }
    if (v[4] != 0) {
      return Error{ErrorCode::kUnsupported, "",
                   "create_tir_paged_kv_cache: the reference KV cache has no sliding window"};
    }
    return std::vector<Value>{ObjectRef(std::make_shared<KvCache>(c, v[1], v[3], v[0]))};
  }

  static Result<std::vector<Value>> Audio(const Config& c, Args args) {
    ArgReader r("audio_embed", args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    auto pcm = r.Tensor(0, DlFloat32(), {-1});
    MLC_RETURN_IF_ERROR(pcm);
    auto w = WeightsArg(c, r, 1);
    MLC_RETURN_IF_ERROR(w);
    if (pcm->Elements() < 1) return Invalid("", "audio_embed: expected at least one sample");
    int64_t rows = 0;
    auto out = AudioAdapter(c, *w, std::span<const float>(pcm->data<float>(), static_cast<size_t>(pcm->Elements())), &rows);
    return std::vector<Value>{FloatTensor(out, {rows, c.hidden_size})};
  }

  static Result<std::vector<Value>> Image(const Config& c, Args args) {
    ArgReader r("image_embed", args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    const NDArray* px = std::get_if<NDArray>(&args[0]);
    bool wide = px && px->defined() && SameDtype(px->dtype(), DlUInt32());
    auto pixels = r.Tensor(0, wide ? DlUInt32() : DlUInt8(), {1, c.image_size, c.image_size, 3});
    MLC_RETURN_IF_ERROR(pixels);
    auto w = WeightsArg(c, r, 1);
    MLC_RETURN_IF_ERROR(w);
    std::vector<uint32_t> values(static_cast<size_t>(pixels->Elements()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = wide ? pixels->data<uint32_t>()[i] : pixels->data<uint8_t>()[i];
      if (values[i] > 255) return Invalid("", "image_embed: pixel values must be 0..255");
    }
    auto out = ImageAdapter(c, *w, values);
    return std::vector<Value>{FloatTensor(out, {c.num_patches(), c.hidden_size})};
  }

  Config c_;
};

}  // namespace
}  // namespace reference

Result<std::unique_ptr<ModelLibrary>> OpenReferenceLibrary(const std::string& dir) {
  auto chat = ReadChatConfig(JoinPath(dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(chat);
  auto config = reference::ParseConfig(chat->model_config);
  MLC_RETURN_IF_ERROR(config);
  std::string meta_path = JoinPath(dir, kReferenceLibraryFile);
  auto meta = ReadJsonFile(meta_path, {}, dir);
  MLC_RETURN_IF_ERROR(meta);
  Errors errors;
  FieldChecker check(&errors);
  LibraryMetadata metadata;
  std::vector<std::string> functions;
  if (check.Object(*meta, "") &&
      check.Keys(*meta, "", {"model_type", "kv_state_kind", "functions", "params", "artifact"},
                 {"model_type", "functions", "params"})) {
    const Json& m = *meta;
    if (m["model_type"] != kReferenceModelType) {
      check.Fail("/model_type", std::string("expected \"") + kReferenceModelType + "\"");
    }
    if (m.contains("kv_state_kind")) {
      if (auto k = check.String(m["kv_state_kind"], "/kv_state_kind")) metadata.kv_state_kind = *k;
    }
    metadata.model_type = kReferenceModelType;
    if (!m["functions"].is_array()) check.Fail("/functions", "expected an array of names");
    for (size_t i = 0; m["functions"].is_array() && i < m["functions"].size(); ++i) {
      std::string p = PointerAppend("/functions", i);
      auto name = check.String(m["functions"][i], p);
      if (name && !reference::Library::Known(*name)) {
        check.Fail(p, "the reference runtime implements no function \"" + *name + "\"");
      } else if (name) {
        functions.push_back(*name);
      }
    }
    if (auto params = ParseParamSpecs(m["params"], "/params")) {
      metadata.params = std::move(*params);
    } else {
      for (const Error& e : params.errors()) errors.push_back(e);
    }
    if (m.contains("artifact")) metadata.artifact = m["artifact"];
  }
  if (!errors.empty()) {
    return InDocument(std::move(errors), meta_path);
  }
  std::unique_ptr<ModelLibrary> lib =
      std::make_unique<reference::Library>(*config, std::move(metadata), functions);
  return lib;
}

namespace {

// A package holding reference-lib.json runs on the reference runtime (OpenPackageLibrary).
[[maybe_unused]] const bool kRegistered = (RegisterLibraryOpener(kReferenceLibraryFile, &OpenReferenceLibrary), true);

}  // namespace

}  // namespace mlc
