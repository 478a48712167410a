// The C API (include/mlc_manifest/mlc_manifest.h) through libmlc_manifest.so: documents, ids,
// binding, check (against the CLI's report), audio and image decoding (against the C++ library),
// tokenizer, prompt, plan, and sessions driven by the built-in reference runtime and by a
// caller's function table whose role calls receive DLPack tensors.
#include "mlc_manifest/mlc_manifest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/audio.h"
#include "mlc_manifest/cpu_model.h"
#include "mlc_manifest/open_package.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/image.h"
#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "mlc_manifest/tokenizer.h"
#include "mlc_manifest/version.h"
#include "support/family_checks.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

const std::string kGemma = "examples/gemma-4-E2B-it-q4f16_1";

std::string GemmaPath(const std::string& file = "") {
  return test::SourcePath(kGemma + (file.empty() ? "" : "/" + file));
}

std::string Describe(const std::vector<c::Error>& errors) {
  std::string out;
  for (const c::Error& e : errors) {
    out += e.code_name + " " + e.document + " " + e.path + ": " + e.message + "\n";
  }
  return out;
}

TEST(CApi, VersionAndStatusNames) {
  EXPECT_STREQ(mlc_version(), MLC_MANIFEST_VERSION);
  EXPECT_STREQ(mlc_status_name(MLC_OK), "ok");
  EXPECT_STREQ(mlc_status_name(MLC_ERR_IO), "io");
  EXPECT_STREQ(mlc_status_name(MLC_ERR_BUFFER), "buffer");
  EXPECT_STREQ(mlc_status_name(99), "unknown");
  // The codes of the C++ error model keep their numbers in the C API.
  EXPECT_EQ(static_cast<int>(ErrorCode::kLimit), MLC_ERR_LIMIT);
  EXPECT_STREQ(ErrorCodeName(ErrorCode::kLimit), mlc_status_name(MLC_ERR_LIMIT));
}

TEST(CApi, ReadsAndBindsTheShippedExample) {
  c::Package package;
  c::Program program;
  ASSERT_EQ(mlc_package_read(package, GemmaPath().c_str()), MLC_OK) << Describe(package.errors());
  ASSERT_EQ(mlc_program_read(program, GemmaPath("compiled-program.json").c_str()), MLC_OK)
      << Describe(program.errors());
  // The ids agree with the C++ library's and between the two documents.
  auto cpp = ReadModelPackage(GemmaPath("mlc-model-manifest.json"));
  ASSERT_TRUE(cpp.ok());
  EXPECT_EQ(mlc_package_interface_id(package), cpp->interface_id);
  EXPECT_STREQ(mlc_package_interface_id(package), mlc_program_interface_id(program));
  EXPECT_STREQ(mlc_package_parameter_schema_id(package), mlc_program_parameter_schema_id(program));
  EXPECT_EQ(mlc_package_json(package), WriteModelPackage(*cpp));

  c::Binding binding;
  ASSERT_EQ(mlc_bind(binding, package, program, nullptr), MLC_OK) << Describe(binding.errors());
  EXPECT_TRUE(mlc_errors_count(mlc_binding_errors(binding)) == 0);
  EXPECT_NE(mlc_binding_executor(binding), nullptr);
  ASSERT_GT(mlc_binding_function_count(binding), 0u);
  EXPECT_EQ(mlc_binding_function(binding, mlc_binding_function_count(binding)), nullptr);
  auto json = ParseJson(mlc_binding_json(binding));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["executor"], mlc_binding_executor(binding));
  // A task the package does not have fails with errors naming where.
  mlc_bind_params params = mlc_bind_params_default();
  params.task = "no.such.task";
  EXPECT_NE(mlc_bind(binding, package, program, &params), MLC_OK);
  EXPECT_GT(mlc_errors_count(mlc_binding_errors(binding)), 0u);
  EXPECT_EQ(mlc_binding_json(binding), nullptr);
}

TEST(CApi, ErrorsCarryCodeDocumentPathAndMessage) {
  c::Package package;
  EXPECT_EQ(mlc_package_read(package, "/nonexistent/mlc-model-manifest.json"), MLC_ERR_IO);
  auto errors = package.errors();
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].code_name, "io");
  EXPECT_EQ(errors[0].document, "/nonexistent/mlc-model-manifest.json");
  EXPECT_EQ(mlc_package_interface_id(package), nullptr);

  std::string text = ReadFile(GemmaPath("mlc-model-manifest.json")).value();
  auto doc = ParseJson(text).value();
  doc["tasks"]["chat.completions"]["executor"] = 5;
  std::string bad = doc.dump();
  EXPECT_EQ(mlc_package_parse(package, bad.data(), bad.size()), MLC_ERR_INVALID);
  errors = package.errors();
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].document, "<memory>");
  EXPECT_EQ(errors[0].path.rfind("/tasks/chat.completions", 0), 0u) << errors[0].path;
  EXPECT_FALSE(errors[0].message.empty());
  // A success clears the list.
  EXPECT_EQ(mlc_package_parse(package, text.data(), text.size()), MLC_OK);
  EXPECT_EQ(mlc_errors_count(mlc_package_errors(package)), 0u);
  mlc_error e;
  EXPECT_EQ(mlc_errors_get(mlc_package_errors(package), 0, &e), MLC_ERR_ARGUMENT);
  EXPECT_EQ(mlc_package_read(nullptr, "x"), MLC_ERR_ARGUMENT);
  mlc_package_free(nullptr);
}

TEST(CApi, CheckGivesTheCliReport) {
  c::Report report;
  mlc_check_params params = mlc_check_params_default();
  std::string program = GemmaPath("compiled-program.json");
  params.program_path = program.c_str();
  ASSERT_EQ(mlc_check(report, GemmaPath().c_str(), &params), MLC_OK);
  auto cli = test::RunCli({"check", GemmaPath(), "--program", program, "--json"});
  EXPECT_EQ(std::string(mlc_report_json(report)) + "\n", cli.out);
  auto json = ParseJson(cli.out).value();
  ASSERT_EQ(mlc_report_count(report), json["checks"].size());
  EXPECT_EQ(mlc_report_ok(report) == 1, json["ok"].get<bool>());
  for (size_t i = 0; i < mlc_report_count(report); ++i) {
    mlc_check_item item;
    ASSERT_EQ(mlc_report_item(report, i, &item), MLC_OK);
    EXPECT_EQ(json["checks"][i]["check"], item.name);
    EXPECT_EQ(json["checks"][i]["verdict"], item.verdict_name);
  }
  mlc_check_item item;
  EXPECT_EQ(mlc_report_item(report, mlc_report_count(report), &item), MLC_ERR_ARGUMENT);
  params.device = "no-such-device";
  EXPECT_EQ(mlc_check(report, GemmaPath().c_str(), &params), MLC_ERR_USAGE);
}

TEST(CApi, AudioIntoLibraryAndCallerBuffers) {
  test::TempDir dir;
  test::WavLayout layout;
  layout.sample_rate_hz = 22050;
  std::vector<double> tone = test::Tones({{440.0, {0.5}}}, 1, 22050, 4410);
  std::string wav = test::EncodeWav(layout, tone);
  std::string path = dir.Write("tone.wav", wav);
  c::Audio audio;
  ASSERT_EQ(mlc_audio_decode_file(audio, path.c_str(), nullptr), MLC_OK) << Describe(audio.errors());
  size_t n = 0;
  const float* samples = mlc_audio_samples(audio, &n);
  auto expected = DecodeAudioFile(path, AudioDecode{}).value();
  ASSERT_EQ(n, expected.samples.size());
  EXPECT_EQ(std::vector<float>(samples, samples + n), expected.samples);
  mlc_audio_info info;
  ASSERT_EQ(mlc_audio_get_info(audio, &info), MLC_OK);
  EXPECT_EQ(info.source_rate_hz, 22050);
  EXPECT_STREQ(info.container, "WAV");

  c::Audio from_memory;
  ASSERT_EQ(mlc_audio_decode_memory(from_memory, wav.data(), wav.size(), nullptr), MLC_OK);
  std::vector<float> small(10);
  size_t count = 0;
  EXPECT_EQ(mlc_audio_copy(from_memory, small.data(), small.size(), &count), MLC_ERR_BUFFER);
  EXPECT_EQ(count, n);
  std::vector<float> buffer(count);
  ASSERT_EQ(mlc_audio_copy(from_memory, buffer.data(), buffer.size(), &count), MLC_OK);
  EXPECT_EQ(buffer, expected.samples);

  std::string junk = "not audio at all";
  EXPECT_EQ(mlc_audio_decode_memory(audio, junk.data(), junk.size(), nullptr), MLC_ERR_INVALID);
  EXPECT_EQ(mlc_audio_samples(audio, &n), nullptr);
  EXPECT_EQ(audio.errors().at(0).document, "<memory>");
  mlc_audio_params bad = mlc_audio_params_default();
  bad.sample_rate_hz = 0;
  EXPECT_EQ(mlc_audio_decode_file(audio, path.c_str(), &bad), MLC_ERR_USAGE);
}

TEST(CApi, ImageTensorMatchesTheLibrary) {
  RgbImage rgb;
  rgb.width = 40;
  rgb.height = 24;
  for (int64_t i = 0; i < rgb.width * rgb.height * 3; ++i) rgb.pixels.push_back(static_cast<uint8_t>(i * 7));
  std::string png = EncodePng(rgb).value();
  c::Image image;
  mlc_image_params params = mlc_image_params_default();
  EXPECT_EQ(mlc_image_decode_memory(image, png.data(), png.size(), &params), MLC_ERR_ARGUMENT);
  params.height = 16;
  params.width = 16;
  params.mode = MLC_RESIZE_CENTER_CROP;
  params.dtype = MLC_PIXEL_UINT32;
  ASSERT_EQ(mlc_image_decode_memory(image, png.data(), png.size(), &params), MLC_OK)
      << Describe(image.errors());
  DLTensor t;
  ASSERT_EQ(mlc_image_tensor(image, &t), MLC_OK);
  ASSERT_EQ(t.ndim, 4);
  EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + 4), (std::vector<int64_t>{1, 16, 16, 3}));
  EXPECT_EQ(t.dtype.bits, 32);
  ImageDecode processor;
  processor.height = processor.width = 16;
  processor.mode = ResizeMode::kCenterCrop;
  auto expected = ImageTensor(PrepareImage(png, processor).value().rgb, PixelDtype::kUint32);
  EXPECT_EQ(std::string(static_cast<const char*>(t.data), expected.data.size()), expected.data);
  size_t nbytes = 0;
  std::vector<char> buffer(4);
  EXPECT_EQ(mlc_image_copy(image, buffer.data(), buffer.size(), &nbytes), MLC_ERR_BUFFER);
  buffer.resize(nbytes);
  ASSERT_EQ(mlc_image_copy(image, buffer.data(), buffer.size(), &nbytes), MLC_OK);
  EXPECT_EQ(std::string(buffer.begin(), buffer.end()), expected.data);
  // colour_manage is 0 (the default: an embedded profile ignored) or 1; an untagged image is
  // the same either way.
  EXPECT_EQ(params.colour_manage, 0);
  params.colour_manage = 2;
  EXPECT_EQ(mlc_image_decode_memory(image, png.data(), png.size(), &params), MLC_ERR_ARGUMENT);
  params.colour_manage = 1;
  ASSERT_EQ(mlc_image_decode_memory(image, png.data(), png.size(), &params), MLC_OK);
  ASSERT_EQ(mlc_image_tensor(image, &t), MLC_OK);
  EXPECT_EQ(std::string(static_cast<const char*>(t.data), expected.data.size()), expected.data);
  EXPECT_EQ(mlc_image_decode_file(image, "/nonexistent.png", &params), MLC_ERR_IO);
  EXPECT_EQ(mlc_image_tensor(image, &t), MLC_ERR_STATE);
}

// Pixels a caller decoded (RGBA, alpha ignored) resize exactly as the same image decoded here.
TEST(CApi, ImageResizeRgbaMatchesTheDecodedFile) {
  RgbImage rgb;
  rgb.width = 37;
  rgb.height = 29;
  std::vector<uint8_t> rgba;
  for (int64_t i = 0; i < rgb.width * rgb.height; ++i) {
    for (int c = 0; c < 3; ++c) rgb.pixels.push_back(static_cast<uint8_t>(i * (5 + c) + c * 40));
    rgba.insert(rgba.end(), rgb.pixels.end() - 3, rgb.pixels.end());
    rgba.push_back(static_cast<uint8_t>(i));  // alpha: dropped, as decoding drops it
  }
  std::string png = EncodePng(rgb).value();
  mlc_image_params params = mlc_image_params_default();
  params.height = 20;
  params.width = 24;
  params.mode = MLC_RESIZE_CENTER_CROP;
  params.filter = MLC_FILTER_LANCZOS;
  c::Image decoded, resized;
  ASSERT_EQ(mlc_image_decode_memory(decoded, png.data(), png.size(), &params), MLC_OK);
  ASSERT_EQ(mlc_image_resize_rgba(resized, rgba.data(), rgb.width, rgb.height, &params), MLC_OK)
      << Describe(resized.errors());
  DLTensor a, b;
  ASSERT_EQ(mlc_image_tensor(decoded, &a), MLC_OK);
  ASSERT_EQ(mlc_image_tensor(resized, &b), MLC_OK);
  EXPECT_EQ(std::vector<int64_t>(b.shape, b.shape + 4), (std::vector<int64_t>{1, 20, 24, 3}));
  EXPECT_EQ(std::string(static_cast<const char*>(a.data), 20 * 24 * 3),
            std::string(static_cast<const char*>(b.data), 20 * 24 * 3));
  EXPECT_EQ(mlc_image_resize_rgba(resized, nullptr, 2, 2, &params), MLC_ERR_ARGUMENT);
  EXPECT_EQ(mlc_image_resize_rgba(resized, rgba.data(), 0, 2, &params), MLC_ERR_INVALID);
  params.max_pixels = 100;
  EXPECT_EQ(mlc_image_resize_rgba(resized, rgba.data(), rgb.width, rgb.height, &params), MLC_ERR_LIMIT);
  EXPECT_EQ(mlc_image_tensor(resized, &b), MLC_ERR_STATE);
}

// A reference package (the built-in runtime's) in a temporary folder.
struct RefPackage {
  test::TempDir dir;
  std::string path;
  explicit RefPackage(bool audio) : path(dir.File("pkg")) {
    ReferenceModelOptions o;
    o.seed = 3;
    o.audio = audio;
    EXPECT_TRUE(WriteReferenceModel(path, o).ok());
  }
};

TEST(CApi, TokenizerPromptAndPlan) {
  RefPackage ref(false);
  c::Tokenizer tokenizer;
  EXPECT_EQ(mlc_tokenizer_load(tokenizer, "/nonexistent"), MLC_ERR_IO);
  ASSERT_EQ(mlc_tokenizer_load(tokenizer, ref.path.c_str()), MLC_OK) << Describe(tokenizer.errors());
  auto cpp = Tokenizer::FromDirectory(ref.path).value();
  std::string text = "hello world, hello tokens";
  std::vector<int32_t> ids = tokenizer.Encode(text);
  EXPECT_EQ(ids, cpp->Encode(text));
  EXPECT_EQ(tokenizer.Decode(ids), cpp->Decode(ids));
  EXPECT_EQ(mlc_tokenizer_vocab_size(tokenizer), cpp->VocabSize());
  size_t count = 0;
  EXPECT_EQ(mlc_tokenize(tokenizer, text.data(), text.size(), nullptr, 0, &count), MLC_ERR_BUFFER);
  EXPECT_EQ(count, ids.size());

  c::Prompt prompt;
  std::string messages = R"([{"role": "user", "content": "hello world"}])";
  ASSERT_EQ(mlc_prompt_build(prompt, ref.path.c_str(), messages.data(), messages.size()), MLC_OK)
      << Describe(prompt.errors());
  auto cli_messages = ref.dir.Write("messages.json", messages);
  auto cli = test::RunCli({"prompt", ref.path, "--messages", cli_messages, "--program",
                           ref.path + "/" + kReferenceProgramFile, "--json"});
  auto expected = ParseJson(cli.out).value();
  auto got = ParseJson(mlc_prompt_json(prompt)).value();
  EXPECT_EQ(got["prompt"], expected["prompt"]);
  EXPECT_EQ(got["segments"], expected["segments"]);
  EXPECT_EQ(std::string(mlc_prompt_text(prompt)), expected["prompt"].get<std::string>());
  std::string bad = R"([{"role": "robot", "content": "x"}])";
  EXPECT_EQ(mlc_prompt_build(prompt, ref.path.c_str(), bad.data(), bad.size()), MLC_ERR_INVALID);
  EXPECT_EQ(prompt.errors().at(0).path.rfind("/0", 0), 0u);

  c::Plan plan;
  std::string request = R"([{"tokens": [1, 10, 11, 12, 13]}])";
  std::string program = ref.path + "/" + kReferenceProgramFile;
  mlc_plan_params params = mlc_plan_params_default();
  params.program_path = program.c_str();
  params.kv_length = 3;
  ASSERT_EQ(mlc_plan_compute(plan, ref.path.c_str(), request.data(), request.size(), &params), MLC_OK)
      << Describe(plan.errors());
  EXPECT_EQ(mlc_plan_prompt_length(plan), 5);
  EXPECT_EQ(mlc_plan_chunk_count(plan), 1u);
  auto plan_json = ParseJson(mlc_plan_json(plan)).value();
  EXPECT_EQ(plan_json["kv_length"], 3);
  EXPECT_EQ(plan_json["chunks"][0]["token_ids"], Json::parse("[1, 10, 11, 12, 13]"));
}

// ---- a caller's runtime: forwards each role call to the reference library through the C ABI ----

struct Forwarder {
  const ModelLibrary* library = nullptr;
  std::shared_ptr<ParameterSet> params;  // made from the first mlc_param_list seen
  std::map<std::string, int> calls;
  int64_t live_objects = 0;
  int64_t tensor_results = 0;
};

void DeleteManaged(DLManagedTensor* m) {
  delete static_cast<NDArray*>(m->manager_ctx);
  delete m;
}

Value ToValue(Forwarder& f, const mlc_value& v) {
  switch (v.kind) {
    case MLC_VALUE_INT: return Value{v.i};
    case MLC_VALUE_FLOAT: return Value{v.f};
    case MLC_VALUE_SHAPE: return Value{ShapeTuple{std::vector<int64_t>(v.shape, v.shape + v.ndim)}};
    case MLC_VALUE_TENSOR: {
      const DLTensor& t = *v.tensor;
      return Value{NDArray::View(nullptr, static_cast<const char*>(t.data) + t.byte_offset,
                                 std::vector<int64_t>(t.shape, t.shape + t.ndim), t.dtype)};
    }
    case MLC_VALUE_OBJECT: return Value{*static_cast<ObjectRef*>(v.object)};
    case MLC_VALUE_PARAMS: {
      if (!f.params) {
        f.params = std::make_shared<ParameterSet>();
        for (size_t i = 0; i < v.params->count; ++i) {
          const DLTensor& t = v.params->tensors[i];
          f.params->names.push_back(v.params->names[i]);
          f.params->tensors.push_back(NDArray::View(nullptr, t.data,
                                                    std::vector<int64_t>(t.shape, t.shape + t.ndim),
                                                    t.dtype));
        }
      }
      return Value{ObjectRef(f.params)};
    }
    default: return Value{};
  }
}

mlc_value FromValue(Forwarder& f, const Value& v) {
  mlc_value out{};
  if (const auto* i = std::get_if<int64_t>(&v)) {
    out.kind = MLC_VALUE_INT;
    out.i = *i;
  } else if (const auto* t = std::get_if<NDArray>(&v)) {
    auto* owner = new NDArray(*t);
    auto* m = new DLManagedTensor{owner->dl(), owner, DeleteManaged};
    out.kind = MLC_VALUE_TENSOR;
    out.managed = m;
    ++f.tensor_results;
  } else if (const auto* o = std::get_if<ObjectRef>(&v)) {
    out.kind = MLC_VALUE_OBJECT;
    out.object = new ObjectRef(*o);
    ++f.live_objects;
  }
  return out;
}

int ForwardCall(void* user, const char* function, const mlc_value* args, size_t num_args,
                mlc_value* results, size_t max_results, size_t* num_results, char* message,
                size_t message_capacity) {
  auto& f = *static_cast<Forwarder*>(user);
  ++f.calls[function];
  const PackedFunction* fn = f.library->GetFunction(function);
  if (!fn) {
    snprintf(message, message_capacity, "no function %s", function);
    return 1;
  }
  std::vector<Value> in;
  for (size_t i = 0; i < num_args; ++i) in.push_back(ToValue(f, args[i]));
  auto out = (*fn)(in);
  if (!out.ok()) {
    snprintf(message, message_capacity, "%s", FormatErrors(out.errors()).c_str());
    return 1;
  }
  *num_results = std::min(out->size(), max_results);
  for (size_t i = 0; i < *num_results; ++i) results[i] = FromValue(f, (*out)[i]);
  return 0;
}

int64_t ObjectLength(void*, void* object) {
  auto state = std::dynamic_pointer_cast<KvState>(*static_cast<ObjectRef*>(object));
  return state ? state->TotalLength() : 0;
}

void ObjectFree(void* user, void* object) {
  --static_cast<Forwarder*>(user)->live_objects;
  delete static_cast<ObjectRef*>(object);
}

TEST(CApi, SessionsWithBuiltInProgramsAndACallersFunctionTable) {
  RefPackage ref(true);
  test::WavLayout layout;
  std::string clip = ref.dir.Write("clip.wav", test::EncodeWav(layout, test::Tones({{300.0, {0.4}}}, 1, 16000, 3200)));
  std::string request = R"([{"tokens": [1, 20, 21]}, {"audio": "clip.wav"}, {"tokens": [22, 23]}])";
  mlc_session_params params = mlc_session_params_default();
  params.max_tokens = 6;

  c::Session builtin;
  ASSERT_EQ(mlc_session_open(builtin, ref.path.c_str(), &params), MLC_OK) << Describe(builtin.errors());
  std::vector<int32_t> streamed;
  auto on_token = [](void* user, int32_t token) {
    static_cast<std::vector<int32_t>*>(user)->push_back(token);
    return 1;
  };
  ASSERT_EQ(mlc_session_generate(builtin, request.data(), request.size(), ref.dir.path().c_str(),
                                 on_token, &streamed),
            MLC_OK)
      << Describe(builtin.errors());
  std::vector<int32_t> tokens = builtin.Tokens();
  ASSERT_FALSE(tokens.empty());
  EXPECT_EQ(streamed, tokens);
  EXPECT_NE(mlc_session_stop_reason(builtin), nullptr);
  int64_t kv = mlc_session_kv_length(builtin);
  EXPECT_GT(kv, 5);

  // The same package through a caller's table that forwards to the reference library.
  auto library = OpenReferenceLibrary(ref.path).value();
  Forwarder forwarder;
  forwarder.library = library.get();
  std::string metadata = ReadFile(ref.path + "/" + kReferenceLibraryFile).value();
  std::vector<std::string> names = library->FunctionNames();
  std::vector<const char*> name_ptrs;
  for (const std::string& n : names) name_ptrs.push_back(n.c_str());
  mlc_function_table table{&forwarder, metadata.c_str(), name_ptrs.size(), name_ptrs.data(),
                           ForwardCall, ObjectLength, ObjectFree};
  {
    c::Session caller;
    ASSERT_EQ(mlc_session_open_functions(caller, ref.path.c_str(), &table, &params), MLC_OK)
        << Describe(caller.errors());
    ASSERT_EQ(mlc_session_generate(caller, request.data(), request.size(), ref.dir.path().c_str(),
                                   nullptr, nullptr),
              MLC_OK)
        << Describe(caller.errors());
    EXPECT_EQ(caller.Tokens(), tokens);
    EXPECT_EQ(mlc_session_kv_length(caller), kv);
    EXPECT_GT(forwarder.calls.size(), 3u);  // embed, create_kv_cache, the adapter, prefill, decode
    EXPECT_GT(forwarder.tensor_results, 0);
    EXPECT_EQ(forwarder.live_objects, 1);   // the KV cache, held by the session
  }
  EXPECT_EQ(forwarder.live_objects, 0);     // released through object_free

  // A function the caller reports as failed is an error naming it.
  mlc_function_table failing = table;
  failing.call = [](void*, const char* function, const mlc_value*, size_t, mlc_value*, size_t,
                    size_t*, char* message, size_t capacity) {
    snprintf(message, capacity, "device lost in %s", function);
    return 1;
  };
  c::Session broken;
  ASSERT_EQ(mlc_session_open_functions(broken, ref.path.c_str(), &failing, &params), MLC_OK);
  EXPECT_EQ(mlc_session_generate(broken, request.data(), request.size(), ref.dir.path().c_str(),
                                 nullptr, nullptr),
            MLC_ERR_INVALID);
  ASSERT_FALSE(broken.errors().empty());
  EXPECT_NE(broken.errors()[0].message.find("device lost"), std::string::npos);
  c::Session closed;
  EXPECT_EQ(mlc_session_generate(closed, request.data(), request.size(), nullptr, nullptr, nullptr),
            MLC_ERR_STATE);
}

// Structured output and log-probabilities through the C API, as the server has them: the reply
// parses and keeps to its schema, each token has its log-probability and at most `logprobs`
// alternatives, none of them a token the grammar masked.
// Tools through the C API: mlc_prompt_build writes them into the prompt (tools beside messages),
// a session with params.tools constrains the reply to a call of theirs, and
// mlc_session_tool_reply splits it out.
TEST(CApi, SessionToolCalls) {
  RefPackage ref(false);
  const std::string tools = R"({"tools": [{"type": "function", "function": {"name": "add", "parameters":
      {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
       "b": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["a", "b"], "additionalProperties": false}}}],
      "tool_choice": "required", "parallel_tool_calls": false})";
  OrderedJson doc = OrderedJson::parse(tools);  // the tools in their key order
  doc["messages"] = OrderedJson::parse(R"([{"role": "user", "content": "2 + 3?"}])");
  const std::string messages = doc.dump();
  c::Prompt prompt;
  ASSERT_EQ(mlc_prompt_build(prompt, ref.path.c_str(), messages.data(), messages.size()), MLC_OK)
      << Describe(prompt.errors());
  const std::string text = mlc_prompt_text(prompt);
  EXPECT_NE(text.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"add\""), std::string::npos) << text;
  Json ids = Json::array();
  const Json report = Json::parse(mlc_prompt_json(prompt));
  for (const Json& seg : report["segments"]) {
    for (const char* key : {"system_prefix_token_ids", "token_ids"}) {
      if (seg.contains(key)) {
        for (const Json& id : seg[key]) ids.push_back(id);
      }
    }
  }
  mlc_session_params params = mlc_session_params_default();
  EXPECT_EQ(params.tools, nullptr);
  params.max_tokens = 200;
  params.temperature = 1.0;
  params.seed = 2;
  params.tools = tools.c_str();
  c::Session s;
  ASSERT_EQ(mlc_session_open(s, ref.path.c_str(), &params), MLC_OK) << Describe(s.errors());
  const std::string request = Json::array({{{"tokens", ids}}}).dump();
  ASSERT_EQ(mlc_session_generate(s, request.data(), request.size(), nullptr, nullptr, nullptr), MLC_OK)
      << Describe(s.errors());
  Json reply = Json::parse(mlc_session_tool_reply(s));
  ASSERT_EQ(reply["tool_calls"].size(), 1u) << reply.dump() << mlc_session_text(s);
  EXPECT_EQ(reply["tool_calls"][0]["id"], "call_0_0");
  EXPECT_EQ(reply["tool_calls"][0]["function"]["name"], "add");
  Json args = Json::parse(reply["tool_calls"][0]["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["a"].is_number_integer() && args["b"].is_number_integer()) << args.dump();
  EXPECT_LE(args["a"].get<int>(), 9);
  EXPECT_STREQ(mlc_session_stop_reason(s), "stop_token");
  // A keyword outside the subset, or a response format beside active tools, refuses the session.
  const std::string bad = R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"not": {}}}}]})";
  params.tools = bad.c_str();
  c::Session refused;
  EXPECT_NE(mlc_session_open(refused, ref.path.c_str(), &params), MLC_OK);
  EXPECT_EQ(refused.errors().at(0).path, "/tools/0/function/parameters/not");
  params.tools = tools.c_str();
  params.response_format = R"({"type": "json_object"})";
  c::Session both;
  EXPECT_NE(mlc_session_open(both, ref.path.c_str(), &params), MLC_OK);
}

TEST(CApi, SessionStructuredOutputAndLogprobs) {
  RefPackage ref(true);
  mlc_session_params params = mlc_session_params_default();
  EXPECT_EQ(params.prefix_cache, 1);
  EXPECT_EQ(params.logprobs, -1);
  params.max_tokens = 48;
  params.temperature = 1.0;
  params.seed = 4;
  params.logprobs = 2;
  params.response_format = R"({"type": "json_schema", "json_schema": {"name": "w", "schema":
      {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": false}}})";
  c::Session s;
  ASSERT_EQ(mlc_session_open(s, ref.path.c_str(), &params), MLC_OK) << Describe(s.errors());
  std::string request = R"([{"tokens": [1, 20, 21]}])";
  ASSERT_EQ(mlc_session_generate(s, request.data(), request.size(), nullptr, nullptr, nullptr), MLC_OK)
      << Describe(s.errors());
  const std::string text = mlc_session_text(s);
  Json reply = Json::parse(text, nullptr, false);
  ASSERT_TRUE(reply.is_object()) << text;
  EXPECT_EQ(reply.size(), 1u) << text;
  EXPECT_TRUE(reply.contains("ok") && reply["ok"].is_boolean()) << text;
  EXPECT_STREQ(mlc_session_stop_reason(s), "stop_token");
  size_t n = 0;
  const mlc_token_logprob* lp = mlc_session_logprobs(s, &n);
  ASSERT_EQ(n, s.Tokens().size());
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(lp[i].token, s.Tokens()[i]);
    EXPECT_LE(lp[i].logprob, 0.0);
    EXPECT_GE(lp[i].num_top, 1u);
    EXPECT_LE(lp[i].num_top, 2u);
    for (size_t k = 0; k < lp[i].num_top; ++k) EXPECT_TRUE(std::isfinite(lp[i].top_logprobs[k]));
  }
  EXPECT_EQ(mlc_session_cached_tokens(s), 0);
  params.response_format = R"({"type": "json_schema", "json_schema": {"name": "w", "schema": {"type": "string", "not": {"const": "x"}}}})";
  c::Session refused;
  EXPECT_NE(mlc_session_open(refused, ref.path.c_str(), &params), MLC_OK);
}

// mlc_session_embed: the engine's embedding (Session::Embed over the same package), mean and
// last; the session's conversation left alone; a bad pooling or a request of two turns refused.
TEST(CApi, SessionEmbeddings) {
  test::TempDir dir;
  ASSERT_TRUE(WriteFamilyModel(dir.path(), test::TinyOptions("llama", "q0f32", 6)).ok());
  auto opened = OpenPackage(dir.path());
  ASSERT_TRUE(opened.ok()) << FormatErrors(opened.errors());
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{{1, 8, 13, 21, 34}}, "/0"});
  in.media.emplace_back();
  c::Session s;
  mlc_session_params params = mlc_session_params_default();
  ASSERT_EQ(mlc_session_open(s, dir.path().c_str(), &params), MLC_OK) << Describe(s.errors());
  const std::string turn = R"([{"tokens": [2, 3]}])";
  ASSERT_EQ(mlc_session_generate(s, turn.data(), turn.size(), nullptr, nullptr, nullptr), MLC_OK);
  const int64_t held = mlc_session_kv_length(s);
  const std::string request = R"([{"tokens": [1, 8, 13, 21, 34]}])";
  for (int pooling : {MLC_POOLING_MEAN, MLC_POOLING_LAST}) {
    ASSERT_EQ(mlc_session_embed(s, request.data(), request.size(), nullptr, pooling), MLC_OK) << Describe(s.errors());
    auto want = opened->model.NewSession().Embed(in, pooling == MLC_POOLING_LAST ? EmbeddingPooling::kLast
                                                                                   : EmbeddingPooling::kMean);
    ASSERT_TRUE(want.ok()) << FormatErrors(want.errors());
    size_t dim = 0;
    int64_t positions = 0;
    const float* v = mlc_session_embedding(s, &dim, &positions);
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(std::vector<float>(v, v + dim), want->embedding) << "pooling " << pooling;
    EXPECT_EQ(positions, 5);
  }
  EXPECT_EQ(mlc_session_kv_length(s), held);
  EXPECT_EQ(mlc_session_embed(s, request.data(), request.size(), nullptr, 2), MLC_ERR_ARGUMENT);
  const std::string two = R"({"turns": [[{"tokens": [1]}], [{"tokens": [2]}]]})";
  EXPECT_EQ(mlc_session_embed(s, two.data(), two.size(), nullptr, MLC_POOLING_MEAN), MLC_ERR_USAGE);
  size_t dim = 7;
  EXPECT_EQ(mlc_session_embedding(s, &dim, nullptr), nullptr);
  EXPECT_EQ(dim, 0u);
}

}  // namespace
}  // namespace mlc
