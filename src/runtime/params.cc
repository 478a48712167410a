// The parameter loader: maps the shards named by tensor-cache.json and hands the library its
// parameters in the order it asks for, widening bfloat16-encoded float32 records.
#include <cstring>
#include <map>
#include <set>

#include "mlc_manifest/check.h"
#include "mlc_manifest/env.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/runtime.h"

namespace mlc {
namespace {

// A shard mapped through the process's Env (OpenForRead's rule: a regular file inside the package
// folder), checked to still hold every mapped byte before any of them is read.
Result<std::shared_ptr<const MappedFile>> MapShard(const std::string& path,
                                                  const std::string& package_dir) {
  auto file = DefaultEnv()->MapFile(path, package_dir);
  MLC_RETURN_IF_ERROR(file);
  MLC_RETURN_IF_ERROR((*file)->CheckIntact());
  return file;
}

struct Located {
  const TensorShard* shard;
  const TensorRecord* record;
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// The shape a library asks for must be all integers (named dimensions are resolved by then).
std::optional<std::vector<int64_t>> IntegerShape(const ParamSpec& spec) {
  std::vector<int64_t> out;
  for (const auto& d : spec.shape) {
    if (!std::holds_alternative<int64_t>(d)) return std::nullopt;
    out.push_back(std::get<int64_t>(d));
  }
  return out;
}

Result<NDArray> Materialize(const Located& at, const std::shared_ptr<const MappedFile>& file,
                            const std::string& shard_path, uint64_t* widened) {
  const TensorRecord& r = *at.record;
  auto dtype = ParseDlDtype(r.dtype);
  if (!dtype) return FileError(ErrorCode::kInvalid, shard_path, "record \"" + r.name + "\": unsupported dtype \"" + r.dtype + "\"");
  if (r.byte_offset + r.nbytes > file->size()) {
    return FileError(ErrorCode::kInvalid, shard_path, "record \"" + r.name + "\" ends at byte " +
                                   std::to_string(r.byte_offset + r.nbytes) + " but the shard has " +
                                   std::to_string(file->size()) + " bytes");
  }
  const uint8_t* src = file->data() + r.byte_offset;
  if (r.format == "f32-to-bf16" && r.dtype == "float32") {
    NDArray out = NDArray::Empty(r.shape, *dtype);
    float* dst = out.data<float>();
    for (uint64_t i = 0; i < r.Elements(); ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      dst[i] = Bf16ToFloat(v);
    }
    *widened += out.Bytes();
    return out;
  }
  size_t align = std::max<size_t>(1, (dtype->bits + 7) / 8);
  if (reinterpret_cast<uintptr_t>(src) % align == 0) {
    return NDArray::View(file, src, r.shape, *dtype);
  }
  NDArray out = NDArray::Empty(r.shape, *dtype);  // unaligned record: copy
  std::memcpy(out.data<uint8_t>(), src, r.nbytes);
  return out;
}

// Records the library does not ask for: weights of another layout (a layer the program has no
// projection for, another model's tensors), refused as the manifest's parameter_schema_id would
// refuse them. Names the first few.
Status CheckNoExtraRecords(const std::map<std::string, Located>& by_name, const std::vector<ParamSpec>& order,
                           const std::string& file) {
  std::set<std::string> asked;
  for (const ParamSpec& spec : order) asked.insert(spec.name);
  std::vector<std::string> extra;
  for (const auto& [name, located] : by_name) {
    if (!asked.count(name)) extra.push_back(name);
  }
  if (extra.empty()) return Status::Ok();
  std::string list;
  for (size_t i = 0; i < std::min<size_t>(extra.size(), 5); ++i) list += (i ? ", \"" : "\"") + extra[i] + "\"";
  if (extra.size() > 5) list += " and " + std::to_string(extra.size() - 5) + " more";
  return FileError(ErrorCode::kInvalid, file,
                   "holds " + std::to_string(extra.size()) + " parameter" + (extra.size() == 1 ? "" : "s") +
                       " the library does not take (" + list +
                       "): the weights are laid out for another model or layer plan");
}

}  // namespace

Result<std::shared_ptr<ParameterSet>> LoadParameters(const std::string& package_dir,
                                                     const std::vector<ParamSpec>& order) {
  auto cache = ReadTensorCache(package_dir);
  MLC_RETURN_IF_ERROR(cache);
  std::map<std::string, Located> by_name;
  for (const TensorShard& s : cache->shards) {
    for (const TensorRecord& r : s.records) by_name[r.name] = Located{&s, &r};
  }
  Errors errors;
  auto params = std::make_shared<ParameterSet>();
  std::map<std::string, std::shared_ptr<const MappedFile>> mapped;
  std::set<std::string> unusable;  // shards that could not be mapped or are LFS pointers
  for (const ParamSpec& spec : order) {
    auto it = by_name.find(spec.name);
    if (it == by_name.end()) {
      errors.push_back(FileError(ErrorCode::kInvalid, cache->file, "the library asks for parameter \"" + spec.name +
                                                "\", which tensor-cache.json does not hold"));
      continue;
    }
    const TensorRecord& r = *it->second.record;
    auto shape = IntegerShape(spec);
    if (!shape || *shape != r.shape || spec.dtype != r.dtype) {
      errors.push_back(FileError(ErrorCode::kInvalid, cache->file, "parameter \"" + spec.name + "\" is " +
                                                ShapeText(r.shape) + " " + r.dtype +
                                                " in tensor-cache.json but the library expects " +
                                                (shape ? ShapeText(*shape) : "a symbolic shape") +
                                                " " + spec.dtype));
      continue;
    }
    const std::string& data_path = it->second.shard->data_path;
    std::string shard_path = JoinPath(package_dir, data_path);
    if (unusable.count(data_path)) continue;  // its error is reported once
    auto& file = mapped[data_path];
    if (!file) {
      auto m = MapShard(shard_path, package_dir);
      if (!m) {
        errors.push_back(m.error());
        unusable.insert(data_path);
        continue;
      }
      // A Git LFS pointer in place of the shard: say so, with the command that fetches it.
      std::string_view head(reinterpret_cast<const char*>((*m)->data()),
                            std::min<size_t>((*m)->size(), 64));
      if (std::string lfs = GitLfsPointerNote(head, data_path, package_dir); !lfs.empty()) {
        errors.push_back(FileError(ErrorCode::kInvalid, shard_path, lfs));
        unusable.insert(data_path);
        continue;
      }
      file = *m;
      params->mapped_bytes += file->size();
    }
    auto tensor = Materialize(it->second, file, shard_path, &params->widened_bytes);
    if (!tensor) {
      errors.push_back(tensor.error());
      continue;
    }
    params->names.push_back(spec.name);
    params->tensors.push_back(*tensor);
  }
  if (Status extra = CheckNoExtraRecords(by_name, order, cache->file); !extra) errors.push_back(extra.error());
  if (!errors.empty()) return errors;
  return params;
}

}  // namespace mlc
