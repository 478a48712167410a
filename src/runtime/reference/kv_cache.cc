// The reference paged KV cache: a fixed pool of pages per layer, a page table per sequence, and
// the sequence interface (add, remove, fork, begin/end forward) a batching engine drives. Every
// request is checked before anything changes; running out of pages is an error, never a crash.
#include <algorithm>
#include <cstring>
#include <set>

#include "runtime/reference/reference_internal.h"

namespace mlc::reference {
namespace {

std::string SeqName(int64_t id) { return "sequence " + std::to_string(id); }

}  // namespace

KvCache::KvCache(const Config& c, int64_t capacity, int64_t page_size, int64_t max_sequences)
    : hidden_(c.hidden_size),
      page_size_(page_size),
      num_pages_((capacity + page_size - 1) / page_size),
      max_sequences_(max_sequences) {
  size_t floats = static_cast<size_t>(num_pages_ * page_size_ * hidden_);
  keys_.assign(static_cast<size_t>(c.num_layers), std::vector<float>(floats));
  values_.assign(static_cast<size_t>(c.num_layers), std::vector<float>(floats));
  for (int64_t p = num_pages_ - 1; p >= 0; --p) free_.push_back(p);
}

int64_t KvCache::TotalLength() const {
  int64_t total = 0;
  for (const auto& [id, s] : seqs_) total += s.length;
  return total;
}

Status KvCache::AddSequence(int64_t seq_id) {
  if (seq_id < 0) return Invalid("", "kv_cache: sequence ids are >= 0, got " + std::to_string(seq_id));
  if (seqs_.count(seq_id)) return Invalid("", "kv_cache: " + SeqName(seq_id) + " already exists");
  if (static_cast<int64_t>(seqs_.size()) >= max_sequences_) {
    return Error{ErrorCode::kLimit, "",
                 "kv_cache: the KV cache holds at most " + std::to_string(max_sequences_) + " sequences"};
  }
  seqs_[seq_id] = Sequence{};
  return Status::Ok();
}

Status KvCache::RemoveSequence(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return Invalid("", "kv_cache: no " + SeqName(seq_id));
  for (int64_t p : it->second.pages) free_.push_back(p);
  seqs_.erase(it);
  forward_.clear();
  return Status::Ok();
}

Status KvCache::ForkSequence(int64_t parent_id, int64_t child_id) {
  auto parent = seqs_.find(parent_id);
  if (parent == seqs_.end()) return Invalid("", "kv_cache: no " + SeqName(parent_id));
  int64_t pages = static_cast<int64_t>(parent->second.pages.size());
  if (pages > FreePages()) {
    return Error{ErrorCode::kLimit, "",
                 "kv_cache: forking " + SeqName(parent_id) + " needs " + std::to_string(pages) +
                     " pages; " + std::to_string(FreePages()) + " are free"};
  }
  if (Status s = AddSequence(child_id); !s) return s;
  Sequence& child = seqs_[child_id];
  const Sequence& from = seqs_[parent_id];
  size_t page_floats = static_cast<size_t>(page_size_ * hidden_);
  for (int64_t src : from.pages) {
    int64_t dst = free_.back();
    free_.pop_back();
    child.pages.push_back(dst);
    for (auto* store : {&keys_, &values_}) {
      for (auto& layer : *store) {
        std::memcpy(layer.data() + dst * page_size_ * hidden_, layer.data() + src * page_size_ * hidden_,
                    page_floats * sizeof(float));
      }
    }
  }
  child.length = from.length;
  return Status::Ok();
}

Status KvCache::BeginForward(std::span<const int64_t> seq_ids,
                             std::span<const int64_t> append_lengths) {
  if (seq_ids.empty() || seq_ids.size() != append_lengths.size()) {
    return Invalid("", "kv_cache: begin_forward needs one append length per sequence, at least one");
  }
  std::set<int64_t> seen;
  int64_t pages = 0;
  for (size_t i = 0; i < seq_ids.size(); ++i) {
    auto it = seqs_.find(seq_ids[i]);
    if (it == seqs_.end()) return Invalid("", "kv_cache: no " + SeqName(seq_ids[i]));
    if (!seen.insert(seq_ids[i]).second) {
      return Invalid("", "kv_cache: " + SeqName(seq_ids[i]) + " appears twice in one forward pass");
    }
    if (append_lengths[i] < 1) return Invalid("", "kv_cache: append lengths are >= 1");
    pages += PagesFor(it->second.length + append_lengths[i]) -
             static_cast<int64_t>(it->second.pages.size());
  }
  if (pages > FreePages()) {
    return Error{ErrorCode::kLimit, "",
                 "kv_cache: the forward pass needs " + std::to_string(pages) + " more pages; " +
                     std::to_string(FreePages()) + " of " + std::to_string(num_pages_) + " are free"};
  }
  forward_.clear();
  for (size_t i = 0; i < seq_ids.size(); ++i) forward_.emplace_back(seq_ids[i], append_lengths[i]);
  return Status::Ok();
}

Result<int64_t> KvCache::SequenceLength(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return Invalid("", "kv_cache: no " + SeqName(seq_id));
  return it->second.length;
}

Result<std::vector<KvCache::Segment>> KvCache::Prepare(const std::string& function, int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> plan = forward_;
  if (plan.empty()) {  // one-sequence use: the only sequence, added on first use
    if (seqs_.empty()) {
      MLC_RETURN_IF_ERROR(AddSequence(0));
    }
    if (seqs_.size() != 1) {
      return Invalid("", function + ": the KV cache holds " + std::to_string(seqs_.size()) +
                                   " sequences; name them with begin_forward");
    }
    plan.emplace_back(seqs_.begin()->first, n);
  }
  int64_t total = 0, pages = 0;
  for (const auto& [id, length] : plan) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) return Invalid("", function + ": no " + SeqName(id) + " in the KV cache");
    total += length;
    pages += PagesFor(it->second.length + length) - static_cast<int64_t>(it->second.pages.size());
  }
  if (total != n) {
    return Invalid("", function + ": the call has " + std::to_string(n) +
                                 " positions but begin_forward announced " + std::to_string(total));
  }
  if (pages > FreePages()) {
    int64_t held = TotalLength();
    return Error{ErrorCode::kLimit, "",
                 function + ": the KV cache holds " + std::to_string(held) + " positions in " +
                     std::to_string(num_pages_ - FreePages()) + " of " + std::to_string(num_pages_) +
                     " pages and cannot take " + std::to_string(n) + " more"};
  }
  std::vector<Segment> out;
  for (const auto& [id, length] : plan) {
    Sequence& s = seqs_[id];
    while (static_cast<int64_t>(s.pages.size()) < PagesFor(s.length + length)) {
      s.pages.push_back(free_.back());
      free_.pop_back();
    }
    out.push_back(Segment{id, s.length, length});
  }
  return out;
}

float* KvCache::Row(std::vector<std::vector<float>>& store, int64_t layer, int64_t seq_id,
                    int64_t pos) {
  const Sequence& s = seqs_.at(seq_id);
  int64_t page = s.pages[static_cast<size_t>(pos / page_size_)];
  return store[static_cast<size_t>(layer)].data() + (page * page_size_ + pos % page_size_) * hidden_;
}

}  // namespace mlc::reference
