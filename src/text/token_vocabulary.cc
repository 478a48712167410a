// A tokenizer's vocabulary as the bytes each token adds to decoded text, in a trie, and the mask
// a JSON grammar state allows over it: the trie is walked depth first, each edge's byte fed to a
// copy of the parent's state, so a refused prefix cuts off every token below it.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mlc_manifest/json_grammar.h"
#include "text/hf_components.h"
#include "text/token_pieces.h"
#include "text/tokenizers_internal.h"
#include "text/unicode.h"

namespace mlc {

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tokenizer,
                                                                     std::span<const std::string> markers) {
  const text::TokenPieces pieces(tokenizer);
  std::vector<std::string> bytes(tokenizer.VocabSize());
  for (size_t id = 0; id < bytes.size(); ++id) {
    const int32_t token = static_cast<int32_t>(id);
    if (text::IsSpecialToken(tokenizer, token)) {
      const std::string text = tokenizer.IdToToken(token);
      if (std::find(markers.begin(), markers.end(), text) != markers.end()) bytes[id] = text;
      continue;
    }
    // An unknown piece of a character: never allowed.
    bytes[id] = pieces.Bytes(token).value_or(std::string());
  }
  return FromBytes(std::move(bytes));
}

std::shared_ptr<const TokenVocabulary> TokenVocabulary::FromBytes(std::vector<std::string> bytes) {
  auto v = std::make_shared<TokenVocabulary>();
  v->bytes_ = std::move(bytes);
  v->BuildTrie();
  v->FindPlainText();
  return v;
}

void TokenVocabulary::BuildTrie() {
  // Inserted in byte order, each string's new child is its node's last one.
  std::vector<int32_t> order(bytes_.size());
  std::iota(order.begin(), order.end(), 0);
  std::erase_if(order, [&](int32_t id) { return bytes_[static_cast<size_t>(id)].empty(); });
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return bytes_[static_cast<size_t>(a)] < bytes_[static_cast<size_t>(b)];
  });
  trie_.assign(1, TrieNode{});
  std::vector<uint32_t> last_child(1, 0);
  trie_tokens_ = order;
  for (size_t k = 0; k < order.size(); ++k) {
    const std::string& s = bytes_[static_cast<size_t>(order[k])];
    uint32_t node = 0;
    for (char ch : s) {
      const uint8_t c = static_cast<uint8_t>(ch);
      uint32_t child = last_child[node];
      if (child == 0 || trie_[child].byte != c) {
        TrieNode n;
        n.byte = c;
        n.tokens_begin = n.tokens_end = 0;
        trie_.push_back(n);
        last_child.push_back(0);
        uint32_t added = static_cast<uint32_t>(trie_.size() - 1);
        if (child == 0) {
          trie_[node].first_child = added;
        } else {
          trie_[child].next_sibling = added;
        }
        last_child[node] = added;
        child = added;
      }
      node = child;
    }
    if (trie_[node].tokens_end == 0) trie_[node].tokens_begin = static_cast<uint32_t>(k);
    trie_[node].tokens_end = static_cast<uint32_t>(k + 1);
  }
}

void TokenVocabulary::FindPlainText() {
  plain_chars_.assign(bytes_.size(), -1);
  not_plain_.clear();
  for (size_t id = 0; id < bytes_.size(); ++id) {
    const std::string& b = bytes_[id];
    if (b.empty()) continue;
    int32_t chars = 0;
    bool plain = text::IsValidUtf8(b);
    for (size_t i = 0; plain && i < b.size(); ++i) {
      const uint8_t c = static_cast<uint8_t>(b[i]);
      plain = c >= 0x20 && c != '"' && c != '\\' && c != '<';  // '<' may begin the Gemma dialect's closing mark
      chars += (c & 0xc0) != 0x80;
    }
    if (plain) {
      plain_chars_[id] = chars;
    } else {
      not_plain_.push_back(static_cast<int32_t>(id));
    }
  }
}

void TokenVocabulary::Allowed(const JsonGrammar& grammar, const JsonGrammar::State& state,
                              std::vector<uint8_t>& allowed) const {
  allowed.assign(bytes_.size(), 0);
  if (int64_t room = grammar.StringRoom(state); room >= 0) {
    // Inside a string nearly every token is allowed: plain text by its length, the rest fed.
    for (size_t id = 0; id < bytes_.size(); ++id) {
      allowed[id] = plain_chars_[id] >= 0 && plain_chars_[id] <= room;
    }
    JsonGrammar::State copy;
    for (int32_t id : not_plain_) {
      copy = state;
      allowed[static_cast<size_t>(id)] = grammar.Feed(copy, bytes_[static_cast<size_t>(id)]);
    }
    return;
  }
  std::vector<JsonGrammar::State> states(1, state);  // states[d]: after d bytes of the path
  struct Visit {
    uint32_t node;
    size_t depth;
  };
  std::vector<Visit> todo;
  for (uint32_t c = trie_[0].first_child; c; c = trie_[c].next_sibling) todo.push_back({c, 1});
  while (!todo.empty()) {
    Visit v = todo.back();
    todo.pop_back();
    if (states.size() <= v.depth) states.resize(v.depth + 1);
    states[v.depth] = states[v.depth - 1];
    if (!grammar.Step(states[v.depth], trie_[v.node].byte)) continue;
    const TrieNode& n = trie_[v.node];
    for (uint32_t k = n.tokens_begin; k < n.tokens_end; ++k) {
      allowed[static_cast<size_t>(trie_tokens_[k])] = 1;
    }
    for (uint32_t c = n.first_child; c; c = trie_[c].next_sibling) todo.push_back({c, v.depth + 1});
  }
}

GrammarMatcher::GrammarMatcher(JsonConstraint constraint)
    : constraint_(std::move(constraint)), state_(constraint_.grammar->Start()) {}

size_t GrammarMatcher::Constrain(std::span<float> logits, std::span<const int32_t> stop_ids, bool full) {
  if (!full && InFreeText()) return logits.size();
  constraint_.vocabulary->Allowed(*constraint_.grammar, state_, allowed_);
  allowed_.resize(std::max(allowed_.size(), logits.size()), 0);
  // Stop ids (which may lie past the tokenizer's vocabulary) only once the value is complete.
  const bool done = Accepting();
  for (int32_t id : stop_ids) {
    if (id >= 0 && static_cast<size_t>(id) < allowed_.size()) allowed_[static_cast<size_t>(id)] = done;
  }
  size_t kept = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (allowed_[i]) {
      ++kept;
    } else {
      logits[i] = -std::numeric_limits<float>::infinity();
    }
  }
  return kept;
}

bool GrammarMatcher::Advance(int32_t token) {
  if (token < 0 || static_cast<size_t>(token) >= constraint_.vocabulary->size()) return false;
  const std::string& b = constraint_.vocabulary->bytes(token);
  if (b.empty() && InFreeText()) return true;
  JsonGrammar::State next = state_;
  if (b.empty() || !constraint_.grammar->Feed(next, b)) return false;
  state_ = std::move(next);
  return true;
}

}  // namespace mlc
