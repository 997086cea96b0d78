// add (broadcasting), scale, relu, gelu and cast against double-precision references.
#include <cmath>
#include <limits>

#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

using UnaryCase = ShapeCase;

class UnaryTest : public DeviceTestWithParam<UnaryCase> {};

TEST_P(UnaryTest, ScaleReluGeluMatchReference) {
  const auto& [shape, dtype] = GetParam();
  auto values = random_values(shape.numel(), 7, -4.0f, 4.0f);
  auto x_stored = stored(values, dtype);
  Graph g;
  Tensor x = g.input("x", shape, dtype);
  g.output("scaled", g.scale(x, -0.37f));
  g.output("relu", g.relu(x));
  g.output("gelu", g.gelu(x));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(shape, values, dtype)}});

  std::vector<double> scaled(x_stored.size()), relu(x_stored.size()), gelu(x_stored.size());
  for (size_t i = 0; i < x_stored.size(); ++i) {
    scaled[i] = x_stored[i] * static_cast<double>(-0.37f);
    relu[i] = ref::relu(x_stored[i]);
    gelu[i] = ref::gelu(x_stored[i]);
  }
  auto tol = default_tolerance(dtype);
  EXPECT_TRUE(all_close(out["scaled"], scaled, tol));
  EXPECT_TRUE(all_close(out["relu"], relu, tol));
  // erf is approximated to 1.5e-7 absolute; |x| <= 4 scales that by at most 2.
  EXPECT_TRUE(all_close(out["gelu"], gelu, {std::max(tol.atol, 1e-6), tol.rtol}));
}

INSTANTIATE_TEST_SUITE_P(Shapes, UnaryTest,
                         ::testing::Values(UnaryCase{{1}, DType::f32}, UnaryCase{{7}, DType::f32},
                                           UnaryCase{{3, 257}, DType::f32},
                                           UnaryCase{{2, 3, 5, 67}, DType::f32},
                                           UnaryCase{{1}, DType::f16}, UnaryCase{{13, 31}, DType::f16},
                                           UnaryCase{{2, 3, 5, 67}, DType::f16},
                                           // whole vec4s: the four-per-invocation kernels
                                           UnaryCase{{4, 64}, DType::f32}, UnaryCase{{2, 3, 8}, DType::f16}),
                         shape_case_name);

// soft_cap: cap·tanh(x / cap) (Gemma 2's logit soft-capping) in double; near 0 it is ~x, far out
// it saturates to ±cap without overflowing (|x| / cap up to 1e4), in both dtypes and in whole
// vec4s and not.
TEST_F(DeviceTest, SoftCapMatchesReferenceAndSaturates) {
  for (DType dtype : {DType::f32, DType::f16})
    for (int64_t n : {int64_t{7}, int64_t{64}}) {
      std::vector<float> values = random_values(n - 4, 11, -60.0f, 60.0f);
      values.insert(values.end(), {0.0f, 3e4f, -3e4f, 1e-3f});
      const Shape shape{n};
      const std::vector<double> x = stored(values, dtype);
      Graph g;
      g.output("y", g.soft_cap(g.input("x", shape, dtype), 30.0f));
      Executor ex(device(), g);
      EXPECT_EQ(ex.stats().dispatches, 1u);
      auto out = ex.run({{"x", make_tensor(shape, values, dtype)}});
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = 30.0 * std::tanh(x[i] / 30.0);
      Tolerance tol = default_tolerance(dtype);
      tol.atol = std::max(tol.atol, dtype == DType::f16 ? 3e-2 : 1e-5);
      EXPECT_TRUE(all_close(out["y"], want, tol)) << dtype_name(dtype) << " n " << n;
    }
  Graph g;
  Tensor x = g.input("x", {3});
  EXPECT_TRUE(fails_with([&] { g.soft_cap(x, 0.0f); }, ErrorCode::invalid_argument, "cap must be a finite number > 0"));
}

// PyTorch propagates NaN through activations (relu(NaN) = NaN, also after a linear layer), so a
// bad weight or input shows in the output instead of being hidden by a max().
TEST_F(DeviceTest, ActivationsPropagateNaNAndInfinityAsPyTorchDoes) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x{nan, inf, -inf, -1.0f, 2.0f};
  Graph g;
  Tensor t = g.input("x", {5});
  g.output("relu", g.relu(t));
  g.output("gelu", g.gelu(t));
  // linear with a fused relu: [NaN, -3] x [[1, 0], [0, 1]]^T is [NaN, NaN] (NaN * 0 is NaN),
  // and relu keeps both, as torch.relu(nn.Linear(...)(x)) does.
  Tensor xl = g.input("xl", {1, 2});
  Tensor w = g.constant("w", HostTensor::from_f32({2, 2}, std::vector<float>{1, 0, 0, 1}));
  g.output("linear_relu", g.linear(xl, w, {}, Activation::relu));
  Executor ex(device(), g);
  auto out = ex.run({{"x", HostTensor::from_f32({5}, x)},
                     {"xl", HostTensor::from_f32({1, 2}, std::vector<float>{nan, -3.0f})}});
  auto relu = out["relu"].to_f32(), gelu = out["gelu"].to_f32(), lin = out["linear_relu"].to_f32();
  EXPECT_TRUE(std::isnan(relu[0]));
  EXPECT_EQ(relu[1], inf);
  EXPECT_EQ(relu[2], 0.0f);
  EXPECT_EQ(relu[3], 0.0f);
  EXPECT_EQ(relu[4], 2.0f);
  EXPECT_TRUE(std::isnan(gelu[0]));
  EXPECT_EQ(gelu[1], inf);
  EXPECT_TRUE(std::isnan(lin[0])) << lin[0];
  EXPECT_TRUE(std::isnan(lin[1])) << lin[1];
}

struct AddCase {
  Shape a, b;
  DType dtype;
};

class AddTest : public DeviceTestWithParam<AddCase> {};

// Numpy broadcasting on the host in double, independent of the kernel's stride trick.
std::vector<double> broadcast_add(const std::vector<double>& a, const Shape& as,
                                  const std::vector<double>& b, const Shape& bs, Shape* out) {
  EXPECT_TRUE(broadcast_shapes(as, bs, out));
  auto x = broadcast_to(a, as, *out), y = broadcast_to(b, bs, *out);
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  return x;
}

TEST_P(AddTest, BroadcastsLikeNumpy) {
  const auto& [as, bs, dtype] = GetParam();
  auto av = random_values(as.numel(), 1), bv = random_values(bs.numel(), 2);
  Shape os;
  auto want = broadcast_add(stored(av, dtype), as, stored(bv, dtype), bs, &os);
  Graph g;
  Tensor a = g.input("a", as, dtype), b = g.input("b", bs, dtype);
  Tensor o = g.add(a, b);
  ASSERT_EQ(o.shape, os);
  g.output("o", o);
  Executor ex(device(), g);
  auto out = ex.run({{"a", make_tensor(as, av, dtype)}, {"b", make_tensor(bs, bv, dtype)}});
  EXPECT_TRUE(all_close(out["o"], want, default_tolerance(dtype)));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AddTest,
    ::testing::Values(AddCase{{5}, {5}, DType::f32}, AddCase{{3, 7}, {7}, DType::f32},
                      AddCase{{7}, {2, 3, 7}, DType::f32}, AddCase{{1, 1, 7}, {2, 3, 7}, DType::f16},
                      // rows of whole vec4s: the four-per-invocation kernels
                      AddCase{{3, 8}, {8}, DType::f32}, AddCase{{8}, {2, 3, 8}, DType::f16},
                      AddCase{{2, 12}, {2, 12}, DType::f32},
                      AddCase{{2, 3, 7}, {3, 1}, DType::f32}, AddCase{{1}, {4, 1, 3}, DType::f32},
                      AddCase{{2, 1, 5, 3}, {4, 1, 3}, DType::f32},
                      AddCase{{3, 1, 13}, {1, 11, 1}, DType::f16},
                      AddCase{{2, 3, 5, 67}, {2, 3, 5, 67}, DType::f16}));

TEST_F(DeviceTest, CastRoundTripsThroughF16) {
  std::vector<float> values = {0.0f, 1.0f, -2.5f, 65504.0f, 1e-8f, 3.14159265f, 70000.0f, -1e5f};
  Graph g;
  Tensor x = g.input("x", {8});
  Tensor h = g.cast(x, DType::f16);
  g.output("h", h);
  g.output("back", g.cast(h, DType::f32));
  Executor ex(device(), g);
  auto out = ex.run({{"x", HostTensor::from_f32({8}, values)}});
  auto back = out["back"].to_f32();
  ASSERT_EQ(out["h"].dtype(), DType::f16);
  for (size_t i = 0; i < values.size(); ++i) {
    float want = half_to_float(float_to_half(values[i]));  // round to nearest even, overflow to inf
    EXPECT_EQ(back[i], want) << "value " << values[i];
  }
}

TEST_F(DeviceTest, AddRejectsShapesThatDoNotBroadcast) {
  Graph g;
  Tensor a = g.input("a", {2, 3}), b = g.input("b", {4});
  const std::string what = error_message([&] { g.add(a, b); }, ErrorCode::shape_mismatch);
  EXPECT_NE(what.find("[2,3]"), std::string::npos) << what;
  EXPECT_NE(what.find("[4]"), std::string::npos) << what;
}

}  // namespace
}  // namespace vkformer::testing
