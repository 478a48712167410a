// tensor-cache.json (and the legacy ndarray-cache.json): the converter's list of shards and the
// records inside them. Validation covers what a loader would otherwise trip over: paths that
// escape the folder, records past their shard or overlapping, duplicate names, byte counts
// that disagree with shape x stored itemsize.
#include <algorithm>
#include <filesystem>
#include <limits>
#include <set>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/package.h"

namespace mlc {
namespace {

bool MulOverflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// A data path must stay inside the package folder: relative, no "..", no empty segments.
std::optional<std::string> BadDataPath(const std::string& p) {
  if (p.empty()) return "is empty";
  if (p.front() == '/') return "is absolute; expected a path relative to the package folder";
  if (p.find('\\') != std::string::npos) return "contains a backslash";
  // A NUL would cut the name where the file is opened (and alias another shard).
  if (HasControlChar(p)) return "contains a control character";
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    std::string seg = p.substr(start, end - start);
    if (seg == "..") return "contains \"..\"; expected a path inside the package folder";
    if (seg.empty()) return "has an empty path segment";
    start = end + 1;
  }
  return std::nullopt;
}

TensorRecord ParseRecord(const Json& v, const std::string& path, FieldChecker& c) {
  TensorRecord r;
  if (!c.Object(v, path)) return r;
  c.Keys(v, path, {"name", "shape", "dtype", "format", "nbytes", "byteOffset"},
         {"name", "shape", "dtype", "format", "nbytes", "byteOffset"});
  if (v.contains("name")) r.name = c.String(v["name"], path + "/name").value_or("");
  if (v.contains("dtype")) r.dtype = c.String(v["dtype"], path + "/dtype").value_or("");
  if (v.contains("format")) {
    r.format = c.String(v["format"], path + "/format").value_or("");
    if (!r.format.empty() && r.format != "raw" && r.format != "f32-to-bf16") {
      c.Fail(path + "/format", "expected \"raw\" or \"f32-to-bf16\", got \"" + r.format + "\"");
    }
  }
  if (v.contains("shape")) {
    const Json& s = v["shape"];
    if (!s.is_array()) {
      c.Fail(path + "/shape", "expected an array of integers, got " + JsonTypeName(s));
    } else {
      for (size_t i = 0; i < s.size(); ++i) {
        if (auto d = c.Integer(s[i], PointerAppend(path + "/shape", i), 0)) r.shape.push_back(*d);
      }
    }
  }
  if (v.contains("nbytes")) r.nbytes = c.Integer(v["nbytes"], path + "/nbytes", 0).value_or(0);
  if (v.contains("byteOffset")) {
    r.byte_offset = c.Integer(v["byteOffset"], path + "/byteOffset", 0).value_or(0);
  }
  return r;
}

void CheckRecordBytes(const TensorRecord& r, const std::string& path, FieldChecker& c) {
  if (r.dtype.empty()) return;
  if (!DtypeItemSize(r.dtype)) {
    c.Fail(path + "/dtype", "unknown dtype \"" + r.dtype + "\"");
    return;
  }
  uint64_t elements = 1;
  for (int64_t d : r.shape) {
    if (MulOverflows(elements, static_cast<uint64_t>(d), &elements)) {
      c.Fail(path + "/shape", "element count overflows");
      return;
    }
  }
  uint64_t expected = 0;
  if (MulOverflows(elements, r.StoredItemSize(), &expected)) {
    c.Fail(path + "/shape", "byte count overflows");
    return;
  }
  if (expected != r.nbytes) {
    c.Fail(path + "/nbytes", "expected " + std::to_string(expected) + " (" +
                                 std::to_string(elements) + " elements x " +
                                 std::to_string(r.StoredItemSize()) + " stored bytes of " +
                                 r.dtype + (r.format == "f32-to-bf16" && r.dtype == "float32"
                                                ? " as bfloat16"
                                                : "") +
                                 "), got " + std::to_string(r.nbytes));
  }
}

TensorShard ParseShard(const Json& v, const std::string& path, FieldChecker& c) {
  TensorShard s;
  if (!c.Object(v, path)) return s;
  c.Keys(v, path, {"dataPath", "format", "nbytes", "records", "md5sum"},
         {"dataPath", "format", "nbytes", "records"});
  if (v.contains("dataPath")) {
    if (auto p = c.String(v["dataPath"], path + "/dataPath")) {
      if (auto bad = BadDataPath(*p)) {
        c.Fail(path + "/dataPath", "\"" + EscapeControl(*p) + "\" " + *bad);
      } else {
        s.data_path = *p;
      }
    }
  }
  if (v.contains("format")) c.Literal(v["format"], path + "/format", "raw-shard");
  if (v.contains("nbytes")) s.nbytes = c.Integer(v["nbytes"], path + "/nbytes", 0).value_or(0);
  if (v.contains("md5sum")) {
    if (auto m = c.String(v["md5sum"], path + "/md5sum")) {
      bool hex = m->size() == 32 && std::all_of(m->begin(), m->end(), [](char ch) {
                   return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f');
                 });
      if (!hex) {
        c.Fail(path + "/md5sum", "expected 32 lowercase hex digits");
      } else {
        s.md5sum = *m;
      }
    }
  }
  if (v.contains("records")) {
    const Json& recs = v["records"];
    std::string rp = path + "/records";
    if (!recs.is_array()) {
      c.Fail(rp, "expected an array of records, got " + JsonTypeName(recs));
      return s;
    }
    for (size_t i = 0; i < recs.size(); ++i) {
      std::string p = PointerAppend(rp, i);
      size_t before = c.count();
      TensorRecord r = ParseRecord(recs[i], p, c);
      if (c.count() == before) CheckRecordBytes(r, p, c);
      s.records.push_back(std::move(r));
    }
  }
  // Records lie inside the shard and do not overlap.
  std::vector<std::pair<uint64_t, size_t>> spans;
  for (size_t i = 0; i < s.records.size(); ++i) {
    const TensorRecord& r = s.records[i];
    std::string p = PointerAppend(path + "/records", i);
    if (r.byte_offset > s.nbytes || r.nbytes > s.nbytes - r.byte_offset) {
      c.Fail(p, "bytes " + std::to_string(r.byte_offset) + ".." +
                    std::to_string(r.byte_offset + r.nbytes) + " run past the end of shard \"" +
                    s.data_path + "\" (" + std::to_string(s.nbytes) + " bytes)");
    }
    spans.emplace_back(r.byte_offset, i);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t k = 1; k < spans.size(); ++k) {
    const TensorRecord& prev = s.records[spans[k - 1].second];
    const TensorRecord& cur = s.records[spans[k].second];
    if (prev.byte_offset + prev.nbytes > cur.byte_offset) {
      c.Fail(PointerAppend(path + "/records", spans[k].second),
             "record \"" + cur.name + "\" overlaps record \"" + prev.name + "\"");
    }
  }
  return s;
}

}  // namespace

uint64_t TensorRecord::StoredItemSize() const {
  if (format == "f32-to-bf16" && dtype == "float32") return 2;
  return static_cast<uint64_t>(DtypeItemSize(dtype).value_or(0));
}

uint64_t TensorRecord::Elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

Result<TensorCache> ParseTensorCache(const Json& doc) {
  Errors errors;
  FieldChecker c(&errors);
  TensorCache cache;
  if (!c.Object(doc, "")) return errors;
  c.Keys(doc, "", {"metadata", "records"}, {"records"});
  if (doc.contains("metadata") && c.Object(doc["metadata"], "/metadata")) {
    const Json& m = doc["metadata"];
    if (m.contains("ParamSize")) cache.param_size = c.Integer(m["ParamSize"], "/metadata/ParamSize", 0);
    if (m.contains("ParamBytes")) cache.param_bytes = c.Integer(m["ParamBytes"], "/metadata/ParamBytes", 0);
  }
  if (doc.contains("records")) {
    const Json& shards = doc["records"];
    if (!shards.is_array()) {
      c.Fail("/records", "expected an array of shards, got " + JsonTypeName(shards));
    } else {
      for (size_t i = 0; i < shards.size(); ++i) {
        cache.shards.push_back(ParseShard(shards[i], PointerAppend("/records", i), c));
      }
    }
  }
  // Names unique across shards; data paths unique.
  std::set<std::string> names, paths;
  for (size_t i = 0; i < cache.shards.size(); ++i) {
    const TensorShard& s = cache.shards[i];
    std::string sp = PointerAppend("/records", i);
    if (!s.data_path.empty() && !paths.insert(s.data_path).second) {
      c.Fail(sp + "/dataPath", "shard \"" + s.data_path + "\" is listed twice");
    }
    for (size_t j = 0; j < s.records.size(); ++j) {
      const std::string& n = s.records[j].name;
      if (!n.empty() && !names.insert(n).second) {
        c.Fail(PointerAppend(sp + "/records", j) + "/name",
               "duplicate parameter name \"" + n + "\"");
      }
    }
  }
  if (!errors.empty()) return errors;
  return cache;
}

Result<TensorCache> ReadTensorCache(const std::string& dir) {
  std::string path = JoinPath(dir, kTensorCacheFileName);
  bool legacy = false;
  if (!FileExists(path)) {
    std::string old = JoinPath(dir, "ndarray-cache.json");
    if (!FileExists(old)) {
      return IoError(dir, "no tensor-cache.json (nor the legacy ndarray-cache.json) in the folder");
    }
    path = old;
    legacy = true;
  }
  Result<Json> doc = ReadJsonFile(path, {}, dir);
  MLC_RETURN_IF_ERROR(doc);
  Result<TensorCache> cache = InDocument(ParseTensorCache(*doc), path);
  MLC_RETURN_IF_ERROR(cache);
  cache->file = path;
  cache->legacy_name = legacy;
  return cache;
}

std::vector<ParamSpec> ParamSpecsOf(const TensorCache& cache) {
  std::vector<ParamSpec> out;
  for (const TensorShard& s : cache.shards) {
    for (const TensorRecord& r : s.records) {
      ParamSpec p;
      p.name = r.name;
      for (int64_t d : r.shape) p.shape.emplace_back(d);
      p.dtype = r.dtype;
      out.push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace mlc

namespace mlc {

std::string ManifestPath(const std::string& dir_or_file) {
  std::error_code ec;
  if (std::filesystem::is_directory(dir_or_file, ec)) return JoinPath(dir_or_file, kManifestFileName);
  return dir_or_file;
}

Result<std::vector<ParamSpec>> ParamSpecsOfDocument(const Json& doc) {
  if (doc.is_array()) return ParseParamSpecs(doc);
  if (doc.is_object() && doc.contains("records")) {
    Result<TensorCache> cache = ParseTensorCache(doc);
    MLC_RETURN_IF_ERROR(cache);
    return ParamSpecsOf(*cache);
  }
  return Invalid("", "expected a JSON array of {name, shape, dtype} or a tensor-cache.json "
                     "object with \"records\"");
}

}  // namespace mlc
