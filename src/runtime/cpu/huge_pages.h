// Large working buffers of the CPU programs in transparent huge pages: storage that must grow is
// reserved untouched, advised to Linux as huge pages (MADV_HUGEPAGE; the default "madvise" THP
// mode uses them only when asked), then filled, so tens of MB of activations fault in 2 MB pages
// instead of thousands of 4 KB ones (each a costly trap in a virtual machine): ResizeHuge for a
// vector, AllocateHuge for a block, HugeScratch for scratch kept between calls.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

namespace mlc::cpu {

// Resizes v to n elements; when its storage must grow, the new storage's whole 2 MB pages are
// advised as huge pages before anything touches them. Elements kept are kept; new ones are
// value-initialised as resize does.
template <typename T>
void ResizeHuge(std::vector<T>& v, size_t n) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (n > v.capacity() && n * sizeof(T) >= kHuge) {
    std::vector<T> grown;
    grown.reserve(n);
    const auto begin = reinterpret_cast<uintptr_t>(grown.data());
    const uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t last = (begin + n * sizeof(T)) & ~(kHuge - 1);
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);  // advice only
    grown.assign(v.begin(), v.end());
    v.swap(grown);
  }
  v.resize(n);
}

// Storage from AllocateHuge, freed with the alignment it was made with.
struct HugeFree {
  size_t align = 64;
  void operator()(void* p) const { ::operator delete(p, std::align_val_t{align}); }
};
using HugeBlock = std::unique_ptr<void, HugeFree>;

// `bytes` of uninitialised storage: from 2 MB up, on a 2 MB boundary with its whole 2 MB pages
// advised as huge pages; below, 64-byte aligned (a cache line).
inline HugeBlock AllocateHuge(size_t bytes) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  HugeBlock block(::operator new(std::max<size_t>(bytes, 1), std::align_val_t{align}), HugeFree{align});
  if (bytes >= kHuge) madvise(block.get(), bytes / kHuge * kHuge, MADV_HUGEPAGE);  // advice only
  return block;
}

// Scratch kept between calls that grows by half again at least, in whole huge pages from 2 MB
// up: one row more than the last step does not map it anew, and a larger step maps a few huge
// pages instead of faulting in thousands of 4 KB ones. Contents are not kept when it grows, nor
// initialised: callers write before they read.
class HugeScratch {
 public:
  // At least `bytes`, 64-byte aligned.
  void* Reserve(size_t bytes) {
    constexpr size_t kHuge = size_t{2} << 20;
    if (bytes > capacity_) {
      size_t grown = std::max(bytes, capacity_ + capacity_ / 2);
      if (grown >= kHuge) grown = (grown + kHuge - 1) / kHuge * kHuge;
      block_.reset();
      block_ = AllocateHuge(grown);
      capacity_ = grown;
    }
    return block_.get();
  }

 private:
  HugeBlock block_;
  size_t capacity_ = 0;
};

}  // namespace mlc::cpu
