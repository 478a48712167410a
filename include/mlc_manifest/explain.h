// Why a package does not match: the parameters behind two parameter_schema_ids (only on one
// side, renamed, another shape or dtype) with the likely cause in words, the task fields behind
// two interface_ids (a JSON diff of the normalized tasks), and the earlier drafts of the
// documents, recognised with what changed and the command that rewrites them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/package.h"

namespace mlc {

// ---- parameters ----

// One parameter present on both sides with another shape or dtype (shapes as written, symbolic
// dimensions by name).
struct ParamChange {
  ParamSpec a, b;
  bool shape_differs = false;
  bool dtype_differs = false;
};

// A parameter on one side matched, by shape and dtype, to one of another name on the other.
struct ParamRename {
  ParamSpec a, b;
};

struct ParamDiff {
  std::string a_name, b_name;     // what the two sides are ("tensor-cache.json", "--params ...")
  std::vector<ParamSpec> only_a;  // by name, not renamed
  std::vector<ParamSpec> only_b;
  std::vector<ParamRename> renamed;
  std::vector<ParamChange> changed;
  std::vector<std::string> causes;  // the likely causes in words, most telling first

  bool empty() const { return only_a.empty() && only_b.empty() && renamed.empty() && changed.empty(); }
  // "2 parameters differ: ..." on one line; the causes joined.
  std::string Summary() const;
  // One line per difference (the first `limit` of each kind, then a count of the rest).
  std::vector<std::string> Lines(size_t limit = 20) const;
  // The same as data: {a, b, only_in_a, only_in_b, renamed, changed, *_count, causes}.
  OrderedJson ToJson(size_t limit = 20) const;
};

// Compares two parameter lists by name. A symbolic dimension is resolved from `config` when it
// can be (may be null); one that cannot is taken to match any integer.
ParamDiff DiffParams(const std::vector<ParamSpec>& a, const std::vector<ParamSpec>& b,
                     const ChatConfig* config, std::string a_name, std::string b_name);

// A library's _metadata carries its parameter list beside "artifact" as "params" (MLC writes
// it): that list, or nullopt when the document has none or it is not a valid list.
std::optional<std::vector<ParamSpec>> MetadataParams(const Json& doc);

// ---- tasks ----

// The fields where two JSON values differ, each {"path": JSON Pointer, "a": ..., "b": ...} with
// "a" or "b" left out where that side has nothing; at most `limit` entries.
OrderedJson JsonDiff(const OrderedJson& a, const OrderedJson& b, size_t limit = 50);

// A tasks object we know whose interface_id is `id`: the presets and the text-only chat task.
// Its name ("preset gemma-3", "the text-only chat task") and tasks; nullopt when none hashes so.
struct KnownTasks {
  std::string name;
  Tasks tasks;
};
std::optional<KnownTasks> FindKnownTasks(const std::string& id);

// ---- explanations of id mismatches ----

// Lines for people and the same as data.
struct Explanation {
  std::vector<std::string> lines;
  OrderedJson data = OrderedJson::object();
};

struct NamedParams {
  std::string name;  // "tensor-cache.json", "the given parameter list", ...
  std::vector<ParamSpec> params;
};

// Why `weights` do not hash to `id` (the id the other side declares): their differences from the
// list among `lists` whose id is `id` (else the first list), with the likely cause; a note saying
// what to give when there is no list to compare with.
Explanation ExplainParameterSchemaId(const std::string& id, const NamedParams& weights,
                                     const std::vector<NamedParams>& lists, const ChatConfig* config);

// Why `tasks` do not hash to `id`: the fields that differ from the known tasks with that id (a
// JSON diff of the normalized tasks), or a note that no known task set has that id.
Explanation ExplainInterfaceId(const std::string& id, const Tasks& tasks);

// What there is to compare a package's ids with: its weights' parameter list, other parameter
// lists (the program's own, a given one, a built-in program's), its chat config.
struct IdEvidence {
  std::optional<NamedParams> weights;
  std::vector<NamedParams> lists;
  std::optional<ChatConfig> config;
};

// For the id errors among a failed Bind's (/interface_id, /parameter_schema_id): why the
// package's ids differ from the program's, each line prefixed with the id it is about and the
// data under that id's name. Empty when there is no id error.
Explanation ExplainIdErrors(const Errors& errors, const ModelPackage& package, const CompiledProgram& program,
                            const IdEvidence& evidence);

// ---- earlier drafts (schema_version 1 as first shipped) ----

struct DraftChange {
  std::string path;     // JSON Pointer in the document
  std::string draft;    // what the earlier draft has there
  std::string current;  // what the current text has
};

struct EarlierDraft {
  std::string document;  // "mlc.model-package" or "mlc.compiled-program"
  std::vector<DraftChange> changes;
  bool rewritable = false;  // every change is one `emit package DIR --upgrade` makes
  std::string Message(const std::string& dir) const;  // what changed and what to run
  OrderedJson ToJson(const std::string& dir) const;
};

// Recognises an earlier draft: a package whose weights.manifest is "ndarray-cache.json", a
// document declaring the single "prefill_prompt" role. nullopt for anything else.
std::optional<EarlierDraft> DetectEarlierDraft(const Json& doc);

// The package manifest rewritten to the current text, everything else kept; an error when the
// document is not an earlier draft this rewrite can bring up to date.
Result<Json> UpgradeEarlierDraft(const Json& doc);

// The tensor cache an upgraded manifest names (its weights.manifest) is a file in dir: kIo naming
// the missing file otherwise (the upgrade would point the manifest at nothing).
Status CheckUpgradedWeights(const std::string& dir, const Json& upgraded);

}  // namespace mlc
