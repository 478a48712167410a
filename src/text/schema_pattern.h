// A JSON Schema string's "pattern" (an ECMA-262 regular-expression subset) and its "format"
// (built-in patterns) compiled into a ByteDfa over the string's UTF-8 bytes (see schema_pattern.cc
// for the subset).
#pragma once

#include <memory>
#include <string>

#include "mlc_manifest/error.h"
#include "text/byte_dfa.h"

namespace mlc {

// The pattern, unanchored as ECMA-262 searches (anything may come before it unless it starts
// with ^, after it unless it ends with $). kUnsupported at `at` for constructs outside the
// subset, kInvalid for a malformed pattern, kLimit past max_states.
Result<std::shared_ptr<const ByteDfa>> CompileSchemaPattern(const std::string& pattern, const std::string& at,
                                                            size_t max_states);

// The format's automaton (date-time, date, time, duration, uuid, email, ipv4, ipv6, uri);
// kUnsupported at `at` for any other name.
Result<std::shared_ptr<const ByteDfa>> CompileSchemaFormat(const std::string& format, const std::string& at,
                                                           size_t max_states);

}  // namespace mlc
