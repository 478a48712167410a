// The engine's prefix cache: a radix tree over whole KV pages, each node one page, keyed by what
// filled its positions (a token id, or a row of a media input's adapter output named by the
// media's digest), so a prompt that starts as a cached one reuses its pages and prefills only the
// rest. Nodes on a running sequence's path are pinned; the least recently used unpinned leaf is
// evicted first. The tree holds page ids; the KV cache counts the holds (PagedKvState).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mlc {

// What filled one position: a token ({0, id}) or a media row ({tagged digest half, other half +
// row}); 128 bits, so two different media inputs never share a key in practice.
struct PositionKey {
  uint64_t hi = 0;
  uint64_t lo = 0;
  auto operator<=>(const PositionKey&) const = default;
};
PositionKey TokenKey(int32_t token);
// digest: at least 16 bytes (a SHA-256); row: the adapter output's row.
PositionKey MediaRowKey(const std::string& digest, int64_t row);
// A key no other position has (media whose digest could not be taken).
PositionKey UniqueKey();

class PrefixCache {
 public:
  struct Node {
    Node* parent = nullptr;
    const std::vector<PositionKey>* keys = nullptr;  // the page's keys (the parent's map key)
    int32_t page = -1;
    int64_t users = 0;  // running or kept sequences whose path holds it
    uint64_t stamp = 0;  // last use
    bool listed = false;  // in evictable_, under listed_stamp
    uint64_t listed_stamp = 0;
    std::map<std::vector<PositionKey>, std::unique_ptr<Node>> children;
  };

  explicit PrefixCache(int64_t page_size) : page_size_(page_size) {}

  // The longest run of cached pages that keys[0, n x page_size) fills, n <= max_pages; each
  // node's use is stamped.
  std::vector<Node*> Match(std::span<const PositionKey> keys, int64_t max_pages);
  // The child of parent (nullptr: the root) for one page's keys; created holding `page` when
  // absent (*created says which).
  Node* Insert(Node* parent, std::span<const PositionKey> page_keys, int32_t page, bool* created);
  void Pin(Node* node);
  void Unpin(Node* node);
  // Removes the least recently used leaf that no sequence uses; its page, or -1 when none.
  int32_t EvictOne();

  int64_t pages() const { return pages_; }
  int64_t pinned_pages() const { return pinned_; }
  int64_t page_size() const { return page_size_; }

 private:
  void Refresh(Node* node);  // keeps evictable_ in step with the node's users and children
  Node root_;
  int64_t page_size_;
  int64_t pages_ = 0;
  int64_t pinned_ = 0;
  uint64_t clock_ = 0;
  std::set<std::pair<uint64_t, Node*>> evictable_;
};

}  // namespace mlc
