// softmax and log-softmax (scale, causal, additive and key-padding masks) against the
// double-precision reference, plus the numerical edge cases. ctest runs this binary twice: as
// softmax_test (subgroup reductions where the device has them) and as softmax_test_no_subgroup
// with VKFORMER_NO_SUBGROUP_OPS=1 (the shared-memory reduction). On CPU devices rows of whole
// texels (Sk % 4 == 0) go through the row kernel (shaders/softmax_rows.comp), others through the
// workgroup-per-row kernel, so the cases have both kinds of row length.
//
// Tolerances: f32 atol 1e-5 + rtol 1e-5 (fp32 exp and sums against double); f16 atol 2e-3 + rtol
// 2e-3 (the output is rounded to f16, 2^-11 relative; references use the f16-rounded inputs).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "kernel_variants.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// x's shape viewed as [B, H, Sq, Sk] the way the kernel reads it: a key padding mask indexes
// dim 0 as the batch, so rank 3 is [B, 1, Sq, Sk].
std::array<int64_t, 4> as_bhqk(const Shape& s) {
  switch (s.rank()) {
    case 1: return {1, 1, 1, s[0]};
    case 2: return {1, 1, s[0], s[1]};
    case 3: return {s[0], 1, s[1], s[2]};
    default: return {s[0], s[1], s[2], s[3]};
  }
}

// An additive mask: uniform in [-2, 2) with about one entry in 8 at -inf.
std::vector<float> mask_values(size_t n, uint32_t seed) {
  auto v = random_values(n, seed, -2.0f, 2.0f);
  auto pick = random_values(n, seed + 1000, 0.0f, 1.0f);
  for (size_t i = 0; i < n; ++i)
    if (pick[i] < 0.125f) v[i] = -std::numeric_limits<float>::infinity();
  return v;
}

// Padding flags [B, Sk]: about a third of the keys; batch 1 (if any) has every key padded.
std::vector<int32_t> padding_values(int64_t B, int64_t Sk, uint32_t seed) {
  auto pick = random_values(static_cast<size_t>(B * Sk), seed, 0.0f, 1.0f);
  std::vector<int32_t> v(pick.size());
  for (size_t i = 0; i < v.size(); ++i) v[i] = pick[i] < 0.33f ? 1 + static_cast<int32_t>(i % 3) : 0;
  if (B > 1)
    for (int64_t j = 0; j < Sk; ++j) v[Sk + j] = 1;
  return v;
}

struct SoftmaxCase {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  float scale = 1.0f;
  bool causal = false;
  std::optional<Shape> mask;
  bool key_padding = false;
  bool log = false;
};

void PrintTo(const SoftmaxCase& c, std::ostream* os) { *os << c.name; }

std::string case_name(const ::testing::TestParamInfo<SoftmaxCase>& info) {
  return info.param.name + "_" + std::string(dtype_name(info.param.dtype));
}

class SoftmaxTest : public DeviceTestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxTest, MatchesReference) {
  const SoftmaxCase& c = GetParam();
  const auto xv = random_values(c.shape.numel(), 11, -6.0f, 6.0f);
  Graph g;
  Tensor x = g.input("x", c.shape, c.dtype);
  SoftmaxOptions o{.scale = c.scale, .causal = c.causal, .log = c.log};
  std::map<std::string, HostTensor> inputs{{"x", make_tensor(c.shape, xv, c.dtype)}};
  auto [B, H, Sq, Sk] = as_bhqk(c.shape);
  ref::SoftmaxMasks m;
  m.scale = c.scale;
  m.causal = c.causal;
  m.log = c.log;
  std::vector<double> mask_expanded;
  if (c.mask) {
    auto mv = mask_values(c.mask->numel(), 23);
    o.mask = g.input("mask", *c.mask, c.dtype);
    inputs.emplace("mask", make_tensor(*c.mask, mv, c.dtype));
    mask_expanded = broadcast_to(stored(mv, c.dtype), *c.mask, c.shape);
    m.mask = &mask_expanded;
  }
  std::vector<int32_t> padding;
  if (c.key_padding) {
    padding = padding_values(B, Sk, 31);
    o.key_padding_mask = g.input("padding", {B, Sk}, DType::i32);
    inputs.emplace("padding", HostTensor::from_i32({B, Sk}, padding));
    m.key_padding = &padding;
  }
  g.output("y", g.softmax(x, o));
  Executor ex(device(), g);
  auto out = ex.run(inputs);
  auto want = ref::softmax(stored(xv, c.dtype), B, H, Sq, Sk, m);
  EXPECT_TRUE(all_close(out["y"], want, default_tolerance(c.dtype)));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want)));
  for (float y : out["y"].to_f32()) ASSERT_FALSE(std::isnan(y));
}

std::vector<SoftmaxCase> softmax_cases() {
  std::vector<SoftmaxCase> base = {
      {"len1", {1}},
      {"prime_row", {7}, DType::f32, 0.5f},
      {"rows_of_length1", {3, 1}, DType::f32, 1.0f, true},
      {"causal_sq_lt_sk", {5, 13}, DType::f32, 0.7f, true},
      {"causal_sq_gt_sk", {13, 5}, DType::f32, 1.0f, true},
      {"causal_log", {2, 9, 11}, DType::f32, 1.3f, true, {}, false, true},
      {"mask_2d", {2, 3, 17, 31}, DType::f32, 0.25f, false, Shape{17, 31}},
      {"mask_b1qk", {2, 3, 17, 31}, DType::f32, 1.0f, false, Shape{2, 1, 17, 31}},
      {"mask_full", {2, 4, 5, 7}, DType::f32, 1.0f, false, Shape{2, 4, 5, 7}},
      {"mask_per_row", {2, 11, 67}, DType::f32, 1.0f, false, Shape{11, 1}},
      {"padding_3d", {3, 7, 19}, DType::f32, 1.0f, false, {}, true},
      {"padding_4d", {2, 3, 5, 37}, DType::f32, 1.0f, false, {}, true},
      {"padding_log", {2, 3, 5, 37}, DType::f32, 1.0f, false, {}, true, true},
      {"all_masks", {2, 3, 17, 31}, DType::f32, 0.125f, true, Shape{17, 31}, true},
      {"all_masks_log", {3, 2, 19, 13}, DType::f32, 0.5f, true, Shape{3, 1, 19, 13}, true, true},
      {"row_gt_4096", {3, 4133}, DType::f32, 1.0f, true},
      {"row_gt_4096_masked", {2, 1, 5003}, DType::f32, 1.0f, false, Shape{5003}, true},
      {"wide_rows", {2, 257}, DType::f32, 3.0f},
      {"single", {1, 1, 1, 1}, DType::f32, 1.0f, true, Shape{1}, true},
      // Rows of whole texels (Sk % 4 == 0) take the row kernels on CPU devices: in registers up
      // to 8 * 32 texels per row, in two passes beyond; several rows per workgroup.
      {"texel_row_4", {5, 4}, DType::f32, 2.0f, false, {}, false, true},
      {"texel_rows_512", {3, 5, 512}, DType::f32, 0.125f},
      {"texel_causal", {2, 3, 8, 12}, DType::f32, 0.5f, true},
      {"texel_mask_padding", {2, 3, 9, 20}, DType::f32, 1.0f, false, Shape{9, 20}, true},
      {"texel_all_masks_log", {2, 2, 7, 24}, DType::f32, 0.7f, true, Shape{2, 1, 7, 24}, true, true},
      {"texel_long_row_causal", {3, 2052}, DType::f32, 1.0f, true},
      {"texel_long_row_masked", {2, 1, 1100}, DType::f32, 1.0f, false, Shape{1100}, true},
      {"texel_many_rows", {301, 8}, DType::f32, 1.5f, true},
      // Several rows per workgroup (rows / 128 of them), read one row ahead: each row's masks
      // (causal limit, mask row, padding batch) must follow it across query, head and batch
      // boundaries inside a workgroup.
      {"texel_pipelined_rows_all_masks", {4, 3, 40, 64}, DType::f32, 0.5f, true, Shape{3, 40, 64}, true},
      {"texel_pipelined_rows_log", {3, 3, 37, 36}, DType::f32, 1.0f, false, Shape{3, 1, 37, 36}, true, true},
      {"texel_rows_1000_log", {3, 1000}, DType::f32, 0.25f, false, {}, false, true},
  };
  std::vector<SoftmaxCase> all = base;
  for (SoftmaxCase c : base) {
    c.dtype = DType::f16;
    all.push_back(c);
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Cases, SoftmaxTest, ::testing::ValuesIn(softmax_cases()), case_name);

// Runs softmax over `values` shaped `shape` (f32) and returns the outputs.
std::vector<float> run_softmax(Device& device, const Shape& shape, const std::vector<float>& values,
                               SoftmaxOptions o = {}, DType dtype = DType::f32) {
  Graph g;
  Tensor x = g.input("x", shape, dtype);
  g.output("y", g.softmax(x, o));
  Executor ex(device, g);
  return ex.run({{"x", make_tensor(shape, values, dtype)}})["y"].to_f32();
}

TEST_F(DeviceTest, FullyMaskedRowsGiveZerosNotNaN) {
  const float ninf = -std::numeric_limits<float>::infinity();
  for (DType dtype : {DType::f32, DType::f16}) {
    for (bool log : {false, true}) {
      // Row lengths that are not, and are, whole texels (the two CPU kernels).
      for (int w : {70, 72}) {
        SCOPED_TRACE(std::string(dtype_name(dtype)) + (log ? " log-softmax" : " softmax") +
                     ", rows of " + std::to_string(w));
        const float masked = log ? ninf : 0.0f;
        // All -inf additive mask on row 1 of 3.
        {
          Graph g;
          Tensor x = g.input("x", {3, w}, dtype);
          Tensor mk = g.input("mask", {3, w}, dtype);
          SoftmaxOptions o;
          o.mask = mk;
          o.log = log;
          g.output("y", g.softmax(x, o));
          std::vector<float> mv(3 * w, 0.0f);
          for (int j = 0; j < w; ++j) mv[w + j] = ninf;
          Executor ex(device(), g);
          auto y = ex.run({{"x", make_tensor({3, w}, random_values(3 * w, 3), dtype)},
                           {"mask", make_tensor({3, w}, mv, dtype)}})["y"].to_f32();
          for (int j = 0; j < w; ++j) EXPECT_EQ(y[w + j], masked) << "key " << j;
          for (int r : {0, 2}) {
            double sum = 0;
            for (int j = 0; j < w; ++j) sum += log ? std::exp(double(y[r * w + j])) : y[r * w + j];
            EXPECT_NEAR(sum, 1.0, 1e-2) << "row " << r;
          }
        }
        // Every key of batch 0 padded (rows of w / 8: 9 or 8 keys).
        {
          const int k = w / 8;
          Graph g;
          Tensor x = g.input("x", {2, 4, k}, dtype);
          Tensor kp = g.input("padding", {2, k}, DType::i32);
          SoftmaxOptions o;
          o.key_padding_mask = kp;
          o.log = log;
          g.output("y", g.softmax(x, o));
          std::vector<int32_t> pad(2 * k, 0);
          for (int j = 0; j < k; ++j) pad[j] = 1;
          Executor ex(device(), g);
          auto y = ex.run({{"x", make_tensor({2, 4, k}, random_values(8 * k, 4), dtype)},
                           {"padding", HostTensor::from_i32({2, k}, pad)}})["y"].to_f32();
          for (int i = 0; i < 4 * k; ++i) EXPECT_EQ(y[i], masked) << "element " << i;
          for (int i = 4 * k; i < 8 * k; ++i) EXPECT_FALSE(std::isnan(y[i]) || std::isinf(y[i]));
        }
        // Causal with Sq > Sk: query i sees keys j <= i - (Sq - Sk), so rows 0..Sq-Sk-1 see
        // nothing ([6, 3], or [7, 4] for whole texels).
        {
          const int sk = w == 70 ? 3 : 4, sq = sk + 3;
          SoftmaxOptions o;
          o.causal = true;
          o.log = log;
          auto y = run_softmax(device(), {sq, sk}, random_values(sq * sk, 5), o, dtype);
          for (int i = 0; i < 3 * sk; ++i) EXPECT_EQ(y[i], masked) << "element " << i;
          EXPECT_EQ(y[3 * sk + 0], log ? 0.0f : 1.0f);  // row 3 sees key 0 only
          EXPECT_EQ(y[3 * sk + 1], masked);
        }
      }
    }
  }
}

TEST_F(DeviceTest, HugeLogitsStayFinite) {
  // Logits of +-1e10: the max is subtracted before exp, so nothing overflows.
  std::vector<float> x = {1e10f, -1e10f, 0.0f, 1e10f, -1e10f, -1e10f, -1e10f, -1e10f};
  auto y = run_softmax(device(), {2, 4}, x);
  std::vector<float> want = {0.5f, 0.0f, 0.0f, 0.5f, 0.25f, 0.25f, 0.25f, 0.25f};
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], want[i]) << "element " << i;
  SoftmaxOptions o;
  o.log = true;
  auto ly = run_softmax(device(), {2, 4}, x, o);
  std::vector<double> lwant = {-std::log(2.0), -2e10, -1e10, -std::log(2.0), -std::log(4.0),
                               -std::log(4.0), -std::log(4.0), -std::log(4.0)};
  for (size_t i = 0; i < ly.size(); ++i) {
    EXPECT_TRUE(std::isfinite(ly[i])) << "element " << i;
    EXPECT_NEAR(ly[i], lwant[i], 1e-6 * std::abs(lwant[i]) + 1e-6) << "element " << i;
  }
  // Scaled up beyond float range they would overflow; scaled down they are ordinary.
  o = {};
  o.scale = 1e-10f;
  auto sy = run_softmax(device(), {1, 2}, {1e10f, -1e10f}, o);
  EXPECT_NEAR(sy[0], std::exp(1.0) / (std::exp(1.0) + std::exp(-1.0)), 1e-6);
}

TEST_F(DeviceTest, RowsOfLengthOne) {
  for (bool log : {false, true}) {
    SoftmaxOptions o;
    o.log = log;
    auto y = run_softmax(device(), {5, 1}, {-3.0f, 0.0f, 7.0f, 1e10f, -1e10f}, o);
    for (float v : y) EXPECT_EQ(v, log ? 0.0f : 1.0f);
  }
}

TEST_F(DeviceTest, MoreRowsThanOneGridDimension) {
  // 70001 rows > 65535 workgroups in x: rows_grid spills into y.
  const Shape s{70001, 3};
  auto xv = random_values(s.numel(), 9, -3.0f, 3.0f);
  SoftmaxOptions o;
  o.causal = true;  // Sq > Sk: most rows see all 3 keys, the first two fewer
  auto y = run_softmax(device(), s, xv, o);
  ref::SoftmaxMasks m;
  m.causal = true;
  auto want = ref::softmax(stored(xv, DType::f32), 1, 1, 70001, 3, m);
  HostTensor got = HostTensor::from_f32(s, y);
  EXPECT_TRUE(all_close(got, want, default_tolerance(DType::f32)));
}

// The worked example from the project notes: causal softmax of Q·Kᵀ / sqrt(4).
TEST_F(DeviceTest, WorkedExampleProbabilities) {
  const std::vector<float> q = {-1.6964f, 1.3355f,  -0.5133f, 0.0674f, 1.6595f, -0.4445f,
                                -0.1917f, 1.7729f,  -0.1650f, -2.9899f, -3.8893f, 1.2756f};
  const std::vector<float> k = {0.6023f,  -0.7260f, 1.1799f,  0.2383f, -0.6521f, 4.4224f,
                                -3.7460f, -1.2657f, -0.7106f, -4.3429f, 4.2984f, -2.3664f};
  const std::vector<double> probs = {1, 0, 0, 0.9546, 0.0454, 0, 0.2563, 0.7156, 0.0281};
  Graph g;
  Tensor qt = g.input("q", {3, 4}), kt = g.input("k", {3, 4});
  MatmulOptions mo;
  mo.transpose_b = true;
  SoftmaxOptions so;
  so.scale = 0.5f;  // 1 / sqrt(4)
  so.causal = true;
  g.output("p", g.softmax(g.matmul(qt, kt, mo), so));
  Executor ex(device(), g);
  auto out = ex.run({{"q", HostTensor::from_f32({3, 4}, q)}, {"k", HostTensor::from_f32({3, 4}, k)}});
  EXPECT_TRUE(all_close(out["p"], probs, {2e-4, 0.0}));
}

TEST_F(DeviceTest, SoftmaxRejectsBadMasks) {
  Graph g;
  Tensor x = g.input("x", {2, 5, 7});
  auto expect_shape_error = [&](SoftmaxOptions o, const char* fragment) {
    EXPECT_TRUE(fails_with([&] { g.softmax(x, o); }, ErrorCode::shape_mismatch, fragment));
  };
  SoftmaxOptions o;
  o.mask = g.input("m1", {5, 6});
  expect_shape_error(o, "[5,6]");
  o.mask = g.input("m2", {3, 5, 7});  // would enlarge x
  expect_shape_error(o, "[3,5,7]");
  o.mask = g.input("m3", {5, 7}, DType::f16);
  expect_shape_error(o, "dtype");
  o = {};
  o.key_padding_mask = g.input("p1", {2, 6}, DType::i32);
  expect_shape_error(o, "[2,6]");
  o.key_padding_mask = g.input("p2", {2, 7});  // f32, not i32
  expect_shape_error(o, "i32");
  Tensor x2 = g.input("x2", {5, 7});
  o.key_padding_mask = g.input("p3", {5, 7}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.softmax(x2, o); }, ErrorCode::shape_mismatch, ""));
  EXPECT_TRUE(fails_with([&] { g.softmax(g.input("ids", {4}, DType::i32)); }, ErrorCode::shape_mismatch, ""));
}

// The CPU row kernels reduce with subgroup shuffles (row_reduce.glsl): their subgroup variants are
// built and runnable exactly where the device has shuffles; elsewhere the shared-memory ones run.
TEST_F(DeviceTest, RowKernelsReduceWithShufflesWhereTheDeviceHasThem) {
  expect_runnable_exactly_where(
      device(), {kernels::Kernel::softmax_rows_subgroup, kernels::Kernel::softmax_rows_mask4_subgroup},
      device().info().subgroup_shuffle);
  std::printf("[ softmax  ] reductions: %s\n", rows_reduce_with_shuffles(device()) ? "subgroup shuffles" : "shared memory");
}

}  // namespace
}  // namespace vkformer::testing
