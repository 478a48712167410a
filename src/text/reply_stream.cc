// The stop conditions of a reply: stop strings found in streamed text, and a reply detokenized
// token by token into whole characters; and the reply escaped for a terminal.
#include <algorithm>

#include "mlc_manifest/conversation.h"

namespace mlc {

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) {
  for (std::string& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return "";
  pending_ += text;
  size_t first = std::string::npos;
  for (const std::string& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out = stopped_ ? "" : pending_;
  pending_.clear();
  return out;
}

ReplyStream::ReplyStream(const Tokenizer& tokenizer, std::vector<std::string> stop_strings)
    : tokenizer_(tokenizer), matcher_(std::move(stop_strings)) {}

std::string ReplyStream::Emit(std::string piece) {
  std::string out = matcher_.Push(piece);
  text_ += out;
  return out;
}

std::string ReplyStream::Release(bool final) {
  // Decode a window that starts one released step back, so that tokenizers which drop a word's
  // leading space at the start of a decode (SentencePiece) see the same context as a full decode.
  std::span<const int32_t> all(tokens_);
  std::string before = tokenizer_.Decode(all.subspan(prefix_, read_ - prefix_));
  std::string now = tokenizer_.Decode(all.subspan(prefix_));
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD: an unfinished character
  if (now.size() <= before.size() || !now.starts_with(before) ||
      (!final && now.ends_with(kReplacement))) {
    return "";
  }
  // The tokens released now: the first starts where the piece does; each later one (held back
  // with it, as an unfinished character) where the text the tokens before it decode to stops
  // agreeing with the piece (inside a character split over tokens: where that character starts).
  starts_.push_back(decoded_);
  for (size_t i = read_ + 1; i < tokens_.size(); ++i) {
    const std::string upto = tokenizer_.Decode(all.subspan(prefix_, i - prefix_));
    const size_t agree = static_cast<size_t>(
        std::mismatch(upto.begin(), upto.end(), now.begin(), now.end()).first - upto.begin());
    starts_.push_back(std::max(starts_.back(), decoded_ + std::max(agree, before.size()) - before.size()));
  }
  prefix_ = read_;
  read_ = tokens_.size();
  std::string piece = now.substr(before.size());
  decoded_ += piece.size();
  return Emit(std::move(piece));
}

size_t ReplyStream::TokensShown() const {
  return static_cast<size_t>(std::lower_bound(starts_.begin(), starts_.end(), text_.size()) - starts_.begin());
}

std::string ReplyStream::Push(int32_t token) {
  if (stopped()) return "";
  tokens_.push_back(token);
  return Release(false);
}

std::string ReplyStream::Finish() {
  // Tokens still held back (an unfinished character) are released as they decode.
  std::string out = !stopped() && read_ < tokens_.size() ? Release(true) : "";
  std::string rest = matcher_.Finish();
  text_ += rest;
  return out + rest;
}

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  auto escape = [&out](unsigned char c) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      escape(c);
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {  // a C1 control, UTF-8 encoded
      escape(c);
      escape(next);
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace mlc
