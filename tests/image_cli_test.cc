// `mlc-manifest image`: the .npy it writes (uint8 / widened uint32, shape (1, H, W, 3)) equals
// the library's result; geometry from a model package or from flags; dtype from the compiled
// program's adapter_dtypes; --preview, --json, no-clobber, and exit codes 0/1/2/3.
#include <gtest/gtest.h>

#include <cstring>

#include "mlc_manifest/contract.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/npy.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::RunCli;
using test::TempDir;

// A 120 x 80 PNG with structure in both axes.
std::string TestPng(const TempDir& dir, const std::string& name) {
  RgbImage rgb;
  rgb.width = 120;
  rgb.height = 80;
  for (int y = 0; y < 80; ++y) {
    for (int x = 0; x < 120; ++x) {
      rgb.pixels.push_back(static_cast<uint8_t>(x * 2));
      rgb.pixels.push_back(static_cast<uint8_t>(y * 3));
      rgb.pixels.push_back(static_cast<uint8_t>((x * y) % 256));
    }
  }
  auto png = EncodePng(rgb);
  EXPECT_TRUE(png.ok());
  return dir.Write(name, png.ok() ? *png : "");
}

RgbImage LibraryResult(const std::string& path, ResizeMode mode, int64_t h, int64_t w) {
  ImageDecode p;
  p.mode = mode;
  p.height = h;
  p.width = w;
  auto r = PrepareImageFile(path, p);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r->rgb : RgbImage{};
}

Json ParseOut(const test::CliResult& r) {
  auto j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << r.out;
  return j.ok() ? *j : Json();
}

NpyArray ReadNpy(const std::string& path) {
  auto npy = DecodeNpy(test::ReadText(path));
  EXPECT_TRUE(npy.ok());
  return npy.ok() ? *npy : NpyArray{};
}

TEST(ImageCli, WritesUint8NpyEqualToTheLibrary) {
  TempDir dir;
  std::string in = TestPng(dir, "in.png"), out = dir.File("px.npy");
  auto r = RunCli({"image", in, "-o", out, "--mode", "center_crop", "--height", "32", "--width",
                   "24", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  Json j = ParseOut(r);
  EXPECT_EQ(j["ok"], true);
  EXPECT_EQ(j["format"], "png");
  EXPECT_EQ(j["width"], 120);
  EXPECT_EQ(j["height"], 80);
  EXPECT_EQ(j["orientation"], 1);
  EXPECT_EQ(j["plan"]["mode"], "center_crop");
  EXPECT_EQ(j["plan"]["filter"], "bicubic");
  EXPECT_EQ(j["plan"]["scaled"], Json::array({48, 32}));
  EXPECT_EQ(j["plan"]["left"], 12);
  EXPECT_EQ(j["plan"]["top"], 0);
  EXPECT_EQ(j["output"]["dtype"], "uint8");
  NpyArray npy = ReadNpy(out);
  EXPECT_EQ(npy.descr, "|u1");
  EXPECT_EQ(npy.shape, (std::vector<int64_t>{1, 32, 24, 3}));
  RgbImage lib = LibraryResult(in, ResizeMode::kCenterCrop, 32, 24);
  EXPECT_EQ(npy.data, std::string(lib.pixels.begin(), lib.pixels.end()));
}

// Chroma subsampling decides shrink-on-load; the report says which was used.
TEST(ImageCli, ReportsChromaAndShrinkOnLoad) {
  TempDir dir;
  const std::string png = TestPng(dir, "src.png");
  for (const char* sub : {"444", "420"}) {
    const std::string jpg = dir.File(std::string("photo") + sub + ".jpg");
    auto made = test::RunProgram({"vips", "resize", png, jpg + (std::string(sub) == "444" ? "[Q=95,subsample_mode=off]" : "[Q=80,subsample_mode=on]"), "10"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto r = RunCli({"image", jpg, "-o", dir.File(std::string("o") + sub + ".npy"), "--mode", "stretch",
                     "--height", "40", "--width", "60", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    Json j = ParseOut(r);
    EXPECT_EQ(j["format"], "jpeg");
    EXPECT_EQ(j["width"], 1200);
    if (std::string(sub) == "444") {
      EXPECT_EQ(j["chroma_subsampling"], "4:4:4");
      EXPECT_EQ(j["shrink_on_load"], 4) << "a reduction of 20: 1/4, leaving 5 for the resize";
    } else {
      EXPECT_EQ(j["chroma_subsampling"], "4:2:0");
      EXPECT_EQ(j["shrink_on_load"], 1) << "subsampled chroma: always the full decode";
    }
    auto full = RunCli({"image", jpg, "-o", dir.File(std::string("f") + sub + ".npy"), "--mode", "stretch",
                        "--height", "40", "--width", "60", "--no-shrink-on-load", "--json"});
    ASSERT_EQ(full.exit_code, 0) << full.err;
    EXPECT_EQ(ParseOut(full)["shrink_on_load"], 1);
  }
}

// libvips lives in a module opened on first use: other commands never map it, and a missing
// module is an I/O error that names where it was looked for.
TEST(ImageCli, LibvipsIsLoadedOnlyForImages) {
  TempDir dir;
  const std::string png = TestPng(dir, "in.png");
  auto maps_of = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"env", "LD_DEBUG=files", MLC_CLI_PATH};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::RunProgram(argv);
  };
  auto version = maps_of({"version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.err.find("libvips"), std::string::npos) << "libvips loaded by `version`";
  auto image = maps_of({"image", png, "-o", dir.File("a.npy"), "--mode", "stretch", "--height", "4",
                        "--width", "4"});
  ASSERT_EQ(image.exit_code, 0) << image.err;
  EXPECT_NE(image.err.find("libvips"), std::string::npos);

  auto missing = test::RunProgram({"env", "MLC_MANIFEST_IMAGE_MODULE=/nonexistent/libmlc_manifest_image.so",
                                   MLC_CLI_PATH, "image", png, "-o", dir.File("b.npy"), "--mode",
                                   "stretch", "--height", "4", "--width", "4", "--json"});
  EXPECT_EQ(missing.exit_code, 3) << missing.out << missing.err;
  EXPECT_NE(missing.out.find("/nonexistent/libmlc_manifest_image.so"), std::string::npos) << missing.out;
}

TEST(ImageCli, Uint32WidensValueForValueAndPreviewIsPng) {
  TempDir dir;
  std::string in = TestPng(dir, "in.png"), out = dir.File("px.npy"), prev = dir.File("p.png");
  auto r = RunCli({"image", in, "-o", out, "--mode", "stretch", "--height", "10", "--width", "7",
                   "--dtype", "uint32", "--filter", "lanczos", "--preview", prev});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("stretch"), std::string::npos);
  EXPECT_NE(r.out.find("scaled to 7x10"), std::string::npos) << r.out;
  NpyArray npy = ReadNpy(out);
  EXPECT_EQ(npy.descr, "<u4");
  EXPECT_EQ(npy.shape, (std::vector<int64_t>{1, 10, 7, 3}));
  auto preview = DecodeImageFile(prev);
  ASSERT_TRUE(preview.ok());
  ASSERT_EQ(npy.data.size(), preview->rgb.pixels.size() * 4);
  for (size_t i = 0; i < preview->rgb.pixels.size(); ++i) {
    uint32_t v = 0;
    std::memcpy(&v, npy.data.data() + i * 4, 4);
    ASSERT_EQ(v, preview->rgb.pixels[i]);
  }
}

TEST(ImageCli, NeverOverwritesWithoutForce) {
  TempDir dir;
  std::string in = TestPng(dir, "in.png");
  std::string out = dir.Write("px.npy", "keep");
  std::vector<std::string> args{"image", in, "-o", out, "--mode", "stretch", "--height", "4",
                                "--width", "4"};
  auto r = RunCli(args);
  EXPECT_EQ(r.exit_code, 1);  // as README says: would overwrite is a problem found (exit 1)
  EXPECT_NE(r.err.find("--force"), std::string::npos);
  EXPECT_EQ(test::ReadText(out), "keep");
  // The same file as -o and --preview is refused before anything is written.
  std::string same = dir.File("same.npy");
  EXPECT_EQ(RunCli({"image", in, "-o", same, "--preview", same, "--mode", "stretch", "--height", "4",
                    "--width", "4"}).exit_code, 2);
  EXPECT_FALSE(FileExists(same));
  args.push_back("--force");
  EXPECT_EQ(RunCli(args).exit_code, 0);
  EXPECT_EQ(ReadNpy(out).shape, (std::vector<int64_t>{1, 4, 4, 3}));
}

TEST(ImageCli, UsageErrorsExit2) {
  TempDir dir;
  std::string in = TestPng(dir, "in.png"), out = dir.File("o.npy");
  EXPECT_EQ(RunCli({"image", in, "-o", out}).exit_code, 2);  // no geometry
  EXPECT_EQ(RunCli({"image", in, "-o", out, "--model", dir.path(), "--mode", "stretch",
                    "--height", "4", "--width", "4"}).exit_code, 2);
  EXPECT_EQ(RunCli({"image", in, "-o", out, "--mode", "zoom", "--height", "4", "--width", "4"})
                .exit_code, 2);
  EXPECT_EQ(RunCli({"image", in, "-o", out, "--mode", "stretch", "--height", "0", "--width",
                    "4"}).exit_code, 2);
  EXPECT_EQ(RunCli({"image", in, "-o", out, "--mode", "stretch", "--height", "4", "--width", "4",
                    "--filter", "nearest"}).exit_code, 2);
  EXPECT_EQ(RunCli({"image", in, "-o", out, "--mode", "stretch", "--height", "4", "--width", "4",
                    "--dtype", "float32"}).exit_code, 2);
  EXPECT_FALSE(test::ReadText(out).size());
}

TEST(ImageCli, RejectedInputsExit1AndIoErrorsExit3) {
  TempDir dir;
  std::string out = dir.File("o.npy");
  std::string text = dir.Write("notes.txt", "this is not an image\n");
  auto r = RunCli({"image", text, "-o", out, "--mode", "stretch", "--height", "4", "--width", "4",
                   "--json"});
  EXPECT_EQ(r.exit_code, 1);
  Json j = ParseOut(r);
  EXPECT_EQ(j["ok"], false);
  EXPECT_NE(j["errors"][0]["message"].get<std::string>().find("not an image"), std::string::npos);
  std::string png = TestPng(dir, "in.png");
  r = RunCli({"image", png, "-o", out, "--mode", "stretch", "--height", "4", "--width", "4",
              "--max-pixels", "100"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("over the limit"), std::string::npos) << r.err;
  r = RunCli({"image", dir.File("missing.png"), "-o", out, "--mode", "stretch", "--height", "4",
              "--width", "4"});
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_FALSE(test::ReadText(out).size());
}

// A package with one image input and a program whose adapter takes uint32.
void WriteModel(const TempDir& dir, ResizeMode mode, int64_t h, int64_t w) {
  ModelPackage pkg;
  TaskInput text;
  text.processor = std::string("tokenizer");
  TaskInput image;
  ImageDecode decode;
  decode.mode = mode;
  decode.height = h;
  decode.width = w;
  decode.num_embeddings = 9;
  image.processor = decode;
  image.adapter = "image";
  image.prompt = PromptInsertion{{}, 32000, {}};
  Task task;
  task.executor = "llm";
  task.inputs = {{"text", text}, {"image", image}};
  task.output = "text";
  pkg.tasks["chat.completions"] = task;
  pkg.interface_id = *ComputeInterfaceId(pkg.tasks);
  pkg.parameter_schema_id = "sha256:" + std::string(64, '0');
  dir.Write("model/" + std::string(kManifestFileName), WriteModelPackage(pkg));

  CompiledProgram prog;
  prog.interface_id = pkg.interface_id;
  prog.parameter_schema_id = pkg.parameter_schema_id;
  Program llm;
  llm.kind = "llm";
  llm.exports = {{"prefill_embeds", "prefill"}};
  llm.adapters = std::map<std::string, std::string>{{"image", "image_embed"}};
  llm.adapter_dtypes = std::map<std::string, std::string>{{"image", "uint32"}};
  prog.programs["llm"] = llm;
  dir.Write("program.json", WriteCompiledProgram(prog));
}

TEST(ImageCli, GeometryFromModelAndDtypeFromProgram) {
  TempDir dir;
  WriteModel(dir, ResizeMode::kCenterCrop, 20, 20);
  std::string in = TestPng(dir, "in.png"), out = dir.File("o.npy");
  auto r = RunCli({"image", in, "-o", out, "--model", dir.File("model"), "--program",
                   dir.File("program.json"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  Json j = ParseOut(r);
  EXPECT_EQ(j["geometry_from"], "model");
  EXPECT_EQ(j["plan"]["scaled"], Json::array({30, 20}));
  EXPECT_EQ(j["plan"]["left"], 5);
  EXPECT_EQ(j["output"]["dtype"], "uint32");
  NpyArray npy = ReadNpy(out);
  EXPECT_EQ(npy.descr, "<u4");
  EXPECT_EQ(npy.shape, (std::vector<int64_t>{1, 20, 20, 3}));

  // Without the program: uint8. A contradicting --dtype is a usage error.
  r = RunCli({"image", in, "-o", out, "--model", dir.File("model"), "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(ReadNpy(out).descr, "|u1");
  r = RunCli({"image", in, "-o", out, "--model", dir.File("model"), "--program",
              dir.File("program.json"), "--dtype", "uint8", "--force"});
  EXPECT_EQ(r.exit_code, 2);
  // An unknown task is a usage error naming the tasks there are.
  r = RunCli({"image", in, "-o", out, "--model", dir.File("model"), "--task", "embed", "--force"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("chat.completions"), std::string::npos);
  // A missing package is an I/O error.
  r = RunCli({"image", in, "-o", out, "--model", dir.File("nowhere"), "--force"});
  EXPECT_EQ(r.exit_code, 3);
}

}  // namespace
}  // namespace mlc
