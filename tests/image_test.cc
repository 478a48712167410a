// Tests of the image frontend (SPEC 6.2): geometry, fidelity to Pillow's resampling for every
// format, colour model, orientation and filter (Pillow run by tests/support/pil_image.py),
// shrink-on-load quality, limits and hostile inputs.
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include <gtest/gtest.h>

#include "media/jpeg_direct.h"
#include "media/jpeg_markers.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/npy.h"
#include "support/test_util.h"

namespace mlc {
namespace {

constexpr const char* kPython = "/usr/bin/python3";

std::string Helper() { return test::SourcePath("tests/support/pil_image.py"); }

// One comparison against Pillow.
struct Job {
  std::string input;
  ResizeMode mode;
  int64_t height, width;
  ResizeFilter filter;
  bool icc = false;
  std::string out;
};

struct Reference {
  RgbImage rgb;
  int64_t scaled_w = 0, scaled_h = 0, left = 0, top = 0;
};

// Generates the test images once and runs every Pillow reference in one Python process.
class PillowFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new test::TempDir();
    auto made = test::RunProgram({kPython, Helper(), "make", dir_->path()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto list = ParseJson(made.out);
    ASSERT_TRUE(list.ok());
    images_ = new std::map<std::string, Json>();
    for (const Json& item : *list) (*images_)[item["name"]] = item;
    jobs_ = new std::vector<Job>(BuildJobs());
    refs_ = new std::map<std::string, Reference>();
    Json jobs = Json::array();
    for (const Job& j : *jobs_) {
      jobs.push_back({{"input", j.input}, {"mode", ResizeModeName(j.mode)}, {"height", j.height},
                      {"width", j.width}, {"filter", ResizeFilterName(j.filter)},
                      {"icc", j.icc}, {"out", j.out}});
    }
    std::string jobs_path = dir_->Write("jobs.json", jobs.dump());
    auto ran = test::RunProgram({kPython, Helper(), "resize", jobs_path});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    size_t pos = 0;
    while (pos < ran.out.size()) {
      size_t nl = ran.out.find('\n', pos);
      if (nl == std::string::npos) nl = ran.out.size();
      auto line = ParseJson(std::string_view(ran.out).substr(pos, nl - pos));
      pos = nl + 1;
      ASSERT_TRUE(line.ok());
      Reference ref;
      auto bytes = ReadFile((*line)["out"]);
      ASSERT_TRUE(bytes.ok());
      auto npy = DecodeNpy(*bytes);
      ASSERT_TRUE(npy.ok());
      ref.rgb.height = npy->shape[1];
      ref.rgb.width = npy->shape[2];
      ref.rgb.pixels.assign(npy->data.begin(), npy->data.end());
      ref.scaled_w = (*line)["scaled"][0];
      ref.scaled_h = (*line)["scaled"][1];
      ref.left = (*line)["left"];
      ref.top = (*line)["top"];
      (*refs_)[(*line)["out"]] = std::move(ref);
    }
  }

  static void TearDownTestSuite() {
    delete refs_;
    delete jobs_;
    delete images_;
    delete dir_;
  }

  static std::string File(const std::string& name) { return dir_->File(name); }

  static std::vector<Job> BuildJobs() {
    std::vector<Job> jobs;
    auto add = [&](const std::string& name, ResizeMode mode, int64_t h, int64_t w,
                   ResizeFilter f = ResizeFilter::kBicubic, bool icc = false) {
      std::string out = File("ref" + std::to_string(jobs.size()) + ".npy");
      jobs.push_back({File(name), mode, h, w, f, icc, out});
    };
    const auto crop = ResizeMode::kCenterCrop;
    const auto stretch = ResizeMode::kStretch;
    for (const auto& [name, props] : *images_) {
      if (props.contains("large") || name == "one.png" || name == "wide.png" ||
          name == "tall.jpg" || name == "small.png") {
        continue;
      }
      // By default a profile is ignored, as Pillow's convert("RGB"); colour-managed jobs compare
      // with Pillow's ImageCms conversion to sRGB.
      add(name, crop, 32, 40);
      add(name, stretch, 30, 50);
      if (props.contains("icc")) {
        add(name, crop, 32, 40, ResizeFilter::kBicubic, /*icc=*/true);
        add(name, stretch, 30, 50, ResizeFilter::kBicubic, /*icc=*/true);
      }
    }
    for (const char* name : {"rgb.png", "rgb.jpg", "orient6.jpg"}) {
      for (ResizeFilter f : {ResizeFilter::kBilinear, ResizeFilter::kLanczos}) {
        add(name, crop, 32, 40, f);
        add(name, stretch, 30, 50, f);
        add(name, crop, 150, 200, f);  // upscaling
      }
      add(name, crop, 150, 200);
      add(name, crop, 61, 97);  // identity size
      add(name, stretch, 61, 20);  // only one axis resampled
    }
    add("one.png", stretch, 7, 5);
    add("one.png", crop, 4, 4);
    add("wide.png", crop, 336, 336);
    add("wide.png", stretch, 200, 20, ResizeFilter::kLanczos);
    add("tall.jpg", crop, 336, 336);
    add("tall.jpg", crop, 24, 336, ResizeFilter::kBilinear);
    add("small.png", crop, 336, 336);
    add("small.png", stretch, 100, 3);
    return jobs;
  }

  static test::TempDir* dir_;
  static std::map<std::string, Json>* images_;
  static std::vector<Job>* jobs_;
  static std::map<std::string, Reference>* refs_;
};

test::TempDir* PillowFixture::dir_ = nullptr;
std::map<std::string, Json>* PillowFixture::images_ = nullptr;
std::vector<Job>* PillowFixture::jobs_ = nullptr;
std::map<std::string, Reference>* PillowFixture::refs_ = nullptr;

int MaxDiff(const RgbImage& a, const RgbImage& b) {
  int m = 0;
  for (size_t i = 0; i < a.pixels.size() && i < b.pixels.size(); ++i) {
    m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
  }
  return m;
}

std::string Describe(const Job& j) {
  return j.input.substr(j.input.rfind('/') + 1) + " " + ResizeModeName(j.mode) + " " +
         std::to_string(j.width) + "x" + std::to_string(j.height) + " " +
         ResizeFilterName(j.filter) + (j.icc ? " colour-managed" : "");
}

TEST_F(PillowFixture, MatchesPillowForEveryFormatOrientationAndFilter) {
  ASSERT_FALSE(jobs_->empty());
  int exact = 0;
  for (const Job& j : *jobs_) {
    SCOPED_TRACE(Describe(j));
    auto bytes = ReadFile(j.input);
    ASSERT_TRUE(bytes.ok());
    ImageOptions options;
    options.filter = j.filter;
    options.colour_manage = j.icc;
    auto got = PrepareImage(*bytes, j.mode, j.height, j.width, options);
    ASSERT_TRUE(got.ok()) << got.error().ToString();
    const Reference& ref = refs_->at(j.out);
    EXPECT_EQ(got->plan.scaled_width, ref.scaled_w);
    EXPECT_EQ(got->plan.scaled_height, ref.scaled_h);
    EXPECT_EQ(got->plan.left, ref.left);
    EXPECT_EQ(got->plan.top, ref.top);
    ASSERT_EQ(got->rgb.width, ref.rgb.width);
    ASSERT_EQ(got->rgb.height, ref.rgb.height);
    const double psnr = Psnr(got->rgb, ref.rgb);
    const int diff = MaxDiff(got->rgb, ref.rgb);
    EXPECT_GE(psnr, 60.0) << "max diff " << diff;
    if (!j.icc) {
      EXPECT_LE(diff, 1) << "psnr " << psnr;
    }
    if (diff == 0) ++exact;
  }
  std::printf("[ image ] %d of %zu Pillow comparisons bit-exact\n", exact, jobs_->size());
}

TEST_F(PillowFixture, ReportsHeaderFacts) {
  auto info = [](const std::string& name) {
    auto bytes = ReadFile(File(name));
    EXPECT_TRUE(bytes.ok());
    auto i = ProbeImage(*bytes);
    EXPECT_TRUE(i.ok()) << (i.ok() ? "" : i.error().ToString());
    return i.ok() ? *i : ImageInfo{};
  };
  EXPECT_EQ(info("rgb.jpg").format, "jpeg");
  EXPECT_EQ(info("rgb.png").format, "png");
  EXPECT_EQ(info("lossy.webp").format, "webp");
  EXPECT_EQ(info("anim.gif").format, "gif");
  EXPECT_EQ(info("rgb.bmp").format, "bmp");
  EXPECT_EQ(info("rgb.tif").format, "tiff");
  EXPECT_EQ(info("cmyk.jpg").colour, "cmyk");
  EXPECT_EQ(info("grey16.png").bits, 16);
  EXPECT_TRUE(info("rgba.png").has_alpha);
  EXPECT_TRUE(info("icc.png").has_icc);
  for (int o = 1; o <= 8; ++o) {
    ImageInfo i = info("orient" + std::to_string(o) + ".jpg");
    EXPECT_EQ(i.orientation, o);
    EXPECT_EQ(i.upright_width, o >= 5 ? 61 : 97);
    EXPECT_EQ(i.upright_height, o >= 5 ? 97 : 61);
  }
}

// SPEC 6.2: an embedded profile is ignored by default (the encoded values, as Pillow's
// convert("RGB")), and applied with colour_manage.
TEST_F(PillowFixture, IccProfileIgnoredByDefaultAppliedWhenAsked) {
  auto plain = DecodeImage(*ReadFile(File("rgb.png")));
  ASSERT_TRUE(plain.ok());
  ImageOptions managed;
  managed.colour_manage = true;
  for (const char* name : {"icc.png", "p3.png"}) {
    SCOPED_TRACE(name);
    auto bytes = ReadFile(File(name));
    ASSERT_TRUE(bytes.ok());
    auto by_default = DecodeImage(*bytes);
    ASSERT_TRUE(by_default.ok());
    EXPECT_TRUE(by_default->info.has_icc);
    EXPECT_FALSE(by_default->info.icc_applied);
    // The same pixels were saved with and without the profile (PNG is lossless).
    EXPECT_EQ(by_default->rgb.pixels, plain->rgb.pixels);
    auto with = DecodeImage(*bytes, managed);
    ASSERT_TRUE(with.ok());
    EXPECT_TRUE(with->info.icc_applied);
    // A wide-gamut profile moves the colours well away from the encoded values.
    EXPECT_LT(Psnr(with->rgb, plain->rgb), 40.0);
  }
  // An sRGB-tagged file is managed into (nearly) itself.
  auto srgb = DecodeImage(*ReadFile(File("srgb_tagged.png")), managed);
  ASSERT_TRUE(srgb.ok());
  EXPECT_GE(Psnr(srgb->rgb, plain->rgb), 45.0);
}

// --colour-manage matches libvips's own icc_transform to sRGB (the vips command), pixel for pixel
// within 1.
TEST_F(PillowFixture, ColourManagedMatchesVipsIccTransform) {
  ImageOptions managed;
  managed.colour_manage = true;
  for (const char* name : {"icc.png", "p3.png", "icc.jpg", "p3.jpg"}) {
    SCOPED_TRACE(name);
    const std::string out = File(std::string("vips_srgb_") + name + ".png");
    auto ran = test::RunProgram({"vips", "icc_transform", File(name), out, "srgb", "--embedded",
                                 "--intent", "relative", "--depth", "8"});
    ASSERT_EQ(ran.exit_code, 0) << ran.err;
    auto reference = DecodeImage(*ReadFile(out));  // its sRGB profile ignored: the values as stored
    ASSERT_TRUE(reference.ok());
    auto got = DecodeImage(*ReadFile(File(name)), managed);
    ASSERT_TRUE(got.ok());
    ASSERT_EQ(got->rgb.width, reference->rgb.width);
    ASSERT_EQ(got->rgb.height, reference->rgb.height);
    EXPECT_LE(MaxDiff(got->rgb, reference->rgb), 1);
    auto by_default = DecodeImage(*ReadFile(File(name)));
    ASSERT_TRUE(by_default.ok());
    EXPECT_GT(MaxDiff(by_default->rgb, reference->rgb), 10);
  }
}

// The command line: the default ignores the profile and says so; --colour-manage applies it.
TEST_F(PillowFixture, ColourManageFlagOnTheCommandLine) {
  const std::string in = File("p3.png");
  const std::string plain_out = File("cli_plain.npy"), managed_out = File("cli_managed.npy");
  const std::vector<std::string> args{"image", in, "--mode", "center_crop", "--height", "32",
                                      "--width", "40", "--force", "--json"};
  std::vector<std::string> plain_args = args, managed_args = args;
  plain_args.insert(plain_args.end(), {"-o", plain_out});
  managed_args.insert(managed_args.end(), {"-o", managed_out, "--colour-manage"});
  auto plain = test::RunCli(plain_args);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto managed = test::RunCli(managed_args);
  ASSERT_EQ(managed.exit_code, 0) << managed.err;
  EXPECT_NE(plain.out.find("\"ignored\""), std::string::npos) << plain.out;
  EXPECT_NE(managed.out.find("\"applied\""), std::string::npos) << managed.out;
  auto a = DecodeNpy(*ReadFile(plain_out));
  auto b = DecodeNpy(*ReadFile(managed_out));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->data, b->data);
  ImageDecode processor;
  processor.mode = ResizeMode::kCenterCrop;
  processor.height = 32;
  processor.width = 40;
  auto lib = PrepareImageFile(in, processor);
  ASSERT_TRUE(lib.ok());
  EXPECT_EQ(a->data, std::string(lib->rgb.pixels.begin(), lib->rgb.pixels.end()));
}

TEST_F(PillowFixture, CompositeOnWhiteInsteadOfDroppingAlpha) {
  auto bytes = ReadFile(File("rgba.png"));
  ASSERT_TRUE(bytes.ok());
  ImageOptions options;
  options.composite_on_white = true;
  auto white = DecodeImage(*bytes, options);
  auto dropped = DecodeImage(*bytes);
  ASSERT_TRUE(white.ok() && dropped.ok());
  // Column 0 has alpha 0: white when composited, the colour itself when alpha is dropped.
  EXPECT_EQ(white->rgb.pixels[0], 255);
  EXPECT_EQ(white->rgb.pixels[1], 255);
  EXPECT_EQ(white->rgb.pixels[2], 255);
  auto plain = DecodeImage(*ReadFile(File("rgb.png")));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(dropped->rgb.pixels, plain->rgb.pixels);
  // The last column is opaque: the same either way.
  const size_t last = (dropped->rgb.width - 1) * 3;
  EXPECT_EQ(white->rgb.pixels[last], dropped->rgb.pixels[last]);
}

TEST_F(PillowFixture, GifFirstFrameOnly) {
  auto d = DecodeImage(*ReadFile(File("anim.gif")));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->rgb.width, 97);
  EXPECT_EQ(d->rgb.height, 61);
}

TEST_F(PillowFixture, HeifWhenLibvipsReadsIt) {
  // Pillow cannot write HEIF here; libvips's own CLI (libvips-tools) can.
  std::string heic = File("rgb.heic");
  auto saved = test::RunProgram({"vips", "copy", File("rgb.png"), heic + "[Q=95]"});
  if (saved.exit_code != 0) GTEST_SKIP() << "libvips cannot write HEIF here: " << saved.err;
  auto got = DecodeImageFile(heic);
  ASSERT_TRUE(got.ok()) << got.error().ToString();
  EXPECT_EQ(got->info.format, "heif");
  auto png = DecodeImageFile(File("rgb.png"));
  ASSERT_TRUE(png.ok());
  EXPECT_GE(Psnr(got->rgb, png->rgb), 30.0);
}

// ---- Shrink-on-load: only where it stays >= 45 dB from the full decode ----

TEST_F(PillowFixture, ShrinkOnLoadStaysAbove45Db) {
  struct Case {
    const char* name;
    ResizeMode mode;
    int64_t h, w;
  };
  const Case cases[] = {
      {"photo.jpg", ResizeMode::kCenterCrop, 100, 100},  // reduction 12 -> shrink 2
      {"photo.jpg", ResizeMode::kCenterCrop, 50, 50},    // reduction 24 -> shrink 4
      {"photo.jpg", ResizeMode::kStretch, 200, 266},     // reduction 6: full decode
      {"photo.jpg", ResizeMode::kStretch, 130, 70},      // anisotropic
      {"photo_o6.jpg", ResizeMode::kCenterCrop, 60, 90}, // rotated source
      {"odd_o3.jpg", ResizeMode::kCenterCrop, 41, 37},   // partial blocks, 180 degrees
      {"photo420.jpg", ResizeMode::kCenterCrop, 50, 50}, // 4:2:0 chroma: full decode
  };
  int used = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto bytes = ReadFile(File(c.name));
    ASSERT_TRUE(bytes.ok());
    ImageOptions full_opts;
    full_opts.shrink_on_load = false;
    auto full = PrepareImage(*bytes, c.mode, c.h, c.w, full_opts);
    auto fast = PrepareImage(*bytes, c.mode, c.h, c.w);
    ASSERT_TRUE(full.ok() && fast.ok());
    EXPECT_EQ(full->info.shrink, 1);
    if (std::string(c.name) == "photo420.jpg") {
      EXPECT_EQ(fast->info.chroma_subsampling, "4:2:0");
      EXPECT_EQ(fast->info.shrink, 1);
    }
    EXPECT_EQ(fast->plan, full->plan);
    if (fast->info.shrink > 1) ++used;
    const double psnr = Psnr(fast->rgb, full->rgb);
    std::printf("[ image ] %s %lldx%lld shrink %d: %.1f dB\n", c.name,
                static_cast<long long>(c.w), static_cast<long long>(c.h), fast->info.shrink,
                psnr);
    EXPECT_GE(psnr, 45.0);
  }
  EXPECT_GE(used, 4);  // the fast path is really taken
}

// The worst case: 1-2 px lines, a checkerboard and hard chroma edges, with 4:2:0 and 4:4:4
// chroma, over a sweep of reductions on both sides of every shrink factor's threshold.
TEST_F(PillowFixture, ShrinkOnLoadStaysAbove45DbOnAdversarialContent) {
  int used = 0;
  for (const char* name : {"lines420.jpg", "lines444.jpg"}) {
    auto bytes = ReadFile(File(name));
    ASSERT_TRUE(bytes.ok());
    for (int64_t size : {500, 400, 336, 300, 224, 200, 150, 120, 100, 75, 64, 50, 40, 32}) {
      for (ResizeMode mode : {ResizeMode::kCenterCrop, ResizeMode::kStretch}) {
        const int64_t w = mode == ResizeMode::kStretch ? size * 4 / 3 : size;
        ImageOptions full_opts;
        full_opts.shrink_on_load = false;
        auto full = PrepareImage(*bytes, mode, size, w, full_opts);
        auto fast = PrepareImage(*bytes, mode, size, w);
        ASSERT_TRUE(full.ok() && fast.ok());
        if (fast->info.shrink == 1) continue;
        ++used;
        const double psnr = Psnr(fast->rgb, full->rgb);
        std::printf("[ image ] %s %s %lldx%lld shrink %d: %.1f dB\n", name, ResizeModeName(mode),
                    static_cast<long long>(w), static_cast<long long>(size), fast->info.shrink, psnr);
        EXPECT_GE(psnr, 45.0) << name << " " << ResizeModeName(mode) << " " << w << "x" << size;
      }
    }
  }
  EXPECT_GE(used, 10);
}

TEST(ImageShrink, ChoosesOnlyForJpegAndLargeReductions) {
  ImageInfo info;
  info.format = "jpeg";
  info.chroma_subsampling = "4:4:4";
  info.upright_width = 4000;
  info.upright_height = 3000;
  ResizePlan plan = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 336, 336);
  EXPECT_EQ(ChooseShrink(info, plan, {}), 2);  // 8.9 / 2 >= 4, 8.9 / 4 < 4
  plan = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 100, 100);
  EXPECT_EQ(ChooseShrink(info, plan, {}), 4);  // 30 / 8 < 4
  plan = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 50, 50);
  EXPECT_EQ(ChooseShrink(info, plan, {}), 8);
  info.chroma_subsampling = "4:2:0";
  EXPECT_EQ(ChooseShrink(info, plan, {}), 1);
  info.chroma_subsampling = "4:4:4";
  ImageOptions off;
  off.shrink_on_load = false;
  EXPECT_EQ(ChooseShrink(info, plan, off), 1);
  plan = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 1200, 1200);
  EXPECT_EQ(ChooseShrink(info, plan, {}), 1);
  info.format = "png";
  plan = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 100, 100);
  EXPECT_EQ(ChooseShrink(info, plan, {}), 1);
}

// ---- Streaming: decode straight into the resize ----

// The streamed path (rows resized as libvips decodes them) gives exactly the pixels of the
// whole-image path, for every geometry, filter and shrink; reoriented, grey and CMYK images
// take the whole-image path.
TEST_F(PillowFixture, StreamedDecodeEqualsWholeImagePath) {
  struct Case {
    const char* name;
    ResizeMode mode;
    int64_t h, w;
    ResizeFilter filter;
  };
  const Case cases[] = {
      {"photo.jpg", ResizeMode::kCenterCrop, 336, 336, ResizeFilter::kBicubic},
      {"photo.jpg", ResizeMode::kCenterCrop, 50, 50, ResizeFilter::kLanczos},  // shrink 4
      {"photo.jpg", ResizeMode::kStretch, 1300, 1700, ResizeFilter::kBilinear},  // upscale
      {"photo.jpg", ResizeMode::kStretch, 1200, 1600, ResizeFilter::kBicubic},   // identity
      {"photo.jpg", ResizeMode::kStretch, 1200, 300, ResizeFilter::kBicubic},    // one axis
      {"rgb.png", ResizeMode::kCenterCrop, 32, 40, ResizeFilter::kBicubic},
      {"rgba.png", ResizeMode::kStretch, 30, 50, ResizeFilter::kBicubic},
      {"lossy.webp", ResizeMode::kCenterCrop, 150, 200, ResizeFilter::kBicubic},
      {"one.png", ResizeMode::kCenterCrop, 3, 3, ResizeFilter::kBicubic},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto bytes = ReadFile(File(c.name));
    ASSERT_TRUE(bytes.ok());
    ImageOptions opts;
    opts.filter = c.filter;
    auto info = ProbeImage(*bytes, opts);
    ASSERT_TRUE(info.ok());
    ResizePlan plan = PlanResize(info->upright_width, info->upright_height, c.mode, c.h, c.w);
    const int shrink = ChooseShrink(*info, plan, opts);
    auto streamed = DecodeAndResize(*bytes, *info, plan, opts, shrink);
    ASSERT_TRUE(streamed.ok()) << FormatErrors(streamed.errors());
    ASSERT_TRUE(streamed->has_value()) << "an upright RGB image streams";
    auto whole = DecodeImage(*bytes, opts, shrink);
    ASSERT_TRUE(whole.ok());
    ResizePlan p = plan;
    p.source_width = whole->rgb.width;
    p.source_height = whole->rgb.height;
    RgbImage expected = ResizeRgb(whole->rgb, p, c.filter, whole->box);
    EXPECT_EQ((*streamed)->rgb.width, c.w);
    EXPECT_EQ((*streamed)->rgb.height, c.h);
    EXPECT_TRUE((*streamed)->rgb.pixels == expected.pixels);
    EXPECT_EQ((*streamed)->info.shrink, shrink);
  }
  for (const char* name : {"orient6.jpg", "grey.jpg", "cmyk.jpg", "grey16.png"}) {
    auto bytes = ReadFile(File(name));
    ASSERT_TRUE(bytes.ok());
    auto info = ProbeImage(*bytes);
    ASSERT_TRUE(info.ok());
    ResizePlan plan = PlanResize(info->upright_width, info->upright_height, ResizeMode::kStretch, 20, 20);
    auto streamed = DecodeAndResize(*bytes, *info, plan, {}, 1);
    ASSERT_TRUE(streamed.ok()) << name;
    EXPECT_FALSE(streamed->has_value()) << name << " needs the whole-image path";
  }
}

// ---- The direct JPEG path (libjpeg-turbo without libvips) ----

// For every plain upright YCbCr JPEG the direct path gives exactly the libvips path's pixels and
// header facts (the decode with the same libjpeg settings, then ResizeRgb), also where it decodes
// only the needed columns and skips rows; every other file is left to libvips.
TEST_F(PillowFixture, DirectJpegPathEqualsLibvipsPath) {
  struct Case {
    const char* name;
    ResizeMode mode;
    int64_t h, w;
    ResizeFilter filter;
  };
  const Case cases[] = {
      {"photo.jpg", ResizeMode::kCenterCrop, 336, 336, ResizeFilter::kBicubic},
      {"photo.jpg", ResizeMode::kCenterCrop, 50, 50, ResizeFilter::kLanczos},     // shrink 4
      {"photo.jpg", ResizeMode::kStretch, 1300, 1700, ResizeFilter::kBilinear},   // upscale
      {"photo.jpg", ResizeMode::kStretch, 1200, 1600, ResizeFilter::kBicubic},    // identity
      {"photo.jpg", ResizeMode::kStretch, 1200, 300, ResizeFilter::kBicubic},     // one axis
      {"photo420.jpg", ResizeMode::kCenterCrop, 336, 336, ResizeFilter::kBicubic},
      {"photo420.jpg", ResizeMode::kCenterCrop, 1000, 77, ResizeFilter::kBicubic}, // column crop
      {"photo420.jpg", ResizeMode::kCenterCrop, 77, 1000, ResizeFilter::kLanczos}, // row skip
      {"photo420.jpg", ResizeMode::kCenterCrop, 1200, 1, ResizeFilter::kBilinear},
      {"lines420.jpg", ResizeMode::kCenterCrop, 100, 60, ResizeFilter::kBicubic},
      {"lines444.jpg", ResizeMode::kCenterCrop, 60, 100, ResizeFilter::kBicubic},
      {"tall.jpg", ResizeMode::kCenterCrop, 336, 336, ResizeFilter::kBicubic},
      {"rgb.jpg", ResizeMode::kCenterCrop, 7, 5, ResizeFilter::kBicubic},
      {"orient1.jpg", ResizeMode::kStretch, 20, 30, ResizeFilter::kBicubic},
      {"icc.jpg", ResizeMode::kCenterCrop, 32, 40, ResizeFilter::kBicubic},  // profile ignored
      {"p3.jpg", ResizeMode::kStretch, 30, 50, ResizeFilter::kBicubic},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + " " + std::to_string(c.w) + "x" + std::to_string(c.h));
    auto bytes = ReadFile(File(c.name));
    ASSERT_TRUE(bytes.ok());
    ImageOptions opts;
    opts.filter = c.filter;
    auto direct = jpeg_direct::Prepare(*bytes, c.mode, c.h, c.w, opts);
    ASSERT_TRUE(direct.has_value()) << "a plain JPEG takes the direct path";
    auto info = ProbeImage(*bytes, opts);
    ASSERT_TRUE(info.ok());
    const ResizePlan plan = PlanResize(info->upright_width, info->upright_height, c.mode, c.h, c.w);
    const int shrink = ChooseShrink(*info, plan, opts);
    auto whole = DecodeImage(*bytes, opts, shrink);
    ASSERT_TRUE(whole.ok());
    ResizePlan p = plan;
    p.source_width = whole->rgb.width;
    p.source_height = whole->rgb.height;
    const RgbImage expected = ResizeRgb(whole->rgb, p, c.filter, whole->box);
    EXPECT_EQ(direct->plan, plan);
    EXPECT_TRUE(direct->rgb.pixels == expected.pixels) << "max diff " << MaxDiff(direct->rgb, expected);
    const ImageInfo& a = direct->info;
    const ImageInfo& b = whole->info;
    EXPECT_EQ(a.format, b.format);
    EXPECT_EQ(a.width, b.width);
    EXPECT_EQ(a.height, b.height);
    EXPECT_EQ(a.orientation, b.orientation);
    EXPECT_EQ(a.bands, b.bands);
    EXPECT_EQ(a.bits, b.bits);
    EXPECT_EQ(a.colour, b.colour);
    EXPECT_EQ(a.has_alpha, b.has_alpha);
    EXPECT_EQ(a.has_icc, b.has_icc);
    EXPECT_EQ(a.chroma_subsampling, b.chroma_subsampling);
    EXPECT_EQ(a.shrink, shrink);
  }
  for (const char* name : {"orient6.jpg", "odd_o3.jpg", "grey.jpg", "cmyk.jpg", "progressive.jpg",
                           "rgb.png"}) {
    auto bytes = ReadFile(File(name));
    ASSERT_TRUE(bytes.ok());
    EXPECT_FALSE(jpeg_direct::Prepare(*bytes, ResizeMode::kStretch, 20, 20, {}).has_value()) << name;
  }
  const std::string photo = *ReadFile(File("photo420.jpg"));
  for (size_t keep : {photo.size() / 2, photo.size() - 2, size_t{300}}) {
    EXPECT_FALSE(jpeg_direct::Prepare(std::string_view(photo).substr(0, keep),
                                      ResizeMode::kCenterCrop, 336, 336, {}).has_value())
        << "truncated at " << keep << ": left to libvips, which rejects it";
  }
  ImageOptions managed;  // a profile to apply is libvips's
  managed.colour_manage = true;
  for (const char* name : {"icc.jpg", "p3.jpg"}) {
    EXPECT_FALSE(jpeg_direct::Prepare(*ReadFile(File(name)), ResizeMode::kStretch, 20, 20, managed)
                     .has_value()) << name;
    EXPECT_TRUE(jpeg_direct::Prepare(*ReadFile(File(name)), ResizeMode::kStretch, 20, 20, {})
                    .has_value()) << name;
  }
  ImageOptions small;
  small.max_pixels = 1000;
  EXPECT_FALSE(jpeg_direct::Prepare(photo, ResizeMode::kStretch, 8, 8, small).has_value());
}

// The Exif orientation reader: both byte orders, an absent tag, and anything it cannot be
// sure of (which leaves the file to libvips).
TEST(JpegDirect, ExifOrientation) {
  auto exif = [](bool little, uint16_t tag, uint16_t type, uint32_t count, uint16_t value) {
    std::string s("Exif\0\0", 6);
    auto put16 = [&](uint16_t v) {
      s += little ? std::string{char(v & 0xff), char(v >> 8)} : std::string{char(v >> 8), char(v & 0xff)};
    };
    auto put32 = [&](uint32_t v) {
      if (little) { put16(v & 0xffff); put16(v >> 16); } else { put16(v >> 16); put16(v & 0xffff); }
    };
    s += little ? "II" : "MM";
    put16(42);
    put32(8);
    put16(1);
    put16(tag);
    put16(type);
    put32(count);
    put16(value);
    put16(0);
    put32(0);
    return s;
  };
  EXPECT_EQ(jpeg_direct::ExifOrientation(exif(true, 0x0112, 3, 1, 6)), 6);
  EXPECT_EQ(jpeg_direct::ExifOrientation(exif(false, 0x0112, 3, 1, 1)), 1);
  EXPECT_EQ(jpeg_direct::ExifOrientation(exif(true, 0x010f, 2, 4, 0)), 1) << "no orientation tag";
  EXPECT_EQ(jpeg_direct::ExifOrientation(exif(true, 0x0112, 3, 1, 9)), std::nullopt);
  EXPECT_EQ(jpeg_direct::ExifOrientation(exif(true, 0x0112, 4, 1, 1)), std::nullopt);
  std::string cut = exif(true, 0x0112, 3, 1, 1);
  EXPECT_EQ(jpeg_direct::ExifOrientation(cut.substr(0, 20)), std::nullopt);
  EXPECT_EQ(jpeg_direct::ExifOrientation("Exif"), std::nullopt);
  EXPECT_EQ(jpeg_direct::ExifOrientation(std::string("Exif\0\0XX*\0", 10)), std::nullopt);
}

// A WebP whose frame data is damaged (found by image_fuzz): depending on how libvips schedules
// the tiles, the run fails, or its tile cache blacks out the failed tile and finishes with only
// a warning; either way both decode paths must refuse it instead of returning whatever the
// buffers held.
TEST(ImageInputs, DamagedFrameDataIsRejectedByBothPaths) {
  auto bytes = ReadFile(test::SourcePath("tests/data/damaged_frame.webp"));
  ASSERT_TRUE(bytes.ok());
  auto info = ProbeImage(*bytes);
  ASSERT_TRUE(info.ok()) << "the header is fine";
  for (int round = 0; round < 3; ++round) {
    auto prepared = PrepareImage(*bytes, ResizeMode::kStretch, 4, 6);
    ASSERT_FALSE(prepared.ok());
    EXPECT_EQ(prepared.errors()[0].path, "");  // the whole image: its pixel data
    EXPECT_NE(prepared.errors()[0].message.find("pixels"), std::string::npos);
    EXPECT_NE(prepared.errors()[0].message.find("webp"), std::string::npos)
        << prepared.errors()[0].message;
    auto whole = DecodeImage(*bytes);
    ASSERT_FALSE(whole.ok());
    EXPECT_EQ(whole.errors()[0].path, "");
  }
}

// Rows pushed in strips of any height, in order, give ResizeRgb's pixels.
TEST(RowResizer, StripsOfAnyHeightEqualTheWholeImage) {
  RgbImage src;
  src.width = 53;
  src.height = 41;
  for (int64_t i = 0; i < src.width * src.height * 3; ++i) {
    src.pixels.push_back(static_cast<uint8_t>((i * 7919) % 251));
  }
  for (ResizeMode mode : {ResizeMode::kStretch, ResizeMode::kCenterCrop}) {
    for (auto [h, w] : {std::pair<int64_t, int64_t>{10, 12}, {80, 30}, {41, 53}, {41, 20}, {1, 1}}) {
      ResizePlan plan = PlanResize(src.width, src.height, mode, h, w);
      RgbImage expected = ResizeRgb(src, plan, ResizeFilter::kBicubic);
      for (int64_t strip : {1, 3, 16, 64}) {
        RowResizer r(plan, ResizeFilter::kBicubic, std::nullopt);
        for (int64_t y = 0; y < src.height; y += strip) {
          const int64_t n = std::min(strip, src.height - y);
          r.PushRows(y, n, src.pixels.data() + y * src.width * 3, src.width * 3);
        }
        RgbImage got = r.Finish();
        EXPECT_TRUE(got.pixels == expected.pixels) << ResizeModeName(mode) << " " << w << "x" << h
                                                   << " strips of " << strip;
      }
    }
  }
}

// The RGBX entry the direct JPEG path feeds (the vectorised horizontal pass where the CPU has
// AVX2) gives exactly the RGB path's pixels: random content (every pixel clipped somewhere),
// reductions wide enough that the taps run past the last needed column (the zero-padded tail),
// upscales (weights near 1.0), every filter. Each row is its own allocation of exactly the
// needed columns, so a read past them is caught under ASan.
TEST(RowResizer, RgbxRowsEqualRgbRows) {
  RgbImage src;
  src.width = 411;
  src.height = 97;
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (int64_t i = 0; i < src.width * src.height * 3; ++i) src.pixels.push_back(next() >> 24);
  struct Case { ResizeMode mode; int64_t h, w; };
  const Case cases[] = {{ResizeMode::kCenterCrop, 7, 7},     {ResizeMode::kStretch, 5, 3},
                        {ResizeMode::kStretch, 1, 1},        {ResizeMode::kCenterCrop, 50, 336},
                        {ResizeMode::kStretch, 97, 1000},    {ResizeMode::kStretch, 200, 411},
                        {ResizeMode::kCenterCrop, 33, 130},  {ResizeMode::kStretch, 60, 137}};
  for (ResizeFilter f : {ResizeFilter::kBicubic, ResizeFilter::kBilinear, ResizeFilter::kLanczos}) {
    for (const Case& c : cases) {
      const ResizePlan plan = PlanResize(src.width, src.height, c.mode, c.h, c.w);
      const RgbImage expected = ResizeRgb(src, plan, f);
      RowResizer r(plan, f, std::nullopt);
      const auto [c0, c1] = r.NeededColumns();
      ASSERT_LT(c0, c1);
      for (int64_t y = 0; y < src.height; ++y) {
        std::vector<uint8_t> row(static_cast<size_t>(c1 - c0) * 4);
        for (int64_t x = c0; x < c1; ++x) {
          std::memcpy(&row[(x - c0) * 4], &src.pixels[(y * src.width + x) * 3], 3);
          row[(x - c0) * 4 + 3] = static_cast<uint8_t>(next() >> 24);  // X is ignored
        }
        r.PushRgbxRows(y, 1, row.data(), static_cast<int64_t>(row.size()), c0);
      }
      const RgbImage got = r.Finish();
      EXPECT_TRUE(got.pixels == expected.pixels)
          << ResizeFilterName(f) << " " << ResizeModeName(c.mode) << " " << c.w << "x" << c.h;
    }
  }
}

// ---- Geometry (SPEC 6.2) ----

TEST(ImagePlan, CenterCropGeometry) {
  ResizePlan p = PlanResize(4000, 3000, ResizeMode::kCenterCrop, 336, 336);
  EXPECT_EQ(p.scaled_width, 448);
  EXPECT_EQ(p.scaled_height, 336);
  EXPECT_EQ(p.left, 56);
  EXPECT_EQ(p.top, 0);
  // round(1000 * 336 / 667) = round(503.75) = 504; Hugging Face's shortest-edge resize would
  // truncate to 503, but SPEC's geometry rounds.
  p = PlanResize(1000, 667, ResizeMode::kCenterCrop, 336, 336);
  EXPECT_EQ(p.scaled_width, 504);
  EXPECT_EQ(p.scaled_height, 336);
  EXPECT_EQ(p.left, 84);
  // Halves round up (Math.round): 5 x 2 into 1 x 1 scales by 0.5 to 2.5 -> 3.
  p = PlanResize(5, 2, ResizeMode::kCenterCrop, 1, 1);
  EXPECT_EQ(p.scaled_width, 3);
  EXPECT_EQ(p.scaled_height, 1);
  EXPECT_EQ(p.left, 1);
  // Non-square target: the height covers, the width is cropped with floor.
  p = PlanResize(640, 480, ResizeMode::kCenterCrop, 224, 100);
  EXPECT_EQ(p.scaled_width, 299);
  EXPECT_EQ(p.scaled_height, 224);
  EXPECT_EQ(p.left, 99);
  EXPECT_EQ(p.top, 0);
  // Upscaling a tiny image.
  p = PlanResize(1, 1, ResizeMode::kCenterCrop, 336, 336);
  EXPECT_EQ(p.scaled_width, 336);
  EXPECT_EQ(p.left, 0);
}

TEST(ImagePlan, StretchIgnoresAspect) {
  ResizePlan p = PlanResize(3000, 40, ResizeMode::kStretch, 896, 896);
  EXPECT_EQ(p.scaled_width, 896);
  EXPECT_EQ(p.scaled_height, 896);
  EXPECT_EQ(p.left, 0);
  EXPECT_EQ(p.top, 0);
}

TEST(ImageResize, IdentityAndConstantImages) {
  RgbImage src;
  src.width = 7;
  src.height = 5;
  for (int i = 0; i < 7 * 5 * 3; ++i) src.pixels.push_back(static_cast<uint8_t>(i * 7));
  for (ResizeFilter f : {ResizeFilter::kBicubic, ResizeFilter::kBilinear, ResizeFilter::kLanczos}) {
    RgbImage same = ResizeRgb(src, PlanResize(7, 5, ResizeMode::kStretch, 5, 7), f);
    EXPECT_EQ(same.pixels, src.pixels);
    RgbImage flat;
    flat.width = 9;
    flat.height = 4;
    flat.pixels.assign(9 * 4 * 3, 200);
    RgbImage r = ResizeRgb(flat, PlanResize(9, 4, ResizeMode::kCenterCrop, 13, 11), f);
    for (uint8_t v : r.pixels) ASSERT_EQ(v, 200);  // weights are normalized
  }
}

// ---- Output tensor ----

TEST(ImageTensor, Uint8AndWidenedUint32) {
  RgbImage rgb;
  rgb.width = 2;
  rgb.height = 1;
  rgb.pixels = {0, 1, 2, 253, 254, 255};
  NpyArray u8 = ImageTensor(rgb, PixelDtype::kUint8);
  EXPECT_EQ(u8.descr, "|u1");
  EXPECT_EQ(u8.shape, (std::vector<int64_t>{1, 1, 2, 3}));
  EXPECT_EQ(u8.data, std::string("\x00\x01\x02\xfd\xfe\xff", 6));
  NpyArray u32 = ImageTensor(rgb, PixelDtype::kUint32);
  EXPECT_EQ(u32.descr, "<u4");
  ASSERT_EQ(u32.data.size(), 24u);
  EXPECT_EQ(static_cast<uint8_t>(u32.data[20]), 255);
  EXPECT_EQ(u32.data.substr(21, 3), std::string(3, '\0'));
  EXPECT_EQ(ParsePixelDtype("uint32"), PixelDtype::kUint32);
  EXPECT_FALSE(ParsePixelDtype("float32").has_value());
}

TEST(ImagePng, PreviewRoundTrips) {
  RgbImage rgb;
  rgb.width = 3;
  rgb.height = 2;
  for (int i = 0; i < 18; ++i) rgb.pixels.push_back(static_cast<uint8_t>(i * 13));
  auto png = EncodePng(rgb);
  ASSERT_TRUE(png.ok());
  auto back = DecodeImage(*png);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rgb.pixels, rgb.pixels);
}

// ---- Hostile and broken inputs ----

std::string Be32(uint32_t v) {
  return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
          static_cast<char>(v)};
}

uint32_t Crc32(const std::string& data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

std::string PngChunk(const std::string& type, const std::string& data) {
  return Be32(static_cast<uint32_t>(data.size())) + type + data + Be32(Crc32(type + data));
}

// A valid PNG header claiming width x height, with a tiny (wrong) IDAT.
std::string HugePng(uint32_t width, uint32_t height) {
  std::string ihdr = Be32(width) + Be32(height) + std::string("\x08\x02\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + PngChunk("IHDR", ihdr) +
         PngChunk("IDAT", std::string("\x78\x9c\x03\x00\x00\x00\x00\x01", 8)) +
         PngChunk("IEND", "");
}

long PeakRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// A manifest may declare a resize size up to 2^53 - 1: the target is checked against the limits
// before any buffer is sized from it (it once died of bad_alloc).
TEST(ImageLimits, HugeTargetSizeFromAManifestIsRefusedBeforeAllocating) {
  RgbImage rgb;
  rgb.width = 2;
  rgb.height = 2;
  rgb.pixels.assign(12, 7);
  auto png = EncodePng(rgb);
  ASSERT_TRUE(png.ok());
  const std::pair<int64_t, int64_t> sizes[] = {
      {1000000, 1000000}, {65535, 65535}, {3000000000, 1}, {(int64_t{1} << 53) - 1, 2}};
  for (auto [h, w] : sizes) {
    ImageDecode processor;
    processor.mode = ResizeMode::kStretch;
    processor.height = h;
    processor.width = w;
    auto r = PrepareImage(*png, processor);
    ASSERT_FALSE(r.ok()) << h << "x" << w;
    EXPECT_EQ(r.error().code, ErrorCode::kLimit) << r.error().message;
  }
  ImageDecode fine;
  fine.mode = ResizeMode::kStretch;
  fine.height = 4;
  fine.width = 4;
  EXPECT_TRUE(PrepareImage(*png, fine).ok());
}

TEST(ImageLimits, HugePngHeaderIsRejectedQuicklyWithBoundedMemory) {
  const std::string png = HugePng(100000, 100000);
  const long before = PeakRssKb();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = PrepareImage(png, ResizeMode::kCenterCrop, 336, 336);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
  EXPECT_NE(r.error().message.find("100000x100000"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("limit"), std::string::npos);
  EXPECT_LT(PeakRssKb() - before, 64 * 1024);  // nowhere near the 30 GB the pixels would take
  (void)ms;  // tests never assert on time; the header path decodes nothing
}

TEST(ImageLimits, ConfigurablePixelLimit) {
  const std::string png = HugePng(200, 100);
  ImageOptions options;
  options.max_pixels = 19999;
  auto r = ProbeImage(png, options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
  options.max_pixels = 20000;
  EXPECT_TRUE(ProbeImage(png, options).ok());
}

TEST_F(PillowFixture, JpegHeaderClaimingHugeSizeIsRejected) {
  std::string jpg = *ReadFile(File("rgb.jpg"));
  size_t sof = jpg.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  jpg[sof + 5] = '\xea';  // height 60000
  jpg[sof + 6] = '\x60';
  jpg[sof + 7] = '\xea';  // width 60000
  jpg[sof + 8] = '\x60';
  auto r = PrepareImage(jpg, ResizeMode::kStretch, 10, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kLimit);
}

TEST_F(PillowFixture, TruncatedFilesAreRejected) {
  for (const char* name : {"rgb.jpg", "progressive.jpg", "rgb.png", "lossy.webp", "rgb.tif",
                           "anim.gif", "rgb.bmp", "photo.jpg"}) {
    SCOPED_TRACE(name);
    std::string bytes = *ReadFile(File(name));
    for (size_t keep : {bytes.size() / 2, size_t{40}, size_t{8}}) {
      auto r = PrepareImage(std::string_view(bytes).substr(0, keep), ResizeMode::kStretch, 8, 8);
      EXPECT_FALSE(r.ok()) << "kept " << keep << " bytes";
    }
  }
}

// The marker walk counts scans as a decoder finds them: lengths honoured (an APP segment holding
// the bytes FF DA is no scan), entropy-coded data skipped (stuffed FF 00 and RSTn are no markers).
TEST(JpegBudget, MarkerWalkCountsScans) {
  auto seg = [](uint8_t marker, const std::string& body) {
    const size_t n = body.size() + 2;
    return std::string{'\xFF', static_cast<char>(marker), static_cast<char>(n >> 8), static_cast<char>(n & 0xFF)} + body;
  };
  const std::string sof = seg(0xC2, std::string("\x08\x00\x30\x00\x40\x01\x01\x11\x00", 9));  // 64x48
  const std::string scan = seg(0xDA, std::string("\x01\x01\x00\x00\x3F\x00", 6)) + std::string("\x12\xFF\x00\x34\xFF\xD3\x56", 7);
  std::string jpeg = std::string("\xFF\xD8") + seg(0xE1, std::string("x\xFF\xDAy", 4)) + sof;
  for (int i = 0; i < 5; ++i) jpeg += scan;
  jpeg += "\xFF\xD9";
  auto layout = jpeg_markers::WalkJpeg(jpeg, 100);
  ASSERT_TRUE(layout.has_value());
  EXPECT_EQ(layout->scans, 5);
  EXPECT_EQ(layout->width, 64);
  EXPECT_EQ(layout->height, 48);
  EXPECT_TRUE(layout->progressive);
  EXPECT_FALSE(jpeg_markers::WalkJpeg("\x89PNG\r\n", 100).has_value());
  // Truncated anywhere: no crash, never more scans than whole.
  for (size_t cut = 0; cut < jpeg.size(); ++cut) {
    auto part = jpeg_markers::WalkJpeg(std::string_view(jpeg).substr(0, cut), 100);
    if (part) {
      EXPECT_LE(part->scans, 5);
    }
  }
  EXPECT_TRUE(jpeg_markers::CheckJpegBudget(jpeg, 5, 1 << 30).ok());
  Status over = jpeg_markers::CheckJpegBudget(jpeg, 4, 1 << 30);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kLimit);
  const size_t fifth = jpeg.find(scan, jpeg.find(scan) + 4 * scan.size());
  EXPECT_EQ(over.error().path, "byte " + std::to_string(fifth));
  Status product = jpeg_markers::CheckJpegBudget(jpeg, 100, 5 * 64 * 48 - 1);
  ASSERT_FALSE(product.ok());
  EXPECT_NE(product.error().message.find("max_jpeg_scan_pixels"), std::string::npos);
}

// A progressive JPEG with thousands of scans (each a pass over the image) is refused from its
// markers before any decoder runs; the real progressive file beside it decodes as before.
TEST(JpegBudget, ThousandsOfScansAreRefusedBeforeDecoding) {
  auto bytes = ReadFile(test::SourcePath("fuzz/corpus/image_fuzz/progressive.jpg"));
  ASSERT_TRUE(bytes.ok());
  auto layout = jpeg_markers::WalkJpeg(*bytes, 1000);
  ASSERT_TRUE(layout.has_value());
  EXPECT_TRUE(layout->progressive);
  EXPECT_GE(layout->scans, 2);
  ASSERT_TRUE(PrepareImage(*bytes, ResizeMode::kStretch, 8, 8).ok());
  // Its last scan repeated 2,000 times before EOI.
  const size_t last = bytes->rfind("\xFF\xDA");
  const size_t eoi = bytes->rfind("\xFF\xD9");
  ASSERT_TRUE(last != std::string::npos && eoi != std::string::npos && last < eoi);
  std::string many = bytes->substr(0, eoi);
  for (int i = 0; i < 2000; ++i) many += bytes->substr(last, eoi - last);
  many += "\xFF\xD9";
  auto refused = [](const Errors& errors) {
    ASSERT_FALSE(errors.empty());
    EXPECT_EQ(errors.front().code, ErrorCode::kLimit);
    EXPECT_NE(errors.front().message.find("max_jpeg_scans"), std::string::npos) << errors.front().message;
    EXPECT_EQ(errors.front().path.rfind("byte ", 0), 0u);
  };
  auto prepared = PrepareImage(many, ResizeMode::kStretch, 8, 8);
  ASSERT_FALSE(prepared.ok());
  refused(prepared.errors());
  auto decoded = DecodeImage(many);
  ASSERT_FALSE(decoded.ok());
  refused(decoded.errors());
}

TEST(ImageInputs, NonImagesAreRejectedSayingSo) {
  const std::string inputs[] = {
      "", "hello, world\n", std::string(100, '\0'), "%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n",
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"10\" height=\"10\"></svg>",
      "P6\n2 2\n255\n" + std::string(12, 'x'), "BM"};
  for (const std::string& in : inputs) {
    auto r = PrepareImage(in, ResizeMode::kStretch, 8, 8);
    ASSERT_FALSE(r.ok());
    const std::string& m = r.error().message;
    EXPECT_TRUE(m.find("not an image") != std::string::npos ||
                m.find("not a supported image") != std::string::npos ||
                m.find("empty") != std::string::npos || m.find("header") != std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace mlc
