// The strict JSON reader: nlohmann's SAX lexer (which validates UTF-8 and never recurses)
// feeding a DOM builder that rejects duplicate keys and excess depth and knows, at every
// moment, the JSON Pointer of the value it is reading.
#include <cmath>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/json.h"

namespace mlc {
namespace {

class StrictBuilder : public nlohmann::json_sax<Json> {
 public:
  StrictBuilder(std::string_view text, const JsonLimits& limits) : text_(text), limits_(limits) {}

  bool null() override { return Put(Json(nullptr)); }
  bool boolean(bool v) override { return Put(Json(v)); }
  bool number_integer(number_integer_t v) override { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return Put(Json(v)); }
  bool string(string_t& v) override { return Put(Json(std::move(v))); }
  bool binary(binary_t&) override { return Fail("binary values are not JSON"); }

  bool start_object(std::size_t) override { return Open(Json::object()); }
  bool start_array(std::size_t) override { return Open(Json::array()); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

  bool key(string_t& k) override {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      f.key = k;
      f.key_pending = true;
      return Fail("duplicate key \"" + k + "\" (a key may appear once per object)");
    }
    f.key = std::move(k);
    f.key_pending = true;
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (error_.message.empty()) {
      std::string what = ex.what();
      // Drop nlohmann's "[json.exception.parse_error.101] " prefix; keep the explanation.
      size_t close = what.find("] ");
      if (close != std::string::npos) what = what.substr(close + 2);
      // ... and its "parse error at line L, column C: ": Where() says that, with the byte.
      size_t colon = what.rfind("parse error", 0) == 0 ? what.find(": ") : std::string::npos;
      if (colon != std::string::npos) what = what.substr(colon + 2);
      error_ = Invalid(CurrentPointer(), "malformed JSON at " + Where(position) + ": " + what);
    }
    return false;
  }

  Result<Json> Take() {
    if (!error_.message.empty()) return error_;
    return std::move(root_);
  }

 private:
  struct Frame {
    Json* node;
    std::set<std::string> keys;  // for objects: keys seen so far
    std::string key;             // for objects: the key of the value being read
    bool key_pending = false;    // for objects: `key` is read and its value is not finished
    size_t index = 0;            // for arrays: the index of the value being read
  };

  // Pointer of the value being read now: the innermost open container's current child, or the
  // container itself when it is between members (a text cut after `{"audio": {` points at
  // /audio, not at an empty key below it).
  std::string CurrentPointer() const {
    std::string p;
    for (const Frame& f : stack_) {
      if (!f.node->is_object()) {
        p = PointerAppend(p, f.index);
      } else if (f.key_pending) {
        p = PointerAppend(p, f.key);
      } else {
        break;
      }
    }
    return p;
  }

  // "line L, column C (byte B)" for the lexer's position (bytes read so far, so the offending
  // byte is the one before it); "end of input" when the text ran out first.
  std::string Where(std::size_t position) const {
    size_t byte = position > 0 ? position - 1 : 0;
    bool at_end = position > text_.size();
    if (byte > text_.size()) byte = text_.size();
    size_t line = 1;
    size_t line_start = 0;
    for (size_t i = 0; i < byte; ++i) {
      if (text_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    std::string where = "line " + std::to_string(line) + ", column " +
                        std::to_string(byte - line_start + 1) + " (byte " + std::to_string(byte);
    return where + (at_end ? ", the end of input)" : ")");
  }

  bool Fail(std::string message) {
    if (error_.message.empty()) error_ = Invalid(CurrentPointer(), std::move(message));
    return false;
  }

  Json* Place(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.node->is_object()) {
      return &((*f.node)[f.key] = std::move(v));
    }
    f.node->push_back(std::move(v));
    return &f.node->back();
  }

  // The value being read is finished: arrays move to the next index, objects wait for a key.
  void Advance() {
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    if (f.node->is_array()) {
      ++f.index;
    } else {
      f.key_pending = false;
    }
  }

  // Every value counts against max_values before it is stored.
  bool Count() {
    if (limits_.max_values != 0 && ++values_ > limits_.max_values) {
      return Fail("more values than the limit of " + std::to_string(limits_.max_values));
    }
    return true;
  }

  bool Put(Json&& v) {
    if (!Count()) return false;
    Place(std::move(v));
    Advance();
    return true;
  }

  bool Open(Json&& container) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      return Fail("nesting deeper than the limit of " + std::to_string(limits_.max_depth));
    }
    if (!Count()) return false;
    Json* node = Place(std::move(container));
    stack_.push_back(Frame{node, {}, {}, 0});
    return true;
  }

  bool Close() {
    stack_.pop_back();
    Advance();
    return true;
  }

  std::string_view text_;
  JsonLimits limits_;
  Json root_;
  std::vector<Frame> stack_;
  uint64_t values_ = 0;
  Error error_;
};

}  // namespace

Result<Json> ParseJson(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Error{ErrorCode::kLimit, "",
                 "document is " + std::to_string(text.size()) + " bytes, over the limit of " +
                     std::to_string(limits.max_bytes)};
  }
  // RFC 8259 forbids a byte order mark in JSON text; Python's json.load refuses it too.
  if (text.substr(0, 3) == "\xEF\xBB\xBF") {
    return Invalid("", "at byte 0: a UTF-8 byte order mark; JSON text must not start with one "
                       "(save the file as UTF-8 without BOM)");
  }
  StrictBuilder builder(text, limits);
  // Strict: trailing data after the value is an error; comments are not JSON.
  Json::sax_parse(text.begin(), text.end(), &builder, nlohmann::json::input_format_t::json,
                  /*strict=*/true);
  return builder.Take();
}

Result<Json> ReadJsonFile(const std::string& path, const JsonLimits& limits,
                          const std::string& inside) {
  Result<std::string> text = ReadFile(path, limits.max_bytes, inside);
  MLC_RETURN_IF_ERROR(text);
  Result<Json> doc = ParseJson(*text, limits);
  return InDocument(std::move(doc), DocumentName(path));
}

OrderedJson ErrorsJson(const Errors& errors) {
  OrderedJson list = OrderedJson::array();
  for (const Error& e : CapErrors(errors)) {
    list.push_back({{"code", ErrorCodeName(e.code)},
                    {"document", e.document},
                    {"path", e.path},
                    {"message", e.message}});
  }
  return list;
}

std::string PointerAppend(const std::string& base, std::string_view token) {
  std::string out = base;
  out.reserve(base.size() + token.size() + 1);
  out += '/';
  for (char c : token) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string PointerAppend(const std::string& base, size_t index) {
  return base + "/" + std::to_string(index);
}

std::optional<int64_t> SafeInteger(const Json& value) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(kMaxSafeInteger)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) {
    int64_t i = value.get<int64_t>();
    if (i > kMaxSafeInteger || i < -kMaxSafeInteger) return std::nullopt;
    return i;
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (!std::isfinite(d) || d != std::trunc(d)) return std::nullopt;
    if (d > static_cast<double>(kMaxSafeInteger) || d < -static_cast<double>(kMaxSafeInteger)) {
      return std::nullopt;
    }
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::string JsonTypeName(const Json& value) {
  switch (value.type()) {
    case Json::value_t::object: return "an object";
    case Json::value_t::array: return "an array";
    case Json::value_t::string: return "a string";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::null: return "null";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "the integer " + value.dump();
    case Json::value_t::number_float: return "the number " + value.dump();
    default: return "a non-JSON value";
  }
}

}  // namespace mlc
