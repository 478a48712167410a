// `mlc-manifest tokenize`: encode text with a package's tokenizer as WebLLM would (no special
// tokens added) and decode it back (none skipped). `--jsonl` streams {"text": ...} lines from
// stdin to {"ids": [...], "decoded": ...} lines; `--text` handles one string.
#include <iostream>
#include <string>

#include "cli/command.h"
#include "mlc_manifest/fs.h"
#include "mlc_manifest/tokenizer.h"

namespace mlc::cli {
namespace {

struct Options {
  std::string dir;
  std::string tokenizer_file;
  std::string text;
  bool has_text = false;
  bool jsonl = false;
  bool json = false;
};

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<std::unique_ptr<Tokenizer>> Load(const Options& o) {
  if (!o.tokenizer_file.empty()) {
    if (EndsWith(o.tokenizer_file, ".model")) return Tokenizer::FromSentencePieceFile(o.tokenizer_file);
    return Tokenizer::FromJsonFile(o.tokenizer_file);
  }
  return Tokenizer::FromDirectory(o.dir);
}

OrderedJson Encoded(const Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids = tok.Encode(text);
  return OrderedJson{{"ids", ids}, {"decoded", tok.Decode(ids)}};
}

// Each stdin line {"text": T} -> {"ids": [...], "decoded": ...}; a bad line stops with exit 1
// (with `json`, its failure is the stream's last line: one {"ok": false, "errors": [...]} object).
int RunJsonl(const Tokenizer& tok, bool json) {
  std::string line;
  size_t number = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto doc = ParseJson(line);
    std::string where = "stdin line " + std::to_string(number);
    if (!doc.ok()) return ReportFailure(doc.errors(), json, where);
    auto text = doc->is_object() ? doc->find("text") : doc->end();
    if (!doc->is_object() || text == doc->end() || !text->is_string() || doc->size() != 1) {
      return ReportFailure({Invalid("", "expected {\"text\": \"...\"}")}, json, where);
    }
    PrintJson(Encoded(tok, text->get_ref<const std::string&>()));
  }
  std::cout.flush();
  return std::cout.good() ? kExitOk : kExitIo;
}

int Run(const Options& o) {
  if (o.dir.empty() == o.tokenizer_file.empty() || o.jsonl == o.has_text) {
    return ReportFailure({Error{ErrorCode::kUsage, "",
                                "give DIR or --tokenizer FILE, and --jsonl or --text TEXT"}},
                         o.json);
  }
  if (!o.dir.empty()) {
    if (Status s = CheckFolder(o.dir); !s) return ReportFailure(s.errors(), o.json);
  }
  auto tok = Load(o);
  if (!tok.ok()) return ReportFailure(tok.errors(), o.json);
  if (o.jsonl) return RunJsonl(**tok, o.json);
  OrderedJson result = Encoded(**tok, o.text);
  if (o.json) {
    OrderedJson out{{"ok", true}, {"kind", std::string((*tok)->Kind())}};
    out["ids"] = result["ids"];
    out["decoded"] = result["decoded"];
    PrintJson(out);
  } else {
    std::cout << "ids:";
    for (const auto& id : result["ids"]) std::cout << " " << id.get<int32_t>();
    std::cout << "\ndecoded: " << result["decoded"].get<std::string>() << "\n";
  }
  return kExitOk;
}

const Registration kTokenize(700, "tokenize",
                             "Encode text with a package's tokenizer (tokenizer.json, else tokenizer.model)",
                             [](CLI::App* cmd) {
  auto o = std::make_shared<Options>();
  cmd->add_option("dir", o->dir, "Model package folder holding the tokenizer");
  cmd->add_option("--tokenizer", o->tokenizer_file,
                  "A tokenizer file instead of a folder (*.model: SentencePiece, else tokenizer.json)");
  cmd->add_flag("--jsonl", o->jsonl, "Read {\"text\": ...} lines on stdin, write {\"ids\", \"decoded\"} lines");
  cmd->add_option_function<std::string>(
      "--text", [o](const std::string& t) { o->text = t; o->has_text = true; }, "One text to encode");
  cmd->add_flag("--json", o->json, "With --text: one JSON object on stdout; with --jsonl: a failure as one JSON line");
  return [o]() { return Run(*o); };
});

}  // namespace
}  // namespace mlc::cli
