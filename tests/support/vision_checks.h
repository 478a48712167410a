// What the image families' tests (LLaVA, Gemma 3 vision) share: a package's CPU library with its
// parameters, calls of its image_embed function, image prompts for `run --messages` and `serve`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlc_manifest/library.h"
#include "mlc_manifest/runtime.h"
#include "support/test_util.h"

namespace mlc::test {

struct OpenedPackage {
  std::unique_ptr<ModelLibrary> lib;
  std::shared_ptr<ParameterSet> params;
};

// The package's CPU library and its parameters (expectations fail, members empty, on an error).
OpenedPackage OpenPackage(const std::string& pkg);

// The library's image_embed over `pixels` with the package's parameters.
Result<std::vector<Value>> ImageEmbed(const OpenedPackage& o, const NDArray& pixels);

// RGB pixels [s, s, 3] as the uint8 [1, s, s, 3] tensor image_embed takes.
NDArray PixelTensor(const std::vector<uint8_t>& px, int64_t s);

// The same pixels as uint32 (WebGPU's pixel type).
NDArray WidePixelTensor(const std::vector<uint8_t>& px, int64_t s);

// A messages file: one user turn of the image (a path or a URL), then " What is it?".
std::string ImageMessages(const TempDir& dir, const std::string& image);

// `run PKG --messages FILE` greedy for 12 tokens: the tokens (empty after a failure, with an
// expectation failed); the adapter's time is expected above zero. `report`: the JSON printed.
std::vector<int32_t> RunImageTokens(const std::string& pkg, const std::string& messages, std::string* report = nullptr);

// One chat request with the image data URL and a question through `serve` (serve_once.py): expects
// status 200 and a prompt longer than `min_prompt` tokens with a completion.
void ExpectServeAnswersImage(const TempDir& dir, const std::string& pkg, const std::string& url, int64_t min_prompt);

}  // namespace mlc::test
