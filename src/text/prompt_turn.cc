// A prompt as a request turn: its strings as token ids, its media parts as files or as bytes
// carried inline (base64 data: URLs and raw base64 audio), held in memory.
#include "mlc_manifest/conversation.h"

#include <limits.h>
#include <sys/stat.h>

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

char Base64Value(char c) {
  if (c >= 'A' && c <= 'Z') return static_cast<char>(c - 'A');
  if (c >= 'a' && c <= 'z') return static_cast<char>(c - 'a' + 26);
  if (c >= '0' && c <= '9') return static_cast<char>(c - '0' + 52);
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

// Standard or URL-safe base64 from `pos` on; errors give the offset in `text`.
Result<std::string> DecodeBase64(std::string_view text, size_t pos, const std::string& path) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (; pos < text.size() && text[pos] != '='; ++pos) {
    char v = Base64Value(text[pos]);
    if (v < 0) return Invalid(path, "invalid base64 character at offset " + std::to_string(pos));
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  for (; pos < text.size(); ++pos) {
    if (text[pos] != '=') return Invalid(path, "base64 data after padding at offset " + std::to_string(pos));
  }
  return out;
}

// Raw base64 as OpenAI's input_audio.data carries it: base64 characters in groups of four.
bool IsRawBase64(std::string_view text) {
  if (text.empty() || text.size() % 4 != 0) return false;
  size_t end = text.find_last_not_of('=');
  if (end == std::string_view::npos || text.size() - end - 1 > 2) return false;
  for (size_t i = 0; i <= end; ++i) {
    if (Base64Value(text[i]) < 0) return false;
  }
  return true;
}

std::string ReferencePointer(const ContentPart& part) {
  return part.kind == PartKind::kImage ? PointerAppend(PointerAppend(part.path, "image_url"), "url")
                                       : PointerAppend(PointerAppend(part.path, "input_audio"), "data");
}

// True when text names an existing file (relative to base_dir). Never throws: a text longer than
// a file name, or with control characters, names none.
bool NamesAFile(const std::string& text, const std::string& base_dir) {
  if (text.size() > NAME_MAX || HasControlChar(text)) return false;
  struct stat st {};
  return ::stat(JoinPath(base_dir, text).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

}  // namespace

Result<std::string> DecodeDataUrl(std::string_view url, const std::string& path) {
  size_t comma = url.find(',');
  if (url.substr(0, 5) != "data:" || comma == std::string_view::npos ||
      url.substr(0, comma).find(";base64") == std::string_view::npos) {
    return Invalid(path, "expected a base64 data: URL (data:<type>;base64,<payload>)");
  }
  return DecodeBase64(url, comma + 1, path);
}

Result<std::optional<std::string>> InlineMedia(const ContentPart& part, const std::string& base_dir,
                                               bool allow_files) {
  const std::string at = ReferencePointer(part);
  if (part.url.empty()) return Invalid(at, "expected a file path, a data: URL or base64 audio");
  Result<std::string> bytes = Errors{};
  if (part.url.rfind("data:", 0) == 0) {
    bytes = DecodeDataUrl(part.url, at);
  } else if (part.kind == PartKind::kAudio && IsRawBase64(part.url) &&
             (!allow_files || !NamesAFile(part.url, base_dir))) {
    bytes = DecodeBase64(part.url, 0, at);
  } else {
    return std::optional<std::string>();  // a file
  }
  MLC_RETURN_IF_ERROR(bytes);
  return std::optional<std::string>(std::move(*bytes));
}

Result<std::string> MediaFile(const ContentPart& part, const std::string& base_dir) {
  auto inline_bytes = InlineMedia(part, base_dir);
  MLC_RETURN_IF_ERROR(inline_bytes);
  if (*inline_bytes) return std::string();
  if (HasControlChar(part.url)) {
    return Invalid(ReferencePointer(part), "a file name may not hold control characters");
  }
  return JoinPath(base_dir, part.url);
}

Result<RequestTurn> PromptTurn(const ChatPrompt& prompt, const ConvTemplate& tmpl,
                               const Tokenizer& tokenizer, const std::string& base_dir, bool allow_files) {
  RequestTurn turn;
  // Token runs merge only under one pointer, so that a context overflow names its message.
  auto add_tokens = [&turn](std::vector<int32_t> ids, const std::string& path) {
    if (ids.empty()) return;
    if (!turn.empty() && turn.back().kind == SegmentKind::kTokens && turn.back().path == path) {
      turn.back().token_ids.insert(turn.back().token_ids.end(), ids.begin(), ids.end());
      return;
    }
    RequestSegment seg;
    seg.token_ids = std::move(ids);
    seg.path = path;
    turn.push_back(std::move(seg));
  };
  if (prompt.first_round && tmpl.system_prefix_token_ids) {
    add_tokens(*tmpl.system_prefix_token_ids, "/conv_template/system_prefix_token_ids");
  }
  Errors errors;
  for (const PromptSegment& s : prompt.segments) {
    if (s.kind == PartKind::kText) {
      add_tokens(tokenizer.Encode(s.text), s.path);
      continue;
    }
    auto inline_bytes = InlineMedia(s.media, base_dir, allow_files);
    Result<std::string> file = std::string();  // a file reference when nothing is inline
    if (inline_bytes && !*inline_bytes) {
      file = allow_files ? MediaFile(s.media, base_dir)
                         : Result<std::string>(Invalid(ReferencePointer(s.media),
                                                       "expected a data: URL (base64) or base64 audio; "
                                                       "local files are not read here"));
    }
    if (!inline_bytes || !file) {
      AddErrors(errors, inline_bytes ? file.errors() : inline_bytes.errors());
      continue;
    }
    RequestSegment seg;
    seg.kind = s.kind == PartKind::kImage ? SegmentKind::kImage : SegmentKind::kAudio;
    seg.file = *file;
    if (*inline_bytes) seg.bytes = std::make_shared<const std::string>(std::move(**inline_bytes));
    seg.path = s.media.path;
    turn.push_back(std::move(seg));
  }
  if (!errors.empty()) return errors;
  return turn;
}

}  // namespace mlc
