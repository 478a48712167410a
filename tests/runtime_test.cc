// The native runtime path on real reference packages: binding (missing functions, legacy,
// malformed manifests), the parameter loader, chunked prefill equal to one chunk, the token and
// embed pairs agreeing, adapter rows landing at their placeholders, the context check before an
// image adapter, KV lengths over turns, adapter shape errors, sampling, and the `run` command.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <random>

#include "mlc_manifest/fs.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/runtime.h"
#include "support/test_util.h"
#include "support/wav_writer.h"

namespace mlc {
namespace {

// Generation options by position: max_tokens, the sampler, stop ids, on_token.
GenerationOptions Opts(int64_t max_tokens, SamplerConfig sampler = {}, std::vector<int32_t> stops = {},
                       std::function<bool(int32_t)> on_token = {}) {
  GenerationOptions o;
  o.max_tokens = max_tokens;
  o.sampler = sampler;
  o.stop_token_ids = std::move(stops);
  o.on_token = std::move(on_token);
  return o;
}


// Wraps a library: counts calls, records prefill arguments, replaces or hides functions.
class SpyLibrary : public ModelLibrary {
 public:
  struct PrefillCall {
    std::vector<float> embeds;
    std::vector<int32_t> token_ids, modality_ids;
  };

  explicit SpyLibrary(const ModelLibrary& inner) : inner_(inner) {
    for (const std::string& name : inner.FunctionNames()) Wrap(name, *inner.GetFunction(name));
  }
  void Replace(const std::string& name, PackedFunction f) { Wrap(name, std::move(f)); }
  void Hide(const std::string& name) { functions_.erase(name); }

  const PackedFunction* GetFunction(const std::string& name) const override {
    auto it = functions_.find(name);
    return it == functions_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> FunctionNames() const override {
    std::vector<std::string> out;
    for (const auto& [n, f] : functions_) out.push_back(n);
    return out;
  }
  const LibraryMetadata& Metadata() const override { return inner_.Metadata(); }

  std::map<std::string, int> calls;
  std::vector<PrefillCall> prefills;

 private:
  void Wrap(const std::string& name, PackedFunction f) {
    functions_[name] = [this, name, f](std::span<const Value> args) {
      ++calls[name];
      if (name == "prefill_tokens" && args.size() == 5) {
        PrefillCall c;
        const NDArray& e = std::get<NDArray>(args[0]);
        c.embeds.assign(e.data<float>(), e.data<float>() + e.Elements());
        const NDArray& t = std::get<NDArray>(args[1]);
        c.token_ids.assign(t.data<int32_t>(), t.data<int32_t>() + t.Elements());
        const NDArray& m = std::get<NDArray>(args[2]);
        c.modality_ids.assign(m.data<int32_t>(), m.data<int32_t>() + m.Elements());
        prefills.push_back(std::move(c));
      }
      return f(args);
    };
  }
  const ModelLibrary& inner_;
  std::map<std::string, PackedFunction> functions_;
};

struct Package {
  test::TempDir dir;
  std::unique_ptr<ModelLibrary> library;
  std::string path() const { return dir.File("pkg"); }
};

std::unique_ptr<Package> MakePackage(ReferenceModelOptions o) {
  auto p = std::make_unique<Package>();
  auto report = WriteReferenceModel(p->path(), o);
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : FormatErrors(report.errors()));
  auto lib = OpenReferenceLibrary(p->path());
  EXPECT_TRUE(lib.ok()) << (lib.ok() ? "" : FormatErrors(lib.errors()));
  if (lib.ok()) p->library = std::move(*lib);
  return p;
}

ReferenceModelOptions Multimodal(ReferencePairs pairs) {
  ReferenceModelOptions o;
  o.seed = 7;
  o.pairs = pairs;
  o.audio = o.image = true;
  o.prefill_chunk_size = 512;
  o.context_window_size = 512;
  return o;
}

LoadedModel MustLoad(const Package& p, const ModelLibrary& lib,
                     const std::optional<CompiledProgram>& program = std::nullopt) {
  auto m = LoadModel(p.path(), lib, program);
  EXPECT_TRUE(m.ok()) << (m.ok() ? "" : FormatErrors(m.errors()));
  return m.ok() ? std::move(*m) : LoadedModel{};
}

NDArray Pcm(int64_t n) {
  NDArray a = NDArray::Empty({n}, DlFloat32());
  for (int64_t i = 0; i < n; ++i) a.data<float>()[i] = static_cast<float>(0.5 * std::sin(0.013 * i));
  return a;
}

NDArray Pixels(int64_t size, bool wide = false) {
  NDArray a = NDArray::Empty({1, size, size, 3}, wide ? DlUInt32() : DlUInt8());
  for (int64_t i = 0; i < a.Elements(); ++i) {
    uint8_t v = static_cast<uint8_t>((i * 37) % 251);
    if (wide) {
      a.data<uint32_t>()[i] = v;
    } else {
      a.data<uint8_t>()[i] = v;
    }
  }
  return a;
}

// text, audio (pcm_samples), text, image, text — rows of audio: ceil(n / 640).
TurnInput MixedTurn(const BoundContract& c, int64_t pcm_samples = 3000) {
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{{1, 20, 21, 22, 23}}, "/0"});
  in.pieces.push_back(PromptPiece{AudioPiece(*c.audio, std::nullopt), "/1"});
  in.pieces.push_back(PromptPiece{TextPiece{{30, 31, 32}}, "/2"});
  in.pieces.push_back(PromptPiece{ImagePiece(*c.image), "/3"});
  in.pieces.push_back(PromptPiece{TextPiece{{40, 41}}, "/4"});
  in.media = {NDArray(), Pcm(pcm_samples), NDArray(), Pixels(32, c.image->dtype == "uint32"), NDArray()};
  return in;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - b[i]));
  return d;
}

CompiledProgram ProgramOf(const Package& p) {
  auto prog = ReadCompiledProgram(JoinPath(p.path(), kReferenceProgramFile));
  EXPECT_TRUE(prog.ok());
  return *prog;
}

// ---- Binding ----

TEST(Bind, ManifestPackageBindsTheTokenPair) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  auto bound = BindModel(p->path(), *p->library);
  ASSERT_TRUE(bound.ok()) << FormatErrors(bound.errors());
  EXPECT_FALSE(bound->legacy);
  EXPECT_EQ(bound->contract.pair, GenerationPair::kTokens);
  EXPECT_NE(bound->audio_adapter, nullptr);
  EXPECT_NE(bound->image_adapter, nullptr);
}

TEST(Bind, MissingFunctionsAreNamedBeforeAnyCall) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  SpyLibrary spy(*p->library);
  spy.Hide("decode_tokens");
  spy.Hide("audio_embed");
  auto bound = BindModel(p->path(), spy);
  ASSERT_FALSE(bound.ok());
  std::string all = FormatErrors(bound.errors());
  EXPECT_EQ(bound.errors().size(), 2u) << all;
  EXPECT_NE(all.find("\"decode_tokens\""), std::string::npos) << all;
  EXPECT_NE(all.find("\"audio_embed\""), std::string::npos) << all;
  EXPECT_NE(all.find("/programs/generation/adapters/audio"), std::string::npos) << all;
  EXPECT_TRUE(spy.calls.empty());
  // A library whose own function list lacks an export fails the same way.
  std::string meta_path = JoinPath(p->path(), kReferenceLibraryFile);
  auto meta = ReadJsonFile(meta_path);
  Json m = *meta;
  Json kept = Json::array();
  for (const auto& f : m["functions"]) {
    if (f != "embed") kept.push_back(f);
  }
  m["functions"] = kept;
  ASSERT_TRUE(WriteFileAtomic(meta_path, m.dump(), true).ok());
  auto lib = OpenReferenceLibrary(p->path());
  ASSERT_TRUE(lib.ok());
  auto b2 = BindModel(p->path(), **lib);
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(FormatErrors(b2.errors()).find("\"embed\" (role embed_tokens)"), std::string::npos)
      << FormatErrors(b2.errors());
}

TEST(Bind, LegacyPackageBindsTheEmbedPairAndSaysSo) {
  ReferenceModelOptions o;
  o.pairs = ReferencePairs::kEmbeds;
  o.manifest = false;
  auto p = MakePackage(o);
  ASSERT_FALSE(FileExists(JoinPath(p->path(), kManifestFileName)));
  auto bound = BindModel(p->path(), *p->library);
  ASSERT_TRUE(bound.ok()) << FormatErrors(bound.errors());
  EXPECT_TRUE(bound->legacy);
  EXPECT_EQ(bound->contract.pair, GenerationPair::kEmbeds);
  EXPECT_EQ(bound->contract.create_kv_cache_function, "create_tir_paged_kv_cache");
  EXPECT_NE(bound->note.find("no mlc-model-manifest.json"), std::string::npos) << bound->note;
  EXPECT_FALSE(bound->contract.audio || bound->contract.image);
  // It generates, text only.
  LoadedModel m = MustLoad(*p, *p->library);
  Session s = m.NewSession();
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{{1, 2, 3}}, "/0"});
  auto r = s.Generate(in, Opts(4, {}, {}, {}));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ(r->tokens.size(), 4u);
  // Without prefill/decode the legacy path fails naming them.
  SpyLibrary spy(*p->library);
  spy.Hide("prefill");
  auto b = BindModel(p->path(), spy);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(FormatErrors(b.errors()).find("\"prefill\""), std::string::npos);
}

TEST(Bind, MalformedOrMismatchedManifestIsAnErrorNotAFallback) {
  auto p = MakePackage(Multimodal(ReferencePairs::kEmbeds));
  std::string manifest = JoinPath(p->path(), kManifestFileName);
  std::string good = *ReadFile(manifest);
  ASSERT_TRUE(WriteFileAtomic(manifest, "{\"schema\": \"mlc.model-package\",", true).ok());
  auto b1 = BindModel(p->path(), *p->library);
  ASSERT_FALSE(b1.ok());
  EXPECT_NE(b1.error().document.find(kManifestFileName), std::string::npos) << b1.error().ToString();
  // Well-formed, but its interface does not match the library's program.
  auto doc = ParseJson(good);
  Json j = *doc;
  j["tasks"]["chat.completions"]["inputs"]["audio"]["prompt"]["placeholder_token_id"] = 9;
  auto pkg = ParseModelPackage(j);  // fails: interface_id no longer matches the tasks
  ASSERT_FALSE(pkg.ok());
  ModelPackage changed;
  auto parsed = ParseModelPackage(*doc);
  ASSERT_TRUE(parsed.ok());
  changed = *parsed;
  changed.tasks["chat.completions"].inputs["audio"].prompt->placeholder_token_id = 9;
  changed.interface_id = *ComputeInterfaceId(changed.tasks);
  ASSERT_TRUE(WriteFileAtomic(manifest, WriteModelPackage(changed), true).ok());
  auto b2 = BindModel(p->path(), *p->library);
  ASSERT_FALSE(b2.ok());
  EXPECT_NE(FormatErrors(b2.errors()).find("interface_id"), std::string::npos);
}

// ---- Parameters ----

TEST(Params, LoadedInLibraryOrderAndWidenedFromBf16) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  const auto& order = p->library->Metadata().params;
  auto params = LoadParameters(p->path(), order);
  ASSERT_TRUE(params.ok()) << FormatErrors(params.errors());
  ASSERT_EQ((*params)->names.size(), order.size());
  for (size_t i = 0; i < order.size(); ++i) EXPECT_EQ((*params)->names[i], order[i].name);
  // Each value is exactly the widened bf16 stored in its shard.
  auto cache = ReadTensorCache(p->path());
  ASSERT_TRUE(cache.ok());
  const TensorShard& shard = cache->shards[0];
  const TensorRecord& rec = shard.records[0];
  std::string bytes = *ReadFile(JoinPath(p->path(), shard.data_path));
  size_t idx = std::find((*params)->names.begin(), (*params)->names.end(), rec.name) - (*params)->names.begin();
  const NDArray& t = (*params)->tensors[idx];
  for (int64_t k = 0; k < t.Elements(); k += 97) {
    uint16_t b;
    std::memcpy(&b, bytes.data() + rec.byte_offset + 2 * k, 2);
    ASSERT_EQ(t.data<float>()[k], Bf16ToFloat(b));
  }
  EXPECT_GT((*params)->widened_bytes, 0u);
  // A parameter the library asks for with another shape is an error naming it.
  auto bad = order;
  bad[0].shape[0] = int64_t{3};
  auto e = LoadParameters(p->path(), bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find(order[0].name), std::string::npos);
}

TEST(Params, Bf16RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  uint32_t bits = 0x3f808000;  // exactly halfway: ties to even (down)
  float f;
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBf16(f), 0x3f80);
  bits = 0x3f818000;  // halfway, odd: up
  std::memcpy(&f, &bits, 4);
  EXPECT_EQ(FloatToBf16(f), 0x3f82);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
}

// ---- Generation ----

class Chunking : public ::testing::TestWithParam<int64_t> {};

TEST_P(Chunking, ChunkedPrefillGivesTheLogitsOfOneChunk) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  LoadedModel m = MustLoad(*p, *p->library);
  Session whole = m.NewSession();
  auto a = whole.Prefill(MixedTurn(m.bound.contract));
  ASSERT_TRUE(a.ok()) << FormatErrors(a.errors());
  EXPECT_EQ(a->plan.chunks.size(), 5u);
  PlanLimits small = m.limits;
  small.prefill_chunk_size = GetParam();
  LoadedModel small_model = m;
  small_model.limits = small;
  Session chunked = small_model.NewSession();
  auto b = chunked.Prefill(MixedTurn(m.bound.contract));
  ASSERT_TRUE(b.ok()) << FormatErrors(b.errors());
  EXPECT_GT(b->plan.chunks.size(), a->plan.chunks.size());
  EXPECT_LE(MaxAbsDiff(a->logits, b->logits), 1e-5);
  EXPECT_EQ(whole.KvLength(), a->plan.prompt_length);  // KV length after prefill = prompt length
  EXPECT_EQ(chunked.KvLength(), b->plan.prompt_length);
  EXPECT_EQ(a->plan.prompt_length, 5 + (1 + 5 + 1) + 3 + (1 + 16 + 1) + 2);
}

INSTANTIATE_TEST_SUITE_P(Runtime, Chunking, ::testing::Values(1, 7));

TEST(Generate, TokenPairAndEmbedPairGiveTheSameLogits) {
  auto p = MakePackage(Multimodal(ReferencePairs::kBoth));
  LoadedModel tokens = MustLoad(*p, *p->library);
  ASSERT_EQ(tokens.bound.contract.pair, GenerationPair::kTokens);  // the token pair wins
  CompiledProgram embeds_only = ProgramOf(*p);
  auto& ex = embeds_only.programs["generation"].exports;
  ex.erase("prefill_tokens");
  ex.erase("decode_tokens");
  LoadedModel embeds = MustLoad(*p, *p->library, embeds_only);
  ASSERT_EQ(embeds.bound.contract.pair, GenerationPair::kEmbeds);
  Session st = tokens.NewSession(), se = embeds.NewSession();
  GenerationOptions opt = Opts(6, {}, {}, {});
  auto rt = st.Generate(MixedTurn(tokens.bound.contract), opt);
  auto re = se.Generate(MixedTurn(embeds.bound.contract), opt);
  ASSERT_TRUE(rt.ok()) << FormatErrors(rt.errors());
  ASSERT_TRUE(re.ok()) << FormatErrors(re.errors());
  EXPECT_LE(MaxAbsDiff(rt->last_logits, re->last_logits), 1e-5);
  EXPECT_EQ(rt->tokens, re->tokens);
  EXPECT_EQ(st.KvLength(), se.KvLength());
}

TEST(Generate, EachAdapterRowLandsAtItsPlaceholder) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  SpyLibrary spy(*p->library);
  LoadedModel m = MustLoad(*p, spy);
  PlanLimits limits = m.limits;
  limits.prefill_chunk_size = 4;
  LoadedModel chunked_model = m;
  chunked_model.limits = limits;
  Session s = chunked_model.NewSession();
  TurnInput in = MixedTurn(m.bound.contract);
  auto r = s.Prefill(in);
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  // The adapters' own outputs, computed separately.
  auto run = [&](const char* fn, const NDArray& x) {
    std::vector<Value> args = {x, ObjectRef(m.params)};
    auto out = (*p->library->GetFunction(fn))(args);
    EXPECT_TRUE(out.ok());
    return std::get<NDArray>(out->front());
  };
  NDArray audio = run("audio_embed", in.media[1]);
  NDArray image = run("image_embed", in.media[3]);
  int64_t h = m.hidden_size.value();
  int64_t audio_row = 0, image_row = 0;
  for (const auto& call : spy.prefills) {
    for (size_t i = 0; i < call.token_ids.size(); ++i) {
      const float* got = call.embeds.data() + i * h;
      if (call.modality_ids[i] == kModalityText) {
        EXPECT_NE(call.token_ids[i], ReferenceTokens::kAudioPlaceholder);
        continue;
      }
      const NDArray& src = call.token_ids[i] == ReferenceTokens::kAudioPlaceholder ? audio : image;
      int64_t& row = call.token_ids[i] == ReferenceTokens::kAudioPlaceholder ? audio_row : image_row;
      ASSERT_TRUE(call.token_ids[i] == ReferenceTokens::kAudioPlaceholder ||
                  call.token_ids[i] == ReferenceTokens::kImagePlaceholder);
      ASSERT_LT(row, src.shape()[0]);
      EXPECT_EQ(0, std::memcmp(got, src.data<float>() + row * h, h * sizeof(float)))
          << "row " << row << " of the " << (&src == &audio ? "audio" : "image") << " adapter";
      ++row;
    }
  }
  EXPECT_EQ(audio_row, audio.shape()[0]);
  EXPECT_EQ(image_row, 16);
  EXPECT_EQ(spy.calls["audio_embed"], 1);
  EXPECT_EQ(spy.calls["image_embed"], 1);
}

TEST(Generate, WrongModalityIdsChangeTheOutput) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  LoadedModel m = MustLoad(*p, *p->library);
  const PackedFunction& embed = *p->library->GetFunction("embed");
  const PackedFunction& prefill = *p->library->GetFunction("prefill_tokens");
  const PackedFunction& create = *p->library->GetFunction("create_tir_paged_kv_cache");
  auto logits = [&](std::vector<int32_t> mods) {
    std::vector<int32_t> ids = {1, 20, 21, 22};
    NDArray t = NDArray::Empty({4}, DlInt32());
    std::memcpy(t.data<int32_t>(), ids.data(), 16);
    std::vector<Value> ea = {t, ObjectRef(m.params)};
    NDArray e = std::get<NDArray>((*embed(ea)).front());
    std::vector<Value> ca = {int64_t{1}, int64_t{64}, int64_t{64}, int64_t{16}, int64_t{0}};
    ObjectRef kv = std::get<ObjectRef>((*create(ca)).front());
    NDArray ti = t.Reshape({1, 4}), mi = NDArray::Empty({1, 4}, DlInt32());
    std::memcpy(mi.data<int32_t>(), mods.data(), 16);
    std::vector<Value> pa = {e.Reshape({1, 4, 64}), ti, mi, kv, ObjectRef(m.params)};
    NDArray l = std::get<NDArray>((*prefill(pa)).front());
    return std::vector<float>(l.data<float>(), l.data<float>() + l.Elements());
  };
  auto right = logits({0, 0, 0, 0});
  EXPECT_GT(MaxAbsDiff(right, logits({0, 1, 0, 0})), 1e-3);
  EXPECT_LE(MaxAbsDiff(right, logits({0, 0, 0, 0})), 0.0);
}

TEST(Generate, ImageThatCannotFitIsRejectedBeforeItsAdapterRuns) {
  ReferenceModelOptions o = Multimodal(ReferencePairs::kTokens);
  o.context_window_size = 40;
  auto p = MakePackage(o);
  SpyLibrary spy(*p->library);
  LoadedModel m = MustLoad(*p, spy);
  Session s = m.NewSession();
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{std::vector<int32_t>(25, 11)}, "/0"});
  in.pieces.push_back(PromptPiece{ImagePiece(*m.bound.contract.image), "/1"});
  in.media = {NDArray(), Pixels(32)};
  auto r = s.Prefill(in);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().path, "/1");
  // (one position is kept for the reply)
  EXPECT_NE(r.error().message.find("overflows by 4 positions"), std::string::npos) << r.error().message;
  EXPECT_EQ(spy.calls["image_embed"], 0);
  EXPECT_EQ(s.adapter_calls(), 0);
  EXPECT_EQ(spy.calls["prefill_tokens"], 0);
  // Audio is checked once its adapter reports the rows: 25 + 1 + 20 + 1 + 1 > 40.
  TurnInput audio;
  audio.pieces.push_back(PromptPiece{TextPiece{std::vector<int32_t>(25, 11)}, "/0"});
  audio.pieces.push_back(PromptPiece{AudioPiece(*m.bound.contract.audio, std::nullopt), "/1"});
  audio.media = {NDArray(), Pcm(640 * 20)};
  auto ra = s.Prefill(audio);
  ASSERT_FALSE(ra.ok());
  EXPECT_NE(ra.error().message.find("overflows by 8 positions"), std::string::npos) << ra.error().message;
  EXPECT_EQ(spy.calls["audio_embed"], 1);
  EXPECT_EQ(spy.calls["prefill_tokens"], 0);
}

TEST(Generate, AdapterOutputOfTheWrongShapeIsNamed) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  SpyLibrary spy(*p->library);
  spy.Replace("image_embed", [](std::span<const Value>) -> Result<std::vector<Value>> {
    return std::vector<Value>{NDArray::Empty({15, 64}, DlFloat32())};
  });
  spy.Replace("audio_embed", [](std::span<const Value>) -> Result<std::vector<Value>> {
    return std::vector<Value>{NDArray::Empty({4, 63}, DlFloat32())};
  });
  LoadedModel m = MustLoad(*p, spy);
  Session s = m.NewSession();
  TurnInput in = MixedTurn(m.bound.contract);
  auto r = s.Prefill(in);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("adapter \"audio\""), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("[4, 63] float32"), std::string::npos) << r.error().message;
  in.pieces.erase(in.pieces.begin() + 1);
  in.media.erase(in.media.begin() + 1);
  auto r2 = s.Prefill(in);
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.error().message.find("adapter \"image\""), std::string::npos) << r2.error().message;
  EXPECT_NE(r2.error().message.find("[15, 64] float32, expected [16, 64]"), std::string::npos)
      << r2.error().message;
}

// Issue 12.7: a full context ends the turn as max_tokens does (stop reason "length"), not with
// an error: the last position is fed, one more token is sampled, and the next turn (which would
// start with that token) no longer fits.
TEST(Generate, FullContextEndsTheTurnWithLength) {
  ReferenceModelOptions o;
  o.seed = 3;
  o.prefill_chunk_size = 8;
  o.context_window_size = 16;
  auto p = MakePackage(o);
  LoadedModel m = MustLoad(*p, *p->library);
  Session s = m.NewSession();
  GenerationOptions opt = Opts(100, {}, {}, {});
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{std::vector<int32_t>(10, 11)}, "/0"});
  auto t = s.Generate(in, opt);
  ASSERT_TRUE(t.ok()) << FormatErrors(t.errors());
  EXPECT_EQ(t->stop_reason, "length");
  EXPECT_EQ(s.KvLength(), 16);
  EXPECT_EQ(t->tokens.size(), 16u - 10u + 1u) << "6 fed at positions 10..15, one sampled after";
  TurnInput next;
  next.pieces.push_back(PromptPiece{TextPiece{{12}}, "/0"});
  auto t2 = s.Generate(next, opt);
  ASSERT_FALSE(t2.ok());
  EXPECT_NE(t2.error().message.find("does not fit the context window"), std::string::npos)
      << t2.error().message;
}

TEST(Generate, TurnsContinueTheKvCache) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  LoadedModel m = MustLoad(*p, *p->library);
  Session s = m.NewSession();
  GenerationOptions opt = Opts(5, {}, {}, {});
  auto t1 = s.Generate(MixedTurn(m.bound.contract), opt);
  ASSERT_TRUE(t1.ok()) << FormatErrors(t1.errors());
  ASSERT_EQ(t1->stop_reason, "length");
  // The last token (cut by the limit) is not cached yet: 4 decode steps fed 4 tokens.
  EXPECT_EQ(s.KvLength(), t1->plan.prompt_length + 4);
  TurnInput second;
  second.pieces.push_back(PromptPiece{TextPiece{{50, 51, 52}}, "/0"});
  auto t2 = s.Generate(second, opt);
  ASSERT_TRUE(t2.ok()) << FormatErrors(t2.errors());
  EXPECT_EQ(t2->plan.kv_length, t1->plan.prompt_length + 4);
  EXPECT_EQ(t2->plan.prompt_length, 1 + 3);  // the pending token, then the new text
  EXPECT_EQ(t2->plan.chunks.front().token_ids.front(), t1->tokens.back());
  // Same as one fresh prompt holding the whole conversation.
  Session fresh = m.NewSession();
  TurnInput all = MixedTurn(m.bound.contract);
  std::vector<int32_t> tail(t1->tokens.begin(), t1->tokens.end());
  tail.insert(tail.end(), {50, 51, 52});
  all.pieces.push_back(PromptPiece{TextPiece{tail}, "/5"});
  all.media.emplace_back();
  auto f = fresh.Prefill(all);
  ASSERT_TRUE(f.ok());
  Session again = m.NewSession();
  auto a1 = again.Generate(MixedTurn(m.bound.contract), opt);
  ASSERT_TRUE(a1.ok());
  auto a2 = again.Prefill(second);
  ASSERT_TRUE(a2.ok());
  EXPECT_LE(MaxAbsDiff(a2->logits, f->logits), 1e-4);
}

TEST(Generate, StopTokensEndTheTurnAndSamplingIsSeeded) {
  auto p = MakePackage(Multimodal(ReferencePairs::kTokens));
  LoadedModel m = MustLoad(*p, *p->library);
  EXPECT_EQ(StopTokenIds(m.config), std::vector<int32_t>{ReferenceTokens::kEos});
  TurnInput in;
  in.pieces.push_back(PromptPiece{TextPiece{{1, 2, 3, 4}}, "/0"});
  Session s = m.NewSession();
  auto greedy = s.Generate(in, Opts(8, {}, {}, {}));
  ASSERT_TRUE(greedy.ok());
  ASSERT_FALSE(greedy->tokens.empty());
  // Declaring the first greedy token a stop token ends the turn at once, without feeding it.
  Session s2 = m.NewSession();
  auto stopped = s2.Generate(in, Opts(8, {}, {greedy->tokens[0]}, {}));
  ASSERT_TRUE(stopped.ok());
  EXPECT_TRUE(stopped->tokens.empty());
  EXPECT_EQ(stopped->stop_reason, "stop_token");
  EXPECT_EQ(s2.KvLength(), 4);
  // on_token returning false ends the turn after that token ("stop_str"); the token is kept and
  // fed at the start of the next turn, like a token cut by the limit.
  Session s6 = m.NewSession();
  std::vector<int32_t> seen;
  GenerationOptions until_third = Opts(8, {}, {}, [&](int32_t t) {
    seen.push_back(t);
    return seen.size() < 3;
  });
  auto cut = s6.Generate(in, until_third);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->stop_reason, "stop_str");
  EXPECT_EQ(cut->tokens, std::vector<int32_t>(greedy->tokens.begin(), greedy->tokens.begin() + 3));
  EXPECT_EQ(seen, cut->tokens);
  EXPECT_EQ(s6.KvLength(), 4 + 2);
  // Seeded sampling is reproducible and differs from greedy for a hot temperature.
  SamplerConfig hot{1.5, 0.95, 50, 42};
  Session s3 = m.NewSession(), s4 = m.NewSession();
  auto x = s3.Generate(in, Opts(12, hot, {}, {}));
  auto y = s4.Generate(in, Opts(12, hot, {}, {}));
  ASSERT_TRUE(x.ok() && y.ok());
  EXPECT_EQ(x->tokens, y->tokens);
  Session s5 = m.NewSession();
  auto g12 = s5.Generate(in, Opts(12, {}, {}, {}));
  EXPECT_NE(x->tokens, g12->tokens);
}

TEST(Sampler, TopKOneIsGreedyAndTopPKeepsTheNucleus) {
  std::vector<float> logits = {0.0f, 5.0f, 1.0f, 4.9f};
  Sampler k1(SamplerConfig{2.0, 1.0, 1, 9});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(k1.Sample(logits), 1);
  Sampler p(SamplerConfig{1.0, 0.6, 0, 9});  // 1 alone holds 0.52, with 3 0.99 -> nucleus {1, 3}
  std::map<int32_t, int> seen;
  for (int i = 0; i < 400; ++i) ++seen[p.Sample(logits)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 100);
  EXPECT_GT(seen[3], 100);
  EXPECT_FALSE(CheckSamplerConfig(SamplerConfig{-1, 1, 0, 0}).ok());
  EXPECT_FALSE(CheckSamplerConfig(SamplerConfig{1, 0, 0, 0}).ok());
}

TEST(Sampler, GreedyIsTheFirstLargestLogitLikeMaxElement) {
  // Lengths around the 16-lane passes, the largest at every place, ties, NaNs, infinities and
  // signed zeros: the greedy choice is std::max_element's.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-3, 3);
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  for (size_t n : {1, 2, 15, 16, 17, 33, 151936}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> logits(n);
      for (float& v : logits) v = static_cast<float>(small(rng));
      const size_t at = static_cast<size_t>(rng() % n);
      switch (trial % 8) {
        case 1: logits[at] = 9; break;
        case 2: logits[at] = nan; break;
        case 3: logits[0] = nan; break;
        case 4: logits[at] = inf; logits[n - 1] = inf; break;
        case 5: std::fill(logits.begin(), logits.end(), -0.0f); logits[at] = 0.0f; break;
        case 6: std::fill(logits.begin(), logits.end(), -inf); logits[at] = nan; break;
        case 7: logits[at] = 3; logits[(at * 7) % n] = 3; break;
        default: break;
      }
      const auto want = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      Sampler greedy(SamplerConfig{0.0, 1.0, 0, 1});
      ASSERT_EQ(greedy.Sample(logits), want) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Generate, Uint32PixelsWhenTheProgramSaysSo) {
  ReferenceModelOptions o = Multimodal(ReferencePairs::kTokens);
  o.image_dtype = "uint32";
  auto p = MakePackage(o);
  LoadedModel m = MustLoad(*p, *p->library);
  ASSERT_EQ(m.bound.contract.image->dtype, "uint32");
  Session s = m.NewSession();
  auto r = s.Prefill(MixedTurn(m.bound.contract));
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
}

// ---- Files end to end ----

TEST(RunCli, GeneratesFromAWavAndAnImageFile) {
  test::TempDir dir;
  std::string pkg = dir.File("pkg");
  auto gen = test::RunCli({"reference-model", pkg, "--audio", "--image", "--pair", "both",
                           "--seed", "3", "--json"});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  auto again = test::RunCli({"reference-model", pkg});
  EXPECT_EQ(again.exit_code, 1) << "existing files are kept without --force";
  std::vector<double> tone;
  for (int i = 0; i < 8000; ++i) tone.push_back(0.3 * std::sin(i * 0.07));
  test::WavLayout layout;
  layout.sample_rate_hz = 8000;  // resampled to 16 kHz by the audio frontend: 16000 samples
  dir.Write("clip.wav", test::EncodeWav(layout, tone));
  std::string req = dir.Write("req.json", R"({"turns": [[{"tokens": [1, 20]}, {"audio": "clip.wav"}, {"tokens": [21]}], [{"tokens": [22, 23]}]]})");
  auto r = test::RunCli({"run", pkg, "--request", req, "--max-tokens", "3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  EXPECT_EQ((*j)["turns"].size(), 2u);
  EXPECT_EQ((*j)["turns"][0]["prompt_length"], 2 + 1 + 25 + 1 + 1);
  EXPECT_EQ((*j)["tokens"].size(), 6u);
  EXPECT_EQ((*j)["kv_length"], 30 + 2 + 1 + 2 + 2);
  EXPECT_TRUE((*j)["timings"].contains("adapter_ms"));
  // A program naming a function the library lacks fails at bind time.
  auto prog = ReadJsonFile(JoinPath(pkg, kReferenceProgramFile));
  Json pj = *prog;
  pj["programs"]["generation"]["adapters"]["audio"] = "audio_encoder_v2";
  std::string bad = dir.Write("bad-program.json", pj.dump());
  auto b = test::RunCli({"run", pkg, "--program", bad, "--request", req});
  EXPECT_EQ(b.exit_code, 1);
  EXPECT_NE(b.err.find("audio_encoder_v2"), std::string::npos) << b.err;
}

}  // namespace
}  // namespace mlc
