// A response_format schema's "$ref" resolved to one canonical target: the fragment's
// percent-encoding and JSON Pointer escapes (~0, ~1) decoded, so every spelling of one target
// names the same node.
#pragma once

#include <string>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc {

struct SchemaRefTarget {
  const OrderedJson* node = nullptr;  // inside the root schema
  std::string pointer;                // canonical JSON Pointer of node ("" for the root)
};

// "#" or "#/a/b" into root (objects only). kInvalid for a malformed fragment (a bad %XX or a
// "~" not followed by 0 or 1), kUnsupported for a reference outside the schema or to nothing;
// the errors' path is "" (the caller puts the $ref's pointer there).
Result<SchemaRefTarget> ResolveSchemaRef(const OrderedJson& root, const std::string& ref);

}  // namespace mlc
