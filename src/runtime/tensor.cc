// CPU tensors as DLPack DLTensor views, dtype names, runtime value names and the bfloat16
// encoding the weight converter uses.
#include <cstring>

#include "mlc_manifest/runtime.h"

namespace mlc {

struct NDArray::State {
  std::vector<int64_t> shape;
  std::shared_ptr<const void> owner;
  DLTensor tensor{};
};

namespace {

DLDataType MakeDtype(uint8_t code, uint8_t bits) {
  DLDataType t;
  t.code = code;
  t.bits = bits;
  t.lanes = 1;
  return t;
}

int64_t Product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace

DLDataType DlFloat32() { return MakeDtype(kDLFloat, 32); }
DLDataType DlInt32() { return MakeDtype(kDLInt, 32); }
DLDataType DlUInt8() { return MakeDtype(kDLUInt, 8); }
DLDataType DlUInt32() { return MakeDtype(kDLUInt, 32); }

bool SameDtype(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

std::string DlDtypeName(DLDataType dtype) {
  std::string base;
  switch (dtype.code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    default: base = "code" + std::to_string(dtype.code) + "_"; break;
  }
  if (dtype.code == kDLUInt && dtype.bits == 1) return "bool";
  std::string name = base + std::to_string(dtype.bits);
  if (dtype.lanes != 1) name += "x" + std::to_string(dtype.lanes);
  return name;
}

std::optional<DLDataType> ParseDlDtype(const std::string& name) {
  static const std::pair<const char*, DLDataType> kKnown[] = {
      {"float32", MakeDtype(kDLFloat, 32)}, {"float16", MakeDtype(kDLFloat, 16)},
      {"float64", MakeDtype(kDLFloat, 64)}, {"bfloat16", MakeDtype(kDLBfloat, 16)},
      {"int8", MakeDtype(kDLInt, 8)},       {"int16", MakeDtype(kDLInt, 16)},
      {"int32", MakeDtype(kDLInt, 32)},     {"int64", MakeDtype(kDLInt, 64)},
      {"uint8", MakeDtype(kDLUInt, 8)},     {"uint16", MakeDtype(kDLUInt, 16)},
      {"uint32", MakeDtype(kDLUInt, 32)},   {"uint64", MakeDtype(kDLUInt, 64)},
  };
  for (const auto& [n, t] : kKnown) {
    if (name == n) return t;
  }
  return std::nullopt;
}

NDArray NDArray::Empty(std::vector<int64_t> shape, DLDataType dtype) {
  size_t bytes = static_cast<size_t>(Product(shape)) * ((dtype.bits * dtype.lanes + 7) / 8);
  // Zero-filled storage of at least one byte, aligned for any element type.
  std::shared_ptr<uint64_t[]> storage(new uint64_t[bytes / 8 + 1]());
  NDArray a = View(storage, storage.get(), std::move(shape), dtype);
  return a;
}

NDArray NDArray::View(std::shared_ptr<const void> owner, const void* data,
                      std::vector<int64_t> shape, DLDataType dtype) {
  NDArray a;
  a.state_ = std::make_shared<State>();
  a.state_->shape = std::move(shape);
  a.state_->owner = std::move(owner);
  DLTensor& t = a.state_->tensor;
  t.data = const_cast<void*>(data);
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = static_cast<int32_t>(a.state_->shape.size());
  t.dtype = dtype;
  t.shape = a.state_->shape.data();
  t.strides = nullptr;
  t.byte_offset = 0;
  return a;
}

const DLTensor& NDArray::dl() const { return state_->tensor; }
DLTensor* NDArray::mutable_dl() { return &state_->tensor; }
const std::vector<int64_t>& NDArray::shape() const { return state_->shape; }
DLDataType NDArray::dtype() const { return state_->tensor.dtype; }
int64_t NDArray::Elements() const { return Product(state_->shape); }
size_t NDArray::Bytes() const {
  return static_cast<size_t>(Elements()) * ((dtype().bits * dtype().lanes + 7) / 8);
}

NDArray Int32Tensor(std::span<const int32_t> values, std::vector<int64_t> shape) {
  NDArray a = NDArray::Empty(std::move(shape), DlInt32());
  if (!values.empty()) std::memcpy(a.data<int32_t>(), values.data(), values.size() * sizeof(int32_t));
  return a;
}

NDArray NDArray::Reshape(std::vector<int64_t> shape) const {
  NDArray a = View(state_->owner, state_->tensor.data, std::move(shape), dtype());
  return a;
}

std::string NDArray::Describe() const {
  if (!defined()) return "undefined";
  std::string s = "[";
  for (size_t i = 0; i < shape().size(); ++i) s += (i ? ", " : "") + std::to_string(shape()[i]);
  return s + "] " + DlDtypeName(dtype());
}

const char* ValueTypeName(const Value& value) {
  switch (value.index()) {
    case 0: return "nothing";
    case 1: return "integer";
    case 2: return "float";
    case 3: return "shape tuple";
    case 4: return "tensor";
    default: return "object";
  }
}

uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float Bf16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace mlc
