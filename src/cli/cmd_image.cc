// `mlc-manifest image`: turns an image file into the tensor an `image_decode` processor declares
// (SPEC 6.2) and writes it as .npy; the geometry comes from a model package (--model) or from
// --mode/--height/--width, the dtype from the compiled program's adapter_dtypes or --dtype.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/npy.h"

namespace mlc::cli {
namespace {

struct ImageArgs {
  std::string input;
  std::string output;
  std::string model;
  std::string program;
  std::string task = "chat.completions";
  std::string input_name;
  std::string mode;
  int64_t height = 0;
  int64_t width = 0;
  std::string dtype;
  std::string filter = "bicubic";
  std::string preview;
  int64_t max_pixels = ImageOptions{}.max_pixels;
  bool composite_white = false;
  bool no_shrink = false;
  bool colour_manage = false;
  bool force = false;
  bool json = false;
};

Error Usage(std::string message) { return UsageError(std::move(message)); }

// What the model package (and its compiled program) ask for.
struct Target {
  ImageDecode processor;
  std::optional<PixelDtype> dtype;  // from adapter_dtypes
  std::string source;               // "model" or "options"
};

Result<std::optional<PixelDtype>> DtypeFromProgram(const std::string& path, const Task& task,
                                                   const TaskInput& input) {
  auto program = ReadCompiledProgram(path);
  MLC_RETURN_IF_ERROR(program);
  auto it = program->programs.find(task.executor);
  if (it == program->programs.end()) {
    return Error{ErrorCode::kInvalid, "/programs", "no program \"" + task.executor + "\" (the task's executor)",
                 path};
  }
  if (!input.adapter || !it->second.adapter_dtypes) return std::optional<PixelDtype>();
  auto d = it->second.adapter_dtypes->find(*input.adapter);
  if (d == it->second.adapter_dtypes->end()) return std::optional<PixelDtype>();
  auto dtype = ParsePixelDtype(d->second);
  if (!dtype) {
    return Error{ErrorCode::kUnsupported,
                 PointerAppend(PointerAppend(PointerAppend("/programs", task.executor), "adapter_dtypes"),
                               *input.adapter),
                 "adapter \"" + *input.adapter + "\" takes " + d->second +
                     "; image pixels can be uint8 or uint32",
                 path};
  }
  return std::optional<PixelDtype>(*dtype);
}

Result<Target> TargetFromModel(const ImageArgs& a) {
  auto pkg = ReadModelPackage(JoinPath(a.model, kManifestFileName));
  MLC_RETURN_IF_ERROR(pkg);
  auto found = FindMediaInput(*pkg, a.task, a.input_name, /*want_audio=*/false);
  MLC_RETURN_IF_ERROR(found);
  const TaskInput* input = found->input;
  Target target{std::get<ImageDecode>(input->processor), std::nullopt, "model"};
  if (!a.program.empty()) {
    auto dtype = DtypeFromProgram(a.program, *found->task, *input);
    MLC_RETURN_IF_ERROR(dtype);
    target.dtype = *dtype;
  }
  return target;
}

Result<Target> TargetFromOptions(const ImageArgs& a) {
  Target target;
  target.source = "options";
  if (a.mode == "stretch") {
    target.processor.mode = ResizeMode::kStretch;
  } else if (a.mode == "center_crop") {
    target.processor.mode = ResizeMode::kCenterCrop;
  } else {
    return Usage("--mode must be stretch or center_crop");
  }
  if (a.height < 1 || a.width < 1 || a.height > 65535 || a.width > 65535) {
    return Usage("--height and --width must be between 1 and 65535");
  }
  target.processor.height = a.height;
  target.processor.width = a.width;
  return target;
}

Result<Target> ResolveTarget(const ImageArgs& a) {
  const bool by_options = !a.mode.empty() || a.height != 0 || a.width != 0;
  if (!a.model.empty() && by_options) {
    return Usage("give either --model or --mode/--height/--width, not both");
  }
  if (a.model.empty() && !by_options) {
    return Usage("give --model DIR, or --mode, --height and --width");
  }
  if (a.model.empty() && !a.program.empty()) return Usage("--program needs --model");
  return a.model.empty() ? TargetFromOptions(a) : TargetFromModel(a);
}

Result<PixelDtype> ResolveDtype(const ImageArgs& a, const Target& target) {
  if (a.dtype.empty()) return target.dtype.value_or(PixelDtype::kUint8);
  auto dtype = ParsePixelDtype(a.dtype);
  if (!dtype) return Usage("--dtype must be uint8 or uint32");
  if (target.dtype && *target.dtype != *dtype) {
    return Usage(std::string("--dtype ") + a.dtype + " contradicts the program's adapter_dtypes (" +
                 PixelDtypeName(*target.dtype) + ")");
  }
  return *dtype;
}

OrderedJson PlanJson(const ResizePlan& p, ResizeFilter filter) {
  return {{"mode", ResizeModeName(p.mode)},
          {"filter", ResizeFilterName(filter)},
          {"scaled", {p.scaled_width, p.scaled_height}},
          {"left", p.left},
          {"top", p.top},
          {"width", p.width},
          {"height", p.height}};
}

OrderedJson ResultJson(const ImageArgs& a, const PreparedImage& img, PixelDtype dtype,
                       ResizeFilter filter, const std::string& source) {
  const ImageInfo& i = img.info;
  return {{"ok", true},
          {"input", a.input},
          {"format", i.format},
          {"width", i.width},
          {"height", i.height},
          {"orientation", i.orientation},
          {"upright", {i.upright_width, i.upright_height}},
          {"colour", i.colour},
          {"bits", i.bits},
          {"alpha", i.has_alpha ? (a.composite_white ? "composited" : "dropped") : "none"},
          {"icc", i.has_icc ? (i.icc_applied ? "applied" : "ignored") : "none"},
          {"chroma_subsampling", i.chroma_subsampling.empty() ? OrderedJson(nullptr)
                                                              : OrderedJson(i.chroma_subsampling)},
          {"shrink_on_load", i.shrink},
          {"geometry_from", source},
          {"plan", PlanJson(img.plan, filter)},
          {"output", {{"path", a.output}, {"dtype", PixelDtypeName(dtype)},
                      {"shape", {1, img.plan.height, img.plan.width, 3}}}},
          {"preview", a.preview.empty() ? OrderedJson(nullptr) : OrderedJson(a.preview)}};
}

void PrintHuman(const ImageArgs& a, const PreparedImage& img, PixelDtype dtype,
                ResizeFilter filter) {
  const ImageInfo& i = img.info;
  const ResizePlan& p = img.plan;
  std::ostringstream o;
  o << "input:  " << a.input << ": " << i.format << " " << i.width << "x" << i.height << ", "
    << i.colour << " " << i.bits << "-bit" << (i.has_alpha ? " + alpha" : "")
    << (i.has_icc ? (i.icc_applied ? ", ICC profile applied" : ", ICC profile ignored") : "")
    << (i.chroma_subsampling.empty() ? "" : ", chroma " + i.chroma_subsampling) << "\n";
  o << "orient: EXIF orientation " << i.orientation << " -> upright " << i.upright_width << "x"
    << i.upright_height << "\n";
  if (i.shrink > 1) o << "decode: JPEG shrink-on-load 1/" << i.shrink << "\n";
  o << "resize: " << ResizeModeName(p.mode) << ", " << ResizeFilterName(filter) << ": scaled to "
    << p.scaled_width << "x" << p.scaled_height << ", keep " << p.width << "x" << p.height
    << " at left " << p.left << ", top " << p.top << "\n";
  o << "output: " << a.output << " " << PixelDtypeName(dtype) << " [1, " << p.height << ", "
    << p.width << ", 3]\n";
  if (!a.preview.empty()) o << "preview: " << a.preview << "\n";
  std::cout << o.str();
}

int Run(const ImageArgs& a) {
  auto target = ResolveTarget(a);
  if (!target) return ReportFailure(target.errors(), a.json);
  auto dtype = ResolveDtype(a, *target);
  if (!dtype) return ReportFailure(dtype.errors(), a.json);
  auto filter = ParseResizeFilter(a.filter);
  if (!filter) return ReportFailure({Usage("--filter must be bicubic, bilinear or lanczos")}, a.json);
  if (a.max_pixels < 1) return ReportFailure({Usage("--max-pixels must be >= 1")}, a.json);
  if (a.preview == a.output) {  // refused before anything is written
    return ReportFailure({Usage("--preview must name a file other than -o")}, a.json);
  }
  for (const std::string& out : {a.output, a.preview}) {
    if (!out.empty() && !a.force && FileExists(out)) {
      return ReportFailure({FileError(ErrorCode::kExists, out, "already exists; not replaced")},
                           a.json);
    }
  }
  ImageOptions options;
  options.filter = *filter;
  options.max_pixels = a.max_pixels;
  options.composite_on_white = a.composite_white;
  options.shrink_on_load = !a.no_shrink;
  options.colour_manage = a.colour_manage;
  auto img = PrepareImageFile(a.input, target->processor, options);
  if (!img) return ReportFailure(img.errors(), a.json, a.input);
  Status wrote = WriteNpy(a.output, ImageTensor(img->rgb, *dtype), a.force);
  if (!wrote) return ReportFailure(wrote.errors(), a.json);
  if (!a.preview.empty()) {
    auto png = EncodePng(img->rgb);
    if (!png) return ReportFailure(png.errors(), a.json);
    Status p = WriteFileAtomic(a.preview, *png, a.force);
    if (!p) return ReportFailure(p.errors(), a.json);
  }
  if (a.json) {
    PrintJson(ResultJson(a, *img, *dtype, *filter, target->source));
  } else {
    PrintHuman(a, *img, *dtype, *filter);
  }
  return kExitOk;
}

const Registration kImage(60, "image",
                          "Decode and resize an image into the uint8/uint32 [1, H, W, 3] tensor an "
                          "image_decode processor declares (.npy)",
                          [](CLI::App* cmd) {
  auto a = std::make_shared<ImageArgs>();
  cmd->add_option("INPUT", a->input, "Image file (JPEG, PNG, WebP, GIF, BMP, TIFF, HEIF)")
      ->required();
  cmd->add_option("-o,--output", a->output, "Output .npy file")->required();
  cmd->add_option("--model", a->model, "Model folder holding mlc-model-manifest.json");
  cmd->add_option("--program", a->program,
                  "Compiled-program document (_metadata.artifact JSON) for adapter_dtypes");
  cmd->add_option("--task", a->task, "Task of the package")->capture_default_str();
  cmd->add_option("--input", a->input_name, "Input of the task (default: its image input)");
  cmd->add_option("--mode", a->mode, "stretch or center_crop (without --model)");
  cmd->add_option("--height", a->height, "Target height (without --model)");
  cmd->add_option("--width", a->width, "Target width (without --model)");
  cmd->add_option("--dtype", a->dtype, "uint8 or uint32 (default: the program's, else uint8)");
  cmd->add_option("--filter", a->filter, "bicubic, bilinear or lanczos")->capture_default_str();
  cmd->add_option("--preview", a->preview, "Also write the resized RGB as PNG");
  cmd->add_option("--max-pixels", a->max_pixels, "Reject larger images")->capture_default_str();
  cmd->add_flag("--composite-white", a->composite_white,
                "Blend alpha onto white instead of dropping it");
  cmd->add_flag("--no-shrink-on-load", a->no_shrink, "Always decode JPEG at full size");
  cmd->add_flag("--colour-manage", a->colour_manage,
                "Convert through an embedded ICC profile to sRGB, as browsers do (default: ignore "
                "it, as Pillow's convert(\"RGB\") and the models' processors)");
  cmd->add_flag("--force", a->force, "Overwrite existing output files");
  cmd->add_flag("--json", a->json, "One JSON object on stdout");
  return [a]() { return Run(*a); };
});

}  // namespace
}  // namespace mlc::cli
