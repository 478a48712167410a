// What the tower tests (a vision or audio tower on its own) share: the decoder config a tower reads
// its widths from, the tower's parameter list, and random parameters in the package's dtypes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlc_manifest/json.h"
#include "mlc_manifest/runtime.h"
#include "runtime/cpu/config_reader.h"
#include "runtime/cpu/family.h"
#include "runtime/cpu/towers/tower.h"

namespace mlc::test {

// The decoder config of a tower test: its quantization, hidden size and vocabulary.
cpu::ModelConfig TowerTextConfig(cpu::Quant quant, const std::string& name, int64_t hidden, int64_t vocab = 512);

// A tower read from model_config by `reader` (ReadSiglipTower, ReadGemma4AudioTower): nullptr and
// the errors when it was refused.
struct ReadResult {
  std::shared_ptr<const cpu::Tower> tower;
  Errors errors;
};
using TowerReader = std::shared_ptr<const cpu::Tower> (*)(cpu::ConfigReader&, const cpu::ModelConfig&);
ReadResult ReadTower(TowerReader reader, const Json& model_config, const cpu::ModelConfig& c);

// The tower's parameters (AppendParams) under c's quantization.
std::vector<ParamSpec> TowerSpecs(const cpu::Tower& tower, const cpu::ModelConfig& c);

std::vector<int64_t> SpecShape(const ParamSpec& s);
bool EndsWith(const std::string& s, const std::string& suffix);

// Values a test fixes for a parameter (nullopt: drawn at random).
using FixedValues = std::function<std::optional<std::vector<float>>(const ParamSpec&)>;

// Random parameters in their dtypes, each drawn from its own stream (seed ^ hash(name)): 4-bit
// words (every nibble in [0, 14], a partial group's padding included) with positive group scales,
// norms near 1, small biases and per_dim_scale, fan-in scaled float matrices and convolutions;
// `fixed` overrides any of them.
ParameterSet RandomTowerParams(const std::vector<ParamSpec>& specs, uint64_t seed, const FixedValues& fixed = {});

// A tower read from a model_config with its parameter list and parameters (drawn by `draw`).
struct TowerCase {
  Json mc;
  cpu::ModelConfig c;
  std::shared_ptr<const cpu::Tower> tower;  // nullptr when refused (a test failure is recorded)
  std::vector<ParamSpec> specs;
  ParameterSet params;
};
using ParamDraw = std::function<ParameterSet(const cpu::Tower&, const std::vector<ParamSpec>&)>;
TowerCase MakeTowerCase(TowerReader reader, Json model_config, cpu::ModelConfig c, const ParamDraw& draw);

// t's tower bound to `params` checked against `specs` (t's own, or changed by a test).
Result<std::unique_ptr<cpu::BoundTower>> BindTower(const TowerCase& t, const std::vector<ParamSpec>& specs,
                                                   const ParameterSet& params);

}  // namespace mlc::test
