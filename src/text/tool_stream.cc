// A reply with tool calls split as it streams: text until a call opens (what may be the start of
// one, and the white space before it, held back), then each call's name and its arguments' text
// as it comes (what may be the call's close held back).
#include "mlc_manifest/tools.h"

#include "text/tool_gemma4.h"

namespace mlc {
namespace {

// How many bytes at the end of `text` may begin `marker` (the longest such suffix).
size_t PartialSuffix(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

}  // namespace

ToolCallStream::ToolCallStream(ToolFormat format, std::string id_prefix)
    : format_(std::move(format)), id_prefix_(std::move(id_prefix)) {}

ToolCallStream::Delta ToolCallStream::Push(std::string_view text) {
  buffer_.append(text);
  Delta out;
  Step(out);
  return out;
}

ToolCallStream::Delta ToolCallStream::Finish() {
  Delta out;
  if (phase_ == Phase::kContent || phase_ == Phase::kAfter || phase_ == Phase::kClose) out.content = std::move(buffer_);
  if (phase_ == Phase::kArguments && !(raw_ + buffer_).empty()) {  // a call cut short: what came of it
    const std::string rest = raw_ + buffer_;
    out.calls.push_back(CallDelta{calls_.size() - 1, "", "", rest});
    calls_.back().arguments += rest;
  }
  buffer_.clear();
  raw_.clear();
  return out;
}

// How many bytes of the buffer belong to the arguments: up to the end of their object.
size_t ToolCallStream::ScanArguments() {
  const bool marks = format_.dialect == JsonDialect::kGemma;  // strings between <|"|> marks, no escapes
  for (size_t i = 0; i < buffer_.size(); ++i) {
    const char c = buffer_[i];
    if (marks && c == kGemmaQuote[0]) {
      const std::string_view rest = std::string_view(buffer_).substr(i, kGemmaQuote.size());
      if (rest.size() < kGemmaQuote.size() && kGemmaQuote.substr(0, rest.size()) == rest) return i;  // held
      if (rest == kGemmaQuote) {
        in_string_ = !in_string_;
        i += kGemmaQuote.size() - 1;
      }
      continue;
    }
    if (marks && in_string_) continue;
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
    } else if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ <= 0) {
      depth_ = 0;
      closed_ = true;
      return i + 1;
    }
  }
  return buffer_.size();
}

void ToolCallStream::Step(Delta& out) {
  for (;;) {
    switch (phase_) {
      case Phase::kContent: {
        const size_t at = buffer_.find(format_.open);
        size_t end = at == std::string::npos ? buffer_.size() - PartialSuffix(buffer_, format_.open) : at;
        size_t text_end = end;
        while (text_end > 0 && IsSpace(buffer_[text_end - 1])) --text_end;  // held: it may precede a call
        out.content += buffer_.substr(0, text_end);
        if (at == std::string::npos) {
          buffer_.erase(0, text_end);
          return;
        }
        buffer_.erase(0, at + format_.open.size());
        phase_ = Phase::kName;
        break;
      }
      case Phase::kName: {
        if (buffer_.size() < format_.name_open.size()) return;
        // Without a closing text the name ends where its arguments' '{' begins (Gemma 4).
        const size_t close = format_.name_close.empty() ? buffer_.find('{', format_.name_open.size())
                                                        : buffer_.find(format_.name_close, format_.name_open.size());
        if (close == std::string::npos) return;
        ToolCall call;
        call.id = id_prefix_ + std::to_string(calls_.size());
        call.name = buffer_.substr(format_.name_open.size(), close - format_.name_open.size());
        out.calls.push_back(CallDelta{calls_.size(), call.id, call.name, ""});
        calls_.push_back(std::move(call));
        buffer_.erase(0, close + format_.name_close.size());
        phase_ = Phase::kArguments;
        break;
      }
      case Phase::kArguments: {
        const size_t end = ScanArguments();
        if (format_.dialect != JsonDialect::kJson) {  // read into JSON once whole
          raw_.append(buffer_, 0, end);
          buffer_.erase(0, end);
          if (!closed_) return;
          auto args = ReadGemma4Arguments(raw_);
          std::string json = args ? args->dump() : raw_;
          raw_.clear();
          calls_.back().arguments = json;
          if (!out.calls.empty() && out.calls.back().index == calls_.size() - 1) {
            out.calls.back().arguments += json;
          } else {
            out.calls.push_back(CallDelta{calls_.size() - 1, "", "", std::move(json)});
          }
          closed_ = false;
          phase_ = Phase::kClose;
          break;
        }
        if (end > 0) {
          std::string piece = buffer_.substr(0, end);
          calls_.back().arguments += piece;
          if (!out.calls.empty() && out.calls.back().index == calls_.size() - 1) {
            out.calls.back().arguments += piece;
          } else {
            out.calls.push_back(CallDelta{calls_.size() - 1, "", "", std::move(piece)});
          }
        }
        buffer_.erase(0, end);
        if (!closed_) return;
        closed_ = false;
        phase_ = Phase::kClose;
        break;
      }
      case Phase::kClose: {
        if (buffer_.size() < format_.close.size()) return;
        if (buffer_.compare(0, format_.close.size(), format_.close) == 0) buffer_.erase(0, format_.close.size());
        phase_ = Phase::kAfter;  // what does not close the call is left as text
        break;
      }
      case Phase::kAfter: {
        if (!format_.calls_end.empty() && buffer_.compare(0, format_.calls_end.size(), format_.calls_end) == 0) {
          buffer_.erase(0, format_.calls_end.size());  // where the calls end (no text of the reply)
          continue;
        }
        const std::string next = format_.between + format_.open;
        if (buffer_.size() < next.size()) return;
        if (buffer_.compare(0, next.size(), next) != 0) return;  // nothing else follows a call
        buffer_.erase(0, next.size());
        phase_ = Phase::kName;
        break;
      }
    }
  }
}

}  // namespace mlc
