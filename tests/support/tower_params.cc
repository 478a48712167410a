// The tower tests' shared parts (tower_params.h).
#include "support/tower_params.h"

#include <gtest/gtest.h>

#include <cmath>

#include "runtime/cpu/kernels.h"
#include "runtime/cpu/weights.h"
#include "runtime/splitmix.h"

namespace mlc::test {

cpu::ModelConfig TowerTextConfig(cpu::Quant quant, const std::string& name, int64_t hidden, int64_t vocab) {
  cpu::ModelConfig c;
  c.quant = quant;
  c.quantization = name;
  c.hidden_size = hidden;
  c.vocab_size = vocab;
  return c;
}

ReadResult ReadTower(TowerReader reader, const Json& model_config, const cpu::ModelConfig& c) {
  ChatConfig chat;
  chat.model_config = model_config;
  ReadResult r;
  cpu::ConfigReader top(chat, &r.errors);
  r.tower = reader(top, c);
  return r;
}

std::vector<ParamSpec> TowerSpecs(const cpu::Tower& tower, const cpu::ModelConfig& c) {
  cpu::ParamListBuilder b(c);
  tower.AppendParams(b);
  return b.Take();
}

std::vector<int64_t> SpecShape(const ParamSpec& s) {
  std::vector<int64_t> shape;
  for (const auto& d : s.shape) shape.push_back(std::get<int64_t>(d));
  return shape;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

ParameterSet RandomTowerParams(const std::vector<ParamSpec>& specs, uint64_t seed, const FixedValues& fixed) {
  ParameterSet set;
  for (const ParamSpec& s : specs) {
    SplitMix64 rng(seed ^ std::hash<std::string>{}(s.name));
    std::vector<int64_t> shape = SpecShape(s);
    NDArray t = NDArray::Empty(shape, *ParseDlDtype(s.dtype));
    const int64_t n = t.Elements();
    if (s.dtype == "uint32") {
      for (int64_t i = 0; i < n; ++i) {
        uint32_t word = 0;
        for (int k = 0; k < 8; ++k) word |= static_cast<uint32_t>(rng.Next() % 15) << (4 * k);
        t.data<uint32_t>()[i] = word;
      }
    } else {
      const int64_t fan_in = shape.size() >= 2 ? n / shape[0] : 1;
      std::vector<float> v(static_cast<size_t>(n));
      std::optional<std::vector<float>> given = fixed ? fixed(s) : std::nullopt;
      if (given) {
        v = *given;
      } else if (EndsWith(s.name, ".q_scale")) {
        const int64_t in = shape[1] * 32;
        for (float& x : v) x = (1.0f + 0.5f * rng.Symmetric()) * 1.7320508f / std::sqrt(static_cast<float>(in)) / 7.0f;
      } else if (s.name.find("norm") != std::string::npos) {
        for (float& x : v) x = 1.0f + 0.2f * rng.Symmetric();
      } else if (EndsWith(s.name, ".bias") || EndsWith(s.name, "per_dim_scale")) {
        for (float& x : v) x = 0.3f * rng.Symmetric();
      } else {
        for (float& x : v) x = 1.7320508f / std::sqrt(static_cast<float>(fan_in)) * rng.Symmetric();
      }
      EXPECT_EQ(static_cast<int64_t>(v.size()), n) << s.name;
      for (int64_t i = 0; i < n && i < static_cast<int64_t>(v.size()); ++i) {
        if (s.dtype == "float32") {
          t.data<float>()[i] = v[static_cast<size_t>(i)];
        } else {
          t.data<uint16_t>()[i] = cpu::FloatToHalf(v[static_cast<size_t>(i)]);
        }
      }
    }
    set.names.push_back(s.name);
    set.tensors.push_back(t);
  }
  return set;
}

TowerCase MakeTowerCase(TowerReader reader, Json model_config, cpu::ModelConfig c, const ParamDraw& draw) {
  TowerCase t;
  t.mc = std::move(model_config);
  t.c = std::move(c);
  ReadResult r = ReadTower(reader, t.mc, t.c);
  EXPECT_TRUE(r.errors.empty()) << ErrorsJson(r.errors).dump();
  t.tower = r.tower;
  if (!t.tower) return t;
  t.specs = TowerSpecs(*t.tower, t.c);
  t.params = draw(*t.tower, t.specs);
  return t;
}

Result<std::unique_ptr<cpu::BoundTower>> BindTower(const TowerCase& t, const std::vector<ParamSpec>& specs,
                                                   const ParameterSet& params) {
  auto index = cpu::ParamIndex::Make(specs, params);
  MLC_RETURN_IF_ERROR(index);
  return t.tower->Bind(t.c, *index);
}

}  // namespace mlc::test
