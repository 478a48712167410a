// Request documents: segments and turns, parsed strictly, and their planner pieces.
#include "mlc_manifest/request.h"

#include <filesystem>
#include <limits>

#include "mlc_manifest/fs.h"

namespace mlc {
namespace {

constexpr int64_t kMaxTokenId = std::numeric_limits<int32_t>::max();

void ParseTokens(const Json& value, const std::string& path, RequestSegment& seg,
                 FieldChecker& check) {
  if (!value.is_array()) {
    check.Fail(path, "expected an array of token ids, got " + JsonTypeName(value));
    return;
  }
  if (value.empty()) {  // nothing to prefill: a run would generate from nothing
    check.Fail(path, "expected at least one token id, got an empty array");
    return;
  }
  seg.token_ids.reserve(value.size());
  for (size_t i = 0; i < value.size(); ++i) {
    std::string p = PointerAppend(path, i);
    auto id = SafeInteger(value[i]);
    if (!id || *id < 0 || *id > kMaxTokenId) {
      check.Fail(p, "expected a token id (an integer from 0 to 2147483647)");
      continue;
    }
    seg.token_ids.push_back(static_cast<int32_t>(*id));
  }
}

std::optional<RequestSegment> ParseSegment(const Json& value, const std::string& path,
                                           const std::string& base_dir,
                                           const RequestLimits& limits, FieldChecker& check) {
  if (!check.Object(value, path)) return std::nullopt;
  if (value.size() != 1) {
    check.Fail(path, "expected exactly one of \"tokens\", \"audio\", \"image\", \"audio_rows\"");
    return std::nullopt;
  }
  auto first = value.begin();
  const std::string key = first.key();
  const Json& v = first.value();
  RequestSegment seg;
  seg.path = path;
  std::string p = PointerAppend(path, key);
  size_t before = check.count();
  if (key == "tokens") {
    seg.kind = SegmentKind::kTokens;
    ParseTokens(v, p, seg, check);
  } else if (key == "audio" || key == "image") {
    seg.kind = key == "audio" ? SegmentKind::kAudio : SegmentKind::kImage;
    if (auto file = check.String(v, p)) {
      if (HasControlChar(*file)) {
        check.Fail(p, "a file name may not hold control characters");
      } else {
        seg.file = JoinPath(base_dir, *file);
      }
    }
  } else if (key == "audio_rows") {
    seg.kind = SegmentKind::kAudioRows;
    if (auto rows = check.Integer(v, p, 1)) {
      if (*rows > limits.max_audio_rows) {
        check.Fail(p, "expected at most " + std::to_string(limits.max_audio_rows) + " rows");
      }
      seg.rows = *rows;
    }
  } else {
    check.Fail(p, "unknown segment kind \"" + std::string(key) +
                      "\"; expected \"tokens\", \"audio\", \"image\" or \"audio_rows\"");
  }
  if (check.count() != before) return std::nullopt;
  return seg;
}

std::optional<RequestTurn> ParseTurn(const Json& value, const std::string& path,
                                     const std::string& base_dir, const RequestLimits& limits,
                                     size_t& segments, FieldChecker& check) {
  if (!value.is_array()) {
    check.Fail(path, "expected an array of segments, got " + JsonTypeName(value));
    return std::nullopt;
  }
  if (value.empty()) {
    check.Fail(path, "expected at least one segment");
    return std::nullopt;
  }
  RequestTurn turn;
  for (size_t i = 0; i < value.size(); ++i) {
    std::string p = PointerAppend(path, i);
    if (++segments > limits.max_segments) {
      check.Fail(p, "too many segments (the limit is " + std::to_string(limits.max_segments) + ")");
      return std::nullopt;
    }
    if (auto seg = ParseSegment(value[i], p, base_dir, limits, check)) turn.push_back(*seg);
  }
  return turn;
}

}  // namespace

Result<Request> ParseRequest(const Json& doc, const std::string& base_dir,
                             const RequestLimits& limits) {
  Errors errors;
  FieldChecker check(&errors);
  Request request;
  size_t segments = 0;
  if (doc.is_array()) {
    if (auto turn = ParseTurn(doc, "", base_dir, limits, segments, check)) {
      request.turns.push_back(std::move(*turn));
    }
  } else if (doc.is_object()) {
    if (check.Keys(doc, "", {"turns"}, {"turns"})) {
      const Json& turns = doc["turns"];
      if (!turns.is_array() || turns.empty()) {
        check.Fail("/turns", "expected a non-empty array of turns");
      } else if (turns.size() > limits.max_turns) {
        check.Fail("/turns", "too many turns (the limit is " + std::to_string(limits.max_turns) + ")");
      } else {
        for (size_t i = 0; i < turns.size(); ++i) {
          auto turn = ParseTurn(turns[i], PointerAppend("/turns", i), base_dir, limits, segments,
                                check);
          if (turn) request.turns.push_back(std::move(*turn));
        }
      }
    }
  } else {
    check.Fail("", "expected an array of segments or {\"turns\": [...]}, got " +
                       JsonTypeName(doc));
  }
  if (!errors.empty()) return errors;
  return request;
}

Result<Request> ReadRequestFile(const std::string& path, const RequestLimits& limits) {
  auto doc = ReadJsonFile(path);
  MLC_RETURN_IF_ERROR(doc);
  std::string dir = path == "-" ? "" : std::filesystem::path(path).parent_path().string();
  return InDocument(ParseRequest(*doc, dir.empty() ? "." : dir, limits), DocumentName(path));
}

namespace {

// Every id of a prompt insertion must fit the int32 token ids a runtime takes.
Status CheckInsertion(const PromptInsertion& p, const std::string& path, const std::string& input) {
  auto bad = [](int64_t id) { return id < 0 || id > kMaxTokenId; };
  bool any = bad(p.placeholder_token_id);
  for (int64_t id : p.prefix_token_ids) any = any || bad(id);
  for (int64_t id : p.suffix_token_ids) any = any || bad(id);
  if (!any) return Status::Ok();
  return Invalid(path, "the prompt ids of input \"" + input +
                           "\" do not fit 32-bit token ids (0 to 2147483647)");
}

}  // namespace

Result<std::vector<PromptPiece>> PiecesForTurn(const BoundContract& bound,
                                               const RequestTurn& turn) {
  Errors errors;
  std::vector<PromptPiece> pieces;
  for (const RequestSegment& seg : turn) {
    PromptPiece piece;
    piece.path = seg.path;
    switch (seg.kind) {
      case SegmentKind::kTokens:
        piece.value = TextPiece{seg.token_ids};
        break;
      case SegmentKind::kAudio:
      case SegmentKind::kAudioRows:
        if (!bound.audio) {
          AddError(errors, Invalid(seg.path, "task \"" + bound.task_name +
                                                 "\" declares no audio input"));
          continue;
        }
        if (Status s = CheckInsertion(bound.audio->prompt, seg.path, bound.audio->input); !s) {
          AddError(errors, s.error());
          continue;
        }
        piece.value = AudioPiece(*bound.audio, seg.kind == SegmentKind::kAudioRows
                                                   ? std::optional<int64_t>(seg.rows)
                                                   : std::nullopt);
        break;
      case SegmentKind::kImage:
        if (!bound.image) {
          AddError(errors, Invalid(seg.path, "task \"" + bound.task_name +
                                                 "\" declares no image input"));
          continue;
        }
        if (Status s = CheckInsertion(bound.image->prompt, seg.path, bound.image->input); !s) {
          AddError(errors, s.error());
          continue;
        }
        piece.value = ImagePiece(*bound.image);
        break;
    }
    pieces.push_back(std::move(piece));
  }
  if (!errors.empty()) return errors;
  return pieces;
}

}  // namespace mlc
