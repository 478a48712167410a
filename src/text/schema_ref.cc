// Resolution of a schema's "$ref" to its canonical target (see schema_ref.h).
#include "text/schema_ref.h"

#include "base/ascii.h"

namespace mlc {
namespace {

constexpr const char* kSupported = "(supported: \"#\", \"#/$defs/NAME\", \"#/definitions/NAME\")";

// A URI fragment's %XX escapes decoded.
Result<std::string> PercentDecoded(const std::string& fragment) {
  std::string out;
  out.reserve(fragment.size());
  for (size_t i = 0; i < fragment.size(); ++i) {
    if (fragment[i] != '%') {
      out.push_back(fragment[i]);
      continue;
    }
    int hi = i + 2 < fragment.size() ? HexDigitValue(fragment[i + 1]) : -1;
    int lo = hi >= 0 ? HexDigitValue(fragment[i + 2]) : -1;
    if (lo < 0) {
      return Invalid("", "the $ref's fragment has a '%' not followed by two hex digits (byte " +
                             std::to_string(i + 1) + ")");
    }
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

// One reference token's ~0 and ~1 decoded (RFC 6901); any other '~' is an error.
Result<std::string> TokenDecoded(std::string_view token) {
  std::string name;
  name.reserve(token.size());
  for (size_t k = 0; k < token.size(); ++k) {
    if (token[k] != '~') {
      name.push_back(token[k]);
      continue;
    }
    if (k + 1 >= token.size() || (token[k + 1] != '0' && token[k + 1] != '1')) {
      return Invalid("", "the $ref's JSON Pointer has a '~' not followed by 0 or 1");
    }
    name.push_back(token[k + 1] == '0' ? '~' : '/');
    ++k;
  }
  return name;
}

}  // namespace

Result<SchemaRefTarget> ResolveSchemaRef(const OrderedJson& root, const std::string& ref) {
  if (ref.empty() || ref[0] != '#') {
    return Error{ErrorCode::kUnsupported, "",
                 "the $ref \"" + ref + "\" does not point into this schema " + kSupported};
  }
  auto pointer = PercentDecoded(ref.substr(1));
  MLC_RETURN_IF_ERROR(pointer);
  if (!pointer->empty() && (*pointer)[0] != '/') {
    return Error{ErrorCode::kUnsupported, "",
                 "the $ref \"" + ref + "\" is not a JSON Pointer fragment " + kSupported};
  }
  SchemaRefTarget target{&root, ""};
  size_t i = 0;
  while (i < pointer->size()) {
    size_t end = pointer->find('/', i + 1);
    if (end == std::string::npos) end = pointer->size();
    auto name = TokenDecoded(std::string_view(*pointer).substr(i + 1, end - i - 1));
    MLC_RETURN_IF_ERROR(name);
    if (!target.node->is_object() || !target.node->contains(*name)) {
      return Error{ErrorCode::kUnsupported, "",
                   "the $ref \"" + ref + "\" does not point into this schema " + kSupported};
    }
    target.node = &(*target.node)[*name];
    target.pointer = PointerAppend(target.pointer, *name);
    i = end;
  }
  return target;
}

}  // namespace mlc
