// The CPU program's paged KV cache: keys and values (after rotary positions) of every layer in
// pages of page_size positions drawn from one pool, per sequence a page table. It honours the
// context window (max_total_seq_len), the prefill chunk size, and a sliding window with
// attention sinks (pages wholly outside the window and past the sinks go back to the pool).
// Several sequences can live in one cache (sequence ids); the program's functions use sequence 0.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "mlc_manifest/runtime.h"

namespace mlc::cpu {

struct KvCacheShape {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t page_size = 16;
  int64_t max_total_seq_len = 0;  // positions a sequence may hold (the window when sliding)
  int64_t prefill_chunk_size = 0;
  int64_t max_batch_size = 1;
  bool sliding = false;           // evict positions older than the window
  int64_t sliding_window = 0;     // positions attended when sliding (= max_total_seq_len)
  int64_t attention_sink = 0;     // first positions always kept when sliding
};

class PagedKvCache : public KvState {
 public:
  explicit PagedKvCache(KvCacheShape shape);
  std::string TypeName() const override { return "cpu.PagedKvCache"; }
  int64_t TotalLength() const override;  // positions appended to sequence 0

  const KvCacheShape& shape() const { return shape_; }
  int64_t row_size() const { return shape_.num_kv_heads * shape_.head_dim; }

  Status AddSequence(int64_t seq_id);
  Status RemoveSequence(int64_t seq_id);
  bool HasSequence(int64_t seq_id) const { return seqs_.count(seq_id) > 0; }
  int64_t Length(int64_t seq_id) const;

  // Makes room for n more positions of seq_id (pages for them); an error when the sequence
  // would pass its window without sliding, or the chunk is longer than prefill_chunk_size.
  Status Reserve(int64_t seq_id, int64_t n);
  // After the positions [Length, Length + n) were written: counts them and, when sliding,
  // returns pages no later query can see.
  void Commit(int64_t seq_id, int64_t n);

  // Key / value row ([num_kv_heads * head_dim] floats) of absolute position pos of a layer;
  // pos must be held (reserved and not evicted).
  float* Key(int64_t seq_id, int64_t layer, int64_t pos);
  float* Value(int64_t seq_id, int64_t layer, int64_t pos);
  // The first position a query at pos may attend to beside the sinks, and the sink count.
  int64_t WindowStart(int64_t pos) const;
  int64_t SinkEnd() const { return shape_.sliding ? shape_.attention_sink : 0; }

  int64_t pages_in_use() const { return static_cast<int64_t>(pages_.size() - free_.size()); }

 private:
  struct Sequence {
    int64_t length = 0;
    std::vector<int32_t> pages;  // page of position p: pages[p / page_size], -1 when evicted
  };
  float* Row(int64_t seq_id, int64_t layer, int64_t pos, int which);
  int32_t NewPage();

  KvCacheShape shape_;
  std::vector<std::vector<float>> pages_;  // [layer][k|v][page_size][row]
  std::vector<int32_t> free_;
  int64_t max_pages_ = 0;
  std::map<int64_t, Sequence> seqs_;
};

}  // namespace mlc::cpu
