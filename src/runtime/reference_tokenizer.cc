// The reference model's tokenizer: a byte-level BPE `tokenizer.json` in Hugging Face's format
// whose ids fit the reference vocabulary: the special tokens of ReferenceTokens first, then the
// 256 byte symbols, then merges trained on a short built-in text until the vocabulary is full.
// It lets `run --messages` drive the reference model through a real tokenizer; the CPU
// families' random-weight packages use it too, so it is part of the core library.
#include <algorithm>
#include <map>
#include <set>

#include "runtime/reference_tokenizer.h"
#include "text/hf_components.h"

namespace mlc::reference {
namespace {

constexpr const char* kSpecialTokens[] = {
    "<pad>", "<bos>", "<eos>", "<start_of_audio>", "<audio_soft_token>", "<end_of_audio>",
    "<start_of_image>", "<image_soft_token>", "<end_of_image>"};

// The training text: what the merges are learned from (any text would do).
constexpr const char* kCorpus =
    "The reference model is a small transformer that runs on the processor of any machine. "
    "It takes text, audio and images, and it answers the user with words that are drawn from "
    "its weights, which were drawn from a seed: the answers mean nothing, but every part of the "
    "path that feeds a real model is there. The user writes a message, the template turns the "
    "messages into a prompt, the tokenizer turns the prompt into token ids, the planner splits "
    "the prompt into chunks, and the model prefills them into its cache before it decodes one "
    "token after another until it reaches a stop token, a stop string or the limit of tokens. "
    "Hello there! How are you today? I am fine, thank you. What is the weather like in the "
    "mountains in winter? It is cold and the snow is deep. Numbers such as 1, 2, 3, 10, 42 "
    "and 2026 are written with digits; code such as int main() { return 0; } has braces.";

// The 256 byte symbols of ByteLevel (GPT-2's table, the one the tokenizer itself decodes with).
std::vector<std::string> ByteSymbols() {
  std::vector<std::string> out;
  for (int b = 0; b < 256; ++b) out.push_back(text::ByteToChar(static_cast<unsigned char>(b)));
  return out;
}

using Word = std::vector<std::string>;

// The corpus as words of byte symbols with their counts; a word keeps the space before it.
std::map<Word, int> CorpusWords(const std::vector<std::string>& symbols) {
  std::map<Word, int> words;
  std::string text = kCorpus;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find(' ', start + 1);
    if (end == std::string::npos) end = text.size();
    Word w;
    for (size_t i = start; i < end; ++i) w.push_back(symbols[static_cast<unsigned char>(text[i])]);
    ++words[w];
    start = end;
  }
  return words;
}

// Learns merges (most frequent adjacent pair first, ties in byte order) until `count` new
// tokens exist or no pair is left; a merge whose result is already a token adds no token.
std::vector<std::pair<std::string, std::string>> LearnMerges(std::map<Word, int> words,
                                                             std::set<std::string> known,
                                                             size_t count) {
  std::vector<std::pair<std::string, std::string>> merges;
  size_t added = 0;
  while (added < count) {
    std::map<std::pair<std::string, std::string>, int> pairs;
    for (const auto& [w, n] : words) {
      for (size_t i = 0; i + 1 < w.size(); ++i) pairs[{w[i], w[i + 1]}] += n;
    }
    if (pairs.empty()) break;
    auto best = pairs.begin();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    auto [a, b] = best->first;
    merges.emplace_back(a, b);
    if (known.insert(a + b).second) ++added;
    std::map<Word, int> merged;
    for (const auto& [w, n] : words) {
      Word out;
      for (size_t i = 0; i < w.size(); ++i) {
        if (i + 1 < w.size() && w[i] == a && w[i + 1] == b) {
          out.push_back(a + b);
          ++i;
        } else {
          out.push_back(w[i]);
        }
      }
      merged[out] += n;
    }
    words = std::move(merged);
  }
  return merges;
}

}  // namespace

std::optional<std::string> TokenizerJson(int64_t vocab_size) {
  const int64_t specials = static_cast<int64_t>(std::size(kSpecialTokens));
  if (vocab_size < specials + 256) return std::nullopt;
  std::vector<std::string> symbols = ByteSymbols();
  OrderedJson vocab = OrderedJson::object();
  OrderedJson added = OrderedJson::array();
  int64_t id = 0;
  for (const char* s : kSpecialTokens) {
    vocab[s] = id;
    added.push_back({{"id", id}, {"content", s}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}});
    ++id;
  }
  std::set<std::string> known(symbols.begin(), symbols.end());
  for (const std::string& s : symbols) vocab[s] = id++;
  auto merges = LearnMerges(CorpusWords(symbols), known,
                            static_cast<size_t>(vocab_size - id));
  OrderedJson merge_list = OrderedJson::array();
  for (const auto& [a, b] : merges) {
    merge_list.push_back(a + " " + b);
    if (!vocab.contains(a + b)) vocab[a + b] = id++;
  }
  OrderedJson byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                            {"trim_offsets", true}, {"use_regex", true}};
  OrderedJson doc = {{"version", "1.0"},
                     {"truncation", nullptr},
                     {"padding", nullptr},
                     {"added_tokens", added},
                     {"normalizer", nullptr},
                     {"pre_tokenizer", byte_level},
                     {"post_processor", nullptr},
                     {"decoder", byte_level},
                     {"model",
                      {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                       {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                       {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab},
                       {"merges", merge_list}}}};
  return doc.dump(1) + "\n";
}

Json ConvTemplateJson() {
  return {{"name", "reference"},
          {"system_template", "{system_message}"},
          {"system_message", ""},
          {"system_prefix_token_ids", {ReferenceTokens::kBos}},
          {"roles", {{"user", "user"}, {"assistant", "assistant"}}},
          {"seps", {"\n"}},
          {"role_content_sep", ": "},
          {"role_empty_sep", ":"},
          {"stop_str", Json::array()},
          {"stop_token_ids", {ReferenceTokens::kEos}}};
}

}  // namespace mlc::reference
