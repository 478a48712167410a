// The chat path end to end on real files: the reference package's byte-level BPE tokenizer, the
// `prompt` command's segments and ids, and `run --messages`: the reply streamed on stdout, follow-up
// turns on one KV cache, and stop strings that end the decode loop at the token that completes them.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "mlc_manifest/conversation.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/reference_model.h"
#include "mlc_manifest/tokenizer.h"
#include "support/sanitizer.h"
#include "support/test_util.h"

namespace mlc {
namespace {

using Ids = std::vector<int32_t>;

// A reference package with audio and image inputs in dir/pkg.
std::string MakePackage(const test::TempDir& dir) {
  std::string pkg = dir.File("pkg");
  auto r = test::RunCli({"reference-model", pkg, "--audio", "--image", "--seed", "5", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return pkg;
}

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& pkg) {
  auto t = Tokenizer::FromDirectory(pkg);
  EXPECT_TRUE(t.ok()) << FormatErrors(t.errors());
  return t.ok() ? std::move(*t) : nullptr;
}

Json RunJson(const std::vector<std::string>& args) {
  auto r = test::RunCli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  auto j = ParseJson(r.out);
  EXPECT_TRUE(j.ok()) << r.out;
  return j.ok() ? *j : Json();
}

TEST(ReferenceTokenizer, FillsTheVocabularyAndRoundTrips) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  auto tok = LoadTokenizer(pkg);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->Kind(), "huggingface");
  EXPECT_EQ(tok->VocabSize(), 512u);
  EXPECT_EQ(tok->TokenToId("<bos>"), ReferenceTokens::kBos);
  EXPECT_EQ(tok->TokenToId("<eos>"), ReferenceTokens::kEos);
  EXPECT_EQ(tok->TokenToId("<image_soft_token>"), ReferenceTokens::kImagePlaceholder);
  for (int32_t id = 0; id < 512; ++id) EXPECT_FALSE(tok->IdToToken(id).empty()) << id;
  const std::string text = "The user writes: héllo wörld 👋\n\tcode() { return 42; }  <eos> done";
  Ids ids = tok->Encode(text);
  for (int32_t id : ids) EXPECT_LT(id, 512);
  EXPECT_EQ(tok->Decode(ids), text);
  EXPECT_NE(std::find(ids.begin(), ids.end(), ReferenceTokens::kEos), ids.end()) << "special tokens in text";
  EXPECT_LT(tok->Encode("the user and the model").size(), std::string("the user and the model").size())
      << "merges were learned";
}

// ---- prompt

TEST(PromptCli, SegmentsIdsAndMedia) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  auto tok = LoadTokenizer(pkg);
  ASSERT_TRUE(tok);
  dir.Write("cat.png", "not read by prompt");
  std::string messages = dir.Write("m.json", R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Describe"},
                                 {"type": "image_url", "image_url": {"url": "cat.png"}},
                                 {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}])");
  std::string program = JoinPath(pkg, kReferenceProgramFile);
  Json j = RunJson({"prompt", pkg, "--messages", messages, "--program", program, "--json"});
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["template"], "reference");
  EXPECT_EQ(j["stop_token_ids"], Json::array({ReferenceTokens::kEos}));
  const Json& segs = j["segments"];
  ASSERT_GE(segs.size(), 4u) << j.dump();
  EXPECT_EQ(segs[0]["system_prefix_token_ids"], Json::array({ReferenceTokens::kBos}));
  int images = 0, audios = 0;
  std::string text;
  for (const Json& s : segs) {
    if (s.contains("text")) {
      EXPECT_EQ(s["token_ids"].get<Ids>(), tok->Encode(s["text"].get<std::string>()));
      text += s["text"].get<std::string>();
    } else if (s.value("media", "") == "image") {
      ++images;
      text += "<image>";
      EXPECT_EQ(s["file"], dir.File("cat.png"));
      EXPECT_EQ(s["prefix_token_ids"], Json::array({ReferenceTokens::kImageStart}));
      EXPECT_EQ(s["placeholder_token_id"], ReferenceTokens::kImagePlaceholder);
      EXPECT_EQ(s["image_rows"], 16) << "(32 / 8)^2 patches";
      EXPECT_EQ(s["part"], "/1/content/1");
    } else if (s.value("media", "") == "audio") {
      ++audios;
      text += "<audio>";
      EXPECT_EQ(s["inline_bytes"], 4) << "raw base64, as OpenAI sends input_audio";
      EXPECT_TRUE(s["audio_rows"].is_null());
    }
  }
  EXPECT_EQ(images, 1);
  EXPECT_EQ(audios, 1);
  EXPECT_EQ(text, j["prompt"].get<std::string>());
  EXPECT_EQ(text.rfind("Be brief.", 0), 0u) << text;
  EXPECT_NE(text.find("user: Describe<image><audio>\nassistant:"), std::string::npos) << text;

  auto human = test::RunCli({"prompt", pkg, "--messages", messages, "--program", program});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("image input \"image\": prefix [6], 16 rows of placeholder 7"), std::string::npos)
      << human.out;
}

TEST(PromptCli, RejectsBadMessagesWithTheirPointer) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  std::string program = JoinPath(pkg, kReferenceProgramFile);
  std::string bad = dir.Write("bad.json", R"([{"role": "user", "content": [{"type": "video", "video": {}}]}])");
  auto r = test::RunCli({"prompt", pkg, "--messages", bad, "--program", program, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("/0/content/0"), std::string::npos) << r.out;
  std::string last = dir.Write("last.json", R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])");
  r = test::RunCli({"prompt", pkg, "--messages", last, "--program", program, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = test::RunCli({"prompt", pkg, "--messages", dir.File("missing.json"), "--program", program});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
}

// Issue 11.11: `prompt` on a 10 MB message in a child limited to 512 MB of address space (the
// old code took ~61x the message in RSS: 1.28 GB for 20 MB), and its peak RSS above a one-line
// message's is at most 6x the message. Not under sanitizers (their shadow memory is not the
// program's).
struct Peak {
  int exit_code = -1;
  long max_rss_kb = 0;
  std::string out;
};

Peak RunPromptLimited(const std::vector<std::string>& args, const std::string& out_file,
                      rlim_t address_space) {
  std::vector<std::string> argv_s = {MLC_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& x : argv_s) argv.push_back(x.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    rlimit lim{address_space, address_space};
    ::setrlimit(RLIMIT_AS, &lim);
    int o = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  Peak p;
  int status = 0;
  rusage usage{};
  if (::wait4(pid, &status, 0, &usage) == pid && WIFEXITED(status)) p.exit_code = WEXITSTATUS(status);
  p.max_rss_kb = usage.ru_maxrss;
  p.out = test::ReadText(out_file);
  return p;
}

TEST(PromptCli, LongMessageInBoundedMemory) {
  if (test::kSanitized) GTEST_SKIP() << "address-space limits do not apply under sanitizers";
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  std::string program = JoinPath(pkg, kReferenceProgramFile);
  const char* words[] = {"the ", "quick ", "brown ", "fox, ", "caf\xC3\xA9 ", "42 ", "\"quoted\" ", "line\n"};
  std::string text;
  const size_t kSize = 10u << 20;
  text.reserve(kSize + 16);
  for (size_t i = 0; text.size() < kSize; i = i * 7 + 3) text += words[i % 8];
  Json doc = {{"messages", {{{"role", "user"}, {"content", text}}}}};
  std::string big = dir.Write("big.json", doc.dump());
  std::string small = dir.Write("small.json", R"({"messages": [{"role": "user", "content": "hi"}]})");
  const rlim_t kLimit = rlim_t{512} << 20;
  Peak base = RunPromptLimited({"prompt", pkg, "--program", program, "--messages", small, "--json"},
                               dir.File("small.out"), kLimit);
  ASSERT_EQ(base.exit_code, 0) << base.out;
  Peak p = RunPromptLimited({"prompt", pkg, "--program", program, "--messages", big, "--json"},
                            dir.File("big.out"), kLimit);
  ASSERT_EQ(p.exit_code, 0) << p.out.substr(0, 400);
  const double ratio = static_cast<double>(p.max_rss_kb - base.max_rss_kb) * 1024.0 /
                       static_cast<double>(std::filesystem::file_size(big));
  EXPECT_LE(ratio, 6.0) << "peak RSS " << p.max_rss_kb << " kB, one-line message " << base.max_rss_kb
                        << " kB";
  // The streamed answer is the same JSON: the prompt text and every id.
  JsonLimits large;
  large.max_bytes = uint64_t{1} << 30;
  auto j = ParseJson(p.out, large);
  ASSERT_TRUE(j.ok()) << p.out.substr(0, 400);
  EXPECT_NE((*j)["prompt"].get<std::string>().find(text), std::string::npos);
  auto tok = LoadTokenizer(pkg);
  ASSERT_TRUE(tok);
  std::string joined;
  for (const Json& s : (*j)["segments"]) {
    if (!s.contains("text")) continue;
    joined += s["text"].get<std::string>();
    if (s["text"].get<std::string>().find(text) != std::string::npos) {
      EXPECT_EQ(s["token_ids"].get<Ids>(), tok->Encode(s["text"].get<std::string>()));
    }
  }
  EXPECT_EQ(joined, (*j)["prompt"].get<std::string>());
}

// ---- run --messages

TEST(RunMessagesCli, FollowUpTurnsShareTheCache) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  auto tok = LoadTokenizer(pkg);
  ASSERT_TRUE(tok);
  std::string m1 = dir.Write("m1.json", R"({"messages": [{"role": "user", "content": "Hello there!"}]})");
  std::string m2 = dir.Write("m2.json", R"([{"role": "user", "content": "How are you today?"}])");
  Json j = RunJson({"run", pkg, "--messages", m1, "--messages", m2, "--max-tokens", "6",
                    "--temperature", "0", "--json"});
  ASSERT_EQ(j["turns"].size(), 2u) << j.dump();
  const Json& t0 = j["turns"][0];
  const Json& t1 = j["turns"][1];
  Ids first = tok->Encode("user: Hello there!\nassistant:");
  EXPECT_EQ(t0["prompt_length"], 1 + first.size()) << "bos, then the first round";
  EXPECT_EQ(t0["kv_length_before"], 0);
  Ids tokens0 = t0["tokens"].get<Ids>();
  EXPECT_EQ(t0["text"], tok->Decode(tokens0)) << "no stop strings: the whole reply";
  // The follow-up continues the cache: after the first prompt and the reply (a reply cut by the
  // limit feeds its last token at the start of the next turn).
  EXPECT_EQ(t1["kv_length_before"].get<int64_t>(),
            t0["prompt_length"].get<int64_t>() + static_cast<int64_t>(tokens0.size()) -
                (t0["stop_reason"] == "length" ? 1 : 0));
  EXPECT_GT(t1["prompt_length"].get<int64_t>(), 0);
  EXPECT_EQ(j["kv_length"].get<int64_t>(), t1["kv_length_before"].get<int64_t>() +
                                               t1["prompt_length"].get<int64_t>() +
                                               static_cast<int64_t>(t1["tokens"].size()) -
                                               (t1["stop_reason"] == "length" ? 1 : 0));

  // Without --json, stdout is just the replies, one per line; the report goes to stderr.
  auto human = test::RunCli({"run", pkg, "--messages", m1, "--messages", m2, "--max-tokens", "6",
                             "--temperature", "0"});
  ASSERT_EQ(human.exit_code, 0) << human.err;
  EXPECT_EQ(human.out, t0["text"].get<std::string>() + "\n" + t1["text"].get<std::string>() + "\n");
  EXPECT_NE(human.err.find("turn 1: prompt"), std::string::npos) << human.err;
}

TEST(RunMessagesCli, StopStringEndsTheDecodeLoop) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  auto tok = LoadTokenizer(pkg);
  ASSERT_TRUE(tok);
  std::string m = dir.Write("m.json", R"([{"role": "user", "content": "What is the weather like?"}])");
  const std::vector<std::string> args = {"run", pkg, "--messages", m, "--max-tokens", "24",
                                         "--temperature", "0", "--json"};
  Json free_run = RunJson(args);
  Ids tokens = free_run["turns"][0]["tokens"].get<Ids>();
  ASSERT_EQ(tokens.size(), 24u) << free_run.dump();
  // A stop string: the text of one token of the reply (plain ASCII) that first appears there.
  std::string stop, before;
  size_t stop_index = 0;
  for (size_t k = 1; k < tokens.size() && stop.empty(); ++k) {
    std::string head = tok->Decode(std::span<const int32_t>(tokens).first(k));
    std::string with = tok->Decode(std::span<const int32_t>(tokens).first(k + 1));
    if (with.size() <= head.size() || with.compare(0, head.size(), head) != 0) continue;
    std::string piece = with.substr(head.size());
    bool ascii = std::all_of(piece.begin(), piece.end(), [](char c) { return c > ' ' && c < 127; });
    if (ascii && with.find(piece) == head.size()) {
      stop = piece;
      before = head;
      stop_index = k;
    }
  }
  ASSERT_FALSE(stop.empty()) << "no usable stop string in " << tok->Decode(tokens);
  Json config = *ReadJsonFile(JoinPath(pkg, "mlc-chat-config.json"));
  config["conv_template"]["stop_str"] = Json::array({stop});
  ASSERT_TRUE(WriteFileAtomic(JoinPath(pkg, "mlc-chat-config.json"), config.dump(2), true).ok());

  Json stopped = RunJson(args);
  const Json& turn = stopped["turns"][0];
  EXPECT_EQ(turn["stop_reason"], "stop_str");
  EXPECT_EQ(turn["text"], before) << "the text before the stop string " << Json(stop).dump();
  EXPECT_EQ(turn["tokens"].get<Ids>(), Ids(tokens.begin(), tokens.begin() + stop_index + 1))
      << "decoding stops at the token that completes the stop string";
}

// Issue 11.9: a context overflow caused by a long message points at that message's content in
// the messages document, not at the template's system_prefix_token_ids.
TEST(RunMessagesCli, ContextOverflowNamesTheLongMessage) {
  test::TempDir dir;
  std::string pkg = dir.File("pkg");
  auto made = test::RunCli({"reference-model", pkg, "--context-window", "64", "--json"});
  ASSERT_EQ(made.exit_code, 0) << made.err << made.out;
  std::string long_text;
  for (int i = 0; i < 100; ++i) long_text += "word" + std::to_string(i) + " ";
  Json doc = {{"messages",
               {{{"role", "user"}, {"content", "Hi"}},
                {{"role", "assistant"}, {"content", "Hello"}},
                {{"role", "user"}, {"content", "Read this"}},
                {{"role", "user"}, {"content", long_text}}}}};
  std::string m = dir.Write("m.json", doc.dump());
  auto r = test::RunCli({"run", pkg, "--messages", m, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  auto j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  ASSERT_FALSE((*j)["errors"].empty()) << r.out;
  EXPECT_EQ((*j)["errors"][0]["path"], "/messages/3/content") << r.out;
  // As a content part, the pointer names the part.
  doc["messages"][3]["content"] = Json::array({{{"type", "text"}, {"text", long_text}}});
  m = dir.Write("m.json", doc.dump());
  r = test::RunCli({"run", pkg, "--messages", m, "--json"});
  j = ParseJson(r.out);
  ASSERT_TRUE(j.ok()) << r.out;
  EXPECT_EQ((*j)["errors"][0]["path"], "/messages/3/content/0") << r.out;
}

// Issue 12.5: run names a Git LFS pointer in place of a shard and the command that fetches it.
TEST(RunMessagesCli, GitLfsPointerShardIsNamed) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  std::string shard;
  for (const auto& e : std::filesystem::directory_iterator(pkg)) {
    if (e.path().filename().string().rfind("params_shard_", 0) == 0) shard = e.path().string();
  }
  ASSERT_FALSE(shard.empty());
  ASSERT_TRUE(WriteFileAtomic(shard, "version https://git-lfs.github.com/spec/v1\n"
                                     "oid sha256:0000000000000000000000000000000000000000000000000000000000000000\n"
                                     "size 65536\n", true).ok());
  std::string ok = dir.Write("ok.json", R"([{"role": "user", "content": "hi"}])");
  auto r = test::RunCli({"run", pkg, "--messages", ok, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("a Git LFS pointer, not the data"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("`git lfs pull` inside " + pkg), std::string::npos) << r.out;
}

// Issue 12.7: control bytes of a reply are escaped on a terminal, raw to a pipe.
TEST(EscapeForTerminal, ControlBytesBecomeEscapes) {
  EXPECT_EQ(EscapeForTerminal("plain\ttext\n"), "plain\ttext\n");
  EXPECT_EQ(EscapeForTerminal("\x1b]0;owned\x07\x1b[2J"), "\\x1b]0;owned\\x07\\x1b[2J");
  EXPECT_EQ(EscapeForTerminal(std::string("a\0b\x7f", 4)), "a\\x00b\\x7f");
  EXPECT_EQ(EscapeForTerminal("\xC2\x9B" "31m"), "\\xc2\\x9b31m");  // C1 CSI, UTF-8 encoded
  EXPECT_EQ(EscapeForTerminal("caf\xC3\xA9 \xC2\xA0\xE2\x82\xAC"), "caf\xC3\xA9 \xC2\xA0\xE2\x82\xAC");
}

// Issue 12.7: run --help shows every option's default.
TEST(RunMessagesCli, HelpShowsDefaults) {
  auto r = test::RunCli({"run", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* line : {"--max-tokens INT=16", "--top-k INT=0", "--seed UINT=0",
                           "--top-p FLOAT=1"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << " in\n" << r.out;
  }
  auto plan = test::RunCli({"plan", "--help"});
  EXPECT_NE(plan.out.find("--task TEXT=chat.completions"), std::string::npos) << plan.out;
  EXPECT_NE(plan.out.find("--kv-length INT=0"), std::string::npos) << plan.out;
}

TEST(RunMessagesCli, ErrorsAndUsage) {
  test::TempDir dir;
  std::string pkg = MakePackage(dir);
  std::string m = dir.Write("m.json", R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "nope.png"}}]}])");
  auto r = test::RunCli({"run", pkg, "--messages", m, "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("nope.png"), std::string::npos) << r.out;
  std::string req = dir.Write("req.json", R"([{"tokens": [1, 2]}])");
  r = test::RunCli({"run", pkg, "--messages", m, "--request", req});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  std::filesystem::remove(JoinPath(pkg, "tokenizer.json"));
  std::string ok = dir.Write("ok.json", R"([{"role": "user", "content": "hi"}])");
  r = test::RunCli({"run", pkg, "--messages", ok});
  EXPECT_EQ(r.exit_code, 3) << "no tokenizer: " << r.out << r.err;
}

}  // namespace
}  // namespace mlc
