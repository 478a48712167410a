// The rows of the CPU family table (one file per family in this folder) and the few parts two
// families share.
#pragma once

#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/family.h"

namespace mlc::cpu {

const FamilySpec& LlamaFamily();
const FamilySpec& Qwen2Family();
const FamilySpec& GemmaFamily();
const FamilySpec& Gemma2Family();
const FamilySpec& Phi3Family();
const FamilySpec& LlavaFamily();
const FamilySpec& Gemma4Family();
const FamilySpec& Gemma3Family();
const FamilySpec& Gemma3TextFamily();
const FamilySpec& Gemma3VFamily();

// Gemma's shared settings: tied embeddings scaled by sqrt(hidden), tanh GeLU, no attention bias.
void ConfigureGemma(ConfigReader& r, ModelConfig& c);

// The names of Gemma 3 / Gemma 4 decoders under `root` ("language_model.model.", "language_model."):
// embed_tokens, norm, layers.N. with unfused self_attn.{q,k,v,o}_proj, the per-head q_norm / k_norm
// and the four norms around attention and MLP.
void SetGemmaNames(Names& n, const std::string& root);

// layer_types (Gemma 3, Gemma 4): per layer, whether it attends to every position
// ("full_attention") or to a window ("sliding_attention"); an error at its pointer (empty) when it
// is absent or not num_hidden_layers such strings.
std::vector<bool> ReadLayerTypes(ConfigReader& r, int64_t layers);

// MLC's Gemma instruction template named `name` over the reference vocabulary's ids.
Json GemmaInstructionTemplate(const std::string& name);

// MLC's llama-style families take SiLU only.
void RequireSilu(ConfigReader& r);

// No rope_scaling (an error when the config has one).
void RequireNoRopeScaling(ConfigReader& r, const ModelConfig& c);

}  // namespace mlc::cpu
