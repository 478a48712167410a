// A model library as the native frontend sees it: named functions taking and returning tensors,
// integers, shape tuples and opaque objects (the KV cache, the parameters); its metadata; binding
// the contract's roles and adapters to its functions before any call; and the parameters it
// takes, mapped from the package's tensor-cache.json shards.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "mlc_manifest/bind.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/tensor.h"

namespace mlc {

// ---- Values and functions ----

// An opaque value a library function returns (the KV cache, the parameters), held by ObjectRef:
// shared, it lives as long as the last reference.
class RuntimeObject {
 public:
  virtual ~RuntimeObject() = default;
  virtual std::string TypeName() const = 0;
};

// The KV cache (or hybrid state) a library creates.
class KvState : public RuntimeObject {
 public:
  virtual int64_t TotalLength() const = 0;  // positions held
};

// A KV cache holding several sequences in pages (MLC's paged KV cache and its
// kv_state_add_sequence / remove / fork / begin_forward / end_forward builtins). Between
// BeginForward and EndForward a prefill call runs the named sequences with their new positions
// laid end to end (total_len = the sum of lengths) and returns the logits of each sequence's last
// position, [1, n_seq, vocab]; decode_tokens [batch_size, 1] returns [batch_size, 1, vocab].
// Without BeginForward a call runs the only sequence (added as id 0 on first use), as a
// one-sequence cache does.
class PagedKvState : public KvState {
 public:
  virtual Status AddSequence(int64_t seq_id) = 0;
  virtual Status RemoveSequence(int64_t seq_id) = 0;
  // The child starts as a copy of the parent's positions.
  virtual Status ForkSequence(int64_t parent_id, int64_t child_id) = 0;
  // Fails (changing nothing) for an unknown or repeated id, or when the pages cannot hold them.
  virtual Status BeginForward(std::span<const int64_t> seq_ids,
                              std::span<const int64_t> append_lengths) = 0;
  virtual void EndForward() = 0;
  virtual Result<int64_t> SequenceLength(int64_t seq_id) const = 0;
  virtual int64_t PageSize() const = 0;
  virtual int64_t FreePages() const = 0;
  virtual int64_t TotalPages() const = 0;

  // Page sharing, for the engine's prefix cache: a full page (page_size positions, written once
  // and never again) may be held by several sequences and by the cache itself, each holder
  // counted; it goes back to the pool when the last one lets go. Caches without it say false and
  // refuse the three calls below.
  virtual bool SharesPages() const { return false; }
  // One more hold on page `index` of seq_id, which must be full; returns the page's id.
  virtual Result<int32_t> RetainPage(int64_t seq_id, int64_t index) {
    (void)seq_id, (void)index;
    return Error{ErrorCode::kUnsupported, "", TypeName() + ": no page sharing"};
  }
  // Lets go of a hold RetainPage took.
  virtual void ReleasePage(int32_t page) { (void)page; }
  // Adds an empty sequence that starts with these full pages (each held once more): its length
  // is pages.size() x PageSize(), and its next position goes to a page of its own.
  virtual Status AddSequenceWithPages(int64_t seq_id, std::span<const int32_t> pages) {
    (void)seq_id, (void)pages;
    return Error{ErrorCode::kUnsupported, "", TypeName() + ": no page sharing"};
  }
};

// The parameters, in the order the library asked for them.
class ParameterSet : public RuntimeObject {
 public:
  std::string TypeName() const override { return "ParameterSet"; }
  std::vector<std::string> names;
  std::vector<NDArray> tensors;
  uint64_t mapped_bytes = 0;   // shard bytes mapped
  uint64_t widened_bytes = 0;  // bytes of float32 produced from bf16 records
};

struct ShapeTuple {
  std::vector<int64_t> dims;
};

using ObjectRef = std::shared_ptr<RuntimeObject>;
using Value = std::variant<std::monostate, int64_t, double, ShapeTuple, NDArray, ObjectRef>;
const char* ValueTypeName(const Value& value);

// A library function: arguments in, results out (functions returning (logits, kv) return two).
using PackedFunction = std::function<Result<std::vector<Value>>(std::span<const Value> args)>;

// What a library says about itself (an MLC library's _metadata).
struct LibraryMetadata {
  std::string model_type;
  std::string kv_state_kind = "kv_cache";
  std::vector<ParamSpec> params;  // the order parameters are passed in
  // > 0 when some of the library's layers attend to the last this-many positions and the others to
  // all of them (Gemma 2, 3, 4): the chat config's sliding_window_size then names those layers'
  // window (MLC's gen_config copies it there), not a KV cache that slides for every layer.
  int64_t layer_sliding_window = 0;
  // _metadata.artifact, the compiled program the library carries, if any: typed when the library
  // makes it itself (the built-in CPU program), else the JSON document it was given (a
  // reference-lib.json, a C API metadata_json), parsed when a package is bound to it.
  std::optional<CompiledProgram> program;
  std::optional<Json> artifact;
};

// A loaded model library. Whoever opens it owns it (std::unique_ptr); every PackedFunction
// pointer it hands out, and so every BoundModel, Session and LoadedModel built on it, is valid
// only while the library lives. Functions may be called from one thread at a time per KV state.
class ModelLibrary {
 public:
  virtual ~ModelLibrary() = default;
  // nullptr when the library does not export the name.
  virtual const PackedFunction* GetFunction(const std::string& name) const = 0;
  virtual std::vector<std::string> FunctionNames() const = 0;
  virtual const LibraryMetadata& Metadata() const = 0;
};

// ---- Binding roles to functions ----

// The bound contract with each role's function. The function pointers are borrowed from the
// ModelLibrary it was bound against, which must outlive this value and its copies.
// The library function the embeddings call (MLC LLM's name): the prefill role's arguments, and it
// returns (every position's final-normed hidden state [1, total_len, hidden], kv).
inline constexpr char kHiddenStatesFunction[] = "prefill_to_last_hidden_states";

struct BoundModel {
  BoundContract contract;
  bool legacy = false;  // no manifest: embed/prefill/decode as MLC libraries always worked
  std::string note;     // how it was bound, for humans
  const PackedFunction* embed = nullptr;
  const PackedFunction* create_kv_cache = nullptr;
  const PackedFunction* prefill = nullptr;
  const PackedFunction* decode = nullptr;
  const PackedFunction* audio_adapter = nullptr;
  const PackedFunction* image_adapter = nullptr;
  const PackedFunction* hidden_states = nullptr;  // kHiddenStatesFunction; null: no embeddings
};

// The contract for a package without mlc-model-manifest.json: the embed pair over the library's
// embed / prefill / decode and create_tir_paged_kv_cache (or create_flashinfer_paged_kv_cache),
// text only.
// (library may be null: planning without a runtime assumes create_tir_paged_kv_cache).
BoundContract LegacyContract(const ModelLibrary* library);

// The contract of a package folder without a library: the legacy contract when it has no
// manifest (*legacy set), else its manifest bound to the compiled-program document at
// program_path (a usage error when none is given).
Result<BoundContract> BindPackageFolder(const std::string& dir, const std::string& program_path,
                                        const std::string& task, bool* legacy);

// With DIR/mlc-model-manifest.json: parses it (a malformed one is an error, never a fallback),
// takes the compiled program from `program` or else the library's _metadata.artifact, binds them
// (SPEC 5, with the weights' parameter_schema_id when tensor-cache.json is readable) and resolves
// every export and adapter function; each missing one is an error naming it. Without a manifest:
// LegacyContract, with a note saying so. No function is called.
Result<BoundModel> BindModel(const std::string& package_dir, const ModelLibrary& library,
                             const std::optional<CompiledProgram>& program = std::nullopt);

// ---- Parameters ----

// Maps the shards of DIR/tensor-cache.json and returns the parameters in `order` (the library's
// metadata), checking each record's shape and dtype; "f32-to-bf16" float32 records are widened
// from bfloat16, raw records are views into the mapping. The set is shared: the mapping stays
// while any of its tensors (or the set) is referenced.
Result<std::shared_ptr<ParameterSet>> LoadParameters(const std::string& package_dir,
                                                     const std::vector<ParamSpec>& order);

// ---- Choosing a library for a package ----

// Opens the library of a package folder.
using LibraryOpener = Result<std::unique_ptr<ModelLibrary>> (*)(const std::string& package_dir);

// A kind of library a package folder names by a file in it (the reference runtime's
// reference-lib.json), registered by the target that implements it when that target is linked
// in. OpenPackageLibrary (cpu_model.h) tries them in the order registered before the CPU
// program. Thread-safe; the opener must live as long as the program.
void RegisterLibraryOpener(const std::string& marker_file, LibraryOpener open);
// The opener whose marker file the folder holds, or nullptr.
LibraryOpener FindLibraryOpener(const std::string& package_dir);

}  // namespace mlc
