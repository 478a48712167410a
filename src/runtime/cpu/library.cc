// The CPU program as a ModelLibrary: embed, prefill, decode and create_tir_paged_kv_cache with
// the argument shapes MLC libraries use (SPEC 9), its metadata (the converter's parameter list
// and the compiled-program document as _metadata.artifact), and the choice of library for a
// package folder (reference model or CPU program).
#include <cstring>
#include <mutex>

#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/presets.h"
#include "runtime/cpu/decoder.h"
#include "runtime/cpu/towers/tower.h"
#include "runtime/cpu/weights.h"
#include "runtime/function_table.h"

namespace mlc {
namespace cpu {
namespace {

// The family's program (SPEC 9): its pair and one adapter per tower.
Program ProgramOf(const ModelConfig& c) {
  Program p = TokenGenerationProgram(c.family->pair == GenerationPair::kTokens);
  if (!c.towers.empty()) {
    std::map<std::string, std::string> adapters;
    for (const auto& tower : c.towers) adapters[tower->adapter()] = tower->function();
    p.adapters = std::move(adapters);
  }
  return p;
}

// The weights of a parameter set: the decoder's and each tower's.
struct BoundModelWeights {
  ModelWeights decoder;
  std::vector<std::unique_ptr<BoundTower>> towers;
};

class Library : public FunctionTableLibrary {
 public:
  Library(ModelConfig config, LibraryMetadata metadata)
      : FunctionTableLibrary(std::move(metadata)), c_(std::move(config)) {
    for (const auto& [role, name] : ProgramOf(c_).exports) {
      if (role == "embed_tokens") functions_[name] = [this](Args a) { return Embed(a); };
      if (role == "create_kv_cache") functions_[name] = [this](Args a) { return CreateKv(a); };
      if (role == "prefill_embeds" || role == "prefill_tokens") {
        functions_[name] = [this, fn = name](Args a) { return Step(a, fn, false); };
        // The embeddings' call: the prefill's arguments, every row's final-normed hidden state.
        functions_[kHiddenStatesFunction] = [this](Args a) {
          return Step(a, kHiddenStatesFunction, false, ForwardOutput::kHiddenStates);
        };
      }
      if (role == "decode_embeds" || role == "decode_tokens") {
        functions_[name] = [this, fn = name](Args a) { return Step(a, fn, true); };
      }
    }
    for (size_t i = 0; i < c_.towers.size(); ++i) {
      const std::string fn = c_.towers[i]->function();
      functions_[fn] = [this, i, fn](Args a) { return RunTower(a, i, fn); };
    }
  }

 private:
  // The bound weights of a parameter set, kept while the set is the last one seen.
  Result<std::shared_ptr<const BoundModelWeights>> Weights(const ArgReader& r, size_t i) {
    auto params = r.Object<ParameterSet>(i, "a parameter set");
    MLC_RETURN_IF_ERROR(params);
    std::lock_guard<std::mutex> lock(mu_);
    if (bound_ && bound_for_.lock() == *params) return bound_;
    auto index = ParamIndex::Make(metadata_.params, **params);
    MLC_RETURN_IF_ERROR(index);
    auto w = BindWeights(c_, metadata_.params, **params);
    MLC_RETURN_IF_ERROR(w);
    auto bound = std::make_shared<BoundModelWeights>();
    bound->decoder = std::move(*w);
    for (const auto& tower : c_.towers) {
      auto t = tower->Bind(c_, *index);
      MLC_RETURN_IF_ERROR(t);
      bound->towers.push_back(std::move(*t));
    }
    bound_ = std::move(bound);
    bound_for_ = *params;
    return bound_;
  }

  // An adapter: (its canonical input, params) -> [rows, hidden] float32.
  Result<std::vector<Value>> RunTower(Args args, size_t i, const std::string& fn) {
    ArgReader r(fn, args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    const NDArray* input = std::get_if<NDArray>(&args[0]);
    if (!input) return Invalid("", fn + ": argument 0 must be a tensor, got " + ValueTypeName(args[0]));
    auto w = Weights(r, 1);
    MLC_RETURN_IF_ERROR(w);
    auto rows = (*w)->towers[i]->Embed(*input, fn);
    MLC_RETURN_IF_ERROR(rows);
    return std::vector<Value>{*rows};
  }

  Result<std::vector<Value>> Embed(Args args) {
    ArgReader r("embed", args);
    MLC_RETURN_IF_ERROR(r.Count(2));
    auto ids = r.Tensor(0, DlInt32(), {-1});
    MLC_RETURN_IF_ERROR(ids);
    auto w = Weights(r, 1);
    MLC_RETURN_IF_ERROR(w);
    NDArray out = NDArray::Empty({ids->Elements(), c_.embed_width()}, DlFloat32());
    std::span<const int32_t> span(ids->data<int32_t>(), static_cast<size_t>(ids->Elements()));
    MLC_RETURN_IF_ERROR(EmbedTokens(c_, (*w)->decoder, span, out.data<float>()));
    return std::vector<Value>{out};
  }

  // The embeddings pair: prefill (embeddings [1, total_len, width]: the sequences begin_forward
  // named, laid end to end) -> (logits [1, sequences, vocab], kv); decode ([1, 1, width]) ->
  // ([1, 1, vocab], kv). The token pair: prefill_tokens (embeddings, token ids [1, total_len],
  // modality ids [1, total_len]); decode_tokens (token ids [batch, 1], embedded here).
  // prefill_to_last_hidden_states takes the prefill's arguments and returns (hidden states
  // [1, total_len, hidden], kv).
  Result<std::vector<Value>> Step(Args args, const std::string& fn, bool decode,
                                  ForwardOutput output = ForwardOutput::kLastLogits) {
    const bool tokens = c_.family->pair == GenerationPair::kTokens;
    const size_t inputs = tokens ? (decode ? 1 : 3) : 1;
    ArgReader r(fn, args);
    MLC_RETURN_IF_ERROR(r.Count(inputs + 2));
    auto first = tokens && decode ? r.Tensor(0, DlInt32(), {-1, 1})
                                  : r.Tensor(0, DlFloat32(), {1, decode ? 1 : -1, c_.embed_width()});
    MLC_RETURN_IF_ERROR(first);
    std::vector<NDArray> ids;  // prefill_tokens: token ids, modality ids
    for (size_t i = 1; i < inputs; ++i) {
      auto t = r.Tensor(i, DlInt32(), {1, first->shape()[1]});
      MLC_RETURN_IF_ERROR(t);
      ids.push_back(*t);
    }
    auto kv = r.Object<PagedKvCache>(inputs, "a cpu.PagedKvCache");
    MLC_RETURN_IF_ERROR(kv);
    auto w = Weights(r, inputs + 1);
    MLC_RETURN_IF_ERROR(w);
    NDArray embeds = *first;
    RowTokens rows;
    auto span_of = [](const NDArray& t) {
      return std::span<const int32_t>(t.data<int32_t>(), static_cast<size_t>(t.Elements()));
    };
    if (tokens && decode) {  // token ids [batch, 1]: their embeddings
      embeds = NDArray::Empty({first->Elements(), c_.embed_width()}, DlFloat32());
      rows.ids = span_of(*first);
      MLC_RETURN_IF_ERROR(EmbedTokens(c_, (*w)->decoder, rows.ids, embeds.data<float>()));
    } else if (tokens) {
      rows.ids = span_of(ids[0]);
      rows.modality = span_of(ids[1]);
    }
    const int64_t n = embeds.Elements() / c_.embed_width();
    auto logits = Forward(c_, (*w)->decoder, **kv, embeds.data<float>(), n, fn, rows, output);
    MLC_RETURN_IF_ERROR(logits);
    if (output == ForwardOutput::kHiddenStates) {
      auto held = std::make_shared<std::vector<float>>(std::move(*logits));
      NDArray hidden = NDArray::View(held, held->data(), {1, n, c_.hidden_size}, DlFloat32());
      return std::vector<Value>{hidden, args[inputs]};
    }
    const int64_t sequences = static_cast<int64_t>(logits->size()) / c_.vocab_size;
    // The logits tensor owns Forward's vector (no zero-filled copy of vocab_size floats a step).
    std::shared_ptr<std::vector<float>> held(new std::vector<float>(std::move(*logits)), [](std::vector<float>* v) {
      RecycleLogitsVector(std::move(*v));
      delete v;
    });
    std::vector<int64_t> shape = tokens && decode ? std::vector<int64_t>{sequences, 1, c_.vocab_size}
                                                  : std::vector<int64_t>{1, sequences, c_.vocab_size};
    NDArray out = NDArray::View(held, held->data(), std::move(shape), DlFloat32());
    return std::vector<Value>{out, args[inputs]};
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
    shape.layers = KvPlan(c_);
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
  std::shared_ptr<const BoundModelWeights> bound_;
  std::weak_ptr<ParameterSet> bound_for_;
};

}  // namespace
}  // namespace cpu

namespace {

// The program document of a parsed config (SPEC 9).
Result<CompiledProgram> ProgramDocument(const ChatConfig& config, const cpu::ModelConfig& c) {
  return AssembleCompiledProgram(ProgramParts{cpu::TasksOf(c), {{"generation", cpu::ProgramOf(c)}},
                                              cpu::ParamSpecs(c), {}, false},
                                 &config);
}

}  // namespace

Status CheckCpuRuntimeConfig(const ChatConfig& config) {
  auto c = cpu::ParseModelConfig(config);
  MLC_RETURN_IF_ERROR(c);
  return Status::Ok();
}

Status CheckPackageRuntimeConfig(const std::string& package_dir, const ChatConfig& config) {
  if (FindLibraryOpener(package_dir)) return Status::Ok();
  return CheckCpuRuntimeConfig(config);
}

Result<CompiledProgram> CpuCompiledProgram(const ChatConfig& config) {
  auto c = cpu::ParseModelConfig(config);
  MLC_RETURN_IF_ERROR(c);
  return ProgramDocument(config, *c);
}

Result<std::unique_ptr<ModelLibrary>> OpenCpuLibrary(const ChatConfig& chat) {
  auto config = cpu::ParseModelConfig(chat);
  MLC_RETURN_IF_ERROR(config);
  auto program = ProgramDocument(chat, *config);
  MLC_RETURN_IF_ERROR(program);
  LibraryMetadata metadata;
  metadata.model_type = config->model_type;
  metadata.params = cpu::ParamSpecs(*config);
  metadata.layer_sliding_window = config->layer_sliding_window;
  metadata.program = std::move(*program);
  std::unique_ptr<ModelLibrary> lib =
      std::make_unique<cpu::Library>(std::move(*config), std::move(metadata));
  return lib;
}

Result<std::unique_ptr<ModelLibrary>> OpenCpuLibrary(const std::string& package_dir) {
  auto chat = ReadChatConfig(JoinPath(package_dir, kChatConfigFileName));
  MLC_RETURN_IF_ERROR(chat);
  return OpenCpuLibrary(*chat);
}

Result<std::unique_ptr<ModelLibrary>> OpenPackageLibrary(const std::string& package_dir,
                                                         const ChatConfig& config) {
  if (LibraryOpener open = FindLibraryOpener(package_dir)) return open(package_dir);
  return OpenCpuLibrary(config);
}

Result<std::unique_ptr<ModelLibrary>> OpenPackageLibrary(const std::string& package_dir) {
  if (LibraryOpener open = FindLibraryOpener(package_dir)) return open(package_dir);
  return OpenCpuLibrary(package_dir);
}

}  // namespace mlc
