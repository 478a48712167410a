// .npy encode/decode: a magic string, a version, a little-endian header length and a Python
// dict literal {'descr': ..., 'fortran_order': False, 'shape': (...), } padded with spaces.
#include "mlc_manifest/npy.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

constexpr std::string_view kMagic("\x93NUMPY", 6);

Error At(size_t offset, std::string message) {
  return Invalid("byte " + std::to_string(offset), std::move(message));
}

// Finds the value text that follows 'key': in the header dict.
std::string_view FieldText(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return {};
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end = at;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', end);
    return end == std::string_view::npos ? std::string_view{} : header.substr(at, end - at + 1);
  }
  if (end < header.size() && header[end] == '\'') {
    end = header.find('\'', end + 1);
    return end == std::string_view::npos ? std::string_view{} : header.substr(at, end - at + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  return header.substr(at, end - at);
}

}  // namespace

size_t NpyItemSize(std::string_view descr) {
  if (descr == "|u1" || descr == "|i1" || descr == "|b1" || descr == "<u1" || descr == "<i1") {
    return 1;
  }
  if (descr == "<u2" || descr == "<i2" || descr == "<f2") return 2;
  if (descr == "<u4" || descr == "<i4" || descr == "<f4") return 4;
  if (descr == "<u8" || descr == "<i8" || descr == "<f8") return 8;
  return 0;
}

std::string NpyHeader(std::string_view descr, const std::vector<int64_t>& shape, size_t min_size) {
  std::string dims = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    if (shape.size() == 1 || i + 1 < shape.size()) dims += ",";
    if (i + 1 < shape.size()) dims += " ";
  }
  dims += ")";
  std::string dict = "{'descr': '";
  dict += descr;
  dict += "', 'fortran_order': False, 'shape': " + dims + ", }";
  size_t total = kMagic.size() + 2 + 2 + dict.size() + 1;
  size_t padded = std::max(total + (64 - total % 64) % 64, min_size + (64 - min_size % 64) % 64);
  dict.append(padded - total, ' ');
  dict += '\n';
  std::string out(kMagic);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xFF);
  out += static_cast<char>((dict.size() >> 8) & 0xFF);
  out += dict;
  return out;
}

ArrayFileWriter::ArrayFileWriter(std::unique_ptr<AtomicFileWriter> file, std::string descr, size_t header_size)
    : file_(std::move(file)), descr_(std::move(descr)), header_size_(header_size) {}

Result<std::unique_ptr<ArrayFileWriter>> ArrayFileWriter::Create(const std::string& path, std::string_view descr,
                                                                 int64_t max_count, bool npy, bool overwrite) {
  if (NpyItemSize(descr) == 0) return Error{ErrorCode::kUsage, "", "unsupported descr " + std::string(descr)};
  auto file = AtomicFileWriter::Create(path, overwrite);
  MLC_RETURN_IF_ERROR(file);
  size_t header_size = 0;
  if (npy) {
    // A placeholder as long as the longest header the final count can need.
    const std::string reserved = NpyHeader(descr, {std::max<int64_t>(max_count, 0)});
    header_size = reserved.size();
    Status wrote = (*file)->Append(reserved);
    MLC_RETURN_IF_ERROR(wrote);
  }
  return std::unique_ptr<ArrayFileWriter>(new ArrayFileWriter(std::move(*file), std::string(descr), header_size));
}

Status ArrayFileWriter::Append(std::string_view element_bytes) {
  bytes_ += element_bytes.size();
  return file_->Append(element_bytes);
}

Status ArrayFileWriter::Commit() {
  if (header_size_ > 0) {
    const int64_t count = static_cast<int64_t>(bytes_ / NpyItemSize(descr_));
    const std::string header = NpyHeader(descr_, {count}, header_size_);
    if (header.size() != header_size_) {
      return Error{ErrorCode::kLimit, "", std::to_string(count) +
                                              " elements need a longer .npy header than the one reserved"};
    }
    Status wrote = file_->WriteAt(0, header);
    MLC_RETURN_IF_ERROR(wrote);
  }
  return file_->Commit();
}

std::string EncodeNpy(const NpyArray& array) {
  return NpyHeader(array.descr, array.shape) + array.data;
}

Result<NpyArray> DecodeNpy(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != kMagic) {
    return At(0, "not a .npy file (expected the magic \\x93NUMPY)");
  }
  int major = static_cast<unsigned char>(bytes[6]);
  size_t len_bytes = major == 1 ? 2 : (major == 2 || major == 3) ? 4 : 0;
  if (len_bytes == 0) return At(6, "unsupported .npy version " + std::to_string(major));
  if (bytes.size() < 8 + len_bytes) return At(8, "truncated header length");
  size_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) {
    header_len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  }
  size_t data_start = 8 + len_bytes + header_len;
  if (header_len > bytes.size() || data_start > bytes.size()) {
    return At(8, "header length " + std::to_string(header_len) + " runs past the end of the file");
  }
  std::string_view header = bytes.substr(8 + len_bytes, header_len);
  NpyArray out;
  std::string_view descr = FieldText(header, "descr");
  if (descr.size() < 2) return At(8 + len_bytes, "header has no 'descr'");
  out.descr = std::string(descr.substr(1, descr.size() - 2));
  size_t item = NpyItemSize(out.descr);
  if (item == 0) return At(8 + len_bytes, "unsupported dtype '" + out.descr + "'");
  if (FieldText(header, "fortran_order") != "False") {
    return At(8 + len_bytes, "expected 'fortran_order': False (C order)");
  }
  std::string_view shape = FieldText(header, "shape");
  if (shape.size() < 2 || shape.front() != '(') return At(8 + len_bytes, "header has no 'shape'");
  uint64_t count = 1;
  int64_t dim = -1;
  for (char c : shape.substr(1)) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (dim < 0) dim = 0;
      if (dim > (std::numeric_limits<int64_t>::max() - 9) / 10) {
        return At(8 + len_bytes, "shape dimension too large");
      }
      dim = dim * 10 + (c - '0');
    } else if (c == ',' || c == ')') {
      if (dim >= 0) {
        out.shape.push_back(dim);
        if (dim != 0 && count > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(dim)) {
          return At(8 + len_bytes, "shape has too many elements");
        }
        count *= static_cast<uint64_t>(dim);
      }
      dim = -1;
    } else if (c != ' ') {
      return At(8 + len_bytes, "malformed shape");
    }
  }
  if (count > std::numeric_limits<uint64_t>::max() / item) {
    return At(8 + len_bytes, "shape has too many elements");
  }
  uint64_t need = count * item;
  if (bytes.size() - data_start != need) {
    return At(data_start, "expected " + std::to_string(need) + " data bytes for the shape, found " +
                              std::to_string(bytes.size() - data_start));
  }
  out.data = std::string(bytes.substr(data_start));
  return out;
}

Status WriteNpy(const std::string& path, const NpyArray& array, bool overwrite) {
  return WriteNpyData(path, array.descr, array.shape, array.data, overwrite);
}

Status WriteNpyData(const std::string& path, std::string_view descr,
                    const std::vector<int64_t>& shape, std::string_view data, bool overwrite) {
  return WriteFileAtomicParts(path, {NpyHeader(descr, shape), data}, overwrite);
}

}  // namespace mlc
