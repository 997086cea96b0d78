// layer_norm and add_layer_norm (layer_norm(a + b)) against the double-precision reference.
// ctest runs this binary twice: as is (the subgroup-arithmetic reductions where the device has
// them) and with VKFORMER_NO_SUBGROUP_OPS=1 (the shared-memory reductions). On CPU devices rows of
// whole texels (D % 4 == 0) go through the row kernel (shaders/layer_norm_rows.comp: in registers
// up to 8 * 32 texels, two passes beyond, several rows per workgroup), other rows through the
// workgroup-per-row kernel, so the shapes have both kinds of D.
//
// Tolerances: f32 outputs are O(1..4) after normalization and scaling; fp32 statistics and
// arithmetic keep them within ~1e-6 of the double reference, so atol 1e-5 + rtol 1e-5 (the
// default) leaves a 10x margin. f16 adds the output rounding, 2^-11 relative: atol/rtol 2e-3.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>

#include "kernel_variants.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

using LayerNormCase = ShapeCase;

// Runs layer_norm(x, gamma, beta, eps) and compares with the reference; returns the max error.
// With `residual`, runs add_layer_norm(x, residual, ...) against the reference of x + residual
// summed in fp32 from the stored values, as the kernel does (for f16 storage the sum is not
// rounded to f16: more accurate than add then layer_norm).
double check_layer_norm(Device& device, const Shape& shape, DType dtype,
                        const std::vector<float>& xv, float eps, Tolerance tol,
                        const std::vector<float>* residual = nullptr) {
  const int64_t d = shape.back(), rows = shape.numel() / d;
  auto gv = random_values(d, 5, 0.5f, 1.5f), bv = random_values(d, 6, -0.5f, 0.5f);
  Graph g;
  Tensor x = g.input("x", shape, dtype);
  Tensor gamma = g.constant("gamma", make_tensor({d}, gv, dtype));
  Tensor beta = g.constant("beta", make_tensor({d}, bv, dtype));
  std::map<std::string, HostTensor> inputs{{"x", make_tensor(shape, xv, dtype)}};
  std::vector<double> v = stored(xv, dtype);
  if (residual) {
    Tensor r = g.input("r", shape, dtype);
    inputs.emplace("r", make_tensor(shape, *residual, dtype));
    auto rv = stored(*residual, dtype);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>(static_cast<float>(v[i]) + static_cast<float>(rv[i]));
    g.output("y", g.add_layer_norm(x, r, gamma, beta, eps));
  } else {
    g.output("y", g.layer_norm(x, gamma, beta, eps));
  }
  Executor ex(device, g);
  EXPECT_EQ(ex.stats().dispatches, 1u);
  auto out = ex.run(inputs);
  auto want = ref::layer_norm(v, rows, d, stored(gv, dtype), stored(bv, dtype),
                              static_cast<double>(eps));
  EXPECT_TRUE(all_close(out["y"], want, tol));
  return max_abs_error(out["y"], want);
}

class LayerNormTest : public DeviceTestWithParam<LayerNormCase> {};

TEST_P(LayerNormTest, MatchesReference) {
  const auto& [shape, dtype] = GetParam();
  auto xv = random_values(shape.numel(), 3, -3.0f, 3.0f);
  double err = check_layer_norm(device(), shape, dtype, xv, 1e-5f, default_tolerance(dtype));
  RecordProperty("max_abs_error", sci(err));
}

// add_layer_norm: the residual add fused in, same shapes.
TEST_P(LayerNormTest, AddLayerNormMatchesReference) {
  const auto& [shape, dtype] = GetParam();
  auto xv = random_values(shape.numel(), 3, -3.0f, 3.0f);
  auto rv = random_values(shape.numel(), 4, -2.0f, 2.0f);
  double err = check_layer_norm(device(), shape, dtype, xv, 1e-5f, default_tolerance(dtype), &rv);
  RecordProperty("max_abs_error", sci(err));
}

// Rank 1 to 4; D = 1 (every output is beta); D below, at and above the workgroup sizes, primes;
// D > 4096; row counts that are primes.
INSTANTIATE_TEST_SUITE_P(
    Shapes, LayerNormTest,
    ::testing::Values(LayerNormCase{{1}, DType::f32}, LayerNormCase{{7, 1}, DType::f32},
                      LayerNormCase{{5}, DType::f32}, LayerNormCase{{3, 7}, DType::f32},
                      LayerNormCase{{2, 3, 64}, DType::f32}, LayerNormCase{{5, 257}, DType::f32},
                      LayerNormCase{{2, 3, 5, 67}, DType::f32},
                      LayerNormCase{{3, 768}, DType::f32}, LayerNormCase{{2, 4099}, DType::f32},
                      LayerNormCase{{1, 10007}, DType::f32}, LayerNormCase{{1}, DType::f16},
                      LayerNormCase{{13, 31}, DType::f16}, LayerNormCase{{2, 3, 5, 67}, DType::f16},
                      LayerNormCase{{2, 4099}, DType::f16},
                      // Whole texels (D % 4 == 0): in registers, several rows per workgroup
                      // (301 rows), two passes (D = 4100 > 8 * 32 * 4).
                      LayerNormCase{{4}, DType::f32}, LayerNormCase{{301, 8}, DType::f32},
                      LayerNormCase{{3, 1000}, DType::f32}, LayerNormCase{{2, 4100}, DType::f32},
                      LayerNormCase{{2, 3, 5, 68}, DType::f16}, LayerNormCase{{3, 768}, DType::f16},
                      LayerNormCase{{2, 4100}, DType::f16},
                      // Several rows per workgroup, read one row ahead: short rows (701 rows) and
                      // two-pass rows (301 rows of 1100) whose statistics overlap the previous
                      // row's outputs; the last workgroup has a single row.
                      LayerNormCase{{701, 36}, DType::f32}, LayerNormCase{{301, 1100}, DType::f32},
                      LayerNormCase{{301, 1100}, DType::f16}),
    shape_case_name);

// 1000 + N(0, 1): the mean is large relative to the spread, where E[x^2] - E[x]^2 in fp32
// loses everything (1000^2 has an ulp of 0.06). The output error must stay at the level of
// fp32 rounding of values of order 1.
TEST_F(DeviceTest, LayerNormLargeMeanStaysAccurate) {
  for (int64_t d : {1, 33, 768, 4099, 4100}) {
    const Shape shape{4, d};
    std::mt19937 rng(17);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> xv(shape.numel());
    for (auto& v : xv) v = 1000.0f + n01(rng);
    double err = check_layer_norm(device(), shape, DType::f32, xv, 1e-5f, {2e-5, 1e-5});
    RecordProperty("max_abs_error_f32_D" + std::to_string(d), sci(err));
    // f16 stores 1000 + N(0,1) in steps of 0.5; the reference sees the same stored values.
    err = check_layer_norm(device(), shape, DType::f16, xv, 1e-5f, default_tolerance(DType::f16));
    RecordProperty("max_abs_error_f16_D" + std::to_string(d), sci(err));
    // The same rows as 1000 + N(0, 1) summed by add_layer_norm: the sum is formed in fp32.
    std::vector<float> big(shape.numel(), 1000.0f), noise(shape.numel());
    for (auto& v : noise) v = n01(rng);
    err = check_layer_norm(device(), shape, DType::f32, big, 1e-5f, {2e-5, 1e-5}, &noise);
    RecordProperty("max_abs_error_add_f32_D" + std::to_string(d), sci(err));
  }
}

// Constant rows have zero variance: the output is beta, and eps alone keeps it finite.
TEST_F(DeviceTest, LayerNormConstantRowsGiveBeta) {
  const Shape shape{3, 100};
  std::vector<float> xv(shape.numel(), -42.5f);
  check_layer_norm(device(), shape, DType::f32, xv, 1e-5f, default_tolerance(DType::f32));
  check_layer_norm(device(), shape, DType::f32, xv, 0.0f, default_tolerance(DType::f32));
}

// eps is inside the square root: with a spread comparable to eps the difference is visible.
TEST_F(DeviceTest, LayerNormEpsIsInsideTheSquareRoot) {
  const Shape shape{2, 9};
  auto xv = random_values(shape.numel(), 8, -0.01f, 0.01f);
  check_layer_norm(device(), shape, DType::f32, xv, 1e-4f, default_tolerance(DType::f32));
}

// More rows than one grid dimension holds (65535 on most devices): rows_grid spreads them over
// x and y and the shader recovers the row with flat_workgroup_id().
TEST_F(DeviceTest, LayerNormManyRows) {
  const Shape shape{70001, 3};
  auto xv = random_values(shape.numel(), 9, -2.0f, 2.0f);
  double err = check_layer_norm(device(), shape, DType::f32, xv, 1e-5f, default_tolerance(DType::f32));
  RecordProperty("max_abs_error", sci(err));
}

TEST_F(DeviceTest, LayerNormRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 3, 8});
  Tensor ok = g.input("ok", {8});
  Tensor bad = g.input("bad", {3});
  Tensor half = g.input("half", {8}, DType::f16);
  for (const char* needle : {"layer_norm", "[2,3,8]", "[3]"})
    EXPECT_TRUE(fails_with([&] { g.layer_norm(x, bad, ok); }, ErrorCode::shape_mismatch, needle));
  EXPECT_THROW(g.layer_norm(x, ok, half), Error);
  EXPECT_THROW(g.layer_norm(x, ok, ok, -1.0f), Error);
  // add_layer_norm: a and b of one shape and dtype (no broadcasting), and the same checks.
  EXPECT_EQ(g.add_layer_norm(x, x, ok, ok).shape, x.shape);
  const Tensor b1 = g.input("b1", {3, 8});
  for (const char* needle : {"add_layer_norm", "[3,8]"})
    EXPECT_TRUE(fails_with([&] { g.add_layer_norm(x, b1, ok, ok); }, ErrorCode::shape_mismatch, needle));
  EXPECT_THROW(g.add_layer_norm(x, g.input("b2", {2, 3, 8}, DType::f16), ok, ok), Error);
  EXPECT_THROW(g.add_layer_norm(x, x, bad, ok), Error);
  EXPECT_THROW(g.add_layer_norm(x, x, ok, ok, -1.0f), Error);
}

// The CPU row kernels reduce with subgroup shuffles (row_reduce.glsl): their subgroup variants are
// built and runnable exactly where the device has shuffles; elsewhere the shared-memory ones run.
TEST_F(DeviceTest, LayerNormRowKernelsReduceWithShufflesWhereTheDeviceHasThem) {
  expect_runnable_exactly_where(
      device(), {kernels::Kernel::layer_norm_rows_subgroup, kernels::Kernel::layer_norm_rows_add_subgroup},
      device().info().subgroup_shuffle);
  const bool shuffles = rows_reduce_with_shuffles(device());
  RecordProperty("reduction", shuffles ? "subgroup" : "shared-memory");
  std::printf("[ layer_norm ] reductions: %s (subgroup size %u)\n", shuffles ? "subgroup shuffles" : "shared-memory tree",
              device().info().subgroup_size);
}

}  // namespace
}  // namespace vkformer::testing
