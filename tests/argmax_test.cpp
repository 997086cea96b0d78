// Graph::argmax (greedy decoding's choice on the device) against the host's greedy Sampler on
// random rows with many ties (zeros of both signs among them), NaN, +-inf, rows with nothing
// usable, and rows of 1 to 65,536 entries (more and fewer than a workgroup's 256 lanes, odd
// tails). The choice must be the Sampler's exactly (comparisons only: no tolerance); the first
// non-finite entry the first std::find_if gives. f16 rows are compared on their stored values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "vkformer/sampling.hpp"

#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

enum class Kind { ties, specials, unusable, plus_inf_ties };

// Row-major [rows, n] of the given kind.
std::vector<float> make_rows(int64_t count, Kind kind, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) {
    const float r = unit(rng);
    switch (kind) {
      case Kind::ties: x = static_cast<float>(static_cast<int>(rng() % 5) - 4) + (r < 0.5f ? 0.0f : -0.0f); break;
      case Kind::specials: x = r < 0.02f ? nan : r < 0.04f ? -inf : r < 0.041f ? inf : normal(rng); break;
      case Kind::unusable: x = r < 0.5f ? nan : -inf; break;
      case Kind::plus_inf_ties: x = r < 0.01f ? inf : r < 0.02f ? nan : normal(rng); break;
    }
  }
  return v;
}

class ArgmaxTest : public DeviceTestWithParam<ShapeCase> {};

TEST_P(ArgmaxTest, SameChoiceAsTheHostSampler) {
  const auto& [shape, dtype] = GetParam();
  const int64_t n = shape.back(), rows = shape.numel() / n;
  Graph g;
  g.output("y", g.argmax(g.input("x", shape, dtype)));
  Executor ex(device(), g);
  for (Kind kind : {Kind::ties, Kind::specials, Kind::unusable, Kind::plus_inf_ties}) {
    const std::vector<float> x = make_rows(shape.numel(), kind, 7 + static_cast<uint32_t>(kind));
    const std::vector<int32_t> y = ex.run({{"x", make_tensor(shape, x, dtype)}})["y"].to_i32();
    ASSERT_EQ(static_cast<int64_t>(y.size()), rows * 4);
    const std::vector<double> v = stored(x, dtype);  // what the device holds (f16: rounded)
    for (int64_t r = 0; r < rows; ++r) {
      const std::vector<float> row(v.begin() + r * n, v.begin() + (r + 1) * n);
      const int32_t* got = y.data() + r * 4;
      const std::string where = "kind " + std::to_string(static_cast<int>(kind)) + " row " + std::to_string(r);
      // The Sampler refuses a row that is all NaN and -inf; the device says -1.
      const bool usable = std::any_of(row.begin(), row.end(), [](float e) { return e > -std::numeric_limits<float>::infinity(); });
      const int32_t want = usable ? Sampler().sample(row) : -1;
      EXPECT_EQ(got[0], want) << where;
      if (usable) EXPECT_EQ(std::bit_cast<float>(got[1]), row[static_cast<size_t>(want)]) << where;
      const auto bad = std::find_if(row.begin(), row.end(), [](float e) { return !std::isfinite(e); });
      const int32_t want_bad = bad == row.end() ? -1 : static_cast<int32_t>(bad - row.begin());
      EXPECT_EQ(got[2], want_bad) << where;
      if (want_bad >= 0) {
        const float b = std::bit_cast<float>(got[3]);
        EXPECT_TRUE(std::isnan(*bad) ? std::isnan(b) : b == *bad) << where << ": " << b << " for " << *bad;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ArgmaxTest,
                         ::testing::Values(ShapeCase{{1}, DType::f32}, ShapeCase{{7}, DType::f32},
                                           ShapeCase{{3, 255}, DType::f32}, ShapeCase{{2, 256}, DType::f32},
                                           ShapeCase{{2, 1, 4099}, DType::f32}, ShapeCase{{1, 65536}, DType::f32},
                                           ShapeCase{{3, 257}, DType::f16}, ShapeCase{{1, 1, 1, 49153}, DType::f16}));

TEST_F(DeviceTest, ArgmaxRefusesWhatItCannotRank) {
  Graph g;
  EXPECT_TRUE(fails_with([&] { g.argmax(g.input("ids", {4}, DType::i32)); }, ErrorCode::shape_mismatch,
                         "argmax: x must be f32 or f16, got [4] i32"));
  EXPECT_TRUE(fails_with([&] { g.argmax(g.input("scalar", Shape{}, DType::f32)); }, ErrorCode::shape_mismatch,
                         "argmax"));
}

}  // namespace
}  // namespace vkformer::testing
