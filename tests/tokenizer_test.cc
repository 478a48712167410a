// Tokenizers (SPEC 8): each Hugging Face component on small hand-written tokenizer.json
// documents (tests/data/tokenizer_docs), errors for components outside the list, the CLI, and
// ids and text identical to @mlc-ai/web-tokenizers 0.1.6 run in Node (installed from npm into
// the build folder once) for the real Phi-3 and Qwen2 tokenizers, a SentencePiece model trained
// here with spm_train, and every small document, over tests/data/tokenizer_corpus.jsonl.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include "mlc_manifest/json.h"
#include "mlc_manifest/tokenizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using test::RunCli;
using test::RunProgram;
using test::SharedPath;
using test::SourcePath;
using test::TempDir;
using Ids = std::vector<int32_t>;

std::string Phi3() { return SharedPath("testdata/tokenizers/phi-3-mini/tokenizer.json"); }
std::string Qwen2() { return SharedPath("testdata/tokenizers/qwen2-readerlm/tokenizer.reconstructed.json"); }
std::string Doc(const std::string& name) { return SourcePath("tests/data/tokenizer_docs/" + name + ".json"); }

std::unique_ptr<Tokenizer> LoadJson(const std::string& path) {
  auto tok = Tokenizer::FromJsonFile(path);
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : FormatErrors(tok.errors()));
  return tok.ok() ? std::move(*tok) : nullptr;
}

// The real tokenizers, loaded once per test run (they take a while under sanitizers).
const Tokenizer* Cached(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto& slot = cache[path];
  if (!slot) slot = LoadJson(path);
  return slot.get();
}

Ids EncodeWith(const std::string& doc, const std::string& text) {
  auto tok = LoadJson(Doc(doc));
  return tok ? tok->Encode(text) : Ids{};
}

// A tokenizer.json around the given parts, with a tiny character vocabulary.
std::string MiniDoc(const std::string& normalizer, const std::string& pre, const std::string& decoder,
                    const std::string& model_type = "BPE") {
  return R"({"added_tokens": [], "normalizer": )" + normalizer + R"(, "pre_tokenizer": )" + pre +
         R"(, "decoder": )" + decoder + R"(, "model": {"type": ")" + model_type +
         R"(", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
}

Error FirstError(const std::string& json) {
  auto tok = Tokenizer::FromJsonText(json);
  EXPECT_FALSE(tok.ok());
  return tok.ok() ? Error{} : tok.error();
}

// ------------------------------------------------------------------ real tokenizers

TEST(Tokenizer, Phi3KnownIds) {
  const Tokenizer* tok = Cached(Phi3());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Encode("Hello world"), (Ids{15043, 3186}));
  EXPECT_EQ(tok->Encode("<|user|>\nhi  there\t<|end|>  x"), (Ids{32010, 7251, 29871, 727, 12, 32007, 921}));
  EXPECT_EQ(tok->Decode(Ids{32010, 7251, 29871, 727, 12, 32007, 921}), "<|user|> hi  there\t<|end|> x");
  EXPECT_EQ(tok->VocabSize(), 32011u);
  EXPECT_EQ(tok->IdToToken(3), "<0x00>");
  EXPECT_EQ(tok->IdToToken(32010), "<|user|>");
  EXPECT_EQ(tok->IdToToken(40000), "");
  EXPECT_EQ(tok->TokenToId("<|end|>"), 32007);
  EXPECT_EQ(tok->TokenToId("no such token"), std::nullopt);
  EXPECT_EQ(tok->Encode(""), Ids{});
  EXPECT_EQ(tok->Kind(), "huggingface");
}

TEST(Tokenizer, Qwen2KnownIds) {
  const Tokenizer* tok = Cached(Qwen2());
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Encode("Hello world"), (Ids{9707, 1879}));  // as Qwen2's documentation shows
  Ids chat{151644, 872, 198, 6023, 220, 1052, 197, 151645, 220, 856};
  EXPECT_EQ(tok->Encode("<|im_start|>user\nhi  there\t<|im_end|>  x"), chat);
  EXPECT_EQ(tok->Decode(chat), "<|im_start|>user\nhi  there\t<|im_end|>  x");
  EXPECT_EQ(tok->VocabSize(), 151665u);
}

TEST(Tokenizer, InvalidUtf8IsReplacedNotFatal) {
  const Tokenizer* tok = Cached(Qwen2());
  ASSERT_TRUE(tok);
  std::string bad = "ok \xff\xfe mid \xe2\x82 end \xc0\xaf";
  Ids ids = tok->Encode(bad);
  EXPECT_EQ(ids, tok->Encode("ok \xEF\xBF\xBD\xEF\xBF\xBD mid \xEF\xBF\xBD end \xEF\xBF\xBD\xEF\xBF\xBD"));
  EXPECT_FALSE(tok->Decode(ids).empty());
  EXPECT_EQ(tok->Decode(Ids{-1, 99999999, 9707}), "Hello");  // unknown ids are skipped
}

TEST(Tokenizer, LongWordIsMergedQuickly) {
  const Tokenizer* tok = Cached(Phi3());
  ASSERT_TRUE(tok);
  std::string word;
  for (int i = 0; i < 50000; ++i) word += "ab";
  std::string text = word + " " + word;  // one 200 kB piece (Phi-3 has no pre-tokenizer)
  Ids ids = tok->Encode(text);
  EXPECT_GT(ids.size(), 1000u);
  EXPECT_EQ(tok->Decode(ids), text);
}

TEST(Tokenizer, FromDirectoryPrefersJson) {
  TempDir dir;
  std::filesystem::copy_file(Doc("byte_level"), dir.File("tokenizer.json"));
  dir.Write("tokenizer.model", "not a model");
  auto tok = Tokenizer::FromDirectory(dir.path());
  ASSERT_TRUE(tok.ok()) << FormatErrors(tok.errors());
  EXPECT_EQ((*tok)->Kind(), "huggingface");
  TempDir empty;
  auto none = Tokenizer::FromDirectory(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kIo);
  TempDir sp;
  sp.Write("tokenizer.model", "not a model");
  auto bad = Tokenizer::FromDirectory(sp.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalid);
}

// ------------------------------------------------------------------ components

TEST(TokenizerComponents, BpeRanksTiesUnkNormalizersWhitespace) {
  // NFKC folds the fullwidth letters, Lowercase, Replace "_" -> " ", Whitespace split, merges
  // by rank ("b c" before "a b"), leftmost on ties ("aaaaa" -> aaaa a), fused unknowns.
  EXPECT_EQ(EncodeWith("bpe_ranks", "abc aaaa aaaaa hello HELLO_World ＡＢＣ x!?"),
            (Ids{1, 45, 47, 47, 1, 52, 52, 23, 15, 18, 12, 4, 1, 45, 24, 41, 42}));
  auto tok = LoadJson(Doc("bpe_ranks"));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Decode(Ids{1, 45, 0}), "a bc <unk>");  // no decoder: tokens joined by spaces
}

TEST(TokenizerComponents, BpePairsPrefixSuffixUnfusedUnkDigitsStringSplit) {
  Ids ids = EncodeWith("bpe_affixes", "ab abc abcz 123 1234 12a b");
  EXPECT_EQ(ids, (Ids{20, 19, 16, 19, 9, 0, 22, 27, 29, 22, 27, 28, 0, 22, 30, 13, 17}));
  auto tok = LoadJson(Doc("bpe_affixes"));
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Decode(ids), "ab</w>abc</w>abc[UNK]123</w>123[UNK]12</w>a</w>b</w>");
}

TEST(TokenizerComponents, ByteFallbackMetaspaceFirstAddedTokenFlags) {
  // lstrip / rstrip / single_word ("cat" inside "concat" is not one) / normalized added tokens,
  // byte fallback for characters outside the vocabulary, ignore_merges.
  auto tok = LoadJson(Doc("byte_fallback"));
  ASSERT_TRUE(tok);
  Ids ids = tok->Encode("x <L> y <R> z  <LR>  w cat concat cat. DOG dog <L <s></s>");
  EXPECT_EQ(ids, (Ids{259, 283, 300, 259, 284, 259, 301, 285, 302, 282, 259, 303, 259, 262, 274, 273, 262,
                      260, 279, 259, 303, 49, 259, 304, 259, 263, 274, 266, 259, 305, 259, 1, 2}));
  EXPECT_EQ(tok->Encode("  <L>start"), (Ids{300, 278, 279, 260, 277, 279}));
  EXPECT_EQ(tok->Decode(Ids{300, 278, 279, 260, 277, 279}), "<L>start");
  EXPECT_EQ(tok->Decode(tok->Encode("hello world a ab  zz ä ü €")), "hello world a ab  zz ä ü €");
}

TEST(TokenizerComponents, SplitBehaviours) {
  const std::string text = "ab-cd--ef gh";
  EXPECT_EQ(EncodeWith("split_removed", text), (Ids{43, 44, 51}));
  EXPECT_EQ(EncodeWith("split_isolated", text), (Ids{43, 37, 44, 37, 37, 51}));
  EXPECT_EQ(EncodeWith("split_mergedwithprevious", text), (Ids{46, 47, 37, 51}));
  EXPECT_EQ(EncodeWith("split_mergedwithnext", text), (Ids{43, 48, 37, 50}));
  EXPECT_EQ(EncodeWith("split_contiguous", text), (Ids{43, 37, 44, 49, 51}));
  EXPECT_EQ(EncodeWith("split_invert", text), (Ids{43, 37, 44, 49, 45, 36, 6, 7}));
}

TEST(TokenizerComponents, ByteLevelRegexPrefixSpaceAndDecoder) {
  auto tok = LoadJson(Doc("byte_level"));
  ASSERT_TRUE(tok);
  Ids ids = tok->Encode("ab abc abcz 123 1234 12a b");
  EXPECT_EQ(ids, (Ids{220, 64, 65, 220, 64, 65, 66, 220, 64, 65, 66, 89, 261, 261, 19, 259, 17, 64, 220, 65}));
  EXPECT_EQ(tok->Decode(ids), " ab abc abcz 123 1234 12a b");
}

TEST(TokenizerComponents, MetaspaceSchemesAndDecoder) {
  auto always = LoadJson(Doc("metaspace_always"));
  auto never = LoadJson(Doc("metaspace_never"));
  ASSERT_TRUE(always && never);
  EXPECT_EQ(always->Encode(" a  b ab  "), (Ids{27, 0, 28, 30, 0, 0}));
  EXPECT_EQ(always->Decode(Ids{27, 0, 28, 30, 0, 0}), "a  b ab  ");
  EXPECT_EQ(never->Encode(" a  b ab  "), (Ids{0, 27, 0, 28, 30, 31}));  // Prepend normalizer
  EXPECT_EQ(never->Decode(Ids{0, 27, 0, 28, 30, 31}), "  a  b ab  ");
  EXPECT_EQ(never->Encode(""), Ids{});  // Prepend leaves an empty text empty
}

TEST(TokenizerComponents, UnknownComponentsNameTheirPointer) {
  const std::string none = "null";
  Error e = FirstError(MiniDoc(R"({"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "NFD"}]})", none, none));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  EXPECT_EQ(e.path, "/normalizer/normalizers/1/type");
  EXPECT_NE(e.message.find("NFD"), std::string::npos);
  e = FirstError(MiniDoc(none, R"({"type": "BertPreTokenizer"})", none));
  EXPECT_EQ(e.path, "/pre_tokenizer/type");
  EXPECT_NE(e.message.find("BertPreTokenizer"), std::string::npos);
  e = FirstError(MiniDoc(none, none, R"({"type": "Sequence", "decoders": [{"type": "WordPiece"}]})"));
  EXPECT_EQ(e.path, "/decoder/decoders/0/type");
  e = FirstError(MiniDoc(none, none, none, "Unigram"));
  EXPECT_EQ(e.path, "/model/type");
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  e = FirstError(MiniDoc(none, R"({"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": false})", none));
  EXPECT_EQ(e.path, "/pre_tokenizer/pattern/Regex");
  e = FirstError(R"({"truncation": {"max_length": 4}, "model": {"type": "BPE", "vocab": {}, "merges": []}})");
  EXPECT_EQ(e.path, "/truncation");
  e = FirstError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})");
  EXPECT_EQ(e.path, "/model/merges/0");
  e = FirstError(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "dropout": 0.1}})");
  EXPECT_EQ(e.path, "/model/dropout");
  auto ok = Tokenizer::FromJsonText(MiniDoc(R"({"type": "Lowercase"})", none, none));
  ASSERT_TRUE(ok.ok()) << FormatErrors(ok.errors());
  EXPECT_EQ((*ok)->Encode("AB"), (Ids{2}));
}

// ------------------------------------------------------------------ CLI

TEST(TokenizeCli, TextJsonAndJsonl) {
  auto r = RunCli({"tokenize", "--tokenizer", Phi3(), "--text", "Hello world", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto j = Json::parse(r.out);
  EXPECT_EQ(j["ids"], Json::parse("[15043, 3186]"));
  EXPECT_EQ(j["decoded"], "Hello world");
  r = RunCli({"tokenize", "--tokenizer", Phi3(), "--jsonl"}, "{\"text\": \"Hello world\"}\n\n{\"text\": \"\"}\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "{\"ids\":[15043,3186],\"decoded\":\"Hello world\"}\n{\"ids\":[],\"decoded\":\"\"}\n");
  r = RunCli({"tokenize", "--tokenizer", Phi3(), "--jsonl"}, "{\"txt\": 1}\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("line 1"), std::string::npos);
  // With --json the failure is the stream's last line, one JSON object; earlier answers stay.
  r = RunCli({"tokenize", "--tokenizer", Phi3(), "--jsonl", "--json"}, "{\"text\": \"\"}\n{\"text\": 1\n");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(r.err.empty()) << r.err;
  ASSERT_EQ(r.out.rfind("{\"ids\":[],\"decoded\":\"\"}\n", 0), 0u) << r.out;
  auto failure = Json::parse(r.out.substr(r.out.find('\n') + 1));
  EXPECT_EQ(failure["ok"], false);
  EXPECT_EQ(failure["errors"][0]["code"], "invalid");
  EXPECT_EQ(failure["errors"][0]["document"], "stdin line 2");
  r = RunCli({"tokenize", "--tokenizer", Phi3()});
  EXPECT_EQ(r.exit_code, 2);
  r = RunCli({"tokenize", "/no/such/folder", "--text", "x"});
  EXPECT_EQ(r.exit_code, 3);
  TempDir dir;
  std::string bad = dir.Write("tokenizer.json", MiniDoc("null", R"({"type": "Punctuation"})", "null"));
  r = RunCli({"tokenize", dir.path(), "--text", "x", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("/pre_tokenizer/type"), std::string::npos);
}

// ------------------------------------------------------------------ the reference

// The bundle of @mlc-ai/web-tokenizers@0.1.6 copied to a .cjs name (the package declares
// "type": "module" but ships a UMD bundle), or "" after a test failure.
std::string WebTokenizersLib() {
  const std::string package = test::NpmPackage("@mlc-ai/web-tokenizers@0.1.6");
  if (package.empty()) return "";
  const std::string lib = std::string(MLC_BINARY_DIR) + "/npm/web-tokenizers-0.1.6.cjs";
  if (!std::filesystem::exists(lib)) {
    const std::string tmp = lib + "." + std::to_string(::getpid());
    std::filesystem::copy_file(package + "/lib/index.js", tmp,
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::rename(tmp, lib);
  }
  return lib;
}

std::vector<std::string> CorpusLines() {
  std::vector<std::string> lines;
  std::ifstream in(SourcePath("tests/data/tokenizer_corpus.jsonl"));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) lines.push_back(line);
  }
  // Probes for the small documents' components.
  for (const char* t : {"abc aaaa aaaaa hello HELLO_World ＡＢＣ x!?", "ab abc abcz 123 1234 12a b",
                        "x <L> y <R> z  <LR>  w cat concat cat. DOG dog <L <s></s>", "  <L>start",
                        "ab-cd--ef gh", "-ab--cd-", " a  b ab  ", "a1 12 123 a  b   c", "▁▁ab ▁",
                        "the 123 world's   the\t\tworld  é e\u0301 <|end|>x"}) {
    lines.push_back(Json{{"text", t}}.dump());
  }
  return lines;
}

struct Subject {
  std::string file;
  bool sentencepiece = false;
  const Tokenizer* ours = nullptr;
};

std::vector<int32_t> ProbeIds(const Tokenizer& ours, bool sentencepiece) {
  std::vector<int32_t> ids;
  for (int32_t id : {0, 1, 2, 3, 100, 259, 1000, 32000, 32010, 151643, 151650, 999999}) {
    // web-tokenizers' SentencePiece idToToken reads out of bounds past the vocabulary.
    if (!sentencepiece || static_cast<size_t>(id) < ours.VocabSize()) ids.push_back(id);
  }
  return ids;
}

// Runs the reference (one Node process) over the corpus for each subject and checks our ids,
// decoded text, vocabulary size and id -> token.
void CompareWithReference(const std::string& lib, const std::vector<Subject>& subjects) {
  std::vector<std::string> lines = CorpusLines();
  std::string input;
  for (const Subject& s : subjects) {
    input += Json{{"load", s.file}, {"sentencepiece", s.sentencepiece}}.dump() + "\n";
    for (const std::string& l : lines) input += l + "\n";
    input += Json{{"id_to_token", ProbeIds(*s.ours, s.sentencepiece)}}.dump() + "\n";
  }
  auto r = RunProgram({"timeout", "600", "node", SourcePath("tests/support/web_tokenizers.cjs"), lib}, input);
  ASSERT_EQ(r.exit_code, 0) << "node failed:\n" << r.err;
  std::istringstream out(r.out);
  std::string line;
  for (const Subject& s : subjects) {
    const Tokenizer& ours = *s.ours;
    ASSERT_TRUE(std::getline(out, line)) << "reference output ended early";
    EXPECT_EQ(Json::parse(line)["vocab_size"].get<size_t>(), ours.VocabSize()) << s.file;
    for (const std::string& request : lines) {
      ASSERT_TRUE(std::getline(out, line)) << "reference output ended early for " << s.file;
      Json ref = Json::parse(line);
      std::string text = Json::parse(request)["text"].get<std::string>();
      Ids ids = ours.Encode(text);
      EXPECT_EQ(ids, ref["ids"].get<Ids>()) << s.file << " encoding " << request;
      EXPECT_EQ(ours.Decode(ids), ref["decoded"].get<std::string>()) << s.file << " decoding " << request;
    }
    ASSERT_TRUE(std::getline(out, line));
    Json tokens = Json::parse(line)["tokens"];
    std::vector<int32_t> probe = ProbeIds(ours, s.sentencepiece);
    for (size_t k = 0; k < probe.size(); ++k) {
      EXPECT_EQ(ours.IdToToken(probe[k]), tokens[k].get<std::string>()) << s.file << " id " << probe[k];
    }
  }
}

TEST(WebTokenizersReference, RealHuggingFaceTokenizers) {
  std::string lib = WebTokenizersLib();
  ASSERT_FALSE(lib.empty());
  const Tokenizer* phi3 = Cached(Phi3());
  const Tokenizer* qwen2 = Cached(Qwen2());
  ASSERT_TRUE(phi3 && qwen2);
  CompareWithReference(lib, {Subject{Phi3(), false, phi3}, Subject{Qwen2(), false, qwen2}});
}

TEST(WebTokenizersReference, ComponentDocuments) {
  std::string lib = WebTokenizersLib();
  ASSERT_FALSE(lib.empty());
  std::vector<std::unique_ptr<Tokenizer>> loaded;
  std::vector<Subject> subjects;
  for (const auto& entry : std::filesystem::directory_iterator(SourcePath("tests/data/tokenizer_docs"))) {
    loaded.push_back(LoadJson(entry.path().string()));
    ASSERT_TRUE(loaded.back()) << entry.path();
    subjects.push_back(Subject{entry.path().string(), false, loaded.back().get()});
  }
  ASSERT_GE(subjects.size(), 10u);
  CompareWithReference(lib, subjects);
}

// The byte-level BPE tokenizer.json that `reference-model` writes is one the reference loads and
// agrees with.
TEST(WebTokenizersReference, ReferenceModelTokenizer) {
  std::string lib = WebTokenizersLib();
  ASSERT_FALSE(lib.empty());
  TempDir dir;
  auto r = RunCli({"reference-model", dir.File("pkg"), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string file = dir.File("pkg/tokenizer.json");
  auto tok = LoadJson(file);
  ASSERT_TRUE(tok);
  CompareWithReference(lib, {Subject{file, false, tok.get()}});
}

TEST(WebTokenizersReference, TrainedSentencePiece) {
  std::string lib = WebTokenizersLib();
  ASSERT_FALSE(lib.empty());
  TempDir dir;
  std::string corpus;
  for (const std::string& l : CorpusLines()) corpus += Json::parse(l)["text"].get<std::string>() + "\n";
  std::string input = dir.Write("corpus.txt", corpus);
  std::vector<std::unique_ptr<Tokenizer>> loaded;
  std::vector<Subject> subjects;
  for (const std::string type : {"bpe", "unigram"}) {
    std::string prefix = dir.File("spm_" + type);
    auto r = RunProgram({"timeout", "120", "spm_train", "--input=" + input, "--model_prefix=" + prefix,
                         "--vocab_size=700", "--model_type=" + type, "--character_coverage=0.98",
                         "--byte_fallback=true", "--user_defined_symbols=<|user|>,<|end|>",
                         "--hard_vocab_limit=false", "--num_threads=1", "--minloglevel=2"});
    ASSERT_EQ(r.exit_code, 0) << "spm_train failed:\n" << r.err;
    auto tok = Tokenizer::FromSentencePieceFile(prefix + ".model");
    ASSERT_TRUE(tok.ok()) << FormatErrors(tok.errors());
    EXPECT_EQ((*tok)->Kind(), "sentencepiece");
    Ids user = (*tok)->Encode("<|user|>");  // the dummy-prefix piece, then the user symbol
    ASSERT_FALSE(user.empty());
    EXPECT_EQ(user.back(), (*tok)->TokenToId("<|user|>"));
    subjects.push_back(Subject{prefix + ".model", true, tok->get()});
    loaded.push_back(std::move(*tok));
  }
  CompareWithReference(lib, subjects);
}

}  // namespace
}  // namespace mlc
