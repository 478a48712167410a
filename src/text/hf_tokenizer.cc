// A Hugging Face tokenizer.json as web-tokenizers runs it: added tokens cut out of the raw text
// (then, after normalization, the normalized ones), the normalizer, the pre-tokenizer and the BPE
// model per piece; decoding maps ids back to tokens and runs the decoder chain. The
// post_processor only adds special tokens, which this encoding never does, so it is not read;
// truncation and padding change ids and must be null.
#include <algorithm>
#include <unordered_set>

#include "mlc_manifest/tokenizer.h"
#include "text/bpe.h"
#include "text/hf_components.h"
#include "text/tokenizers_internal.h"
#include "text/unicode.h"

namespace mlc::text {
namespace {

struct AddedToken {
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
  bool operator==(const AddedToken&) const = default;
};

char32_t LastCodePoint(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  size_t len = 0;
  return DecodeUtf8(s, i, &len);
}

// Leftmost-longest matching of added-token strings (a byte trie).
class TokenMatcher {
 public:
  struct Segment {
    int32_t id;  // -1: plain text
    size_t begin, end;
  };

  void Add(const std::string& pattern, int32_t id) {
    if (pattern.empty()) return;
    int node = 0;
    for (char c : pattern) {
      unsigned char b = static_cast<unsigned char>(c);
      auto& kids = nodes_[node].children;
      auto it = std::find_if(kids.begin(), kids.end(), [b](auto& k) { return k.first == b; });
      if (it == kids.end()) {
        nodes_.push_back(Node{});
        nodes_[node].children.emplace_back(b, static_cast<int>(nodes_.size() - 1));
        node = static_cast<int>(nodes_.size() - 1);
      } else {
        node = it->second;
      }
    }
    if (nodes_[node].id < 0) nodes_[node].id = id;
    first_byte_[static_cast<unsigned char>(pattern[0])] = true;
  }

  // Splits s into added tokens and text, honouring single_word, lstrip and rstrip.
  std::vector<Segment> Split(std::string_view s,
                             const std::unordered_map<int32_t, AddedToken>& tokens) const {
    std::vector<Segment> out;
    size_t start_offset = 0, pos = 0;
    while (pos < s.size()) {
      size_t mstart = 0, mend = 0;
      int32_t id = -1;
      if (!NextMatch(s, pos, &mstart, &mend, &id)) break;
      pos = mend;
      const AddedToken& tok = tokens.at(id);
      if (tok.single_word) {
        bool start_space = mstart == 0 || !IsWordChar(LastCodePoint(s.substr(0, mstart)));
        size_t len = 0;
        bool stop_space = mend == s.size() || !IsWordChar(DecodeUtf8(s, mend, &len));
        if (!start_space || !stop_space) continue;
      }
      if (tok.lstrip) {
        size_t b = mstart;
        while (b > 0) {
          size_t k = b - 1;
          while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
          size_t len = 0;
          if (!IsWhitespace(DecodeUtf8(s, k, &len))) break;
          b = k;
        }
        mstart = std::max(b, start_offset);
      }
      if (tok.rstrip) {
        size_t len = 0;
        while (mend < s.size() && IsWhitespace(DecodeUtf8(s, mend, &len))) mend += len;
      }
      if (start_offset < mstart) out.push_back(Segment{-1, start_offset, mstart});
      out.push_back(Segment{id, mstart, mend});
      start_offset = mend;  // the search itself goes on after the unstripped match
    }
    if (start_offset < s.size() || s.empty()) out.push_back(Segment{-1, start_offset, s.size()});
    return out;
  }

  bool empty() const { return nodes_.size() == 1; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int>> children;
    int32_t id = -1;
  };

  bool NextMatch(std::string_view s, size_t from, size_t* b, size_t* e, int32_t* id) const {
    for (size_t i = from; i < s.size(); ++i) {
      if (!first_byte_[static_cast<unsigned char>(s[i])]) continue;
      int node = 0;
      size_t best_end = 0;
      int32_t best = -1;
      for (size_t k = i; k < s.size(); ++k) {
        unsigned char c = static_cast<unsigned char>(s[k]);
        const auto& kids = nodes_[node].children;
        auto it = std::find_if(kids.begin(), kids.end(), [c](auto& p) { return p.first == c; });
        if (it == kids.end()) break;
        node = it->second;
        if (nodes_[node].id >= 0) {
          best = nodes_[node].id;
          best_end = k + 1;
        }
      }
      if (best >= 0) {
        *b = i;
        *e = best_end;
        *id = best;
        return true;
      }
    }
    return false;
  }

  std::vector<Node> nodes_{Node{}};
  bool first_byte_[256] = {};
};

class HfTokenizer : public Tokenizer {
 public:
  static Result<std::unique_ptr<Tokenizer>> Parse(const Json& doc);

  std::vector<int32_t> Encode(std::string_view text) const override;
  void EncodeEach(std::string_view text, const std::function<void(int32_t)>& emit) const override;
  std::string Decode(std::span<const int32_t> ids) const override;
  // Whether id is an added token marked special.
  bool IsSpecial(int32_t id) const {
    auto a = added_by_id_.find(id);
    return a != added_by_id_.end() && a->second.special;
  }
  std::optional<int32_t> TokenToId(std::string_view token) const override;
  std::string IdToToken(int32_t id) const override;
  size_t VocabSize() const override;
  std::string_view Kind() const override { return "huggingface"; }

 private:
  Status ParseAddedTokens(const Json& doc);
  void AddToken(const AddedToken& token);
  void BuildMatchers();
  void EncodeText(std::string_view text, bool at_start,
                  const std::function<void(int32_t)>& emit) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Decoder> decoder_;
  // The added vocabulary, as Hugging Face builds it from "added_tokens".
  std::unordered_map<std::string, int32_t> added_ids_;
  std::unordered_map<int32_t, AddedToken> added_by_id_;
  std::vector<AddedToken> special_order_, plain_order_;
  std::unordered_set<std::string> special_set_;
  TokenMatcher raw_matcher_, normalized_matcher_;
};

Status HfTokenizer::ParseAddedTokens(const Json& doc) {
  auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return Invalid("/added_tokens", "expected an array of added tokens");
  Errors errors;
  for (size_t k = 0; k < it->size(); ++k) {
    const Json& t = (*it)[k];
    std::string path = PointerAppend("/added_tokens", k);
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) {
      AddError(errors, Invalid(path, "expected an object with a string \"content\""));
      continue;
    }
    AddedToken tok;
    tok.content = t["content"].get<std::string>();
    bool ok = true;
    auto flag = [&](const char* key, bool* out) {
      auto f = t.find(key);
      if (f == t.end() || f->is_null()) return;
      if (!f->is_boolean()) {
        AddError(errors, Invalid(PointerAppend(path, key), "expected true or false"));
        ok = false;
        return;
      }
      *out = f->get<bool>();
    };
    flag("single_word", &tok.single_word);
    flag("lstrip", &tok.lstrip);
    flag("rstrip", &tok.rstrip);
    flag("normalized", &tok.normalized);
    flag("special", &tok.special);
    if (ok) AddToken(tok);
  }
  if (!errors.empty()) return errors;
  BuildMatchers();
  return Status::Ok();
}

// Hugging Face's AddedVocabulary::add_tokens for one token: the id is the one already given to
// this content, else the model's, else the next free id after the model vocabulary.
void HfTokenizer::AddToken(const AddedToken& token) {
  if (token.special && !token.content.empty() && special_set_.insert(token.content).second) {
    special_order_.push_back(token);
  }
  if (token.content.empty()) return;
  for (const auto& [id, existing] : added_by_id_) {
    if (existing == token) return;
  }
  int32_t id = 0;
  if (auto a = added_ids_.find(token.content); a != added_ids_.end()) {
    id = a->second;
  } else if (auto m = model_->TokenToId(token.content)) {
    id = *m;
  } else {
    auto vocab_size = static_cast<int64_t>(model_->vocab().size());
    int64_t max = -1;
    for (const auto& [content, existing_id] : added_ids_) max = std::max<int64_t>(max, existing_id);
    int64_t next = max < 0 ? vocab_size : (max >= vocab_size || vocab_size == 0 ? max + 1 : vocab_size);
    id = static_cast<int32_t>(std::min<int64_t>(next, INT32_MAX));
  }
  added_ids_[token.content] = id;
  added_by_id_[id] = token;
  if (!special_set_.count(token.content)) plain_order_.push_back(token);
}

void HfTokenizer::BuildMatchers() {
  std::vector<const AddedToken*> order;
  for (const AddedToken& t : special_order_) order.push_back(&t);
  for (const AddedToken& t : plain_order_) order.push_back(&t);
  for (const AddedToken* t : order) {
    int32_t id = added_ids_.at(t->content);
    if (t->normalized) {
      normalized_matcher_.Add(normalizer_ ? normalizer_->Normalize(t->content) : t->content, id);
    } else {
      raw_matcher_.Add(t->content, id);
    }
  }
}

Result<std::unique_ptr<Tokenizer>> HfTokenizer::Parse(const Json& doc) {
  if (!doc.is_object()) return Invalid("", "expected a tokenizer.json object");
  for (const char* key : {"truncation", "padding"}) {
    auto it = doc.find(key);
    if (it != doc.end() && !it->is_null()) {
      return Error{ErrorCode::kUnsupported, PointerAppend("", key),
                   std::string("expected null: ") + key + " would change the encoding"};
    }
  }
  auto tok = std::unique_ptr<HfTokenizer>(new HfTokenizer());
  auto model = doc.find("model");
  if (model == doc.end() || !model->is_object()) return Invalid("/model", "expected the model object");
  auto type = model->find("type");
  if (type == model->end() || !type->is_string()) {
    return Invalid("/model/type", "expected the model's type as a string");
  }
  if (*type != "BPE") {
    return Error{ErrorCode::kUnsupported, "/model/type",
                 "unsupported model \"" + type->get<std::string>() + "\"; expected BPE"};
  }
  Errors errors;
  auto collect = [&errors](const Errors& e) { errors.insert(errors.end(), e.begin(), e.end()); };
  auto bpe = BpeModel::Parse(*model, "/model");
  if (bpe.ok()) tok->model_ = std::move(*bpe); else collect(bpe.errors());
  static const Json kNull;
  auto member = [&doc](const char* key) -> const Json& {
    auto it = doc.find(key);
    return it == doc.end() ? kNull : *it;
  };
  auto normalizer = ParseNormalizer(member("normalizer"), "/normalizer");
  if (normalizer.ok()) tok->normalizer_ = std::move(*normalizer); else collect(normalizer.errors());
  auto pre = ParsePreTokenizer(member("pre_tokenizer"), "/pre_tokenizer");
  if (pre.ok()) tok->pre_tokenizer_ = std::move(*pre); else collect(pre.errors());
  auto decoder = ParseDecoder(member("decoder"), "/decoder");
  if (decoder.ok()) tok->decoder_ = std::move(*decoder); else collect(decoder.errors());
  if (!errors.empty()) return errors;
  Status added = tok->ParseAddedTokens(doc);
  if (!added.ok()) return added.errors();
  return std::unique_ptr<Tokenizer>(std::move(tok));
}

void HfTokenizer::EncodeText(std::string_view text, bool at_start,
                             const std::function<void(int32_t)>& emit) const {
  // Without a normalizer the text is used in place (a long text is not copied once more).
  std::string normalized_text = normalizer_ ? normalizer_->Normalize(std::string(text)) : std::string();
  std::string_view normalized = normalizer_ ? std::string_view(normalized_text) : text;
  std::vector<int32_t> word;  // one piece's ids
  auto encode = [&](const Piece& p) {
    word.clear();
    model_->Tokenize(p.text, &word);
    for (int32_t id : word) emit(id);
  };
  for (const TokenMatcher::Segment& seg : normalized_matcher_.Split(normalized, added_by_id_)) {
    if (seg.id >= 0) {
      emit(seg.id);
      continue;
    }
    if (seg.end == seg.begin) continue;
    Piece piece{std::string(normalized.substr(seg.begin, seg.end - seg.begin)),
                at_start && seg.begin == 0};
    // Pieces are encoded as the pre-tokenizer makes them, never all held at once.
    if (pre_tokenizer_) {
      pre_tokenizer_->SplitEach(std::move(piece), encode);
    } else {
      encode(piece);
    }
  }
}

std::vector<int32_t> HfTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  EncodeEach(text, [&ids](int32_t id) { ids.push_back(id); });
  return ids;
}

void HfTokenizer::EncodeEach(std::string_view text, const std::function<void(int32_t)>& emit) const {
  // Valid UTF-8 (the usual case) is encoded in place; otherwise a repaired copy.
  const bool valid = IsValidUtf8(text);
  std::string repaired = valid ? std::string() : Utf8Lossy(text);
  std::string_view s = valid ? text : std::string_view(repaired);
  for (const TokenMatcher::Segment& seg : raw_matcher_.Split(s, added_by_id_)) {
    if (seg.id >= 0) {
      emit(seg.id);
    } else if (seg.end > seg.begin) {
      EncodeText(s.substr(seg.begin, seg.end - seg.begin), seg.begin == 0, emit);
    }
  }
}

std::string HfTokenizer::Decode(std::span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (auto a = added_by_id_.find(id); a != added_by_id_.end()) {
      tokens.push_back(a->second.content);
    } else if (const std::string* t = model_->IdToToken(id)) {
      tokens.push_back(*t);
    }
  }
  std::string out;
  if (!decoder_) {
    for (size_t k = 0; k < tokens.size(); ++k) out += (k ? " " : "") + tokens[k];
    return out;
  }
  for (const std::string& t : decoder_->DecodeChain(std::move(tokens))) out += t;
  return out;
}

std::optional<int32_t> HfTokenizer::TokenToId(std::string_view token) const {
  if (auto a = added_ids_.find(std::string(token)); a != added_ids_.end()) return a->second;
  return model_->TokenToId(token);
}

std::string HfTokenizer::IdToToken(int32_t id) const {
  if (auto a = added_by_id_.find(id); a != added_by_id_.end()) return a->second.content;
  const std::string* t = model_->IdToToken(id);
  return t ? *t : std::string();
}

size_t HfTokenizer::VocabSize() const {
  size_t n = model_->vocab().size();
  for (const auto& [content, id] : added_ids_) n += model_->TokenToId(content) ? 0 : 1;
  return n;
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> ParseHfTokenizer(const Json& doc) { return HfTokenizer::Parse(doc); }

bool IsSpecialToken(const Tokenizer& tokenizer, int32_t id) {
  const auto* hf = dynamic_cast<const HfTokenizer*>(&tokenizer);
  return hf && hf->IsSpecial(id);
}

}  // namespace mlc::text
