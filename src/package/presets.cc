// Presets: the tasks and programs of the models the contract describes, from their public facts
// (token ids, resize policies, embedding counts, role functions).
#include "mlc_manifest/presets.h"

namespace mlc {
namespace {

TaskInput TextInput() { return TaskInput{std::string("tokenizer"), std::nullopt, std::nullopt}; }

Tasks OneTask(const std::string& media_name, TaskInput media) {
  Task t;
  t.executor = "generation";
  t.output = "text";
  t.inputs["text"] = TextInput();
  t.inputs[media_name] = std::move(media);
  return Tasks{{"chat.completions", t}};
}

TaskInput ImageInput(ResizeMode mode, int64_t size, int64_t embeddings, PromptInsertion prompt) {
  ImageDecode im;
  im.mode = mode;
  im.height = size;
  im.width = size;
  im.num_embeddings = embeddings;
  return TaskInput{im, std::string("image"), std::move(prompt)};
}

}  // namespace

Program TokenGenerationProgram(bool token_pair) {
  Program p;
  p.kind = "token_generation";
  p.exports["embed_tokens"] = "embed";
  p.exports["create_kv_cache"] = "create_tir_paged_kv_cache";
  if (token_pair) {
    p.exports["prefill_tokens"] = "prefill_tokens";
    p.exports["decode_tokens"] = "decode_tokens";
  } else {
    p.exports["prefill_embeds"] = "prefill";
    p.exports["decode_embeds"] = "decode";
  }
  return p;
}

std::vector<std::string> PresetNames() { return {"gemma-4-e2b-audio", "llava-1.5", "gemma-3"}; }

Result<Tasks> PresetTasks(const std::string& name) {
  if (name == "gemma-4-e2b-audio") {
    AudioDecode a;
    a.sample_rate_hz = 16000;
    a.channels = 1;
    a.min_samples = 161;
    a.max_samples = 480000;
    return OneTask("audio", TaskInput{a, std::string("audio"), PromptInsertion{{256000}, 258881, {258883}}});
  }
  if (name == "llava-1.5") {
    return OneTask("image", ImageInput(ResizeMode::kCenterCrop, 336, 576, PromptInsertion{{}, 32000, {}}));
  }
  if (name == "gemma-3") {
    return OneTask("image", ImageInput(ResizeMode::kStretch, 896, 256,
                                       PromptInsertion{{255999}, 262144, {256000}}));
  }
  return Error{ErrorCode::kUsage, "", "unknown preset \"" + name +
                                          "\" (expected gemma-4-e2b-audio, llava-1.5 or gemma-3)"};
}

Result<std::map<std::string, Program>> PresetPrograms(const std::string& name, Target target) {
  if (name == "gemma-4-e2b-audio") {
    Program p = TokenGenerationProgram(/*token_pair=*/true);
    p.adapters = std::map<std::string, std::string>{{"audio", "audio_embed"}};
    return std::map<std::string, Program>{{"generation", p}};
  }
  if (name == "llava-1.5" || name == "gemma-3") {
    Program p = TokenGenerationProgram(/*token_pair=*/false);
    p.adapters = std::map<std::string, std::string>{{"image", "image_embed"}};
    if (target == Target::kWebGPU) {
      p.adapter_dtypes = std::map<std::string, std::string>{{"image", "uint32"}};
    }
    return std::map<std::string, Program>{{"generation", p}};
  }
  return PresetTasks(name).errors();
}

std::vector<std::string> TargetFeatures(Target target, const std::string& quantization) {
  if (target == Target::kWebGPU && quantization.find("f16") != std::string::npos) {
    return {"shader-f16"};
  }
  return {};
}

}  // namespace mlc
