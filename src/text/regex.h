// Oniguruma regular expressions as Hugging Face tokenizers runs them (the `onig` crate:
// UTF-8, the library's default syntax, no options), with the crate's iteration over matches.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mlc_manifest/error.h"

namespace mlc::text {

class Regex {
 public:
  // Compiles pattern; a bad pattern is an error at `path`.
  static Result<std::shared_ptr<const Regex>> Compile(const std::string& pattern,
                                                      const std::string& path);
  // A pattern matching `literal` exactly.
  static std::string Escape(std::string_view literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every match of the pattern in text, left to right, as [start, end) byte offsets. An empty
  // match right where the previous match ended is skipped (the search moves on one character).
  std::vector<std::pair<size_t, size_t>> FindAll(std::string_view text) const;
  // FindAll's matches handed to on_match one at a time, as they are found (no list is built).
  void ForEachMatch(std::string_view text,
                    const std::function<void(size_t begin, size_t end)>& on_match) const;

 private:
  explicit Regex(void* handle) : handle_(handle) {}
  void* handle_;  // regex_t*
};

}  // namespace mlc::text
