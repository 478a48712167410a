// The function table and argument reader the built-in model libraries share.
#include "runtime/function_table.h"

namespace mlc {

Status ArgReader::Count(size_t n) const {
  if (args_.size() == n) return Status::Ok();
  return Invalid("", fn_ + ": expected " + std::to_string(n) + " arguments, got " +
                         std::to_string(args_.size()));
}

Result<NDArray> ArgReader::Tensor(size_t i, DLDataType dtype, std::vector<int64_t> shape) const {
  const NDArray* t = std::get_if<NDArray>(&args_[i]);
  bool ok = t && t->defined() && SameDtype(t->dtype(), dtype) &&
            t->ndim() == static_cast<int64_t>(shape.size());
  for (size_t d = 0; ok && d < shape.size(); ++d) ok = shape[d] < 0 || t->shape()[d] == shape[d];
  if (ok) return *t;
  std::string want = "[";
  for (size_t d = 0; d < shape.size(); ++d) {
    want += (d ? ", " : "") + (shape[d] < 0 ? std::string("n") : std::to_string(shape[d]));
  }
  return Invalid("", fn_ + ": argument " + std::to_string(i) + ": expected " + want + "] " +
                         DlDtypeName(dtype) + ", got " +
                         (t ? t->Describe() : std::string(ValueTypeName(args_[i]))));
}

Result<int64_t> ArgReader::Integer(size_t i) const {
  if (const int64_t* v = std::get_if<int64_t>(&args_[i])) return *v;
  return Invalid("", fn_ + ": argument " + std::to_string(i) + ": expected an integer");
}

const PackedFunction* FunctionTableLibrary::GetFunction(const std::string& name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<std::string> FunctionTableLibrary::FunctionNames() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : functions_) out.push_back(name);
  return out;
}

}  // namespace mlc
