// CPU tensors at the runtime boundary: DLPack data types and NDArray, a shared DLTensor that owns
// (or keeps alive) its bytes; and the converter's bfloat16 encoding.
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace mlc {

DLDataType DlFloat32();
DLDataType DlInt32();
DLDataType DlUInt8();
DLDataType DlUInt32();
bool SameDtype(DLDataType a, DLDataType b);
std::string DlDtypeName(DLDataType dtype);                     // "float32", "uint8", ...
std::optional<DLDataType> ParseDlDtype(const std::string& name);  // the inverse

// A CPU tensor: owns its bytes (or keeps the owner of a view alive, e.g. a mapped shard) and
// exposes them as a DLTensor. Copies share the storage, which lives as long as the last copy;
// dl(), mutable_dl() and data() point into it and are valid while this NDArray (or a copy) is.
// Not synchronized: copies written from several threads need the caller's locking.
class NDArray {
 public:
  NDArray() = default;
  // Zero-filled.
  static NDArray Empty(std::vector<int64_t> shape, DLDataType dtype);
  // A view of data owned by `owner` (kept alive as long as the view).
  static NDArray View(std::shared_ptr<const void> owner, const void* data,
                      std::vector<int64_t> shape, DLDataType dtype);

  bool defined() const { return state_ != nullptr; }
  const DLTensor& dl() const;
  DLTensor* mutable_dl();
  const std::vector<int64_t>& shape() const;
  DLDataType dtype() const;
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t Elements() const;
  size_t Bytes() const;
  template <class T>
  T* data() { return static_cast<T*>(mutable_dl()->data); }
  template <class T>
  const T* data() const { return static_cast<const T*>(dl().data); }
  // The same bytes under another shape with as many elements (shares the storage).
  NDArray Reshape(std::vector<int64_t> shape) const;
  // "[2, 64] float32"
  std::string Describe() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// An int32 tensor of `shape` holding `values` (as many as the shape has elements).
NDArray Int32Tensor(std::span<const int32_t> values, std::vector<int64_t> shape);

// The converter's encoding: float32 -> bfloat16 rounding to nearest even; and back.
uint16_t FloatToBf16(float value);
float Bf16ToFloat(uint16_t value);

// The last-position logits of each sequence one prefill or decode call ran, in call order: row i
// is rows[first + i] of the program's logits tensor ([..., vocab]), viewed without a copy (a
// batch's logits are megabytes a step). Valid as long as this object (or a copy) is.
class SequenceLogits {
 public:
  SequenceLogits() = default;
  SequenceLogits(NDArray logits, int64_t first, int64_t count, int64_t vocab)
      : logits_(std::move(logits)), first_(first), count_(count), vocab_(vocab) {}
  size_t size() const { return static_cast<size_t>(count_); }
  bool empty() const { return count_ == 0; }
  std::span<const float> operator[](size_t i) const {
    return {logits_.data<float>() + (first_ + static_cast<int64_t>(i)) * vocab_, static_cast<size_t>(vocab_)};
  }
  std::span<const float> front() const { return (*this)[0]; }
  std::span<const float> back() const { return (*this)[size() - 1]; }

 private:
  NDArray logits_;
  int64_t first_ = 0, count_ = 0, vocab_ = 0;
};

}  // namespace mlc
