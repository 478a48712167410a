// The JSON Schema subset of structured output compiled into JsonGrammar's nodes: type (one or
// several), properties, required, additionalProperties (boolean), enum, const, items,
// minItems/maxItems, minLength/maxLength, anyOf whose alternatives start differently, $ref into
// the schema ("#", "#/$defs/..", "#/definitions/.."); annotations are ignored. Any other keyword
// is kUnsupported at its JSON Pointer.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "mlc_manifest/json_grammar.h"

namespace mlc {

using Node = JsonGrammar::Node;
using Kind = JsonGrammar::Kind;

namespace {

constexpr size_t kMaxLiterals = 64;    // enum values (a 64-bit mask in the frame)
constexpr size_t kMaxProperties = 64;  // properties of one object (likewise)
constexpr int kMaxSchemaDepth = 64;    // nesting of the schema document the compiler follows

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title", "description", "$schema", "$id", "$comment",
                                          "default", "examples", "$defs", "definitions"};
  return k;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> k = {"type", "properties", "required", "additionalProperties",
                                          "enum", "const", "items", "minItems", "maxItems",
                                          "minLength", "maxLength", "anyOf", "$ref"};
  return k;
}

JsonGrammar::Node Of(JsonGrammar::Kind kind) {
  JsonGrammar::Node n;
  n.kind = kind;
  return n;
}

Error Unsupported(const std::string& at, const std::string& message) {
  return Error{ErrorCode::kUnsupported, at, message};
}

// "#/a/b" inside root, or nullptr.
const OrderedJson* Resolve(const OrderedJson& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') return nullptr;
  const OrderedJson* at = &root;
  size_t i = 1;
  while (i < ref.size()) {
    if (ref[i] != '/') return nullptr;
    size_t end = ref.find('/', i + 1);
    if (end == std::string::npos) end = ref.size();
    std::string token = ref.substr(i + 1, end - i - 1);
    std::string name;
    for (size_t k = 0; k < token.size(); ++k) {
      if (token[k] == '~' && k + 1 < token.size() && (token[k + 1] == '0' || token[k + 1] == '1')) {
        name.push_back(token[k + 1] == '0' ? '~' : '/');
        ++k;
      } else {
        name.push_back(token[k]);
      }
    }
    if (!at->is_object() || !at->contains(name)) return nullptr;
    at = &(*at)[name];
    i = end;
  }
  return at;
}

}  // namespace

// Builds the grammar's nodes from one schema document.
class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(const OrderedJson& root, JsonGrammar& g) : root_(root), g_(g) {}

  uint32_t Compile(const OrderedJson& s, const std::string& at, int depth);
  uint32_t AnyValue();
  // First bytes of every node, then the anyOf alternatives checked to start differently.
  void Finish();
  Errors errors;

 private:
  uint32_t Add(Node n) {
    g_.nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(g_.nodes_.size() - 1);
  }
  uint32_t Fail(Error e) {
    if (errors.empty()) errors.push_back(std::move(e));
    return Add(Node{});
  }
  uint32_t Ref(const std::string& ref, const std::string& at, int depth);
  uint32_t Typed(const OrderedJson& s, const std::string& type, const std::string& at, int depth);
  uint32_t Object(const OrderedJson& s, const std::string& at, int depth);
  uint32_t Array(const OrderedJson& s, const std::string& at, int depth);
  uint32_t String(const OrderedJson& s, const std::string& at);
  std::optional<int64_t> Count(const OrderedJson& s, const char* key, const std::string& at);

  const OrderedJson& root_;
  JsonGrammar& g_;
  std::map<std::string, uint32_t> refs_;
  std::optional<uint32_t> any_value_;
  std::map<uint32_t, std::string> choice_paths_;  // anyOf nodes -> their pointer
};

std::optional<int64_t> JsonSchemaCompiler::Count(const OrderedJson& s, const char* key,
                                                 const std::string& at) {
  if (!s.contains(key)) return std::nullopt;
  const OrderedJson& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > (int64_t{1} << 30)) {
    Fail(Invalid(PointerAppend(at, key), "expected a non-negative integer"));
    return std::nullopt;
  }
  return v.get<int64_t>();
}

uint32_t JsonSchemaCompiler::AnyValue() {
  if (any_value_) return *any_value_;
  uint32_t id = Add(Of(Kind::kChoice));
  any_value_ = id;
  Node object = Of(Kind::kAnyObject);
  Node key = Of(Kind::kString);
  key.max = g_.options_.max_string_length > 0 ? g_.options_.max_string_length : -1;
  Node string = key;
  object.children = {id, Add(std::move(key))};
  Node array = Of(Kind::kArray);
  array.children = {id};
  Node literals = Of(Kind::kLiterals);
  literals.literals = {"true", "false", "null"};
  std::vector<uint32_t> alts = {Add(std::move(object)), Add(std::move(array)), Add(std::move(string)),
                                Add(Of(Kind::kNumber)), Add(std::move(literals))};
  g_.nodes_[id].children = std::move(alts);
  return id;
}

uint32_t JsonSchemaCompiler::Ref(const std::string& ref, const std::string& at, int depth) {
  if (auto it = refs_.find(ref); it != refs_.end()) return it->second;
  const OrderedJson* target = Resolve(root_, ref);
  if (!target) {
    return Fail(Unsupported(at, "the $ref \"" + ref + "\" does not point into this schema "
                                "(supported: \"#\", \"#/$defs/NAME\", \"#/definitions/NAME\")"));
  }
  uint32_t id = Add(Node{});  // filled once the target is compiled; recursion refers to it
  refs_[ref] = id;
  uint32_t built = Compile(*target, ref.substr(1), depth + 1);
  if (built == id) return Fail(Unsupported(at, "a $ref that refers only to itself"));
  g_.nodes_[id] = g_.nodes_[built];
  return id;
}

uint32_t JsonSchemaCompiler::String(const OrderedJson& s, const std::string& at) {
  Node n = Of(Kind::kString);
  n.min = Count(s, "minLength", at).value_or(0);
  auto max = Count(s, "maxLength", at);
  n.max = max ? *max : (g_.options_.max_string_length > 0 ? g_.options_.max_string_length : -1);
  if (n.max >= 0 && n.min > n.max) return Fail(Invalid(at, "minLength is above maxLength"));
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Array(const OrderedJson& s, const std::string& at, int depth) {
  Node n = Of(Kind::kArray);
  n.min = Count(s, "minItems", at).value_or(0);
  n.max = Count(s, "maxItems", at).value_or(-1);
  if (n.max >= 0 && n.min > n.max) return Fail(Invalid(at, "minItems is above maxItems"));
  if (s.contains("items")) {
    if (s["items"].is_array()) {
      return Fail(Unsupported(PointerAppend(at, "items"), "the JSON Schema keyword \"items\" as an "
                                                          "array (tuple) is not supported"));
    }
    n.children = {Compile(s["items"], PointerAppend(at, "items"), depth + 1)};
  } else {
    n.children = {AnyValue()};
  }
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Object(const OrderedJson& s, const std::string& at, int depth) {
  bool closed = false;
  if (s.contains("additionalProperties")) {
    const OrderedJson& a = s["additionalProperties"];
    std::string where = PointerAppend(at, "additionalProperties");
    if (!a.is_boolean()) {
      return Fail(Unsupported(where, "the JSON Schema keyword \"additionalProperties\" is supported "
                                     "as true or false only"));
    }
    closed = !a.get<bool>();
  }
  if (!s.contains("properties") && !closed) {
    if (s.contains("required") && !s["required"].empty()) {
      return Fail(Unsupported(PointerAppend(at, "required"), "required needs properties"));
    }
    Node n = Of(Kind::kAnyObject);
    uint32_t key = String(OrderedJson::object(), at);
    n.children = {AnyValue(), key};
    return Add(std::move(n));
  }
  Node n = Of(Kind::kObject);
  if (s.contains("properties")) {
    const OrderedJson& props = s["properties"];
    std::string where = PointerAppend(at, "properties");
    if (!props.is_object()) return Fail(Invalid(where, "expected an object"));
    if (props.size() > kMaxProperties) {
      return Fail(Unsupported(where, "more than " + std::to_string(kMaxProperties) + " properties"));
    }
    for (auto it = props.begin(); it != props.end(); ++it) {
      JsonGrammar::Property p;
      p.key = OrderedJson(it.key()).dump();
      p.value = Compile(it.value(), PointerAppend(where, it.key()), depth + 1);
      n.properties.push_back(std::move(p));
    }
  }
  if (s.contains("required")) {
    const OrderedJson& req = s["required"];
    std::string where = PointerAppend(at, "required");
    if (!req.is_array()) return Fail(Invalid(where, "expected an array of property names"));
    for (size_t i = 0; i < req.size(); ++i) {
      bool found = false;
      for (JsonGrammar::Property& p : n.properties) {
        if (req[i].is_string() && p.key == OrderedJson(req[i]).dump()) p.required = found = true;
      }
      if (!found) {
        return Fail(Unsupported(PointerAppend(where, i),
                                "a required property must be one of properties"));
      }
    }
  }
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Typed(const OrderedJson& s, const std::string& type,
                                   const std::string& at, int depth) {
  if (type == "object") return Object(s, at, depth);
  if (type == "array") return Array(s, at, depth);
  if (type == "string") return String(s, at);
  if (type == "number" || type == "integer") {
    Node n = Of(Kind::kNumber);
    n.integer = type == "integer";
    return Add(std::move(n));
  }
  Node n = Of(Kind::kLiterals);
  if (type == "boolean") {
    n.literals = {"true", "false"};
  } else if (type == "null") {
    n.literals = {"null"};
  } else {
    return Fail(Unsupported(PointerAppend(at, "type"), "the type \"" + type + "\" is not a JSON "
                                                        "Schema type"));
  }
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Compile(const OrderedJson& s, const std::string& at, int depth) {
  if (depth > kMaxSchemaDepth) return Fail(Error{ErrorCode::kLimit, at, "the schema nests too deeply"});
  if (s.is_boolean() && s.get<bool>()) return AnyValue();
  if (!s.is_object()) return Fail(Invalid(at, "expected a schema object"));
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (!Keywords().count(it.key()) && !Annotations().count(it.key())) {
      return Fail(Unsupported(PointerAppend(at, it.key()),
                              "the JSON Schema keyword \"" + it.key() + "\" at " +
                                  PointerAppend(at, it.key()) + " is not supported"));
    }
  }
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return Fail(Invalid(PointerAppend(at, "$ref"), "expected a string"));
    return Ref(s["$ref"].get<std::string>(), PointerAppend(at, "$ref"), depth);
  }
  if (s.contains("const") || s.contains("enum")) {
    Node n = Of(Kind::kLiterals);
    if (s.contains("const")) {
      n.literals = {s["const"].dump()};
    } else {
      const OrderedJson& e = s["enum"];
      std::string where = PointerAppend(at, "enum");
      if (!e.is_array() || e.empty()) return Fail(Invalid(where, "expected a non-empty array"));
      if (e.size() > kMaxLiterals) {
        return Fail(Unsupported(where, "more than " + std::to_string(kMaxLiterals) + " enum values"));
      }
      for (const OrderedJson& v : e) n.literals.push_back(v.dump());
    }
    return Add(std::move(n));
  }
  std::vector<uint32_t> alts;
  if (s.contains("anyOf")) {
    const OrderedJson& any = s["anyOf"];
    std::string where = PointerAppend(at, "anyOf");
    if (!any.is_array() || any.empty()) return Fail(Invalid(where, "expected a non-empty array"));
    for (size_t i = 0; i < any.size(); ++i) alts.push_back(Compile(any[i], PointerAppend(where, i), depth + 1));
    Node n = Of(Kind::kChoice);
    n.children = std::move(alts);
    uint32_t id = Add(std::move(n));
    choice_paths_[id] = where;
    return id;
  }
  std::vector<std::string> types;
  if (s.contains("type")) {
    const OrderedJson& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const OrderedJson& x : t) {
        if (!x.is_string()) return Fail(Invalid(PointerAppend(at, "type"), "expected type names"));
        types.push_back(x.get<std::string>());
      }
    } else {
      return Fail(Invalid(PointerAppend(at, "type"), "expected a type name or an array of them"));
    }
  } else if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
    types.push_back("object");
  } else if (s.contains("items") || s.contains("minItems") || s.contains("maxItems")) {
    types.push_back("array");
  } else if (s.contains("minLength") || s.contains("maxLength")) {
    types.push_back("string");
  } else {
    return AnyValue();
  }
  // "integer" beside "number" adds nothing.
  if (std::find(types.begin(), types.end(), "number") != types.end()) {
    std::erase(types, std::string("integer"));
  }
  for (const std::string& t : types) alts.push_back(Typed(s, t, at, depth));
  if (alts.size() == 1) return alts[0];
  Node n = Of(Kind::kChoice);
  n.children = std::move(alts);
  uint32_t id = Add(std::move(n));
  choice_paths_[id] = PointerAppend(at, "type");
  return id;
}

void JsonSchemaCompiler::Finish() {
  std::vector<std::bitset<256>>& first = g_.first_;
  first.assign(g_.nodes_.size(), {});
  for (bool changed = true; changed;) {  // to a fixpoint: choices may refer to each other
    changed = false;
    for (size_t i = 0; i < g_.nodes_.size(); ++i) {
      const Node& n = g_.nodes_[i];
      std::bitset<256> f;
      switch (n.kind) {
        case Kind::kChoice:
          for (uint32_t c : n.children) f |= first[c];
          break;
        case Kind::kObject:
        case Kind::kAnyObject: f.set('{'); break;
        case Kind::kArray: f.set('['); break;
        case Kind::kString: f.set('"'); break;
        case Kind::kNumber:
          f.set('-');
          for (char d = '0'; d <= '9'; ++d) f.set(static_cast<uint8_t>(d));
          break;
        case Kind::kLiterals:
          for (const std::string& l : n.literals) {
            if (!l.empty()) f.set(static_cast<uint8_t>(l[0]));
          }
          break;
      }
      if (f != first[i]) {
        first[i] = f;
        changed = true;
      }
    }
  }
  for (const auto& [id, where] : choice_paths_) {
    std::bitset<256> seen;
    for (uint32_t c : g_.nodes_[id].children) {
      if ((seen & first[c]).any() || first[c].none()) {
        Fail(Unsupported(where, "alternatives that can start with the same character (two of the "
                                "same JSON type) are not supported"));
        return;
      }
      seen |= first[c];
    }
  }
}

std::shared_ptr<const JsonGrammar> JsonGrammar::AnyObject(const JsonGrammarOptions& options) {
  auto g = std::make_shared<JsonGrammar>();
  g->options_ = options;
  JsonSchemaCompiler c(OrderedJson::object(), *g);
  g->root_ = c.Compile({{"type", "object"}}, "", 0);
  c.Finish();
  return g;
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::FromSchema(const OrderedJson& schema,
                                                                   const JsonGrammarOptions& options) {
  auto g = std::make_shared<JsonGrammar>();
  g->options_ = options;
  JsonSchemaCompiler c(schema, *g);
  g->root_ = c.Compile(schema, "", 0);
  if (c.errors.empty()) c.Finish();
  if (!c.errors.empty()) return std::move(c.errors);
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

}  // namespace mlc
