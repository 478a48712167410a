// NumPy .npy files (format version 1.0): the interchange format for canonical tensors
// (audio PCM, image pixels) between mlc-manifest and Python tooling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "mlc_manifest/error.h"
#include "mlc_manifest/fs.h"

namespace mlc {

struct NpyArray {
  std::string descr;           // "<f4", "|u1", "<u4", "<i4", ...
  std::vector<int64_t> shape;  // C order
  std::string data;            // raw little-endian element bytes
};

// The bytes of a .npy v1.0 file (header padded to a multiple of 64 bytes).
std::string EncodeNpy(const NpyArray& array);
// Parses a .npy file (v1.0/2.0/3.0, C order, little-endian or byte-sized dtypes); errors give
// the byte offset of the fault.
Result<NpyArray> DecodeNpy(std::string_view bytes);

// Size in bytes of one element of a descr, or 0 when unsupported.
size_t NpyItemSize(std::string_view descr);

// The .npy v1.0 header (magic, version, padded dict) that precedes the element bytes: padded to
// a multiple of 64 bytes, and to at least min_size (a header reserved before the shape was known:
// a shorter one pads out to it).
std::string NpyHeader(std::string_view descr, const std::vector<int64_t>& shape, size_t min_size = 0);

// A 1-D array written to a file as its elements are made and put in place atomically on Commit
// (the rules of WriteFileAtomic): .npy, its header reserved for up to max_count elements and
// finished on Commit, or (npy false) the bare element bytes.
class ArrayFileWriter {
 public:
  static Result<std::unique_ptr<ArrayFileWriter>> Create(const std::string& path, std::string_view descr,
                                                         int64_t max_count, bool npy, bool overwrite);
  // Whole elements' bytes, in order.
  Status Append(std::string_view element_bytes);
  // The count is what was appended; the file is in place when this returns Ok.
  Status Commit();

 private:
  ArrayFileWriter(std::unique_ptr<AtomicFileWriter> file, std::string descr, size_t header_size);

  std::unique_ptr<AtomicFileWriter> file_;
  std::string descr_;
  size_t header_size_;  // 0: raw
  uint64_t bytes_ = 0;
};

// EncodeNpy + WriteFileAtomic.
Status WriteNpy(const std::string& path, const NpyArray& array, bool overwrite);
// The same from element bytes held elsewhere (no copy into an NpyArray).
Status WriteNpyData(const std::string& path, std::string_view descr,
                    const std::vector<int64_t>& shape, std::string_view data, bool overwrite);

}  // namespace mlc
