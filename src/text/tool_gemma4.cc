// Gemma 4's own tool format, as its published chat template writes it: each tool declared in the
// system turn (<|tool>declaration:NAME{...}<tool|>, the template's own schema syntax), a call as
// <|tool_call>call:NAME{key:value,...}<tool_call|> (keys bare and sorted, strings between <|"|>
// marks), its result as <|tool_response>response:NAME{value:...}<tool_response|> inside the same
// model turn, which the answer then continues; and the reply's arguments read back into JSON.
#include "text/tool_gemma4.h"

#include <set>

#include "mlc_manifest/json_grammar.h"

namespace mlc {
namespace {

constexpr std::string_view kQuote = kGemmaQuote;

std::string Quoted(const std::string& s) { return std::string(kQuote) + s + std::string(kQuote); }

// Jinja's truth of a value: not null, false, 0, "" or an empty container.
bool Truthy(const OrderedJson* v) {
  if (!v || v->is_null()) return false;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_string() || v->is_array() || v->is_object()) return !v->empty();
  if (v->is_number_integer()) return v->get<int64_t>() != 0;
  if (v->is_number()) return v->get<double>() != 0;
  return true;
}

const OrderedJson* Member(const OrderedJson& v, const char* key) {
  return v.is_object() && v.contains(key) ? &v[key] : nullptr;
}

std::string UpperAscii(std::string s) {
  for (char& c : s) c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  return s;
}

// Python's str() of a number, true/false as the template writes them, None for null.
std::string PythonScalar(const OrderedJson& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

// Jinja's `x | upper` of a schema's type: a name, a list shown as Python shows it, "" when absent.
std::string UpperType(const OrderedJson* v) {
  if (!v) return "";
  if (v->is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v->size(); ++i) out += (i ? ", '" : "'") + PythonScalar((*v)[i]) + "'";
    return UpperAscii(out + "]");
  }
  return UpperAscii(PythonScalar(*v));
}

// The list of names a "required" holds.
std::string RequiredList(const OrderedJson& names) {
  std::string out = "required:[";
  for (size_t i = 0; names.is_array() && i < names.size(); ++i) {
    out += (i ? "," : "") + Quoted(PythonScalar(names[i]));
  }
  return out + "]";
}

std::string FormatParameters(const OrderedJson& properties);

// The keys of an "items" schema, in order.
std::string FormatItems(const OrderedJson& items) {
  std::string out = "items:{";
  bool first = true;
  for (const std::string& key : DialectKeyOrder(items)) {
    const OrderedJson& v = items[key];
    if (v.is_null()) continue;
    if (!first) out += ",";
    first = false;
    if (key == "properties") {
      out += "properties:{" + (v.is_object() ? FormatParameters(v) : std::string()) + "}";
    } else if (key == "required") {
      out += RequiredList(v);
    } else if (key == "type") {
      if (v.is_string()) {
        out += "type:" + Quoted(UpperAscii(v.get<std::string>()));
      } else {
        OrderedJson upper = OrderedJson::array();
        for (const OrderedJson& t : v) upper.push_back(UpperAscii(PythonScalar(t)));
        out += "type:" + Gemma4Value(upper, true);
      }
    } else {
      out += key + ":" + Gemma4Value(v, true);
    }
  }
  return out + "}";
}

// The template's format_parameters: each property (but those named like the schema's own keys)
// with its description, enum, items, nullable, nested properties and type.
std::string FormatParameters(const OrderedJson& properties) {
  static const std::set<std::string> kStandard = {"description", "type", "properties", "required", "nullable"};
  std::string out;
  bool first = true;
  for (const std::string& key : DialectKeyOrder(properties)) {
    if (kStandard.count(key)) continue;
    const OrderedJson& value = properties[key];
    if (!first) out += ",";
    first = false;
    out += key + ":{";
    bool comma = false;
    auto separate = [&] {
      if (comma) out += ",";
      comma = true;
    };
    if (const OrderedJson* d = Member(value, "description"); Truthy(d)) {
      out += "description:" + Quoted(PythonScalar(*d));
      comma = true;
    }
    const std::string type = UpperType(Member(value, "type"));
    if (type == "STRING") {
      if (const OrderedJson* e = Member(value, "enum"); Truthy(e)) {
        separate();
        out += "enum:" + Gemma4Value(*e, true);
      }
    } else if (type == "ARRAY") {
      if (const OrderedJson* items = Member(value, "items"); items && items->is_object() && !items->empty()) {
        separate();
        out += FormatItems(*items);
      }
    }
    if (Truthy(Member(value, "nullable"))) {
      separate();
      out += "nullable:true";
    }
    if (type == "OBJECT") {
      const OrderedJson* props = Member(value, "properties");
      if (props && props->is_object()) {
        separate();
        out += "properties:{" + FormatParameters(*props) + "}";
      } else if (value.is_object()) {
        separate();
        out += "properties:{" + FormatParameters(value) + "}";
      }
      if (const OrderedJson* r = Member(value, "required"); Truthy(r)) {
        separate();
        out += RequiredList(*r);
      }
    }
    separate();
    out += "type:" + Quoted(type) + "}";
  }
  return out;
}

// What Gemma writes in place of each `<|channel>...<channel|>` thought: nothing; then trimmed.
std::string StripThinking(const std::string& text) {
  std::string out;
  size_t at = 0;
  for (;;) {
    const size_t end = text.find("<channel|>", at);
    const std::string part = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    const size_t open = part.find("<|channel>");
    out += open == std::string::npos ? part : part.substr(0, open);
    if (end == std::string::npos) break;
    at = end + std::string_view("<channel|>").size();
  }
  return JinjaTrim(out);
}

// ---- reading the dialect back ----

class DialectReader {
 public:
  explicit DialectReader(std::string_view text) : t_(text) {}
  std::optional<OrderedJson> Read() {
    auto v = Value(0);
    if (!v || i_ != t_.size()) return std::nullopt;
    return v;
  }

 private:
  static constexpr int kMaxDepth = 64;
  bool Eat(char c) {
    while (i_ < t_.size() && t_[i_] == ' ') ++i_;
    if (i_ < t_.size() && t_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::optional<OrderedJson> Value(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    while (i_ < t_.size() && t_[i_] == ' ') ++i_;
    if (t_.substr(i_, kQuote.size()) == kQuote) {
      const size_t end = t_.find(kQuote, i_ + kQuote.size());
      if (end == std::string_view::npos) return std::nullopt;
      OrderedJson s = std::string(t_.substr(i_ + kQuote.size(), end - i_ - kQuote.size()));
      i_ = end + kQuote.size();
      return s;
    }
    if (Eat('{')) {
      OrderedJson o = OrderedJson::object();
      if (Eat('}')) return o;
      do {
        while (i_ < t_.size() && t_[i_] == ' ') ++i_;
        const size_t colon = t_.find(':', i_);
        if (colon == std::string_view::npos || colon == i_) return std::nullopt;
        std::string key(t_.substr(i_, colon - i_));
        i_ = colon + 1;
        auto v = Value(depth + 1);
        if (!v) return std::nullopt;
        o[key] = std::move(*v);
      } while (Eat(','));
      if (!Eat('}')) return std::nullopt;
      return o;
    }
    if (Eat('[')) {
      OrderedJson a = OrderedJson::array();
      if (Eat(']')) return a;
      do {
        auto v = Value(depth + 1);
        if (!v) return std::nullopt;
        a.push_back(std::move(*v));
      } while (Eat(','));
      if (!Eat(']')) return std::nullopt;
      return a;
    }
    // A number, true, false or null: up to the next ',', '}' or ']'.
    size_t end = i_;
    while (end < t_.size() && t_[end] != ',' && t_[end] != '}' && t_[end] != ']') ++end;
    OrderedJson v = OrderedJson::parse(t_.substr(i_, end - i_), nullptr, false);
    if (v.is_discarded() || v.is_object() || v.is_array() || v.is_string()) return std::nullopt;
    i_ = end;
    return v;
  }
  std::string_view t_;
  size_t i_ = 0;
};

}  // namespace

std::string JinjaTrim(const std::string& s) {
  const char* space = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(space);
  return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(space) - b + 1);
}

std::string Gemma4Value(const OrderedJson& v, bool escape_keys) {
  if (v.is_string()) return Quoted(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const std::string& key : DialectKeyOrder(v)) {
      if (!first) out += ",";
      first = false;
      out += (escape_keys ? Quoted(key) : key) + ":" + Gemma4Value(v[key], escape_keys);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "," : "") + Gemma4Value(v[i], escape_keys);
    return out + "]";
  }
  return PythonScalar(v);
}

std::string Gemma4Declaration(const OrderedJson& tool) {
  const OrderedJson* fn = Member(tool, "function");
  const OrderedJson empty = OrderedJson::object();
  const OrderedJson& f = fn ? *fn : empty;
  const OrderedJson* name = Member(f, "name");
  const OrderedJson* description = Member(f, "description");
  std::string out = "declaration:" + (name ? PythonScalar(*name) : std::string()) + "{description:" +
                    Quoted(description && !description->is_null() ? PythonScalar(*description) : "");
  const OrderedJson* params = Member(f, "parameters");
  if (Truthy(params)) {
    out += ",parameters:{";
    if (const OrderedJson* p = Member(*params, "properties"); Truthy(p)) {
      out += "properties:{" + FormatParameters(*p) + "},";
    }
    if (const OrderedJson* r = Member(*params, "required"); Truthy(r)) out += RequiredList(*r) + ",";
    if (const OrderedJson* t = Member(*params, "type"); Truthy(t)) out += "type:" + Quoted(UpperType(t)) + "}";
  }
  return JinjaTrim(out + "}");
}

std::string Gemma4Call(const ToolCall& call, const OrderedJson& arguments) {
  std::string out = "<|tool_call>call:" + call.name + "{";
  bool first = true;
  for (const std::string& key : DialectKeyOrder(arguments)) {
    if (!first) out += ",";
    first = false;
    out += key + ":" + Gemma4Value(arguments[key], false);
  }
  return out + "}<tool_call|>";
}

std::string Gemma4Response(const std::string& name, const std::string& text) {
  return "<|tool_response>response:" + name + "{value:" + Quoted(text) + "}<tool_response|>";
}

std::string Gemma4ModelText(const std::string& content) { return StripThinking(content); }

std::optional<OrderedJson> ReadGemma4Arguments(std::string_view text) {
  auto v = DialectReader(text).Read();
  if (!v || !v->is_object()) return std::nullopt;
  return v;
}

}  // namespace mlc
