// The prefix cache's tree (see prefix_cache.h): matching a prompt's keys page by page, inserting
// a sequence's full pages, pins, and eviction of the least recently used unused leaf.
#include "engine/prefix_cache.h"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace mlc {

PositionKey TokenKey(int32_t token) { return {0, static_cast<uint64_t>(static_cast<uint32_t>(token))}; }

PositionKey MediaRowKey(const std::string& digest, int64_t row) {
  uint64_t a = 0, b = 0;
  std::memcpy(&a, digest.data(), std::min<size_t>(8, digest.size()));
  if (digest.size() > 8) std::memcpy(&b, digest.data() + 8, std::min<size_t>(8, digest.size() - 8));
  return {a | (uint64_t{1} << 63), b + static_cast<uint64_t>(row)};
}

PositionKey UniqueKey() {
  static std::atomic<uint64_t> next{1};
  return {uint64_t{3} << 62, next.fetch_add(1)};
}

std::vector<PrefixCache::Node*> PrefixCache::Match(std::span<const PositionKey> keys, int64_t max_pages) {
  std::vector<Node*> path;
  Node* at = &root_;
  std::vector<PositionKey> page(static_cast<size_t>(page_size_));
  for (int64_t p = 0; p < max_pages && (p + 1) * page_size_ <= static_cast<int64_t>(keys.size()); ++p) {
    std::copy_n(keys.begin() + p * page_size_, page_size_, page.begin());
    auto it = at->children.find(page);
    if (it == at->children.end()) break;
    at = it->second.get();
    path.push_back(at);
  }
  ++clock_;
  for (Node* n : path) {
    n->stamp = clock_;
    Refresh(n);
  }
  return path;
}

PrefixCache::Node* PrefixCache::Insert(Node* parent, std::span<const PositionKey> page_keys, int32_t page,
                                       bool* created) {
  Node* at = parent ? parent : &root_;
  std::vector<PositionKey> key(page_keys.begin(), page_keys.end());
  auto it = at->children.find(key);
  if (it != at->children.end()) {
    *created = false;
    return it->second.get();
  }
  auto node = std::make_unique<Node>();
  Node* n = node.get();
  n->parent = at;
  n->page = page;
  n->stamp = ++clock_;
  auto [pos, inserted] = at->children.emplace(std::move(key), std::move(node));
  (void)inserted;
  n->keys = &pos->first;
  ++pages_;
  *created = true;
  Refresh(n);
  if (at != &root_) Refresh(at);
  return n;
}

void PrefixCache::Pin(Node* node) {
  if (node->users++ == 0) ++pinned_;
  Refresh(node);
}

void PrefixCache::Unpin(Node* node) {
  if (--node->users == 0) --pinned_;
  node->stamp = ++clock_;
  Refresh(node);
}

void PrefixCache::Refresh(Node* node) {
  if (node->listed) evictable_.erase({node->listed_stamp, node});
  node->listed = node->users == 0 && node->children.empty();
  node->listed_stamp = node->stamp;
  if (node->listed) evictable_.emplace(node->stamp, node);
}

int32_t PrefixCache::EvictOne() {
  if (evictable_.empty()) return -1;
  Node* n = evictable_.begin()->second;
  evictable_.erase(evictable_.begin());
  const int32_t page = n->page;
  Node* parent = n->parent;
  parent->children.erase(*n->keys);  // frees n
  --pages_;
  if (parent != &root_) Refresh(parent);
  return page;
}

}  // namespace mlc
