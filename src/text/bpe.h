// The byte-pair-encoding model of Hugging Face tokenizers: merges applied by lowest rank
// (leftmost on ties) with a priority queue over a linked list of symbols, byte fallback to
// <0xXX> tokens, unknown-token fusing, ignore_merges, subword prefix / word suffix, and a
// bounded cache of word encodings.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/json.h"

namespace mlc::text {

// Hash for heterogeneous lookup of std::string keys by std::string_view.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

// Open-addressing map from a pair of token ids to (merge rank, merged id).
class PairMap {
 public:
  struct Value {
    int32_t rank;
    int32_t id;
  };
  void Reserve(size_t n);
  void Insert(int32_t a, int32_t b, Value v);  // replaces an existing entry
  const Value* Find(int32_t a, int32_t b) const;

 private:
  static uint64_t Key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  size_t Slot(uint64_t key) const;
  std::vector<uint64_t> keys_;
  std::vector<Value> values_;
  size_t size_ = 0;
  size_t mask_ = 0;
};

class BpeModel {
 public:
  // Reads a "BPE" model object at `path` (the document's /model).
  static Result<std::unique_ptr<BpeModel>> Parse(const Json& model, const std::string& path);

  // Appends the ids of one pre-tokenized word.
  void Tokenize(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(std::string_view token) const;
  const std::string* IdToToken(int32_t id) const;
  const Vocab& vocab() const { return vocab_; }

 private:
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  void AddChar(std::string_view piece, bool* unk_open, std::vector<int32_t>* symbols) const;
  void ApplyMerges(std::vector<int32_t>* symbols) const;

  Vocab vocab_;
  std::unordered_map<int32_t, std::string> vocab_r_;
  PairMap merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
  int32_t byte_ids_[256];  // <0xXX> ids for byte fallback, -1 when absent

  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>>
      cache_;
};

}  // namespace mlc::text
