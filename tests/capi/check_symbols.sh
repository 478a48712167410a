#!/usr/bin/env bash
# Compares the dynamic symbols libmlc_manifest.so defines with the checked-in list of the C API
# (tests/capi/symbols.txt): anything exported beyond the list, or listed but missing, fails.
#   check_symbols.sh LIBRARY EXPECTED_LIST
set -euo pipefail
lib=$1
expected=$2
actual=$(nm -D --defined-only --format=posix "$lib" | awk '{print $1}' | sort -u)
if ! diff -u "$expected" <(printf '%s\n' "$actual"); then
  echo "check_symbols: the exported symbols of $lib differ from $expected" >&2
  exit 1
fi
echo "check_symbols: $(wc -l < "$expected") symbols, as listed"
