// What the built-in model libraries (the CPU program, the reference runtime) share: a
// ModelLibrary over a table of named functions, and a reader for a call's arguments whose every
// error names the function and the argument.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "mlc_manifest/library.h"

namespace mlc {

using Args = std::span<const Value>;

// Reads the arguments of one call; borrows them (they must outlive the reader).
class ArgReader {
 public:
  ArgReader(std::string function, Args args) : fn_(std::move(function)), args_(args) {}

  Status Count(size_t n) const;
  // A defined tensor of this dtype and shape (a negative dimension takes any size).
  Result<NDArray> Tensor(size_t i, DLDataType dtype, std::vector<int64_t> shape) const;
  Result<int64_t> Integer(size_t i) const;
  // An object of type T; `what` names it in the error ("a parameter set").
  template <class T>
  Result<std::shared_ptr<T>> Object(size_t i, const char* what) const {
    const ObjectRef* o = std::get_if<ObjectRef>(&args_[i]);
    auto p = o ? std::dynamic_pointer_cast<T>(*o) : nullptr;
    if (p) return p;
    return Invalid("", fn_ + ": argument " + std::to_string(i) + ": expected " + what + ", got " +
                            (o && *o ? (*o)->TypeName() : std::string(ValueTypeName(args_[i]))));
  }
  // Argument i, which must be an object (read with Object first).
  const ObjectRef& Ref(size_t i) const { return std::get<ObjectRef>(args_[i]); }

 private:
  std::string fn_;
  Args args_;
};

// A ModelLibrary whose functions are a table filled by the subclass's constructor. The table
// and the metadata live as long as the library; GetFunction's pointers with them.
class FunctionTableLibrary : public ModelLibrary {
 public:
  const PackedFunction* GetFunction(const std::string& name) const override;
  std::vector<std::string> FunctionNames() const override;
  const LibraryMetadata& Metadata() const override { return metadata_; }

 protected:
  explicit FunctionTableLibrary(LibraryMetadata metadata) : metadata_(std::move(metadata)) {}

  LibraryMetadata metadata_;
  std::map<std::string, PackedFunction> functions_;
};

}  // namespace mlc
