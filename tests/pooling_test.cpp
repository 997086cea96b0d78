// pool (mean, CLS, max over the tokens a Hugging Face attention_mask keeps), l2_normalize and
// the gelu_tanh activation against double-precision loops written here.
//
// Tolerances: pooling adds at most S values of |x| < 3 in fp32 and divides once: f32 within
// 1e-5 + 1e-5 relative (default_tolerance). l2_normalize outputs are in [-1, 1]; f16 adds the
// output rounding (default_tolerance(f16)). gelu_tanh through a linear layer: the matmul's
// fp32 accumulation over K = 37 terms, then exp and a division, 1e-5 absolute and relative.
#include <cmath>
#include <numbers>
#include <random>
#include <string>

#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

std::vector<double> ref_pool(const std::vector<double>& x, const std::vector<int32_t>& mask,
                             int64_t b, int64_t s, int64_t d, PoolMode mode) {
  std::vector<double> out(b * d);
  for (int64_t i = 0; i < b; ++i)
    for (int64_t j = 0; j < d; ++j) {
      double r = 0;
      if (mode == PoolMode::cls) {
        r = x[(i * s) * d + j];
      } else if (mode == PoolMode::max) {
        r = -1e9;
        for (int64_t t = 0; t < s; ++t) r = std::max(r, mask[i * s + t] ? x[(i * s + t) * d + j] : -1e9);
      } else {
        double sum = 0, count = 0;
        for (int64_t t = 0; t < s; ++t)
          if (mask[i * s + t]) sum += x[(i * s + t) * d + j], count += 1;
        r = sum / std::max(count, 1e-9);
      }
      out[i * d + j] = r;
    }
  return out;
}

struct PoolCase {
  int64_t b, s, d;
  DType dtype;
};

class PoolTest : public DeviceTestWithParam<PoolCase> {};

TEST_P(PoolTest, EveryModeMatchesReference) {
  const auto [b, s, d, dtype] = GetParam();
  const Shape shape{b, s, d};
  auto xv = random_values(shape.numel(), 11, -3.0f, 3.0f);
  // Random keep/drop, row 0 keeps everything, the last row keeps nothing when there are 3+ rows
  // (mean gives 0, max gives -1e9, as sentence-transformers does; in f32 only, since f16 holds
  // -1e9 as -inf, as torch's f16 does).
  std::mt19937 rng(5);
  std::vector<int32_t> mask(b * s);
  for (auto& m : mask) m = static_cast<int32_t>(rng() % 3 != 0) * static_cast<int32_t>(1 + rng() % 2);
  for (int64_t t = 0; t < s; ++t) mask[t] = 1;
  if (b >= 3 && dtype == DType::f32)
    for (int64_t t = 0; t < s; ++t) mask[(b - 1) * s + t] = 0;
  for (PoolMode mode : {PoolMode::mean, PoolMode::cls, PoolMode::max}) {
    Graph g;
    Tensor x = g.input("x", shape, dtype);
    Tensor m = g.input("mask", {b, s}, DType::i32);
    g.output("y", g.pool(x, m, mode));
    Executor ex(device(), g);
    auto out = ex.run({{"x", make_tensor(shape, xv, dtype)}, {"mask", HostTensor::from_i32({b, s}, mask)}});
    EXPECT_EQ(out["y"].shape(), (Shape{b, d}));
    auto want = ref_pool(stored(xv, dtype), mask, b, s, d, mode);
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(dtype))) << "mode " << static_cast<int>(mode);
    RecordProperty("max_abs_error_mode" + std::to_string(static_cast<int>(mode)),
                   sci(max_abs_error(out["y"], want)));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PoolTest,
                         ::testing::Values(PoolCase{1, 1, 1, DType::f32}, PoolCase{1, 7, 5, DType::f32},
                                           PoolCase{3, 13, 384, DType::f32},
                                           PoolCase{4, 33, 17, DType::f32},
                                           PoolCase{3, 13, 384, DType::f16},
                                           PoolCase{2, 5, 7, DType::f16}),
                         [](const ::testing::TestParamInfo<PoolCase>& i) {
                           return std::to_string(i.param.b) + "x" + std::to_string(i.param.s) + "x" +
                                  std::to_string(i.param.d) + "_" + std::string(dtype_name(i.param.dtype));
                         });

TEST_F(DeviceTest, PoolRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 3, 4});
  Tensor m = g.input("m", {2, 4}, DType::i32);
  Tensor mf = g.input("mf", {2, 3});
  EXPECT_TRUE(fails_with([&] { g.pool(x, m, PoolMode::mean); }, ErrorCode::shape_mismatch, "[batch, seq]"));
  EXPECT_TRUE(fails_with([&] { g.pool(x, mf, PoolMode::mean); }, ErrorCode::shape_mismatch, "attention_mask"));
  EXPECT_TRUE(fails_with([&] { g.pool(g.input("x2", {6, 4}), m, PoolMode::mean); }, ErrorCode::shape_mismatch, "x"));
}

class L2NormalizeTest : public DeviceTestWithParam<ShapeCase> {};

TEST_P(L2NormalizeTest, MatchesReference) {
  const auto& [shape, dtype] = GetParam();
  auto xv = random_values(shape.numel(), 21, -2.0f, 2.0f);
  const int64_t d = shape.back(), rows = shape.numel() / d;
  // The last row is zero: it stays zero (eps keeps the division finite).
  for (int64_t j = 0; j < d; ++j) xv[(rows - 1) * d + j] = 0.0f;
  Graph g;
  g.output("y", g.l2_normalize(g.input("x", shape, dtype)));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, xv, dtype)}});
  auto v = stored(xv, dtype);
  std::vector<double> want(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < d; ++j) ss += v[r * d + j] * v[r * d + j];
    for (int64_t j = 0; j < d; ++j) want[r * d + j] = v[r * d + j] / std::max(std::sqrt(ss), 1e-12);
  }
  EXPECT_TRUE(all_close(out["y"], want, default_tolerance(dtype)));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, L2NormalizeTest,
                         ::testing::Values(ShapeCase{{1}, DType::f32}, ShapeCase{{3, 1}, DType::f32},
                                           ShapeCase{{5, 384}, DType::f32},
                                           ShapeCase{{2, 3, 7}, DType::f32},
                                           ShapeCase{{67, 13}, DType::f32},
                                           ShapeCase{{5, 384}, DType::f16},
                                           ShapeCase{{67, 13}, DType::f16}),
                         [](const ::testing::TestParamInfo<ShapeCase>& i) {
                           std::string s;
                           for (auto d : i.param.shape.dims()) s += std::to_string(d) + "x";
                           s.pop_back();
                           return s + "_" + std::string(dtype_name(i.param.dtype));
                         });

// gelu_tanh fused into a linear layer (how BERT's feed-forward uses it; the only builder that
// takes it), against 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in double. Inputs up
// to |x| = 30 check that the tanh saturates instead of overflowing.
TEST_F(DeviceTest, GeluTanhLinearMatchesReference) {
  const int64_t m = 9, k = 37, n = 11;
  auto av = random_values(m * k, 31, -3.0f, 3.0f);
  for (int64_t i = 0; i < k; ++i) av[i] = 30.0f * (i % 2 ? 1.0f : -1.0f);  // row 0: saturates
  auto wv = random_values(n * k, 32, -0.5f, 0.5f);
  auto bv = random_values(n, 33, -0.5f, 0.5f);
  Graph g;
  Tensor a = g.input("a", {m, k});
  g.output("y", g.linear(a, g.constant("w", make_tensor({n, k}, wv, DType::f32)),
                         g.constant("b", make_tensor({n}, bv, DType::f32)), Activation::gelu_tanh));
  Executor ex(device(), g);
  auto out = ex.run({{"a", make_tensor({m, k}, av, DType::f32)}});
  std::vector<double> want(m * n);
  const double c = std::sqrt(2.0 / std::numbers::pi);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double x = bv[j];
      for (int64_t t = 0; t < k; ++t) x += static_cast<double>(av[i * k + t]) * wv[j * k + t];
      want[i * n + j] = 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
    }
  EXPECT_TRUE(all_close(out["y"], want, {1e-5, 1e-5}));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want)));
}

}  // namespace
}  // namespace vkformer::testing
