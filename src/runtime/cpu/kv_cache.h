// The CPU program's paged KV cache: keys and values (after rotary positions) of every layer in
// pages of page_size positions drawn from one pool, per sequence a page table. It honours the
// context window (max_total_seq_len), the prefill chunk size, and a sliding window with
// attention sinks (pages wholly outside the window and past the sinks go back to the pool).
// It holds several sequences (the paged KV cache's sequence interface: add, remove, fork,
// begin/end forward); a call without begin_forward runs the only sequence. Full pages can be
// shared between sequences and the engine's prefix cache (counted holds, PagedKvState).
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "mlc_manifest/runtime.h"
#include "runtime/cpu/huge_pages.h"

namespace mlc::cpu {

// Where a layer's keys and values live in the KV cache.
enum class KvUse {
  kOwn,     // written and read by the layer itself
  kShared,  // the layer reads the keys and values of layer `source` and writes none
  kNone,    // no attention over the cache
};

// One layer's part of the cache: its use, and for kOwn the floats of one position's keys (and
// as many of its values): num_kv_heads x head_dim.
struct KvLayerPlan {
  KvUse use = KvUse::kOwn;
  int64_t source = 0;  // the layer whose keys and values it reads (itself when kOwn)
  int64_t row_size = 0;
  bool operator==(const KvLayerPlan&) const = default;
};

struct KvCacheShape {
  std::vector<KvLayerPlan> layers;
  int64_t page_size = 16;
  // Positions over all sequences (the pool's size); also the most one sequence may hold, and
  // the window when sliding.
  int64_t max_total_seq_len = 0;
  int64_t prefill_chunk_size = 0;  // the most positions of one sequence in one call
  int64_t max_batch_size = 1;      // sequences held at once
  bool sliding = false;           // evict positions older than the window
  int64_t sliding_window = 0;     // positions attended when sliding (= max_total_seq_len)
  int64_t attention_sink = 0;     // first positions always kept when sliding
};

class PagedKvCache : public PagedKvState {
 public:
  explicit PagedKvCache(KvCacheShape shape);
  std::string TypeName() const override { return "cpu.PagedKvCache"; }
  int64_t TotalLength() const override;  // positions held over all sequences

  Status AddSequence(int64_t seq_id) override;
  Status RemoveSequence(int64_t seq_id) override;
  Status ForkSequence(int64_t parent_id, int64_t child_id) override;
  Status BeginForward(std::span<const int64_t> seq_ids,
                      std::span<const int64_t> append_lengths) override;
  void EndForward() override { forward_.clear(); }
  Result<int64_t> SequenceLength(int64_t seq_id) const override;
  int64_t PageSize() const override { return shape_.page_size; }
  int64_t FreePages() const override { return max_pages_ - pages_in_use(); }
  int64_t TotalPages() const override { return max_pages_; }

  bool SharesPages() const override { return true; }
  Result<int32_t> RetainPage(int64_t seq_id, int64_t index) override;
  void ReleasePage(int32_t page) override;
  Status AddSequenceWithPages(int64_t seq_id, std::span<const int32_t> pages) override;

  const KvCacheShape& shape() const { return shape_; }

  // One sequence's part of a call: `length` new positions after `start` held ones.
  struct Segment {
    int64_t seq_id = 0;
    int64_t start = 0;
    int64_t length = 0;
  };
  // The segments of a call of `function` with n positions: those BeginForward named (their
  // lengths must sum to n), else the only sequence (added as 0 on first use) with n. Checks every
  // segment (chunk size, context window, free pages) before taking the pages for them.
  Result<std::vector<Segment>> Prepare(const std::string& function, int64_t n);
  // After a segment's positions were written: counts them and, when sliding, returns pages no
  // later query can see.
  void Commit(const Segment& s);

  // Keys are kept transposed within a page: per layer a [row_size][page_size] block, so the
  // positions of a page are the columns attention's score product reads (no transposition per
  // step) and each dimension's run of a page is one contiguous stretch. Values stay rows.
  // pos must be held (prepared and not evicted); not for kNone layers; a kShared layer reads the
  // layer it shares with.
  // Stores the key row (the layer's row_size floats) of absolute position pos.
  void WriteKey(int64_t seq_id, int64_t layer, int64_t pos, const float* key);
  // Element 0 of pos's key; element i is i * PageSize() floats further, and position pos + 1 of
  // the same page one float further.
  const float* KeyColumn(int64_t seq_id, int64_t layer, int64_t pos);
  // The value row (row_size floats) of pos.
  float* Value(int64_t seq_id, int64_t layer, int64_t pos);
  // Floats from one position's value row to the next position's within a page: positions p and
  // p + 1 of one page are Value(p) and Value(p) + RowStride(layer).
  int64_t RowStride(int64_t layer) const;
  // The first position a query at pos may attend to beside the sinks, and the sink count.
  int64_t WindowStart(int64_t pos) const;
  int64_t SinkEnd() const { return shape_.sliding ? shape_.attention_sink : 0; }

  int64_t pages_in_use() const { return static_cast<int64_t>(pages_.size() - free_.size()); }

 private:
  struct Sequence {
    int64_t length = 0;
    std::vector<int32_t> pages;  // page of position p: pages[p / page_size], -1 when evicted
  };
  using Plan = std::vector<std::pair<int64_t, int64_t>>;  // (seq_id, append length)
  // Every check of a forward pass, nothing changed: known distinct ids, lengths in
  // [1, prefill_chunk_size], each sequence within the context window, pages for all.
  Status CheckPlan(const std::string& where, const Plan& plan) const;
  int64_t NewPages(const Sequence& s, int64_t n) const;
  // Where pos's page holds the layer's keys (which 0) or values (1), and pos's index in the page.
  float* Block(int64_t seq_id, int64_t layer, int64_t pos, int which);
  int32_t NewPage();  // held once
  void Drop(int32_t page);  // one hold less; back to the pool at none

  KvCacheShape shape_;
  std::vector<int64_t> offsets_;  // per layer: where its keys start in a page (its source's)
  int64_t page_floats_ = 0;
  std::vector<float*> pages_;  // a page: per owning layer [row_size][page_size] keys, [page_size][row_size] values
  // The pages' storage: blocks of several pages (about 4 MB, in huge pages), so a prompt's new
  // pages cost a few page faults, not one per 4 KB; the last block's spare_ pages from next_ are
  // not handed out yet.
  std::vector<HugeBlock> blocks_;
  int64_t spare_ = 0;
  float* next_ = nullptr;
  std::vector<int32_t> free_;
  std::vector<int32_t> holds_;  // per page: sequences and prefix-cache entries holding it
  int64_t max_pages_ = 0;
  std::map<int64_t, Sequence> seqs_;
  Plan forward_;  // since BeginForward
};

}  // namespace mlc::cpu
