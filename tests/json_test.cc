// The strict JSON reader and the two writers.
#include <gtest/gtest.h>

#include "mlc_manifest/json.h"

namespace mlc {
namespace {

TEST(JsonReader, ParsesValidDocument) {
  auto r = ParseJson(R"({"a": [1, 2.5, "x"], "b": {"c": null}})");
  ASSERT_TRUE(r.ok()) << FormatErrors(r.errors());
  EXPECT_EQ((*r)["a"][0], 1);
}

}  // namespace
}  // namespace mlc
