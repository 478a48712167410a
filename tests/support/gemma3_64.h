// An independent float64 Gemma 3 text decoder for the Gemma 3 tests, written from Hugging Face's
// Gemma3TextModel over a package's text_config and parameters (norm gains stored with Gemma's + 1
// folded in, as MLC's loader stores them): sliding layers with the local rotary, every
// sliding_window_pattern-th layer global with the scaled global rotary, q/k norms.
#pragma once

#include <cstdint>
#include <vector>

#include "mlc_manifest/json.h"
#include "support/reference64.h"

namespace mlc::test {

struct Gemma3Reference64 {
  const Json& text;  // model_config.text_config, kwargs merged, vocab_size present
  const Params64& p;
  bool q8 = false;  // 4-bit weights: activations rounded to int8 blocks as the kernels do

  // The input rows of tokens: their embeddings times sqrt(hidden).
  std::vector<Vec> TokenRows(const std::vector<int32_t>& ids) const;
  // Logits at every position of a sequence of input rows (token rows, or adapter rows as they are).
  std::vector<Vec> RunRows(const std::vector<Vec>& rows) const;
  // Logits at every position of a token sequence.
  std::vector<Vec> Run(const std::vector<int32_t>& ids) const;
};

}  // namespace mlc::test
