// Explaining mismatches: parameter lists compared by name (renames matched by shape and dtype,
// the likely cause from the dtypes, shapes and names), JSON diffs of normalized tasks, and the
// earlier drafts of the documents with their rewrite.
#include "mlc_manifest/explain.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/presets.h"
#include "package/rename_pairs.h"

namespace mlc {
namespace {

using Dim = std::variant<int64_t, std::string>;

std::string DimText(const Dim& d) {
  return std::holds_alternative<int64_t>(d) ? std::to_string(std::get<int64_t>(d)) : std::get<std::string>(d);
}

std::string ShapeText(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + DimText(shape[i]);
  return s + "]";
}

std::string SpecText(const ParamSpec& p) { return ShapeText(p.shape) + " " + p.dtype; }

OrderedJson ShapeJson(const std::vector<Dim>& shape) {
  OrderedJson j = OrderedJson::array();
  for (const Dim& d : shape) {
    if (std::holds_alternative<int64_t>(d)) {
      j.push_back(std::get<int64_t>(d));
    } else {
      j.push_back(std::get<std::string>(d));
    }
  }
  return j;
}

OrderedJson SpecJson(const ParamSpec& p) {
  return {{"name", p.name}, {"shape", ShapeJson(p.shape)}, {"dtype", p.dtype}};
}

// A dimension as an integer when it is one or resolves from the config.
std::optional<int64_t> Resolve(const Dim& d, const ChatConfig* config) {
  if (std::holds_alternative<int64_t>(d)) return std::get<int64_t>(d);
  if (config) return config->Dimension(std::get<std::string>(d));
  return std::nullopt;
}

bool SameShape(const std::vector<Dim>& a, const std::vector<Dim>& b, const ChatConfig* config) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    std::optional<int64_t> x = Resolve(a[i], config), y = Resolve(b[i], config);
    if (x && y && *x != *y) return false;
    if (!x && !y && DimText(a[i]) != DimText(b[i])) return false;
  }
  return true;
}

bool IsFloat(const std::string& dtype) {
  return dtype == "float16" || dtype == "float32" || dtype == "bfloat16" || dtype == "float64";
}

// The likely causes, from what differs: dtypes (another quantization), shapes (another model
// size), names (another converter version or quantization scheme), parameters on one side only.
std::vector<std::string> Causes(const ParamDiff& d) {
  std::vector<std::string> out;
  std::map<std::pair<std::string, std::string>, int> dtype_pairs;
  int shapes = 0;
  for (const ParamChange& c : d.changed) {
    if (c.dtype_differs) ++dtype_pairs[{c.a.dtype, c.b.dtype}];
    if (c.shape_differs) ++shapes;
  }
  if (!dtype_pairs.empty()) {
    std::string pairs;
    bool f16_f32 = false;
    for (const auto& [p, n] : dtype_pairs) {
      pairs += (pairs.empty() ? "" : ", ") + p.first + " where the other has " + p.second + " (" +
               std::to_string(n) + ")";
      f16_f32 |= IsFloat(p.first) && IsFloat(p.second);
    }
    out.push_back("another quantization: the dtypes differ (" + d.a_name + " has " + pairs + ")" +
                  (f16_f32 ? ", as between q4f16_1 and q4f32_1" : ""));
  }
  if (shapes) {
    out.push_back("another model size (or another model): " + std::to_string(shapes) +
                  " parameter" + (shapes == 1 ? "" : "s") + " of the same name have other shapes");
  }
  // Quantized names on one side where the other has plain weights: another quantization scheme.
  auto has_leaf = [](const std::vector<ParamSpec>& v, const std::string& leaf) {
    return std::any_of(v.begin(), v.end(), [&](const ParamSpec& p) {
      return p.name.size() > leaf.size() && p.name.compare(p.name.size() - leaf.size(), leaf.size(), leaf) == 0;
    });
  };
  bool quant_names = (has_leaf(d.only_a, ".q_weight") && has_leaf(d.only_b, ".weight")) ||
                     (has_leaf(d.only_b, ".q_weight") && has_leaf(d.only_a, ".weight"));
  if (quant_names) {
    out.push_back("another quantization scheme: quantized tensors (.q_weight, .q_scale) on one side "
                  "where the other has unquantized .weight tensors");
  }
  if (!d.renamed.empty()) {
    out.push_back("renamed tensors: another converter version (or an edited tensor cache): " +
                  std::to_string(d.renamed.size()) + " parameter" + (d.renamed.size() == 1 ? "" : "s") +
                  " with the same shape and dtype under another name");
  }
  if (!quant_names && (!d.only_a.empty() || !d.only_b.empty())) {
    out.push_back(std::string("parameters on one side only: ") +
                  (!d.only_a.empty() && !d.only_b.empty()
                       ? "another converter version or another model"
                       : "a model with more or fewer modules (another model or a converter version "
                         "that adds or drops tensors)"));
  }
  return out;
}

template <class T, class F>
void AppendFirst(std::vector<std::string>& lines, const std::vector<T>& items, size_t limit, F line,
                 const std::string& rest) {
  for (size_t i = 0; i < items.size() && i < limit; ++i) lines.push_back(line(items[i]));
  if (items.size() > limit) lines.push_back("... and " + std::to_string(items.size() - limit) + " more " + rest);
}

template <class T, class F>
OrderedJson FirstJson(const std::vector<T>& items, size_t limit, F to_json) {
  OrderedJson j = OrderedJson::array();
  for (size_t i = 0; i < items.size() && i < limit; ++i) j.push_back(to_json(items[i]));
  return j;
}

}  // namespace

ParamDiff DiffParams(const std::vector<ParamSpec>& a, const std::vector<ParamSpec>& b,
                     const ChatConfig* config, std::string a_name, std::string b_name) {
  ParamDiff d;
  d.a_name = std::move(a_name);
  d.b_name = std::move(b_name);
  std::map<std::string, const ParamSpec*> by_name_b;
  for (const ParamSpec& p : b) by_name_b.emplace(p.name, &p);
  std::set<std::string> names_a;
  std::vector<ParamSpec> only_a;
  for (const ParamSpec& p : a) {
    names_a.insert(p.name);
    auto it = by_name_b.find(p.name);
    if (it == by_name_b.end()) {
      only_a.push_back(p);
      continue;
    }
    ParamChange c{p, *it->second, !SameShape(p.shape, it->second->shape, config), p.dtype != it->second->dtype};
    if (c.shape_differs || c.dtype_differs) d.changed.push_back(std::move(c));
  }
  std::vector<ParamSpec> only_b;
  for (const ParamSpec& p : b) {
    if (!names_a.count(p.name)) only_b.push_back(p);
  }
  // A parameter only in a matched to one only in b of the same shape and dtype: a rename, the
  // names paired in sorted order so the pairing does not depend on the lists' order.
  auto by_name = [](const ParamSpec& x, const ParamSpec& y) { return x.name < y.name; };
  std::sort(only_a.begin(), only_a.end(), by_name);
  std::sort(only_b.begin(), only_b.end(), by_name);
  std::vector<bool> paired_a(only_a.size(), false), paired_b(only_b.size(), false);
  for (const auto& [i, j] : PairRenames(only_a, only_b, config)) {
    paired_a[i] = paired_b[j] = true;
    d.renamed.push_back({only_a[i], only_b[j]});
  }
  for (size_t i = 0; i < only_a.size(); ++i) {
    if (!paired_a[i]) d.only_a.push_back(only_a[i]);
  }
  for (size_t j = 0; j < only_b.size(); ++j) {
    if (!paired_b[j]) d.only_b.push_back(only_b[j]);
  }
  d.causes = Causes(d);
  return d;
}

std::string ParamDiff::Summary() const {
  if (empty()) return "the parameter lists agree";
  std::vector<std::string> parts;
  auto count = [&](size_t n, const std::string& what) {
    if (n) parts.push_back(std::to_string(n) + " " + what);
  };
  count(only_a.size(), "only in " + a_name);
  count(only_b.size(), "only in " + b_name);
  count(renamed.size(), "renamed");
  count(changed.size(), "with another shape or dtype");
  std::string s = "parameters differ (";
  for (size_t i = 0; i < parts.size(); ++i) s += (i ? ", " : "") + parts[i];
  s += ")";
  if (!causes.empty()) s += ": likely " + causes.front();
  return s;
}

std::vector<std::string> ParamDiff::Lines(size_t limit) const {
  std::vector<std::string> lines;
  AppendFirst(lines, only_a, limit,
              [&](const ParamSpec& p) { return "only in " + a_name + ": " + p.name + " " + SpecText(p); },
              "only in " + a_name);
  AppendFirst(lines, only_b, limit,
              [&](const ParamSpec& p) { return "only in " + b_name + ": " + p.name + " " + SpecText(p); },
              "only in " + b_name);
  AppendFirst(lines, renamed, limit,
              [&](const ParamRename& r) {
                return "renamed: " + r.a.name + " (" + a_name + ") is " + r.b.name + " (" + b_name + "), " +
                       SpecText(r.a);
              },
              "renamed");
  AppendFirst(lines, changed, limit,
              [&](const ParamChange& c) {
                return std::string(c.shape_differs && c.dtype_differs ? "shape and dtype"
                                   : c.shape_differs                  ? "shape"
                                                                      : "dtype") +
                       " differ: " + c.a.name + " " + SpecText(c.a) + " in " + a_name + ", " + SpecText(c.b) +
                       " in " + b_name;
              },
              "with another shape or dtype");
  for (const std::string& c : causes) lines.push_back("likely cause: " + c);
  return lines;
}

OrderedJson ParamDiff::ToJson(size_t limit) const {
  OrderedJson j;
  j["a"] = a_name;
  j["b"] = b_name;
  j["only_in_a"] = FirstJson(only_a, limit, SpecJson);
  j["only_in_a_count"] = only_a.size();
  j["only_in_b"] = FirstJson(only_b, limit, SpecJson);
  j["only_in_b_count"] = only_b.size();
  j["renamed"] = FirstJson(renamed, limit, [](const ParamRename& r) {
    return OrderedJson{{"a", r.a.name}, {"b", r.b.name}, {"shape", ShapeJson(r.a.shape)}, {"dtype", r.a.dtype}};
  });
  j["renamed_count"] = renamed.size();
  j["changed"] = FirstJson(changed, limit, [](const ParamChange& c) {
    return OrderedJson{{"name", c.a.name}, {"a", SpecJson(c.a)}, {"b", SpecJson(c.b)},
                       {"shape_differs", c.shape_differs}, {"dtype_differs", c.dtype_differs}};
  });
  j["changed_count"] = changed.size();
  j["causes"] = causes;
  return j;
}

std::optional<std::vector<ParamSpec>> MetadataParams(const Json& doc) {
  if (!doc.is_object() || !doc.contains("artifact") || !doc.contains("params")) return std::nullopt;
  Result<std::vector<ParamSpec>> specs = ParseParamSpecs(doc["params"], "/params");
  if (!specs) return std::nullopt;
  return *specs;
}

// ---- tasks ----

namespace {

void Diff(const OrderedJson& a, const OrderedJson& b, const std::string& path, size_t limit, OrderedJson& out) {
  if (out.size() >= limit || a == b) return;
  if (a.is_object() && b.is_object()) {
    std::set<std::string> keys;
    for (auto it = a.begin(); it != a.end(); ++it) keys.insert(it.key());
    for (auto it = b.begin(); it != b.end(); ++it) keys.insert(it.key());
    for (const std::string& k : keys) {
      std::string at = PointerAppend(path, k);
      bool in_a = a.contains(k), in_b = b.contains(k);
      if (in_a && in_b) {
        Diff(a[k], b[k], at, limit, out);
      } else if (out.size() < limit) {
        OrderedJson e{{"path", at}};
        if (in_a) e["a"] = a[k];
        if (in_b) e["b"] = b[k];
        out.push_back(std::move(e));
      }
    }
    return;
  }
  out.push_back({{"path", path}, {"a", a}, {"b", b}});
}

std::string SafeDump(const OrderedJson& v) {
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Tasks TextChatTasks() {
  Task t;
  t.executor = "generation";
  t.output = "text";
  t.inputs["text"] = TaskInput{std::string("tokenizer"), std::nullopt, std::nullopt};
  return Tasks{{"chat.completions", t}};
}

}  // namespace

OrderedJson JsonDiff(const OrderedJson& a, const OrderedJson& b, size_t limit) {
  OrderedJson out = OrderedJson::array();
  Diff(a, b, "", limit, out);
  return out;
}

std::optional<KnownTasks> FindKnownTasks(const std::string& id) {
  std::vector<KnownTasks> known;
  for (const std::string& name : PresetNames()) {
    if (Result<Tasks> t = PresetTasks(name)) known.push_back({"preset " + name, *t});
  }
  known.push_back({"the text-only chat task", TextChatTasks()});
  for (KnownTasks& k : known) {
    Result<std::string> kid = ComputeInterfaceId(k.tasks);
    if (kid && *kid == id) return std::move(k);
  }
  return std::nullopt;
}

// ---- explanations ----

Explanation ExplainParameterSchemaId(const std::string& id, const NamedParams& weights,
                                     const std::vector<NamedParams>& lists, const ChatConfig* config) {
  Explanation e;
  const NamedParams* against = nullptr;
  for (const NamedParams& l : lists) {
    Result<std::string> lid = ComputeParameterSchemaId(l.params);
    if (lid && *lid == id) {
      against = &l;
      break;
    }
  }
  bool same_id = against != nullptr;
  if (!against && !lists.empty()) against = &lists.front();
  if (!against) {
    e.lines.push_back("no parameter list to compare " + weights.name + " with: give --params FILE (the list "
                      "the program was built from) or a program whose _metadata has its params");
    e.data["note"] = e.lines.back();
    return e;
  }
  ParamDiff d = DiffParams(weights.params, against->params, config, weights.name, against->name);
  e.data["against"] = against->name;
  e.data["against_has_the_id"] = same_id;
  e.data["summary"] = d.Summary();
  e.data["diff"] = d.ToJson();
  if (!same_id) e.lines.push_back(against->name + " does not hash to " + id + " either; compared with it anyway");
  if (d.empty()) {
    e.lines.push_back(weights.name + " and " + against->name + " list the same parameters");
  } else {
    e.lines.push_back(d.Summary());
    for (const std::string& l : d.Lines()) e.lines.push_back(l);
  }
  return e;
}

Explanation ExplainInterfaceId(const std::string& id, const Tasks& tasks) {
  Explanation e;
  std::optional<KnownTasks> known = FindKnownTasks(id);
  if (!known) {
    e.lines.push_back("no known task set hashes to " + id + " (the presets and the text-only chat task): "
                      "compare the tasks of the two documents by hand");
    e.data["note"] = e.lines.back();
    return e;
  }
  OrderedJson diff = JsonDiff(TasksJson(tasks), TasksJson(known->tasks));
  e.data["against"] = known->name;
  e.data["diff"] = diff;
  e.lines.push_back(id + " is the id of " + known->name + "; the tasks differ from it at " +
                    std::to_string(diff.size()) + " field" + (diff.size() == 1 ? "" : "s") + ":");
  for (const auto& f : diff) {
    e.lines.push_back("  " + f["path"].get<std::string>() + ": " + (f.contains("a") ? SafeDump(f["a"]) : "(absent)") +
                      " here, " + (f.contains("b") ? SafeDump(f["b"]) : "(absent)") + " in " + known->name);
  }
  return e;
}

Explanation ExplainIdErrors(const Errors& errors, const ModelPackage& package, const CompiledProgram& program,
                            const IdEvidence& evidence) {
  Explanation out;
  auto has = [&](const std::string& path) {
    return std::any_of(errors.begin(), errors.end(), [&](const Error& e) { return e.path == path; });
  };
  auto add = [&](const std::string& key, const Explanation& e) {
    for (const std::string& l : e.lines) out.lines.push_back(key + ": " + l);
    out.data[key] = e.data;
  };
  if (has("/interface_id")) add("interface_id", ExplainInterfaceId(program.interface_id, package.tasks));
  if (has("/parameter_schema_id")) {
    if (evidence.weights) {
      add("parameter_schema_id",
          ExplainParameterSchemaId(program.parameter_schema_id, *evidence.weights, evidence.lists,
                                   evidence.config ? &*evidence.config : nullptr));
    } else {
      Explanation e;
      e.lines.push_back("the package's tensor cache is not readable: the parameters cannot be compared");
      e.data["note"] = e.lines.back();
      add("parameter_schema_id", e);
    }
  }
  return out;
}

// ---- earlier drafts ----

namespace {

constexpr const char* kDraftRole = "prefill_prompt";
constexpr const char* kDraftWeights = "ndarray-cache.json";

// Every object member named `key`, at any depth (bounded by the reader's depth limit).
void FindKey(const Json& v, const std::string& path, const std::string& key, std::vector<std::string>& out) {
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) {
      std::string at = PointerAppend(path, it.key());
      if (it.key() == key) out.push_back(at);
      FindKey(it.value(), at, key, out);
    }
  } else if (v.is_array()) {
    for (size_t i = 0; i < v.size(); ++i) FindKey(v[i], PointerAppend(path, i), key, out);
  }
}

}  // namespace

std::optional<EarlierDraft> DetectEarlierDraft(const Json& whole) {
  if (!whole.is_object()) return std::nullopt;
  const Json* doc = &whole;
  std::string base;
  if (DetectDocument(whole) == DocumentKind::kMetadata && whole["artifact"].is_object()) {
    doc = &whole["artifact"];
    base = "/artifact";
  }
  if (!doc->contains("schema") || !(*doc)["schema"].is_string()) return std::nullopt;
  const std::string schema = (*doc)["schema"].get<std::string>();
  if (schema != kModelPackageSchema && schema != kCompiledProgramSchema) return std::nullopt;
  EarlierDraft d;
  d.document = schema;
  bool only_weights = true;
  if (schema == kModelPackageSchema && doc->contains("weights") && (*doc)["weights"].is_object() &&
      (*doc)["weights"].contains("manifest") && (*doc)["weights"]["manifest"] == kDraftWeights) {
    d.changes.push_back({base + "/weights/manifest", "\"ndarray-cache.json\"", "\"tensor-cache.json\""});
  }
  std::vector<std::string> roles;
  FindKey(*doc, base, kDraftRole, roles);
  for (const std::string& at : roles) {
    only_weights = false;
    d.changes.push_back({at, "a single \"prefill_prompt\" role",
                         "the pairs prefill_tokens + decode_tokens or prefill_embeds + decode_embeds"});
  }
  if (d.changes.empty()) return std::nullopt;
  d.rewritable = schema == kModelPackageSchema && only_weights;
  return d;
}

std::string EarlierDraft::Message(const std::string& dir) const {
  std::string s = "an earlier draft of " + document + " (schema_version 1 as first shipped): ";
  for (size_t i = 0; i < changes.size(); ++i) {
    s += (i ? "; " : "") + changes[i].path + " is " + changes[i].draft + ", the current text has " +
         changes[i].current;
  }
  if (rewritable) return s + "; rewrite it with `mlc-manifest emit package " + dir + " --upgrade`";
  return s + (document == kModelPackageSchema
                  ? "; write the manifest again with `mlc-manifest emit package " + dir + " --force` and its tasks"
                  : "; compile the library again with a current MLC LLM (for a built-in CPU program: "
                    "`mlc-manifest emit program " + dir + " --target cpu -o FILE`)");
}

OrderedJson EarlierDraft::ToJson(const std::string& dir) const {
  OrderedJson j;
  j["document"] = document;
  OrderedJson list = OrderedJson::array();
  for (const DraftChange& c : changes) list.push_back({{"path", c.path}, {"draft", c.draft}, {"current", c.current}});
  j["changes"] = list;
  j["rewritable"] = rewritable;
  if (rewritable) j["command"] = "mlc-manifest emit package " + dir + " --upgrade";
  return j;
}

Result<Json> UpgradeEarlierDraft(const Json& doc) {
  std::optional<EarlierDraft> draft = DetectEarlierDraft(doc);
  if (!draft) return Invalid("", "not a known earlier draft of mlc.model-package: nothing to upgrade");
  if (!draft->rewritable) {
    return Invalid(draft->changes.front().path, "an earlier draft this rewrite cannot bring up to date: " +
                                                    draft->changes.front().draft);
  }
  Json out = doc;
  out["weights"]["manifest"] = kTensorCacheFileName;
  return out;
}

Status CheckUpgradedWeights(const std::string& dir, const Json& upgraded) {
  const Json* manifest = nullptr;
  if (upgraded.is_object() && upgraded.contains("weights") && upgraded["weights"].is_object() &&
      upgraded["weights"].contains("manifest") && upgraded["weights"]["manifest"].is_string()) {
    manifest = &upgraded["weights"]["manifest"];
  }
  if (!manifest) return Invalid("/weights/manifest", "expected the tensor cache's file name");
  const std::string path = JoinPath(dir, manifest->get<std::string>());
  if (DefaultEnv()->Stat(path, /*follow_symlinks=*/true).regular) return Status::Ok();
  return IoError(path, "missing: the upgraded manifest's /weights/manifest names it, and runtimes read "
                       "only that name (rename ndarray-cache.json to " + manifest->get<std::string>() +
                       " first, then upgrade)");
}

}  // namespace mlc
