// Large working buffers of the CPU programs in transparent huge pages: storage that must grow is
// reserved untouched, advised to Linux as huge pages (MADV_HUGEPAGE; the default "madvise" THP
// mode uses them only when asked), then filled, so tens of MB of activations fault in 2 MB pages
// instead of thousands of 4 KB ones (each a costly trap in a virtual machine).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdint>
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

}  // namespace mlc::cpu
