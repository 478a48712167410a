// The report of a chat prompt (PromptReportJson): its segments with their token ids and, when a
// contract is bound, the input each media part feeds. Shared by `mlc-manifest prompt` and the C
// API's mlc_prompt_build.
#include "mlc_manifest/conversation.h"

namespace mlc {

Result<OrderedJson> PromptMediaJson(const BoundContract& bound, const PromptSegment& seg,
                              const std::string& base_dir) {
  const bool image = seg.kind == PartKind::kImage;
  if (image ? !bound.image : !bound.audio) {
    return Invalid(seg.media.path, std::string("the package declares no ") +
                                       (image ? "image" : "audio") + " input");
  }
  MediaPiece piece = image ? ImagePiece(*bound.image) : AudioPiece(*bound.audio, std::nullopt);
  OrderedJson out = {{"media", MediaKindName(piece.kind)}, {"input", piece.input},
                     {"part", seg.media.path}};
  auto inline_bytes = InlineMedia(seg.media, base_dir);
  MLC_RETURN_IF_ERROR(inline_bytes);
  if (*inline_bytes) {
    out["inline_bytes"] = (*inline_bytes)->size();
  } else {
    auto file = MediaFile(seg.media, base_dir);
    MLC_RETURN_IF_ERROR(file);
    out["file"] = *file;
  }
  out["prefix_token_ids"] = piece.prompt.prefix_token_ids;
  out["placeholder_token_id"] = piece.prompt.placeholder_token_id;
  out[image ? "image_rows" : "audio_rows"] = piece.rows ? OrderedJson(*piece.rows) : OrderedJson();
  out["suffix_token_ids"] = piece.prompt.suffix_token_ids;
  return out;
}

Result<OrderedJson> PromptReportJson(const ChatPrompt& prompt, const ConvTemplate& tmpl,
                                     const Tokenizer& tokenizer, const BoundContract* bound,
                                     const std::string& base_dir) {
  OrderedJson segments = OrderedJson::array();
  if (prompt.first_round && tmpl.system_prefix_token_ids) {
    segments.push_back({{"system_prefix_token_ids", *tmpl.system_prefix_token_ids}});
  }
  for (const PromptSegment& seg : prompt.segments) {
    if (seg.kind == PartKind::kText) {
      segments.push_back({{"text", seg.text}, {"token_ids", tokenizer.Encode(seg.text)}});
    } else if (bound) {
      auto media = PromptMediaJson(*bound, seg, base_dir);
      MLC_RETURN_IF_ERROR(media);
      segments.push_back(std::move(*media));
    } else {
      segments.push_back({{"media", seg.kind == PartKind::kImage ? "image" : "audio"},
                          {"part", seg.media.path}});
    }
  }
  return OrderedJson{{"template", tmpl.name},
                     {"prompt", PromptText(prompt)},
                     {"segments", std::move(segments)},
                     {"stop_token_ids", tmpl.stop_token_ids},
                     {"stop_str", tmpl.stop_str}};
}

}  // namespace mlc
