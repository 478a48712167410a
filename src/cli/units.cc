// Units on the command line: byte-size options taking suffixes ("8GiB"), and the edit distance
// behind "did you mean".
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "cli/command.h"

namespace mlc::cli {

CLI::Validator ByteSize() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        Result<int64_t> n = ParseByteSize(value);
        if (!n) return n.error().message;
        value = std::to_string(*n);
        return "";
      },
      "SIZE", "byte size");
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace mlc::cli
