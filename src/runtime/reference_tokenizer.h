// The reference vocabulary's tokenizer.json (byte-level BPE) and conversation template, shared
// by the reference model's package writer and the CPU families' random-weight packages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "mlc_manifest/json.h"
#include "mlc_manifest/reference_model.h"

namespace mlc::reference {

// The reference tokenizer.json (byte-level BPE) for a vocabulary of vocab_size ids; none when
// the vocabulary cannot hold the special tokens and the 256 byte symbols.
std::optional<std::string> TokenizerJson(int64_t vocab_size);

// The conv_template of mlc-chat-config.json for that vocabulary: "user: ...\n" turns, <s> first
// and </s> as the stop id.
Json ConvTemplateJson();

}  // namespace mlc::reference
