// The paged KV cache of the CPU program (see kv_cache.h): a pool of pages, page tables per
// sequence, window and sink bookkeeping. Errors are values; no call past a checked Reserve can
// reach outside a page.
#include "runtime/cpu/kv_cache.h"

#include <algorithm>

namespace mlc::cpu {
namespace {
constexpr const char* kWhere = "create_tir_paged_kv_cache: ";
}

PagedKvCache::PagedKvCache(KvCacheShape shape) : shape_(shape) {
  int64_t window_pages = (shape_.max_total_seq_len + shape_.page_size - 1) / shape_.page_size;
  int64_t chunk_pages = (shape_.prefill_chunk_size + shape_.page_size - 1) / shape_.page_size;
  int64_t sink_pages = (SinkEnd() + shape_.page_size - 1) / shape_.page_size;
  // A sliding sequence holds its window, the chunk being written and the sinks' pages.
  max_pages_ = shape_.max_batch_size *
               (window_pages + (shape_.sliding ? chunk_pages + sink_pages + 1 : 0));
  seqs_[0] = Sequence{};
}

int64_t PagedKvCache::TotalLength() const { return Length(0); }

int64_t PagedKvCache::Length(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.length;
}

Status PagedKvCache::AddSequence(int64_t seq_id) {
  if (seqs_.count(seq_id)) return Invalid("", std::string(kWhere) + "sequence " + std::to_string(seq_id) + " exists");
  if (static_cast<int64_t>(seqs_.size()) >= shape_.max_batch_size) {
    return Error{ErrorCode::kLimit, "", std::string(kWhere) +
                 "the cache holds max_batch_size = " + std::to_string(shape_.max_batch_size) +
                     " sequences"};
  }
  seqs_[seq_id] = Sequence{};
  return Status::Ok();
}

Status PagedKvCache::RemoveSequence(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return Invalid("", std::string(kWhere) + "no sequence " + std::to_string(seq_id));
  for (int32_t p : it->second.pages) {
    if (p >= 0) free_.push_back(p);
  }
  seqs_.erase(it);
  return Status::Ok();
}

int32_t PagedKvCache::NewPage() {
  if (!free_.empty()) {
    int32_t p = free_.back();
    free_.pop_back();
    return p;
  }
  pages_.emplace_back(static_cast<size_t>(shape_.num_layers * 2 * shape_.page_size * row_size()));
  return static_cast<int32_t>(pages_.size() - 1);
}

Status PagedKvCache::Reserve(int64_t seq_id, int64_t n) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return Invalid("", std::string(kWhere) + "no sequence " + std::to_string(seq_id));
  Sequence& s = it->second;
  if (n > shape_.prefill_chunk_size) {
    return Error{ErrorCode::kLimit, "", std::string(kWhere) +
                 "a chunk of " + std::to_string(n) + " positions is longer than prefill_chunk_size " +
                     std::to_string(shape_.prefill_chunk_size)};
  }
  if (!shape_.sliding && s.length + n > shape_.max_total_seq_len) {
    return Error{ErrorCode::kLimit, "", std::string(kWhere) +
                 "the sequence would hold " + std::to_string(s.length + n) +
                     " positions, more than the context window of " +
                     std::to_string(shape_.max_total_seq_len)};
  }
  int64_t needed = (s.length + n + shape_.page_size - 1) / shape_.page_size;
  int64_t new_pages = needed - static_cast<int64_t>(s.pages.size());
  if (new_pages > 0 && pages_in_use() + new_pages > max_pages_) {
    return Error{ErrorCode::kLimit, "", std::string(kWhere) + "the KV cache's pages are all in use"};
  }
  while (static_cast<int64_t>(s.pages.size()) < needed) s.pages.push_back(NewPage());
  return Status::Ok();
}

int64_t PagedKvCache::WindowStart(int64_t pos) const {
  if (!shape_.sliding) return 0;
  return std::max<int64_t>(0, pos - shape_.sliding_window + 1);
}

void PagedKvCache::Commit(int64_t seq_id, int64_t n) {
  Sequence& s = seqs_.at(seq_id);
  s.length += n;
  if (!shape_.sliding) return;
  // The next query (at s.length) sees [WindowStart(s.length), s.length] and the sinks.
  int64_t first_needed = WindowStart(s.length);
  for (size_t i = 0; i < s.pages.size(); ++i) {
    int64_t begin = static_cast<int64_t>(i) * shape_.page_size;
    int64_t end = begin + shape_.page_size;
    if (s.pages[i] >= 0 && end <= first_needed && begin >= SinkEnd()) {
      free_.push_back(s.pages[i]);
      s.pages[i] = -1;
    }
  }
}

float* PagedKvCache::Row(int64_t seq_id, int64_t layer, int64_t pos, int which) {
  Sequence& s = seqs_.at(seq_id);
  int32_t page = s.pages[static_cast<size_t>(pos / shape_.page_size)];
  std::vector<float>& data = pages_[static_cast<size_t>(page)];
  int64_t slot = ((layer * 2 + which) * shape_.page_size + pos % shape_.page_size) * row_size();
  return data.data() + slot;
}

float* PagedKvCache::Key(int64_t seq_id, int64_t layer, int64_t pos) {
  return Row(seq_id, layer, pos, 0);
}

float* PagedKvCache::Value(int64_t seq_id, int64_t layer, int64_t pos) {
  return Row(seq_id, layer, pos, 1);
}

}  // namespace mlc::cpu
