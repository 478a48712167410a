// The BPE model of Hugging Face tokenizers (see bpe.h).
#include "text/bpe.h"

#include <cstdio>
#include <queue>

#include "text/unicode.h"

namespace mlc::text {
namespace {

constexpr uint64_t kEmpty = ~uint64_t{0};

uint64_t Mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// A pending merge: the pair starting at symbol `pos` becomes `id`; lowest rank first, then
// leftmost.
struct Merge {
  int32_t rank;
  int32_t pos;
  int32_t id;
  bool operator<(const Merge& o) const {  // "less urgent than" for std::priority_queue
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool alive;
};

std::optional<std::string> OptionalString(const Json& obj, const char* key, const std::string& path,
                                          Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected a string or null"));
    return std::nullopt;
  }
  return it->get<std::string>();
}

bool OptionalBool(const Json& obj, const char* key, const std::string& path, Errors* errors) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return false;
  if (!it->is_boolean()) {
    errors->push_back(Invalid(PointerAppend(path, key), "expected true, false or null"));
    return false;
  }
  return it->get<bool>();
}

// A merge entry: "a b" or ["a", "b"].
bool ParseMerge(const Json& m, const std::string& path, std::string* a, std::string* b,
                Errors* errors) {
  if (m.is_string()) {
    const std::string& s = m.get_ref<const std::string&>();
    size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      errors->push_back(Invalid(path, "expected a merge \"a b\" with exactly one space"));
      return false;
    }
    *a = s.substr(0, space);
    *b = s.substr(space + 1);
    return true;
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    *a = m[0].get<std::string>();
    *b = m[1].get<std::string>();
    return true;
  }
  errors->push_back(Invalid(path, "expected a merge as \"a b\" or [\"a\", \"b\"]"));
  return false;
}

}  // namespace

void PairMap::Reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  keys_.assign(cap, kEmpty);
  values_.assign(cap, Value{0, 0});
  mask_ = cap - 1;
  size_ = 0;
}

size_t PairMap::Slot(uint64_t key) const {
  size_t i = Mix(key) & mask_;
  while (keys_[i] != kEmpty && keys_[i] != key) i = (i + 1) & mask_;
  return i;
}

void PairMap::Insert(int32_t a, int32_t b, Value v) {
  if ((size_ + 1) * 2 > keys_.size()) {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<Value> old_values = std::move(values_);
    Reserve(old_keys.size());
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] == kEmpty) continue;
      size_t s = Slot(old_keys[i]);
      keys_[s] = old_keys[i];
      values_[s] = old_values[i];
      ++size_;
    }
  }
  uint64_t key = Key(a, b);
  size_t s = Slot(key);
  if (keys_[s] == kEmpty) ++size_;
  keys_[s] = key;
  values_[s] = v;
}

const PairMap::Value* PairMap::Find(int32_t a, int32_t b) const {
  if (keys_.empty()) return nullptr;
  size_t s = Slot(Key(a, b));
  return keys_[s] == kEmpty ? nullptr : &values_[s];
}

Result<std::unique_ptr<BpeModel>> BpeModel::Parse(const Json& model, const std::string& path) {
  Errors errors;
  auto bpe = std::make_unique<BpeModel>();
  auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return Error{ErrorCode::kUnsupported, PointerAppend(path, "dropout"),
                 "BPE dropout is random; expected null (the reference encodes without it)"};
  }
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return Invalid(PointerAppend(path, "vocab"), "expected an object of token -> id");
  }
  bpe->vocab_.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    std::optional<int64_t> id = SafeInteger(it.value());
    if (!id || *id < 0 || *id > INT32_MAX) {
      AddError(errors, Invalid(PointerAppend(PointerAppend(path, "vocab"), it.key()),
                               "expected a token id from 0 to 2147483647"));
      continue;
    }
    bpe->vocab_.emplace(it.key(), static_cast<int32_t>(*id));
    bpe->vocab_r_.emplace(static_cast<int32_t>(*id), it.key());
  }
  bpe->fuse_unk_ = OptionalBool(model, "fuse_unk", path, &errors);
  bpe->byte_fallback_ = OptionalBool(model, "byte_fallback", path, &errors);
  bpe->ignore_merges_ = OptionalBool(model, "ignore_merges", path, &errors);
  bpe->prefix_ = OptionalString(model, "continuing_subword_prefix", path, &errors).value_or("");
  bpe->suffix_ = OptionalString(model, "end_of_word_suffix", path, &errors).value_or("");
  if (auto unk = OptionalString(model, "unk_token", path, &errors)) {
    auto it = bpe->vocab_.find(*unk);
    if (it == bpe->vocab_.end()) {
      AddError(errors, Invalid(PointerAppend(path, "unk_token"), "expected a token of the vocab"));
    } else {
      bpe->unk_id_ = it->second;
    }
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    auto it = bpe->vocab_.find(std::string_view(name));
    bpe->byte_ids_[b] = it == bpe->vocab_.end() ? -1 : it->second;
  }
  auto merges = model.find("merges");
  std::string merges_path = PointerAppend(path, "merges");
  if (merges != model.end() && !merges->is_null()) {
    if (!merges->is_array()) return Invalid(merges_path, "expected an array of merges");
    bpe->merges_.Reserve(merges->size());
    for (size_t i = 0; i < merges->size(); ++i) {
      std::string at = PointerAppend(merges_path, i), a, b;
      if (!ParseMerge((*merges)[i], at, &a, &b, &errors)) continue;
      if (b.size() < bpe->prefix_.size()) {
        AddError(errors, Invalid(at, "expected the merge's second part to hold the subword prefix"));
        continue;
      }
      // As the reference: the merged token is a + b without the continuing-subword prefix.
      auto ia = bpe->vocab_.find(a), ib = bpe->vocab_.find(b);
      auto im = bpe->vocab_.find(a + b.substr(bpe->prefix_.size()));
      if (ia == bpe->vocab_.end() || ib == bpe->vocab_.end() || im == bpe->vocab_.end()) {
        AddError(errors, Invalid(at, "expected a merge whose parts and result are in the vocab"));
        continue;
      }
      bpe->merges_.Insert(ia->second, ib->second,
                          PairMap::Value{static_cast<int32_t>(i), im->second});
    }
  }
  if (!errors.empty()) return errors;
  return bpe;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  auto it = vocab_r_.find(id);
  return it == vocab_r_.end() ? nullptr : &it->second;
}

void BpeModel::Tokenize(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(word);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> word_ids;
  MergeWord(word, &word_ids);
  ids->insert(ids->end(), word_ids.begin(), word_ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() < kCacheCapacity) cache_.emplace(std::string(word), std::move(word_ids));
  }
}

// One character (with prefix/suffix already applied) -> its symbol(s).
void BpeModel::AddChar(std::string_view piece, bool* unk_open,
                       std::vector<int32_t>* symbols) const {
  auto it = vocab_.find(piece);
  if (it != vocab_.end()) {
    if (*unk_open) symbols->push_back(*unk_id_);
    *unk_open = false;
    symbols->push_back(it->second);
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (char c : piece) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all) {  // a pending unknown token stays pending, as in the reference
      for (char c : piece) symbols->push_back(byte_ids_[static_cast<unsigned char>(c)]);
      return;
    }
  }
  if (!unk_id_) return;  // no unknown token: the character is dropped
  if (*unk_open && !fuse_unk_) symbols->push_back(*unk_id_);
  *unk_open = true;
}

void BpeModel::MergeWord(std::string_view word, std::vector<int32_t>* ids) const {
  std::vector<int32_t> symbols;
  symbols.reserve(word.size());
  bool unk_open = false;
  std::string piece;
  size_t i = 0;
  while (i < word.size()) {
    size_t len = Utf8Length(static_cast<unsigned char>(word[i]));
    if (i + len > word.size()) len = word.size() - i;
    bool first = i == 0, last = i + len == word.size();
    if ((first || prefix_.empty()) && (!last || suffix_.empty())) {
      AddChar(word.substr(i, len), &unk_open, &symbols);
    } else {
      piece.clear();
      if (!first) piece += prefix_;
      piece += word.substr(i, len);
      if (last) piece += suffix_;
      AddChar(piece, &unk_open, &symbols);
    }
    i += len;
  }
  if (unk_open) symbols.push_back(*unk_id_);
  ApplyMerges(&symbols);
  ids->insert(ids->end(), symbols.begin(), symbols.end());
}

void BpeModel::ApplyMerges(std::vector<int32_t>* ids) const {
  size_t n = ids->size();
  if (n < 2) return;
  std::vector<Symbol> sym(n);
  std::vector<Merge> heap_storage;
  heap_storage.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    sym[k] = Symbol{(*ids)[k], static_cast<int32_t>(k) - 1,
                    k + 1 < n ? static_cast<int32_t>(k + 1) : -1, true};
  }
  for (size_t k = 0; k + 1 < n; ++k) {
    if (const PairMap::Value* m = merges_.Find(sym[k].id, sym[k + 1].id)) {
      heap_storage.push_back(Merge{m->rank, static_cast<int32_t>(k), m->id});
    }
  }
  std::priority_queue<Merge> queue(std::less<Merge>(), std::move(heap_storage));
  while (!queue.empty()) {
    Merge top = queue.top();
    queue.pop();
    Symbol& cur = sym[top.pos];
    if (!cur.alive || cur.next < 0) continue;
    int32_t right = cur.next;
    const PairMap::Value* m = merges_.Find(cur.id, sym[right].id);
    if (m == nullptr || m->id != top.id) continue;  // stale entry
    cur.id = top.id;
    cur.next = sym[right].next;
    sym[right].alive = false;
    if (cur.next >= 0) sym[cur.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const PairMap::Value* p = merges_.Find(sym[cur.prev].id, cur.id)) {
        queue.push(Merge{p->rank, cur.prev, p->id});
      }
    }
    if (cur.next >= 0) {
      if (const PairMap::Value* p = merges_.Find(cur.id, sym[cur.next].id)) {
        queue.push(Merge{p->rank, top.pos, p->id});
      }
    }
  }
  ids->clear();
  for (int32_t k = 0; k >= 0; k = sym[k].next) ids->push_back(sym[k].id);
}

}  // namespace mlc::text
