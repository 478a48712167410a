// The paged KV cache of the CPU program (see kv_cache.h): a pool of pages, page tables per
// sequence, the sequence interface, window and sink bookkeeping. Every request is checked before
// anything changes; no call past a checked Prepare can reach outside a page.
#include "runtime/cpu/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace mlc::cpu {
namespace {

constexpr const char* kWhere = "kv_cache";

// An error of a call (or of the cache itself): "where: message"; the cache has no document.
Error CallError(const std::string& where, const std::string& message,
                ErrorCode code = ErrorCode::kInvalid) {
  return Error{code, "", where + ": " + message};
}

std::string SeqName(int64_t id) { return "sequence " + std::to_string(id); }

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

PagedKvCache::PagedKvCache(KvCacheShape shape) : shape_(std::move(shape)) {
  for (const KvLayerPlan& layer : shape_.layers) {
    if (layer.use == KvUse::kOwn) {
      offsets_.push_back(page_floats_);
      page_floats_ += 2 * shape_.page_size * layer.row_size;
    } else {
      // kShared reads an earlier layer's rows (checked by the config); kNone has none.
      size_t source = static_cast<size_t>(layer.source);
      offsets_.push_back(layer.use == KvUse::kShared && source < offsets_.size() ? offsets_[source] : 0);
    }
  }
  const int64_t page = shape_.page_size;
  if (shape_.sliding) {
    // A sliding sequence holds its window, the chunk being written and the sinks' pages.
    max_pages_ = shape_.max_batch_size *
                 (CeilDiv(shape_.max_total_seq_len, page) + CeilDiv(shape_.prefill_chunk_size, page) +
                  CeilDiv(SinkEnd(), page) + 1);
  } else {
    max_pages_ = CeilDiv(shape_.max_total_seq_len, page);
  }
}

int64_t PagedKvCache::TotalLength() const {
  int64_t total = 0;
  for (const auto& [id, s] : seqs_) total += s.length;
  return total;
}

Result<int64_t> PagedKvCache::SequenceLength(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return CallError(kWhere, "no " + SeqName(seq_id));
  return it->second.length;
}

Status PagedKvCache::AddSequence(int64_t seq_id) {
  if (seq_id < 0) return CallError(kWhere, "sequence ids are >= 0, got " + std::to_string(seq_id));
  if (seqs_.count(seq_id)) return CallError(kWhere, SeqName(seq_id) + " already exists");
  if (static_cast<int64_t>(seqs_.size()) >= shape_.max_batch_size) {
    return CallError(kWhere,
                     "the cache holds max_batch_size = " + std::to_string(shape_.max_batch_size) +
                         " sequences",
                     ErrorCode::kLimit);
  }
  seqs_[seq_id] = Sequence{};
  return Status::Ok();
}

Status PagedKvCache::RemoveSequence(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return CallError(kWhere, "no " + SeqName(seq_id));
  for (int32_t p : it->second.pages) {
    if (p >= 0) Drop(p);
  }
  seqs_.erase(it);
  forward_.clear();
  return Status::Ok();
}

Status PagedKvCache::ForkSequence(int64_t parent_id, int64_t child_id) {
  auto parent = seqs_.find(parent_id);
  if (parent == seqs_.end()) return CallError(kWhere, "no " + SeqName(parent_id));
  const auto& from_pages = parent->second.pages;
  int64_t pages = std::count_if(from_pages.begin(), from_pages.end(), [](int32_t p) { return p >= 0; });
  if (pages > FreePages()) {
    return CallError(kWhere,
                     "forking " + SeqName(parent_id) + " needs " + std::to_string(pages) + " pages; " +
                         std::to_string(FreePages()) + " are free",
                     ErrorCode::kLimit);
  }
  MLC_RETURN_IF_ERROR(AddSequence(child_id));
  const Sequence& from = seqs_.at(parent_id);
  Sequence& child = seqs_.at(child_id);
  for (int32_t src : from.pages) {
    int32_t dst = -1;
    if (src >= 0) {
      dst = NewPage();
      std::memcpy(pages_[static_cast<size_t>(dst)], pages_[static_cast<size_t>(src)],
                  static_cast<size_t>(page_floats_) * sizeof(float));
    }
    child.pages.push_back(dst);
  }
  child.length = from.length;
  return Status::Ok();
}

Result<int32_t> PagedKvCache::RetainPage(int64_t seq_id, int64_t index) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return CallError(kWhere, "no " + SeqName(seq_id));
  const Sequence& s = it->second;
  if (index < 0 || (index + 1) * shape_.page_size > s.length ||
      s.pages[static_cast<size_t>(index)] < 0) {
    return CallError(kWhere, "page " + std::to_string(index) + " of " + SeqName(seq_id) +
                                 " is not a full page it holds");
  }
  const int32_t page = s.pages[static_cast<size_t>(index)];
  ++holds_[static_cast<size_t>(page)];
  return page;
}

void PagedKvCache::ReleasePage(int32_t page) {
  if (page >= 0 && static_cast<size_t>(page) < holds_.size() && holds_[static_cast<size_t>(page)] > 0) {
    Drop(page);
  }
}

Status PagedKvCache::AddSequenceWithPages(int64_t seq_id, std::span<const int32_t> pages) {
  const int64_t length = static_cast<int64_t>(pages.size()) * shape_.page_size;
  if (!shape_.sliding && length > shape_.max_total_seq_len) {
    return CallError(kWhere, std::to_string(length) + " positions are more than the context window of " +
                                 std::to_string(shape_.max_total_seq_len));
  }
  for (int32_t p : pages) {
    if (p < 0 || static_cast<size_t>(p) >= holds_.size() || holds_[static_cast<size_t>(p)] < 1) {
      return CallError(kWhere, "page " + std::to_string(p) + " is not held");
    }
  }
  MLC_RETURN_IF_ERROR(AddSequence(seq_id));
  Sequence& s = seqs_.at(seq_id);
  for (int32_t p : pages) {
    ++holds_[static_cast<size_t>(p)];
    s.pages.push_back(p);
  }
  s.length = length;
  return Status::Ok();
}

void PagedKvCache::Drop(int32_t page) {
  if (--holds_[static_cast<size_t>(page)] == 0) free_.push_back(page);
}

int64_t PagedKvCache::NewPages(const Sequence& s, int64_t n) const {
  return CeilDiv(s.length + n, shape_.page_size) - static_cast<int64_t>(s.pages.size());
}

Status PagedKvCache::CheckPlan(const std::string& where, const Plan& plan) const {
  if (plan.empty()) return CallError(where, "a forward pass needs at least one sequence");
  std::set<int64_t> seen;
  int64_t pages = 0;
  for (const auto& [id, n] : plan) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return CallError(where, "no " + SeqName(id) + " in the KV cache");
    if (!seen.insert(id).second) {
      return CallError(where, SeqName(id) + " appears twice in one forward pass");
    }
    if (n < 1) return CallError(where, "append lengths are >= 1");
    const Sequence& s = it->second;
    if (n > shape_.prefill_chunk_size) {
      return CallError(where,
                       "a chunk of " + std::to_string(n) +
                           " positions is longer than prefill_chunk_size " +
                           std::to_string(shape_.prefill_chunk_size),
                       ErrorCode::kLimit);
    }
    if (!shape_.sliding && s.length + n > shape_.max_total_seq_len) {
      return CallError(where,
                       SeqName(id) + " would hold " + std::to_string(s.length + n) +
                           " positions, more than the context window of " +
                           std::to_string(shape_.max_total_seq_len),
                       ErrorCode::kLimit);
    }
    pages += std::max<int64_t>(0, NewPages(s, n));
  }
  if (pages > FreePages()) {
    return CallError(where,
                     "the forward pass needs " + std::to_string(pages) + " more pages; " +
                         std::to_string(FreePages()) + " of " + std::to_string(max_pages_) +
                         " are free (the KV cache holds " + std::to_string(TotalLength()) +
                         " positions)",
                     ErrorCode::kLimit);
  }
  return Status::Ok();
}

Status PagedKvCache::BeginForward(std::span<const int64_t> seq_ids,
                                  std::span<const int64_t> append_lengths) {
  if (seq_ids.size() != append_lengths.size()) {
    return CallError(kWhere, "begin_forward needs one append length per sequence");
  }
  Plan plan;
  for (size_t i = 0; i < seq_ids.size(); ++i) plan.emplace_back(seq_ids[i], append_lengths[i]);
  MLC_RETURN_IF_ERROR(CheckPlan(kWhere, plan));
  forward_ = std::move(plan);
  return Status::Ok();
}

Result<std::vector<PagedKvCache::Segment>> PagedKvCache::Prepare(const std::string& function,
                                                                 int64_t n) {
  Plan plan = forward_;
  if (plan.empty()) {  // one-sequence use: the only sequence, added on first use
    if (seqs_.empty()) MLC_RETURN_IF_ERROR(AddSequence(0));
    if (seqs_.size() != 1) {
      return CallError(function, "the KV cache holds " + std::to_string(seqs_.size()) +
                                     " sequences; name them with begin_forward");
    }
    plan.emplace_back(seqs_.begin()->first, n);
  }
  int64_t total = 0;
  for (const auto& [id, length] : plan) total += length;
  if (total != n) {
    return CallError(function, "the call has " + std::to_string(n) +
                                   " positions but begin_forward announced " + std::to_string(total));
  }
  MLC_RETURN_IF_ERROR(CheckPlan(function, plan));
  std::vector<Segment> out;
  for (const auto& [id, length] : plan) {
    Sequence& s = seqs_.at(id);
    const int64_t needed = CeilDiv(s.length + length, shape_.page_size);
    while (static_cast<int64_t>(s.pages.size()) < needed) s.pages.push_back(NewPage());
    out.push_back(Segment{id, s.length, length});
  }
  return out;
}

int32_t PagedKvCache::NewPage() {
  if (!free_.empty()) {
    int32_t p = free_.back();
    free_.pop_back();
    holds_[static_cast<size_t>(p)] = 1;
    return p;
  }
  const size_t page_bytes = static_cast<size_t>(page_floats_) * sizeof(float);
  if (spare_ == 0) {
    constexpr size_t kBlock = size_t{4} << 20;
    const int64_t left = max_pages_ - static_cast<int64_t>(pages_.size());  // >= 1: checked by the caller
    const int64_t fill = page_bytes > 0 ? static_cast<int64_t>((kBlock + page_bytes - 1) / page_bytes) : 1;
    const int64_t pages = std::max<int64_t>(1, std::min(fill, left));
    const size_t bytes = static_cast<size_t>(pages) * page_bytes;
    blocks_.push_back(AllocateHuge(bytes));
    // Below 2 MB the block may be recycled heap memory: zeroed, as fresh pages are, so no key or
    // value a step has not written yet holds anything but a finite number.
    if (bytes < (size_t{2} << 20)) std::memset(blocks_.back().get(), 0, bytes);
    spare_ = pages;
    next_ = static_cast<float*>(blocks_.back().get());
  }
  pages_.push_back(next_);
  holds_.push_back(1);
  next_ += page_floats_;
  --spare_;
  return static_cast<int32_t>(pages_.size() - 1);
}

int64_t PagedKvCache::WindowStart(int64_t pos) const {
  if (!shape_.sliding) return 0;
  return std::max<int64_t>(0, pos - shape_.sliding_window + 1);
}

void PagedKvCache::Commit(const Segment& seg) {
  Sequence& s = seqs_.at(seg.seq_id);
  s.length = seg.start + seg.length;
  if (!shape_.sliding) return;
  // The next query (at s.length) sees [WindowStart(s.length), s.length] and the sinks.
  int64_t first_needed = WindowStart(s.length);
  for (size_t i = 0; i < s.pages.size(); ++i) {
    int64_t begin = static_cast<int64_t>(i) * shape_.page_size;
    int64_t end = begin + shape_.page_size;
    if (s.pages[i] >= 0 && end <= first_needed && begin >= SinkEnd()) {
      Drop(s.pages[i]);
      s.pages[i] = -1;
    }
  }
}

int64_t PagedKvCache::RowStride(int64_t layer) const {
  const KvLayerPlan& plan = shape_.layers[static_cast<size_t>(layer)];
  return plan.use == KvUse::kShared ? shape_.layers[static_cast<size_t>(plan.source)].row_size : plan.row_size;
}

float* PagedKvCache::Block(int64_t seq_id, int64_t layer, int64_t pos, int which) {
  Sequence& s = seqs_.at(seq_id);
  float* data = pages_[static_cast<size_t>(s.pages[static_cast<size_t>(pos / shape_.page_size)])];
  return data + offsets_[static_cast<size_t>(layer)] + which * shape_.page_size * RowStride(layer);
}

void PagedKvCache::WriteKey(int64_t seq_id, int64_t layer, int64_t pos, const float* key) {
  float* column = Block(seq_id, layer, pos, 0) + pos % shape_.page_size;
  const int64_t row = RowStride(layer), page = shape_.page_size;
  for (int64_t i = 0; i < row; ++i) column[i * page] = key[i];
}

const float* PagedKvCache::KeyColumn(int64_t seq_id, int64_t layer, int64_t pos) {
  return Block(seq_id, layer, pos, 0) + pos % shape_.page_size;
}

float* PagedKvCache::Value(int64_t seq_id, int64_t layer, int64_t pos) {
  return Block(seq_id, layer, pos, 1) + (pos % shape_.page_size) * RowStride(layer);
}

}  // namespace mlc::cpu
