// The CPU program as a ModelLibrary: embed, prefill, decode and create_tir_paged_kv_cache with
// the argument shapes MLC libraries use (SPEC 9), its metadata (the converter's parameter list
// and the compiled-program document as _metadata.artifact), and the choice of library for a
// package folder (reference model or CPU program).
#include <cstring>
#include <mutex>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "runtime/cpu/model.h"
#include "runtime/function_table.h"

namespace mlc {
namespace cpu {
namespace {

class Library : public FunctionTableLibrary {
 public:
  Library(ModelConfig config, LibraryMetadata metadata)
      : FunctionTableLibrary(std::move(metadata)), c_(std::move(config)) {
    functions_["embed"] = [this](Args a) { return Embed(a); };
    functions_["prefill"] = [this](Args a) { return Step(a, "prefill"); };
    functions_["decode"] = [this](Args a) { return Step(a, "decode"); };
    functions_["create_tir_paged_kv_cache"] = [this](Args a) { return CreateKv(a); };
  }

 private:
  // The bound weights of a parameter set, kept while the set is the last one seen.
  Result<std::shared_ptr<const ModelWeights>> Weights(const ArgReader& r, size_t i) {
    auto params = r.Object<ParameterSet>(i, "a parameter set");
    MLC_RETURN_IF_ERROR(params);
    std::lock_guard<std::mutex> lock(mu_);
    if (bound_ && bound_for_.lock() == *params) return bound_;
    auto w = BindWeights(c_, metadata_.params, **params);
    MLC_RETURN_IF_ERROR(w);
    bound_ = std::make_shared<const ModelWeights>(std::move(*w));
    bound_for_ = *params;
    return bound_;
  }

  Result<std::vector<Value>> Embed(Args args) {
    ArgReader r("embed", args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    auto ids = r.Tensor(0, DlInt32(), {-1});
    MLC_RETURN_IF_ERROR(ids);
    auto w = Weights(r, 1);
    MLC_RETURN_IF_ERROR(w);
    NDArray out = NDArray::Empty({ids->Elements(), c_.hidden_size}, DlFloat32());
    std::span<const int32_t> span(ids->data<int32_t>(), static_cast<size_t>(ids->Elements()));
    MLC_RETURN_IF_ERROR(EmbedTokens(c_, **w, span, out.data<float>()));
    return std::vector<Value>{out};
  }

  // prefill (embeddings [1, total_len, hidden]: the sequences begin_forward named, laid end to
  // end) -> (logits [1, sequences, vocab], kv); decode ([1, 1, hidden]) -> ([1, 1, vocab], kv).
  Result<std::vector<Value>> Step(Args args, const std::string& fn) {
    ArgReader r(fn, args);
    MLC_RETURN_IF_ERROR(r.Count(3));
    auto e = r.Tensor(0, DlFloat32(), {1, fn == "decode" ? 1 : -1, c_.hidden_size});
    MLC_RETURN_IF_ERROR(e);
    auto kv = r.Object<PagedKvCache>(1, "a cpu.PagedKvCache");
    MLC_RETURN_IF_ERROR(kv);
    auto w = Weights(r, 2);
    MLC_RETURN_IF_ERROR(w);
    auto logits = Forward(c_, **w, **kv, e->data<float>(), e->shape()[1], fn);
    MLC_RETURN_IF_ERROR(logits);
    const int64_t sequences = static_cast<int64_t>(logits->size()) / c_.vocab_size;
    NDArray out = NDArray::Empty({1, sequences, c_.vocab_size}, DlFloat32());
    std::memcpy(out.data<float>(), logits->data(), logits->size() * sizeof(float));
    return std::vector<Value>{out, args[1]};
  }

  // (max_batch_size, max_total_seq_len, prefill_chunk_size, page_size, support_sliding_window)
  Result<std::vector<Value>> CreateKv(Args args) {
    const std::string fn = "create_tir_paged_kv_cache";
    ArgReader r(fn, args);
    MLC_RETURN_IF_ERROR(r.Count(5));
    int64_t v[5];
    for (size_t i = 0; i < 5; ++i) {
      auto x = r.Integer(i);
      MLC_RETURN_IF_ERROR(x);
      v[i] = *x;
    }
    if (v[0] < 1 || v[0] > 256 || v[1] < 1 || v[1] > (int64_t{1} << 24) || v[2] < 1 ||
        v[2] > (int64_t{1} << 20) || v[3] < 1 || v[3] > 4096 || (v[4] != 0 && v[4] != 1)) {
      return Invalid("", fn + ": expected 1 <= max_batch_size <= 256, 1 <= max_total_seq_len <= 2^24, "
                         "1 <= prefill_chunk_size <= 2^20, 1 <= page_size <= 4096 and "
                         "support_sliding_window 0 or 1");
    }
    KvCacheShape shape;
    shape.num_layers = c_.num_layers;
    shape.num_kv_heads = c_.num_kv_heads;
    shape.head_dim = c_.head_dim;
    shape.max_batch_size = v[0];
    shape.max_total_seq_len = v[1];
    shape.prefill_chunk_size = v[2];
    shape.page_size = v[3];
    shape.sliding = v[4] == 1;
    shape.sliding_window = v[1];
    shape.attention_sink = shape.sliding ? std::max<int64_t>(0, c_.attention_sink_size) : 0;
    return std::vector<Value>{ObjectRef(std::make_shared<PagedKvCache>(shape))};
  }

  ModelConfig c_;
  std::mutex mu_;
  std::shared_ptr<const ModelWeights> bound_;
  std::weak_ptr<ParameterSet> bound_for_;
};

}  // namespace
}  // namespace cpu

Result<CompiledProgram> CpuCompiledProgram(const ChatConfig& config) {
  auto params = CpuParamSpecs(config);
  MLC_RETURN_IF_ERROR(params);
  Program p;
  p.kind = "token_generation";
  p.exports = {{"embed_tokens", "embed"},
               {"prefill_embeds", "prefill"},
               {"decode_embeds", "decode"},
               {"create_kv_cache", "create_tir_paged_kv_cache"}};
  return AssembleCompiledProgram(ProgramParts{cpu::TextTasks(), {{"generation", p}}, *params, {}, false},
                                 &config);
}

Result<std::unique_ptr<ModelLibrary>> OpenCpuLibrary(const std::string& package_dir) {
  auto chat = ReadChatConfig(JoinPath(package_dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(chat);
  auto config = cpu::ParseModelConfig(*chat);
  MLC_RETURN_IF_ERROR(config);
  auto program = CpuCompiledProgram(*chat);
  MLC_RETURN_IF_ERROR(program);
  LibraryMetadata metadata;
  metadata.model_type = config->model_type;
  metadata.params = cpu::ParamSpecs(*config);
  metadata.program = std::move(*program);
  std::unique_ptr<ModelLibrary> lib =
      std::make_unique<cpu::Library>(std::move(*config), std::move(metadata));
  return lib;
}

Result<std::unique_ptr<ModelLibrary>> OpenPackageLibrary(const std::string& package_dir) {
  if (LibraryOpener open = FindLibraryOpener(package_dir)) return open(package_dir);
  return OpenCpuLibrary(package_dir);
}

}  // namespace mlc
