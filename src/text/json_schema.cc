// The JSON Schema subset of structured output compiled into JsonGrammar's nodes, every keyword
// enforced while sampling:
//  - type (one or several), enum, const, anyOf and oneOf whose alternatives start differently
//    (string / number / object / array / true / false / null: zod's .nullable() and pydantic's
//    Optional are an alternative and {"type": "null"}); oneOf also needs each alternative to say
//    its type (or values), else a schema could match values of another; $ref into the schema
//    ("#", "#/$defs/..", "#/definitions/..", one node per target however it is spelt);
//  - allOf: one member beside annotations is that member; several merge into one schema
//    (properties united, a property in two members as their allOf, required united, types
//    intersected, a closed member (additionalProperties false) forbidding what it does not list;
//    any other keyword given differently by two members is kUnsupported);
//  - objects: properties, required, additionalProperties (true, false, or a schema where there
//    are no properties: a map), minProperties/maxProperties (counted as written; an optional
//    property is offered only when the counts can still be met);
//  - arrays: items, minItems/maxItems, prefixItems (tuples; items false or a schema for the rest),
//    draft 7's items array with additionalItems;
//  - strings: minLength/maxLength; pattern (an ECMA-262 subset walked byte by byte over the
//    string's decoded characters, unanchored unless ^/$; see schema_pattern.cc: backreferences,
//    lookarounds, \b, \p{..} are kUnsupported); format date-time, date, time (RFC 3339, upper-case T
//    and Z, no leap second; 02-29 only in leap years), duration (ISO 8601 as JSON Schema's
//    appendix), uuid, email (dot-atom local part @ DNS labels, no quoted or IP-literal forms),
//    ipv4 (no leading zeros), ipv6 (hex groups and "::", no embedded IPv4 or zone), uri (scheme ":"
//    then RFC 3986 characters and %XX); any other format is kUnsupported (a client asking for one
//    expects it enforced); beside a pattern, the strings both take (zod writes the two). While a
//    pattern or format walks,
//    the short JSON escapes (\n, \", ...) are decoded and fed as their character, \u escapes are
//    refused (a half-written one could lead nowhere), and a character is taken only when the
//    pattern can still end within maxLength;
//  - numbers: an integer's minimum/maximum/exclusiveMinimum/exclusiveMaximum and integer
//    multipleOf (a number with an integer multipleOf is an integer; a fractional multipleOf is
//    kUnsupported); a non-integer number's range exactly, digit by digit against the bounds'
//    shortest decimal text, with exponent notation refused for a bounded number (a bound over
//    64 digits either side of the point is kUnsupported).
// Annotations are ignored (title, description, default, examples, $defs, definitions, $schema,
// $id, $comment, readOnly, writeOnly, deprecated, contentEncoding, contentMediaType). Any other
// keyword, and any keyword the compiler would not apply (one beside $ref, enum, const, anyOf or
// oneOf; one of another type's), is kUnsupported at its JSON Pointer; a schema over the options'
// size limits (or a pattern over max_pattern_states) is kLimit.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "mlc_manifest/json_grammar.h"
#include "text/byte_dfa.h"
#include "text/schema_pattern.h"
#include "text/schema_ref.h"

namespace mlc {

using Node = JsonGrammar::Node;
using Kind = JsonGrammar::Kind;

namespace {

constexpr size_t kMaxLiterals = 64;    // enum values (a 64-bit mask in the frame)
constexpr size_t kMaxProperties = 64;  // properties of one object (likewise)
constexpr int kMaxSchemaDepth = 64;    // nesting of the schema document the compiler follows

const std::set<std::string>& Annotations() {
  static const std::set<std::string> k = {"title", "description", "$schema", "$id", "$comment",
                                          "default", "examples", "$defs", "definitions", "readOnly",
                                          "writeOnly", "deprecated", "contentEncoding", "contentMediaType"};
  return k;
}

const std::set<std::string>& Keywords() {
  static const std::set<std::string> k = {"type", "properties", "required", "additionalProperties",
                                          "enum", "const", "items", "minItems", "maxItems",
                                          "minLength", "maxLength", "anyOf", "$ref",
                                          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                                          "multipleOf", "pattern", "format", "minProperties", "maxProperties",
                                          "allOf", "oneOf", "prefixItems", "additionalItems", "nullable"};
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

// The values a keyword constrains ("object", "array", "string"), or "" for a keyword of any value.
std::string KeywordType(const std::string& key) {
  static const std::map<std::string, std::string> k = {
      {"properties", "object"}, {"required", "object"}, {"additionalProperties", "object"},
      {"items", "array"},       {"minItems", "array"},  {"maxItems", "array"},
      {"minLength", "string"},  {"maxLength", "string"},
      {"minimum", "number"},    {"maximum", "number"},  {"exclusiveMinimum", "number"},
      {"exclusiveMaximum", "number"}, {"multipleOf", "number"}, {"pattern", "string"},
      {"format", "string"},     {"minProperties", "object"}, {"maxProperties", "object"},
      {"prefixItems", "array"}, {"additionalItems", "array"}};
  auto it = k.find(key);
  return it == k.end() ? "" : it->second;
}

bool IsTypeName(const std::string& t) {
  static const std::set<std::string> k = {"object", "array", "string", "number",
                                          "integer", "boolean", "null"};
  return k.count(t) > 0;
}

// Whether v is an instance of the JSON Schema type t (1.0 is an integer, as the spec says).
bool IsOfType(const OrderedJson& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer") {
    if (v.is_number_integer()) return true;
    if (!v.is_number_float()) return false;
    double d = v.get<double>();
    return std::isfinite(d) && std::floor(d) == d;
  }
  return false;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "\"" : ", \"") + n + "\"";
  return out;
}

// The JSON values of s, counted until past limit (then limit + 1).
int64_t CountValues(const OrderedJson& s, int64_t limit) {
  int64_t n = 0;
  std::vector<const OrderedJson*> todo = {&s};
  while (!todo.empty() && n <= limit) {
    const OrderedJson* v = todo.back();
    todo.pop_back();
    ++n;
    if (v->is_structured()) {
      for (const OrderedJson& child : *v) todo.push_back(&child);
    }
  }
  return n;
}

}  // namespace

// Builds the grammar's nodes from one schema document.
class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(const OrderedJson& root, JsonGrammar& g)
      : root_(root), g_(g), budget_(std::max<int64_t>(1, g.options_.max_grammar_nodes)) {}

  uint32_t Compile(const OrderedJson& s, const std::string& at, int depth);
  uint32_t AnyValue();
  // First bytes of every node, then the anyOf alternatives checked to start differently.
  void Finish();
  Errors errors;

 private:
  uint32_t Add(Node n) {
    Spend();
    g_.nodes_.push_back(std::move(n));
    return static_cast<uint32_t>(g_.nodes_.size() - 1);
  }
  uint32_t Fail(Error e) {
    if (errors.empty()) errors.push_back(std::move(e));
    return Add(Node{});
  }
  // One unit of the grammar budget; past it, the limit's error (compiling then stops).
  bool Spend();
  // A keyword of s beside `main` other than annotations and `allowed`, refused.
  std::optional<Error> Beside(const OrderedJson& s, const std::string& at, const std::string& main,
                              const std::set<std::string>& allowed);
  // The schema's "type" names into types; false (after Fail) when malformed.
  bool Types(const OrderedJson& s, const std::string& at, std::vector<std::string>& types);
  bool Nullable(const OrderedJson& s, const std::string& at, std::vector<std::string>& types);
  uint32_t Literals(const OrderedJson& s, const std::string& at);
  // Whether keys are written bare (the Gemma dialect).
  bool Bare() const { return g_.options_.dialect == JsonDialect::kGemma; }
  // A property name as the grammar matches it: JSON text, or bare with its ':' (a name the
  // dialect cannot write bare is refused at its pointer).
  std::optional<std::string> KeyText(const std::string& name, const std::string& at);
  uint32_t Ref(const std::string& ref, const std::string& at, int depth);
  uint32_t Typed(const OrderedJson& s, const std::string& type, const std::string& at, int depth);
  uint32_t Object(const OrderedJson& s, const std::string& at, int depth);
  uint32_t Array(const OrderedJson& s, const std::string& at, int depth);
  uint32_t String(const OrderedJson& s, const std::string& at);
  uint32_t Number(const OrderedJson& s, const std::string& type, const std::string& at);
  uint32_t NumberRange(const OrderedJson& s, const std::string& at);
  uint32_t AllOf(const OrderedJson& s, const std::string& at, int depth);
  uint32_t OneOf(const OrderedJson& s, const std::string& at, int depth);
  // The schema behind a chain of $refs (itself when it is none); nullptr after Fail.
  const OrderedJson* Resolved(const OrderedJson& s, const std::string& at);
  // Merges one allOf member into `into` (false after Fail).
  // closed: the property names of each member with additionalProperties false.
  bool Merge(OrderedJson& into, const OrderedJson& member, const std::string& at, int depth,
             std::vector<std::set<std::string>>& closed);
  int32_t AddDfa(std::shared_ptr<const ByteDfa> dfa) {
    g_.dfas_.push_back(std::move(dfa));
    return static_cast<int32_t>(g_.dfas_.size() - 1);
  }
  std::optional<int64_t> Count(const OrderedJson& s, const char* key, const std::string& at);

  const OrderedJson& root_;
  JsonGrammar& g_;
  std::map<const OrderedJson*, uint32_t> refs_;  // $ref targets -> their node
  std::set<uint32_t> pending_;                   // $ref nodes whose target is being compiled
  int64_t budget_;
  std::string where_;  // the schema being compiled, for the budget's error
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

std::optional<std::string> JsonSchemaCompiler::KeyText(const std::string& name, const std::string& at) {
  if (!Bare()) return OrderedJson(name).dump();
  bool ok = !name.empty();
  for (char c : name) ok = ok && JsonGrammar::IsBareKeyByte(static_cast<uint8_t>(c));
  if (!ok) {
    Fail(Unsupported(at, "the gemma4 tool format writes names bare: a name of printable ASCII without spaces, "
                         "quotes or :{}[],<\\ is needed"));
    return std::nullopt;
  }
  return name + ":";
}

uint32_t JsonSchemaCompiler::AnyValue() {
  if (any_value_) return *any_value_;
  uint32_t id = Add(Of(Kind::kChoice));
  any_value_ = id;
  Node object = Of(Kind::kAnyObject);
  Node key = Of(Kind::kString);
  key.max = g_.options_.max_string_length > 0 ? g_.options_.max_string_length : -1;
  Node string = key;
  key.bare = Bare();
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

bool JsonSchemaCompiler::Spend() {
  if (--budget_ >= 0) return true;
  if (budget_ == -1 && errors.empty()) {
    errors.push_back(Error{ErrorCode::kLimit, where_,
                           "the schema compiles to more than " +
                               std::to_string(g_.options_.max_grammar_nodes) +
                               " grammar nodes (the max_grammar_nodes limit)"});
  }
  return false;
}

std::optional<Error> JsonSchemaCompiler::Beside(const OrderedJson& s, const std::string& at,
                                                const std::string& main,
                                                const std::set<std::string>& allowed) {
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (it.key() == main || allowed.count(it.key()) || Annotations().count(it.key())) continue;
    std::string where = PointerAppend(at, it.key());
    return Unsupported(where, "the JSON Schema keyword \"" + it.key() + "\" at " + where +
                                  " beside \"" + main + "\" is not supported (it would be ignored)");
  }
  return std::nullopt;
}

uint32_t JsonSchemaCompiler::Ref(const std::string& ref, const std::string& at, int depth) {
  auto target = ResolveSchemaRef(root_, ref);
  if (!target) {
    Error e = target.error();
    e.path = at;
    return Fail(std::move(e));
  }
  if (auto it = refs_.find(target->node); it != refs_.end()) return it->second;
  uint32_t id = Add(Node{});  // filled once the target is compiled; recursion refers to it
  refs_[target->node] = id;
  pending_.insert(id);
  uint32_t built = Compile(*target->node, target->pointer, depth + 1);
  bool cycle = pending_.count(built) > 0;
  pending_.erase(id);
  if (!errors.empty()) return id;
  if (cycle) return Fail(Unsupported(at, "a $ref that refers only to itself (a cycle of $refs)"));
  g_.nodes_[id] = g_.nodes_[built];
  return id;
}

uint32_t JsonSchemaCompiler::String(const OrderedJson& s, const std::string& at) {
  Node n = Of(Kind::kString);
  n.min = Count(s, "minLength", at).value_or(0);
  auto max = Count(s, "maxLength", at);
  n.max = max ? *max : (g_.options_.max_string_length > 0 ? g_.options_.max_string_length : -1);
  if (n.max >= 0 && n.min > n.max) return Fail(Invalid(at, "minLength is above maxLength"));
  std::shared_ptr<const ByteDfa> both;  // pattern and format: their intersection
  for (const char* key : {"pattern", "format"}) {
    if (!s.contains(key)) continue;
    const std::string where = PointerAppend(at, key);
    if (!s[key].is_string()) return Fail(Invalid(where, "expected a string"));
    const std::string text = s[key].get<std::string>();
    const size_t limit = static_cast<size_t>(std::max<int64_t>(1, g_.options_.max_pattern_states));
    auto dfa = std::string(key) == "pattern" ? CompileSchemaPattern(text, where, limit)
                                             : CompileSchemaFormat(text, where, limit);
    if (!dfa) return Fail(dfa.errors().front());
    if (both) {
      dfa = IntersectDfa(*both, **dfa, limit, where);
      if (!dfa) return Fail(dfa.errors().front());
    }
    both = *dfa;
    // The server's cap for strings without maxLength gives way to what the pattern needs.
    const int64_t needs = (*dfa)->min_chars[static_cast<size_t>((*dfa)->start)];
    if (!max && n.max >= 0 && needs > n.max) n.max = needs;
    if (n.max >= 0 && needs > n.max) {
      return Fail(Invalid(where, "no string of at most maxLength characters matches it"));
    }
  }
  if (both) n.dfa = AddDfa(both);
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Array(const OrderedJson& s, const std::string& at, int depth) {
  Node n = Of(Kind::kArray);
  n.min = Count(s, "minItems", at).value_or(0);
  n.max = Count(s, "maxItems", at).value_or(-1);
  if (n.max >= 0 && n.min > n.max) return Fail(Invalid(at, "minItems is above maxItems"));
  // A tuple: prefixItems (or draft 7's items array) then the rest (items, or additionalItems).
  const bool prefix = s.contains("prefixItems");
  const bool old_tuple = s.contains("items") && s["items"].is_array();
  if (prefix && old_tuple) return Fail(Invalid(PointerAppend(at, "items"), "expected a schema beside prefixItems"));
  if (s.contains("additionalItems") && !old_tuple) {
    return Fail(Unsupported(PointerAppend(at, "additionalItems"),
                            "\"additionalItems\" applies only beside an \"items\" array (it would be ignored)"));
  }
  const char* tuple_key = prefix ? "prefixItems" : "items";
  const char* rest_key = prefix ? "items" : old_tuple ? "additionalItems" : "items";
  if (prefix || old_tuple) {
    const OrderedJson& items = s[tuple_key];
    const std::string where = PointerAppend(at, tuple_key);
    if (!items.is_array()) return Fail(Invalid(where, "expected an array of schemas"));
    for (size_t i = 0; i < items.size(); ++i) n.children.push_back(Compile(items[i], PointerAppend(where, i), depth + 1));
    n.prefix_items = static_cast<uint32_t>(items.size());
  }
  if (s.contains(rest_key) && s[rest_key].is_boolean() && !s[rest_key].get<bool>()) {
    n.max = n.max < 0 ? n.prefix_items : std::min<int64_t>(n.max, n.prefix_items);
    if (n.min > n.max) return Fail(Invalid(at, "minItems is above the tuple's length"));
  } else if (s.contains(rest_key)) {
    n.children.push_back(Compile(s[rest_key], PointerAppend(at, rest_key), depth + 1));
  } else {
    n.children.push_back(AnyValue());
  }
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Object(const OrderedJson& s, const std::string& at, int depth) {
  bool closed = false;
  if (s.contains("additionalProperties")) {
    const OrderedJson& a = s["additionalProperties"];
    std::string where = PointerAppend(at, "additionalProperties");
    const bool has_properties = s.contains("properties") && !s["properties"].empty();
    if (!a.is_boolean() && (has_properties || !a.is_object())) {
      return Fail(Unsupported(where, "the JSON Schema keyword \"additionalProperties\" is supported "
                                     "as true or false, or as a schema where there are no properties"));
    }
    closed = a.is_boolean() && !a.get<bool>();
  }
  const int64_t min_props = Count(s, "minProperties", at).value_or(0);
  const int64_t max_props = Count(s, "maxProperties", at).value_or(-1);
  if (max_props >= 0 && min_props > max_props) return Fail(Invalid(at, "minProperties is above maxProperties"));
  if (!s.contains("properties") && !closed) {
    if (s.contains("required") && !s["required"].empty()) {
      return Fail(Unsupported(PointerAppend(at, "required"), "required needs properties"));
    }
    Node n = Of(Kind::kAnyObject);
    n.min = min_props;
    n.max = max_props;
    uint32_t key = String(OrderedJson::object(), at);
    g_.nodes_[key].bare = Bare();
    const bool typed = s.contains("additionalProperties") && s["additionalProperties"].is_object();
    n.children = {typed ? Compile(s["additionalProperties"], PointerAppend(at, "additionalProperties"), depth + 1)
                        : AnyValue(),
                  key};
    return Add(std::move(n));
  }
  Node n = Of(Kind::kObject);
  n.min = min_props;
  n.max = max_props;
  if (s.contains("properties")) {
    const OrderedJson& props = s["properties"];
    std::string where = PointerAppend(at, "properties");
    if (!props.is_object()) return Fail(Invalid(where, "expected an object"));
    if (props.size() > kMaxProperties) {
      return Fail(Unsupported(where, "more than " + std::to_string(kMaxProperties) + " properties"));
    }
    for (auto it = props.begin(); it != props.end(); ++it) {
      JsonGrammar::Property p;
      auto key = KeyText(it.key(), PointerAppend(where, it.key()));
      if (!key) return 0;
      p.key = *key;
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
        if (req[i].is_string() && p.key == KeyText(req[i].get<std::string>(), where).value_or("")) {
          p.required = found = true;
        }
      }
      if (!found) {
        return Fail(Unsupported(PointerAppend(where, i),
                                "a required property must be one of properties"));
      }
    }
  }
  if (Bare()) {  // the template's key order
    OrderedJson names = OrderedJson::object();
    for (const JsonGrammar::Property& p : n.properties) names[p.key.substr(0, p.key.size() - 1)] = nullptr;
    std::vector<JsonGrammar::Property> sorted;
    for (const std::string& k : DialectKeyOrder(names)) {
      for (const JsonGrammar::Property& p : n.properties) {
        if (p.key == k + ":") sorted.push_back(p);
      }
    }
    n.properties = std::move(sorted);
  }
  const auto required = std::count_if(n.properties.begin(), n.properties.end(),
                                      [](const JsonGrammar::Property& p) { return p.required; });
  if (n.max >= 0 && required > n.max) return Fail(Invalid(at, "more properties are required than maxProperties"));
  if (static_cast<int64_t>(n.properties.size()) < n.min) {
    return Fail(Invalid(at, "minProperties is above the number of properties the object may have"));
  }
  return Add(std::move(n));
}

// A bound's JSON number as a plain decimal (its shortest text, so 0.1 is 0.1); nullopt past 64
// digits either side of the point.
static std::optional<DecimalBound> ToDecimal(const OrderedJson& v) {
  std::string t = v.dump();
  DecimalBound d;
  size_t i = 0;
  if (i < t.size() && t[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  long point = -1, exponent = 0;
  for (; i < t.size() && t[i] != 'e' && t[i] != 'E'; ++i) {
    if (t[i] == '.') {
      point = static_cast<long>(digits.size());
    } else {
      digits += t[i];
    }
  }
  if (point < 0) point = static_cast<long>(digits.size());
  if (i < t.size()) exponent = std::strtol(t.c_str() + i + 1, nullptr, 10);
  point += exponent;
  if (point > 64 || point < -64) return std::nullopt;
  if (point <= 0) {
    d.whole = "0";
    d.fraction = std::string(static_cast<size_t>(-point), '0') + digits;
  } else {
    if (static_cast<long>(digits.size()) < point) digits.append(static_cast<size_t>(point) - digits.size(), '0');
    d.whole = digits.substr(0, static_cast<size_t>(point));
    d.fraction = digits.substr(static_cast<size_t>(point));
  }
  d.whole.erase(0, std::min(d.whole.find_first_not_of('0'), d.whole.size()));
  if (d.whole.empty()) d.whole = "0";
  while (!d.fraction.empty() && d.fraction.back() == '0') d.fraction.pop_back();
  if (d.fraction.size() > 64) return std::nullopt;
  if (d.whole == "0" && d.fraction.empty()) d.negative = false;
  return d;
}

// A non-integer number within its range keywords: the range's automaton over the number's text
// (exponents refused), or any number when none is given.
uint32_t JsonSchemaCompiler::NumberRange(const OrderedJson& s, const std::string& at) {
  Node n = Of(Kind::kNumber);
  std::optional<DecimalBound> bounds[2];
  double values[2] = {0, 0};
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!s.contains(key)) continue;
    const std::string where = PointerAppend(at, key);
    const OrderedJson& v = s[key];
    if (!v.is_number()) return Fail(Invalid(where, "expected a number"));
    const std::string name = key;
    const int i = name == "minimum" || name == "exclusiveMinimum" ? 0 : 1;
    auto d = ToDecimal(v);
    if (!d) return Fail(Unsupported(where, "a bound needing more than 64 digits before or after the point"));
    d->exclusive = name.starts_with("exclusive");
    const double x = v.get<double>();
    // The tighter of two bounds on one side (at a tie the exclusive one).
    const bool tighter = !bounds[i] || (i == 0 ? x > values[i] : x < values[i]) || (x == values[i] && d->exclusive);
    if (tighter) {
      bounds[i] = *d;
      values[i] = x;
    }
  }
  if (!bounds[0] && !bounds[1]) return Add(std::move(n));
  auto dfa = NumberRangeDfa(bounds[0] ? &*bounds[0] : nullptr, bounds[1] ? &*bounds[1] : nullptr, at);
  if (!dfa) return Fail(dfa.errors().front());
  n.dfa = AddDfa(*dfa);
  return Add(std::move(n));
}

// A number, or an integer within the bounds its range keywords give (each bound rounded inwards
// to an integer and clamped to the 64-bit range; both inclusive) and a multiple of its
// multipleOf (an integer; a number with one is an integer).
uint32_t JsonSchemaCompiler::Number(const OrderedJson& s, const std::string& type, const std::string& at) {
  Node n = Of(Kind::kNumber);
  n.integer = type == "integer";
  n.low = INT64_MIN;
  n.high = INT64_MAX;
  if (s.contains("multipleOf")) {
    const std::string where = PointerAppend(at, "multipleOf");
    const OrderedJson& m = s["multipleOf"];
    if (!m.is_number() || !(m.get<double>() > 0)) return Fail(Invalid(where, "expected a number above 0"));
    if (!IsOfType(m, "integer") || m.get<double>() > 9007199254740992.0) {
      return Fail(Unsupported(where, "\"multipleOf\" is enforced for integer divisors only (up to 2^53)"));
    }
    n.integer = true;
    n.bounded = true;
    n.multiple = static_cast<int64_t>(m.get<double>());
  }
  if (!n.integer) return NumberRange(s, at);
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    if (!s.contains(key)) continue;
    const std::string where = PointerAppend(at, key);
    const OrderedJson& v = s[key];
    if (!v.is_number()) return Fail(Invalid(where, "expected a number"));
    const std::string name = key;
    const bool lower = name == "minimum" || name == "exclusiveMinimum";
    const bool exclusive = name.starts_with("exclusive");
    const long double x = v.is_number_integer() ? (v.is_number_unsigned() ? static_cast<long double>(v.get<uint64_t>())
                                                                           : static_cast<long double>(v.get<int64_t>()))
                                                : static_cast<long double>(v.get<double>());
    if (!std::isfinite(static_cast<double>(x))) return Fail(Invalid(where, "expected a finite number"));
    // The nearest integer inside the bound.
    long double bound = lower ? (exclusive ? std::floor(x) + 1 : std::ceil(x))
                              : (exclusive ? std::ceil(x) - 1 : std::floor(x));
    bound = std::clamp(bound, static_cast<long double>(INT64_MIN), static_cast<long double>(INT64_MAX));
    const int64_t b = static_cast<int64_t>(bound);
    if (lower) n.low = std::max(n.low, b);
    if (!lower) n.high = std::min(n.high, b);
    n.bounded = true;
  }
  bool empty = n.bounded && n.low > n.high;
  if (!empty && n.multiple > 0) {  // a multiple within [low, high]
    __extension__ typedef __int128 Wide;
    Wide q = Wide(n.low) / n.multiple;
    if (q * n.multiple < n.low) ++q;
    empty = q * n.multiple > n.high;
  }
  if (empty) {
    return Fail(Invalid(at, "no integer lies within the schema's bounds (" + std::to_string(n.low) + " to " +
                                std::to_string(n.high) + (n.multiple > 0 ? ", a multiple of " + std::to_string(n.multiple) : "") + ")"));
  }
  return Add(std::move(n));
}

const OrderedJson* JsonSchemaCompiler::Resolved(const OrderedJson& s, const std::string& at) {
  const OrderedJson* p = &s;
  for (int hops = 0; p->is_object() && p->contains("$ref"); ++hops) {
    if (hops > kMaxSchemaDepth || !(*p)["$ref"].is_string()) {
      Fail(Unsupported(at, "a $ref chain that does not end in a schema"));
      return nullptr;
    }
    auto target = ResolveSchemaRef(root_, (*p)["$ref"].get<std::string>());
    if (!target) {
      Error e = target.errors().front();
      e.path = PointerAppend(at, "$ref");
      Fail(e);
      return nullptr;
    }
    p = target->node;
  }
  return p;
}

bool JsonSchemaCompiler::Merge(OrderedJson& into, const OrderedJson& member_in, const std::string& at, int depth,
                               std::vector<std::set<std::string>>& closed_sets) {
  if (depth > kMaxSchemaDepth) {
    Fail(Error{ErrorCode::kLimit, at, "allOf nests too deep"});
    return false;
  }
  const OrderedJson* member = Resolved(member_in, at);
  if (!member) return false;
  if (member->is_boolean() && member->get<bool>()) return true;
  if (!member->is_object()) {
    Fail(Unsupported(at, "an allOf member that is not a schema object"));
    return false;
  }
  if (member->contains("allOf")) {
    const OrderedJson& all = (*member)["allOf"];
    if (!all.is_array()) {
      Fail(Invalid(PointerAppend(at, "allOf"), "expected an array"));
      return false;
    }
    for (size_t i = 0; i < all.size(); ++i) {
      if (!Merge(into, all[i], PointerAppend(PointerAppend(at, "allOf"), i), depth + 1, closed_sets)) return false;
    }
  }
  // A closed member forbids the properties it does not list.
  auto closed = [](const OrderedJson& o) {
    return o.contains("additionalProperties") && o["additionalProperties"] == OrderedJson(false);
  };
  for (auto it = member->begin(); it != member->end(); ++it) {
    const std::string& key = it.key();
    const std::string where = PointerAppend(at, key);
    if (Annotations().count(key) || key == "allOf") continue;
    if (key == "properties" && it.value().is_object()) {
      OrderedJson& props = into["properties"];
      if (!props.is_object()) props = OrderedJson::object();
      for (auto p = it.value().begin(); p != it.value().end(); ++p) {
        if (props.contains(p.key()) && props[p.key()] != p.value()) {
          props[p.key()] = OrderedJson{{"allOf", OrderedJson::array({props[p.key()], p.value()})}};
        } else {
          props[p.key()] = p.value();
        }
      }
    } else if (key == "required" && it.value().is_array()) {
      OrderedJson& req = into["required"];
      if (!req.is_array()) req = OrderedJson::array();
      for (const OrderedJson& name : it.value()) {
        if (std::find(req.begin(), req.end(), name) == req.end()) req.push_back(name);
      }
    } else if (key == "type" && into.contains("type")) {
      std::vector<std::string> a, b, both;
      if (!Types(into, at, a) || !Types(*member, at, b)) return false;
      for (const std::string& t : a) {
        for (const std::string& u : b) {
          if (t == u || (t == "integer" && u == "number")) both.push_back(t);
          if (t == "number" && u == "integer") both.push_back(u);
        }
      }
      if (both.empty()) {
        Fail(Invalid(where, "allOf members with no type in common"));
        return false;
      }
      into["type"] = both.size() == 1 ? OrderedJson(both[0]) : OrderedJson(both);
    } else if (into.contains(key) && into[key] != it.value()) {
      if (key == "additionalProperties") {
        if (closed(into) || closed(*member)) {
          into[key] = false;
          continue;
        }
      }
      Fail(Unsupported(where, "allOf members that both give \"" + key + "\" differently are not supported"));
      return false;
    } else {
      into[key] = it.value();
    }
  }
  if (closed(*member)) {
    std::set<std::string> names;
    if (member->contains("properties") && (*member)["properties"].is_object()) {
      for (auto p = (*member)["properties"].begin(); p != (*member)["properties"].end(); ++p) names.insert(p.key());
    }
    closed_sets.push_back(std::move(names));
  }
  return true;
}

// allOf: one member (beside annotations) is that member; several merge into one object schema.
uint32_t JsonSchemaCompiler::AllOf(const OrderedJson& s, const std::string& at, int depth) {
  const OrderedJson& all = s["allOf"];
  const std::string where = PointerAppend(at, "allOf");
  if (!all.is_array() || all.empty()) return Fail(Invalid(where, "expected a non-empty array"));
  const bool alone = std::all_of(s.items().begin(), s.items().end(), [](const auto& kv) {
    return kv.key() == "allOf" || Annotations().count(kv.key()) > 0;
  });
  if (alone && all.size() == 1) return Compile(all[0], PointerAppend(where, 0), depth + 1);
  OrderedJson merged = OrderedJson::object();
  for (auto it = s.begin(); it != s.end(); ++it) {
    if (it.key() != "allOf" && !Annotations().count(it.key())) merged[it.key()] = it.value();
  }
  OrderedJson self = merged;
  merged = OrderedJson::object();
  std::vector<std::set<std::string>> closed;
  if (!Merge(merged, self, at, depth, closed)) return 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!Merge(merged, all[i], PointerAppend(where, i), depth + 1, closed)) return 0;
  }
  // Properties that a closed member does not list are forbidden.
  if (!closed.empty() && merged.contains("properties") && merged["properties"].is_object()) {
    OrderedJson kept = OrderedJson::object();
    for (auto p = merged["properties"].begin(); p != merged["properties"].end(); ++p) {
      if (std::all_of(closed.begin(), closed.end(), [&p](const auto& names) { return names.count(p.key()) > 0; })) {
        kept[p.key()] = p.value();
      }
    }
    merged["properties"] = std::move(kept);
  }
  // A required property that a closed member dropped cannot be written.
  if (merged.contains("required") && merged["required"].is_array()) {
    for (const OrderedJson& name : merged["required"]) {
      const bool listed = merged.contains("properties") && name.is_string() &&
                          merged["properties"].contains(name.get<std::string>());
      if (!listed && merged.contains("additionalProperties") && merged["additionalProperties"] == OrderedJson(false)) {
        return Fail(Invalid(where, "the members require " + name.dump() + ", which a closed member forbids"));
      }
    }
  }
  return Compile(merged, where, depth + 1);
}

// oneOf: as anyOf (alternatives that start differently, so one at most matches) when each
// alternative says its type (or its values); a schema without one could match values of others.
uint32_t JsonSchemaCompiler::OneOf(const OrderedJson& s, const std::string& at, int depth) {
  if (auto e = Beside(s, at, "oneOf", {})) return Fail(*e);
  const OrderedJson& one = s["oneOf"];
  const std::string where = PointerAppend(at, "oneOf");
  if (!one.is_array() || one.empty()) return Fail(Invalid(where, "expected a non-empty array"));
  std::vector<uint32_t> alts;
  for (size_t i = 0; i < one.size(); ++i) {
    const std::string alt_at = PointerAppend(where, i);
    const OrderedJson* alt = Resolved(one[i], alt_at);
    if (!alt) return 0;
    if (!alt->is_object() || !(alt->contains("type") || alt->contains("const") || alt->contains("enum"))) {
      return Fail(Unsupported(alt_at, "a oneOf alternative without \"type\", \"const\" or \"enum\" (it could "
                                      "match the values of another alternative) is not supported"));
    }
    alts.push_back(Compile(one[i], alt_at, depth + 1));
  }
  Node n = Of(Kind::kChoice);
  n.children = std::move(alts);
  uint32_t id = Add(std::move(n));
  choice_paths_[id] = where;
  return id;
}

uint32_t JsonSchemaCompiler::Typed(const OrderedJson& s, const std::string& type,
                                   const std::string& at, int depth) {
  if (type == "object") return Object(s, at, depth);
  if (type == "array") return Array(s, at, depth);
  if (type == "string") return String(s, at);
  if (type == "number" || type == "integer") return Number(s, type, at);
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

bool JsonSchemaCompiler::Types(const OrderedJson& s, const std::string& at,
                               std::vector<std::string>& types) {
  if (!s.contains("type")) return true;
  const OrderedJson& t = s["type"];
  std::string where = PointerAppend(at, "type");
  if (t.is_string()) {
    types.push_back(t.get<std::string>());
  } else if (t.is_array() && !t.empty()) {
    for (const OrderedJson& x : t) {
      if (!x.is_string()) {
        Fail(Invalid(where, "expected type names"));
        return false;
      }
      types.push_back(x.get<std::string>());
    }
  } else {
    Fail(Invalid(where, "expected a type name or an array of them"));
    return false;
  }
  for (const std::string& name : types) {
    if (!IsTypeName(name)) {
      Fail(Unsupported(where, "the type \"" + name + "\" is not a JSON Schema type"));
      return false;
    }
  }
  return Nullable(s, at, types);
}

// OpenAPI's "nullable": true (the openai SDKs' zod helper writes it beside "type"): null is one
// more type.
bool JsonSchemaCompiler::Nullable(const OrderedJson& s, const std::string& at, std::vector<std::string>& types) {
  if (!s.contains("nullable")) return true;
  if (!s["nullable"].is_boolean()) {
    Fail(Invalid(PointerAppend(at, "nullable"), "expected true or false"));
    return false;
  }
  if (s["nullable"].get<bool>() && !types.empty() && std::find(types.begin(), types.end(), "null") == types.end()) {
    types.push_back("null");
  }
  return true;
}

// const or enum: the values that are of the schema's type (when it gives one).
uint32_t JsonSchemaCompiler::Literals(const OrderedJson& s, const std::string& at) {
  const std::string key = s.contains("const") ? "const" : "enum";
  if (auto e = Beside(s, at, key, {"type", "nullable"})) return Fail(*e);
  std::vector<std::string> types;
  if (!Types(s, at, types)) return 0;
  const bool nullable = s.contains("nullable") && s["nullable"] == true;
  auto typed = [&types](const OrderedJson& v) {
    return types.empty() || std::any_of(types.begin(), types.end(),
                                        [&v](const std::string& t) { return IsOfType(v, t); });
  };
  Node n = Of(Kind::kLiterals);
  std::string where = PointerAppend(at, key);
  if (key == "const") {
    if (!typed(s["const"])) return Fail(Invalid(where, "the const value is not of the type " + Joined(types)));
    n.literals = {DialectText(s["const"], g_.options_.dialect)};
    return Add(std::move(n));
  }
  const OrderedJson& e = s["enum"];
  if (!e.is_array() || e.empty()) return Fail(Invalid(where, "expected a non-empty array"));
  if (e.size() > kMaxLiterals) {
    return Fail(Unsupported(where, "more than " + std::to_string(kMaxLiterals) + " enum values"));
  }
  for (const OrderedJson& v : e) {
    if (typed(v)) n.literals.push_back(DialectText(v, g_.options_.dialect));
  }
  if (nullable && std::find(n.literals.begin(), n.literals.end(), "null") == n.literals.end()) {
    n.literals.push_back("null");
  }
  if (n.literals.empty()) return Fail(Invalid(where, "no enum value is of the type " + Joined(types)));
  return Add(std::move(n));
}

uint32_t JsonSchemaCompiler::Compile(const OrderedJson& s, const std::string& at, int depth) {
  if (!errors.empty()) return 0;  // the first error stands; the grammar is discarded
  where_ = at;
  if (!Spend()) return 0;
  if (depth > kMaxSchemaDepth) {
    return Fail(Error{ErrorCode::kLimit, at, "the schema nests more than " + std::to_string(kMaxSchemaDepth) +
                                                 " levels deep (the schema depth limit)"});
  }
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
    if (auto e = Beside(s, at, "$ref", {})) return Fail(*e);
    if (!s["$ref"].is_string()) return Fail(Invalid(PointerAppend(at, "$ref"), "expected a string"));
    return Ref(s["$ref"].get<std::string>(), PointerAppend(at, "$ref"), depth);
  }
  if (s.contains("allOf")) return AllOf(s, at, depth);
  if (s.contains("const") || s.contains("enum")) return Literals(s, at);
  if (s.contains("oneOf")) return OneOf(s, at, depth);
  std::vector<uint32_t> alts;
  if (s.contains("anyOf")) {
    if (auto e = Beside(s, at, "anyOf", {})) return Fail(*e);
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
  if (!Types(s, at, types)) return 0;
  if (types.empty()) {  // inferred from the keywords of one type
    for (auto it = s.begin(); it != s.end() && types.empty(); ++it) {
      if (!KeywordType(it.key()).empty()) types.push_back(KeywordType(it.key()));
    }
    if (types.empty()) return AnyValue();
  }
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string kt = KeywordType(it.key());
    auto names = [&types](const std::string& t) { return std::find(types.begin(), types.end(), t) != types.end(); };
    if (kt.empty() || names(kt) || (kt == "number" && names("integer"))) continue;
    std::string where = PointerAppend(at, it.key());
    return Fail(Unsupported(where, "the JSON Schema keyword \"" + it.key() + "\" at " + where +
                                       " constrains " + kt + " values, which the schema's type " +
                                       Joined(types) + " excludes (it would be ignored)"));
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
  const size_t count = g_.nodes_.size();
  first.assign(count, {});
  // A choice starts with what its alternatives start with: a worklist from the other nodes up
  // through the choices that contain them (each set only grows, so this ends).
  std::vector<std::vector<uint32_t>> choices_of(count);
  std::vector<uint32_t> work;
  for (size_t i = 0; i < count; ++i) {
    const Node& n = g_.nodes_[i];
    std::bitset<256>& f = first[i];
    switch (n.kind) {
      case Kind::kChoice:
        for (uint32_t c : n.children) choices_of[c].push_back(static_cast<uint32_t>(i));
        break;
      case Kind::kObject:
      case Kind::kAnyObject: f.set('{'); break;
      case Kind::kArray: f.set('['); break;
      case Kind::kString:
        if (n.bare) {
          for (int c = 0; c < 256; ++c) f[static_cast<size_t>(c)] = JsonGrammar::IsBareKeyByte(static_cast<uint8_t>(c));
        } else {
          f.set(Bare() ? static_cast<uint8_t>(kGemmaQuote[0]) : '"');
        }
        break;
      case Kind::kNumber:
        f.set('-');
        for (char d = '0'; d <= '9'; ++d) f.set(static_cast<uint8_t>(d));
        break;
      case Kind::kLiterals:
        for (const std::string& l : n.literals) {
          if (!l.empty()) f.set(static_cast<uint8_t>(l[0]));
        }
        break;
      case Kind::kSequence:  // what its first part starts with (composed parts are never empty)
      case Kind::kRepeat:    // what an item starts with
        if (!n.children.empty()) choices_of[n.children[0]].push_back(static_cast<uint32_t>(i));
        break;
      case Kind::kText: f.set(); break;
    }
    if (f.any()) work.push_back(static_cast<uint32_t>(i));
  }
  while (!work.empty()) {
    uint32_t i = work.back();
    work.pop_back();
    for (uint32_t parent : choices_of[i]) {
      std::bitset<256> f = first[parent] | first[i];
      if (f != first[parent]) {
        first[parent] = f;
        work.push_back(parent);
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
  if (CountValues(schema, options.max_schema_values) > options.max_schema_values) {
    return Error{ErrorCode::kLimit, "",
                 "the schema has more than " + std::to_string(options.max_schema_values) +
                     " JSON values (the max_schema_values limit)"};
  }
  JsonSchemaCompiler c(schema, *g);
  g->root_ = c.Compile(schema, "", 0);
  if (c.errors.empty()) c.Finish();
  if (!c.errors.empty()) return std::move(c.errors);
  return std::shared_ptr<const JsonGrammar>(std::move(g));
}

}  // namespace mlc

namespace mlc {

// ---- composed grammars ----

GrammarComposer::GrammarComposer(const JsonGrammarOptions& options) : g_(std::make_shared<JsonGrammar>()) {
  g_->options_ = options;
}

uint32_t GrammarComposer::Add(JsonGrammar::Node node) {
  g_->nodes_.push_back(std::move(node));
  return static_cast<uint32_t>(g_->nodes_.size() - 1);
}

Result<uint32_t> GrammarComposer::Schema(const OrderedJson& schema) {
  const JsonGrammarOptions& options = g_->options_;
  if (CountValues(schema, options.max_schema_values) > options.max_schema_values) {
    return Error{ErrorCode::kLimit, "",
                 "the schema has more than " + std::to_string(options.max_schema_values) +
                     " JSON values (the max_schema_values limit)"};
  }
  JsonSchemaCompiler c(schema, *g_);
  const uint32_t root = c.Compile(schema, "", 0);
  if (c.errors.empty()) c.Finish();  // this schema's alternatives checked
  if (!c.errors.empty()) return std::move(c.errors);
  return root;
}

uint32_t GrammarComposer::Text(std::string bytes) {
  Node n = Of(Kind::kLiterals);
  n.literals = {std::move(bytes)};
  return Add(std::move(n));
}

uint32_t GrammarComposer::Sequence(std::vector<uint32_t> parts) {
  Node n = Of(Kind::kSequence);
  n.children = std::move(parts);
  return Add(std::move(n));
}

uint32_t GrammarComposer::Switch(std::vector<std::pair<std::string, uint32_t>> cases) {
  Node n = Of(Kind::kLiterals);
  for (auto& [literal, part] : cases) {
    n.literals.push_back(std::move(literal));
    n.children.push_back(part);
  }
  return Add(std::move(n));
}

uint32_t GrammarComposer::Repeat(uint32_t item, int64_t min, int64_t max) {
  Node n = Of(Kind::kRepeat);
  n.children = {item};
  n.min = min;
  n.max = max;
  return Add(std::move(n));
}

uint32_t GrammarComposer::FreeTextThen(std::string trigger, uint32_t then) {
  Node n = Of(Kind::kText);
  n.literals = {std::move(trigger)};
  n.children = {then};
  return Add(std::move(n));
}

Result<std::shared_ptr<const JsonGrammar>> GrammarComposer::Finish(uint32_t root) {
  if (static_cast<int64_t>(g_->nodes_.size()) > g_->options_.max_grammar_nodes) {
    return Error{ErrorCode::kLimit, "", "the grammar has more than " + std::to_string(g_->options_.max_grammar_nodes) +
                                            " nodes (the max_grammar_nodes limit)"};
  }
  for (const Node& n : g_->nodes_) {
    if (n.kind == Kind::kLiterals && n.literals.size() > kMaxLiterals) {
      return Error{ErrorCode::kLimit, "", "at most " + std::to_string(kMaxLiterals) + " cases in one choice"};
    }
  }
  g_->root_ = root;
  const OrderedJson none = OrderedJson::object();
  JsonSchemaCompiler c(none, *g_);
  c.Finish();  // first bytes of the composed nodes
  if (!c.errors.empty()) return std::move(c.errors);
  return std::shared_ptr<const JsonGrammar>(std::move(g_));
}

}  // namespace mlc
