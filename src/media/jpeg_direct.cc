// The image frontend's fast path: a plain YCbCr JPEG decoded by libjpeg-turbo (the decoder libvips
// itself uses, with the same settings) straight into the streaming resize, reading only the
// columns and rows the kept window needs; for large images the horizontal pass runs on a second
// thread as rows are decoded. No libvips: the common photo costs the decode and
// little else. Anything this path is not certain about is handed back to libvips (nullopt).
#include "media/jpeg_direct.h"

#include <algorithm>
#include <condition_variable>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <jpeglib.h>

namespace mlc::jpeg_direct {
namespace {

constexpr int kBatchRows = 16;

// libjpeg reports errors by calling error_exit, which must not return: it jumps back to the
// setjmp in Run. Warnings are counted; any warning hands the file to libvips, whose fail_on
// rules then decide.
struct ErrorManager {
  jpeg_error_mgr base;
  std::jmp_buf jump;
  int warnings = 0;
};

[[noreturn]] void OnError(j_common_ptr cinfo) {
  std::longjmp(reinterpret_cast<ErrorManager*>(cinfo->err)->jump, 1);
}

void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) ++reinterpret_cast<ErrorManager*>(cinfo->err)->warnings;
}

uint32_t Read16(const unsigned char* p, bool little) {
  return little ? p[0] | p[1] << 8 : p[0] << 8 | p[1];
}

uint32_t Read32(const unsigned char* p, bool little) {
  return little ? Read16(p, true) | Read16(p + 2, true) << 16
                : Read16(p, false) << 16 | Read16(p + 2, false);
}

// libvips names only two cases (its jpegload): subsampled chroma or not.
std::string ChromaSubsampling(const jpeg_decompress_struct& cinfo) {
  return cinfo.max_h_samp_factor > 1 || cinfo.max_v_samp_factor > 1 ? "4:2:0" : "4:4:4";
}

// The facts libvips's probe reports for an upright 8-bit YCbCr JPEG (a profile, if any, ignored).
ImageInfo InfoOf(const jpeg_decompress_struct& cinfo) {
  ImageInfo info;
  info.format = "jpeg";
  info.width = cinfo.image_width;
  info.height = cinfo.image_height;
  info.orientation = 1;
  info.upright_width = info.width;
  info.upright_height = info.height;
  info.bands = 3;
  info.bits = 8;
  info.colour = "srgb";
  info.chroma_subsampling = ChromaSubsampling(cinfo);
  return info;
}

// True when the markers say the file is what this path serves: at most one Exif block, and that
// one upright; no APP2 block other than an ICC profile, and that one only when the profile is to
// be ignored (colour management is libvips's). Sets *has_icc when a profile is present.
bool PlainMarkers(const jpeg_decompress_struct& cinfo, bool colour_manage, bool* has_icc) {
  int exif_blocks = 0;
  *has_icc = false;
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
    const std::string_view data(reinterpret_cast<const char*>(m->data), m->data_length);
    if (m->marker == JPEG_APP0 + 2) {
      if (colour_manage || data.substr(0, 12) != std::string_view("ICC_PROFILE\0", 12)) return false;
      *has_icc = true;
      continue;
    }
    if (m->marker != JPEG_APP0 + 1) continue;
    if (data.substr(0, 4) != "Exif") continue;  // XMP and others carry no orientation libvips reads
    if (++exif_blocks > 1 || m->data_length != m->original_length) return false;
    const std::optional<int> orientation = ExifOrientation(data);
    if (!orientation || *orientation != 1) return false;
  }
  return true;
}

// Runs the horizontal pass on a second thread: the decoder fills one slot of rows while the
// worker resizes the previous ones, so on two cores the resize hides behind the decode.
class ResizeWorker {
 public:
  ResizeWorker(RowResizer& resizer, int64_t stride, int64_t first_column)
      : resizer_(resizer), stride_(stride), first_column_(first_column) {
    for (Slot& slot : slots_) slot.rows.resize(static_cast<size_t>(stride) * kBatchRows);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ResizeWorker() { Finish(); }
  ResizeWorker(const ResizeWorker&) = delete;
  ResizeWorker& operator=(const ResizeWorker&) = delete;

  // The next free slot's buffer (kBatchRows rows of `stride` bytes); waits for one.
  uint8_t* Acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return produced_ - consumed_ < kSlots; });
    return slots_[produced_ % kSlots].rows.data();
  }
  // Hands the acquired slot, holding source rows [y, y + count), to the worker.
  void Submit(int64_t y, int64_t count) {
    std::lock_guard<std::mutex> lock(mutex_);
    Slot& slot = slots_[produced_ % kSlots];
    slot.y = y;
    slot.count = count;
    ++produced_;
    changed_.notify_all();
  }
  // Waits until every submitted row is resized and stops the thread.
  void Finish() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = true;
      changed_.notify_all();
    }
    thread_.join();
  }

 private:
  static constexpr size_t kSlots = 4;
  struct Slot {
    std::vector<uint8_t> rows;
    int64_t y = 0, count = 0;
  };

  void Loop() {
    for (;;) {
      size_t index;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return consumed_ < produced_ || closed_; });
        if (consumed_ == produced_) return;  // closed and drained
        index = consumed_ % kSlots;
      }
      const Slot& slot = slots_[index];
      resizer_.PushRgbxRows(slot.y, slot.count, slot.rows.data(), stride_, first_column_);
      std::lock_guard<std::mutex> lock(mutex_);
      ++consumed_;
      changed_.notify_all();
    }
  }

  RowResizer& resizer_;
  const int64_t stride_, first_column_;
  Slot slots_[kSlots];
  std::mutex mutex_;
  std::condition_variable changed_;
  size_t produced_ = 0, consumed_ = 0;
  bool closed_ = false;
  std::thread thread_;
};

// Below this many decoded pixels a second thread costs more than it saves.
constexpr int64_t kThreadedPixels = 1'000'000;

// The state Run keeps across its setjmp: plain data only, so a longjmp skips no destructor.
struct Job {
  std::string_view bytes;
  ResizeMode mode;
  int64_t height, width;
  const ImageOptions* options;
  std::optional<PreparedImage> result;
};

// Decodes with the setjmp guard. Returns false when libvips must take the file.
bool Run(Job& job, jpeg_decompress_struct& cinfo, ErrorManager& err,
         std::unique_ptr<RowResizer>& resizer, std::unique_ptr<ResizeWorker>& worker,
         std::vector<uint8_t>& buffer, ImageInfo& info) {
  if (setjmp(err.jump)) return false;
  jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(job.bytes.data()),
               static_cast<unsigned long>(job.bytes.size()));
  jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_save_markers(&cinfo, JPEG_APP0 + 2, 0xffff);
  if (jpeg_read_header(&cinfo, TRUE) != JPEG_HEADER_OK) return false;
  bool has_icc = false;
  if (cinfo.num_components != 3 || cinfo.jpeg_color_space != JCS_YCbCr ||
      cinfo.data_precision != 8 || jpeg_has_multiple_scans(&cinfo) ||
      !PlainMarkers(cinfo, job.options->colour_manage, &has_icc) || err.warnings > 0) {
    return false;
  }
  info = InfoOf(cinfo);
  info.has_icc = has_icc;
  if (info.width * info.height > job.options->max_pixels) return false;  // libvips says so
  ResizePlan plan = PlanResize(info.width, info.height, job.mode, job.height, job.width);
  const int shrink = ChooseShrink(info, plan, *job.options);
  info.shrink = shrink;
  cinfo.out_color_space = JCS_EXT_RGBX;
  cinfo.scale_num = 1;
  cinfo.scale_denom = static_cast<unsigned>(shrink);
  jpeg_start_decompress(&cinfo);
  const int64_t w = cinfo.output_width, h = cinfo.output_height;
  // As libvips's shrink-on-load: the plan in full-resolution pixels maps onto the extent the
  // shrunk pixels stand for.
  ResizePlan decoded_plan = plan;
  decoded_plan.source_width = w;
  decoded_plan.source_height = h;
  const SourceBox box{0, 0, static_cast<double>(info.width) / shrink,
                      static_cast<double>(info.height) / shrink};
  resizer = std::make_unique<RowResizer>(decoded_plan, job.options->filter,
                                         shrink > 1 ? std::optional<SourceBox>(box) : std::nullopt);
  // Decode only the columns the window reads (libjpeg widens the span to whole iMCUs) with a
  // margin of one iMCU, so the chroma upsampling at the span's edges matches the full decode.
  auto [c0, c1] = resizer->NeededColumns();
  const int64_t margin = static_cast<int64_t>(cinfo.max_h_samp_factor) * DCTSIZE;
  JDIMENSION xoffset = static_cast<JDIMENSION>(std::max<int64_t>(0, c0 - margin));
  JDIMENSION xwidth = static_cast<JDIMENSION>(std::min<int64_t>(w, c1 + margin) - xoffset);
  if (xwidth > 0 && (xoffset > 0 || xwidth < w)) jpeg_crop_scanline(&cinfo, &xoffset, &xwidth);
  const int64_t first_column = xoffset, stride = static_cast<int64_t>(cinfo.output_width) * 4;
  auto [r0, r1] = resizer->NeededRows();
  if ((r1 - r0) * static_cast<int64_t>(cinfo.output_width) >= kThreadedPixels) {
    worker = std::make_unique<ResizeWorker>(*resizer, stride, first_column);
  } else {
    buffer.resize(static_cast<size_t>(stride) * kBatchRows);
  }
  if (r0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(std::min(r0, h)));
  while (cinfo.output_scanline < std::min<int64_t>(r1, h)) {
    const int64_t y = cinfo.output_scanline;
    uint8_t* batch = worker ? worker->Acquire() : buffer.data();
    JSAMPROW rows[kBatchRows];
    for (int i = 0; i < kBatchRows; ++i) rows[i] = batch + static_cast<size_t>(i) * stride;
    const JDIMENSION want = static_cast<JDIMENSION>(std::min<int64_t>(kBatchRows, r1 - y));
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, want);
    if (got == 0) return false;
    if (worker) {
      worker->Submit(y, got);
    } else {
      resizer->PushRgbxRows(y, got, batch, stride, first_column);
    }
  }
  // The rest of the data is not needed for the pixels, but a damaged tail is still a damaged
  // file: libvips would fail on it, so the whole stream is read.
  if (cinfo.output_scanline < h) {
    jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(h - cinfo.output_scanline));
  }
  jpeg_finish_decompress(&cinfo);
  if (err.warnings > 0) return false;
  if (worker) worker->Finish();
  plan.source_width = info.width;
  plan.source_height = info.height;
  job.result = PreparedImage{info, plan, resizer->Finish()};
  return true;
}

}  // namespace

std::optional<int> ExifOrientation(std::string_view app1) {
  if (app1.size() < 6 || app1.substr(0, 6) != std::string_view("Exif\0\0", 6)) return std::nullopt;
  const auto* tiff = reinterpret_cast<const unsigned char*>(app1.data()) + 6;
  const size_t size = app1.size() - 6;
  if (size < 8) return std::nullopt;
  bool little;
  if (tiff[0] == 'I' && tiff[1] == 'I') {
    little = true;
  } else if (tiff[0] == 'M' && tiff[1] == 'M') {
    little = false;
  } else {
    return std::nullopt;
  }
  if (Read16(tiff + 2, little) != 42) return std::nullopt;
  const uint64_t ifd = Read32(tiff + 4, little);
  if (ifd + 2 > size) return std::nullopt;
  const uint32_t entries = Read16(tiff + ifd, little);
  if (ifd + 2 + uint64_t{entries} * 12 > size) return std::nullopt;
  for (uint32_t i = 0; i < entries; ++i) {
    const unsigned char* e = tiff + ifd + 2 + i * 12;
    if (Read16(e, little) != 0x0112) continue;
    // SHORT, count 1, value in the first two bytes of the value field.
    if (Read16(e + 2, little) != 3 || Read32(e + 4, little) != 1) return std::nullopt;
    const uint32_t v = Read16(e + 8, little);
    if (v < 1 || v > 8) return std::nullopt;
    return static_cast<int>(v);
  }
  return 1;
}

std::optional<PreparedImage> Prepare(std::string_view bytes, ResizeMode mode, int64_t height,
                                     int64_t width, const ImageOptions& options) {
  if (bytes.size() < 4 || bytes.size() > options.max_file_bytes || height < 1 || width < 1 ||
      static_cast<unsigned char>(bytes[0]) != 0xff || static_cast<unsigned char>(bytes[1]) != 0xd8) {
    return std::nullopt;
  }
  Job job{bytes, mode, height, width, &options, std::nullopt};
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  cinfo.err = jpeg_std_error(&err.base);
  err.base.error_exit = OnError;
  err.base.emit_message = OnMessage;
  jpeg_create_decompress(&cinfo);
  std::unique_ptr<RowResizer> resizer;
  std::unique_ptr<ResizeWorker> worker;  // stopped before the resizer it feeds is destroyed
  std::vector<uint8_t> buffer;
  ImageInfo info;
  const bool ok = Run(job, cinfo, err, resizer, worker, buffer, info);
  worker.reset();
  jpeg_destroy_decompress(&cinfo);
  if (!ok) return std::nullopt;
  return std::move(job.result);
}

}  // namespace mlc::jpeg_direct
