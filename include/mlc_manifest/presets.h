// The facts of the models the manifest was designed for, as presets: the task each declares and
// the compiled program that serves it (Gemma 4 E2B audio, LLaVA 1.5, Gemma 3).
#pragma once

#include <string>
#include <vector>

#include "mlc_manifest/contract.h"

namespace mlc {

enum class Target { kWebGPU, kNative };

// "gemma-4-e2b-audio", "llava-1.5", "gemma-3".
std::vector<std::string> PresetNames();

// The tasks object of a preset (one task, "chat.completions").
Result<Tasks> PresetTasks(const std::string& name);

// The programs of a preset for a target. For WebGPU, image adapters take uint32 pixels.
Result<std::map<std::string, Program>> PresetPrograms(const std::string& name, Target target);

// A token_generation program exporting the names MLC libraries use (SPEC 9): embed,
// create_tir_paged_kv_cache, and prefill / decode (the embeddings pair) or prefill_tokens /
// decode_tokens (the token pair). No adapters.
Program TokenGenerationProgram(bool token_pair);

// Features a target needs for a quantization: "shader-f16" for f16 quantizations on WebGPU.
std::vector<std::string> TargetFeatures(Target target, const std::string& quantization);

}  // namespace mlc
