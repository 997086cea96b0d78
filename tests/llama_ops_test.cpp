// The Llama block's ops against double-precision references written here: rms_norm, silu, mul,
// swiglu (and silu fused into linear), rope in both pairings with static and run-time offsets.
// ctest runs this binary also with VKFORMER_NO_SUBGROUP_OPS=1 (rms_norm's shared-memory
// reduction) and with VKFORMER_TUNING_AS_GPU=1 (rms_norm's workgroup-per-row configuration).
//
// Tolerances: rms_norm, silu, mul and swiglu are fp32 arithmetic on O(1..10) values:
// default_tolerance (f32 1e-5 abs + rel; f16 adds the output rounding, 2^-11 relative). rope is
// compared with the exact rotation by theta = pos * base^(-2i/dims) in double; the kernel computes
// theta in fp32 as llama.cpp does (inv_freq rounded to fp32, then pos * inv_freq rounded), which
// moves theta by at most 2 * 2^-24 * theta. Each output of the pair (a, b) may then differ by
// (|x_a| + |x_b|) * (theta * 2^-22 + 4e-6): twice that angle bound, plus 4e-6 for the range
// reduction, cos/sin and the fp32 products; f16 adds 2^-11 |want|.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {


double silu_ref(double x) { return x / (1.0 + std::exp(-x)); }

// ---------------------------------------------------------------------------------------------
// rms_norm


std::vector<double> rms_norm_ref(const std::vector<double>& x, int64_t rows, int64_t d,
                                 const std::vector<double>& w, double eps) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0.0;
    for (int64_t j = 0; j < d; ++j) ss += x[r * d + j] * x[r * d + j];
    const double scale = 1.0 / std::sqrt(ss / static_cast<double>(d) + eps);
    for (int64_t j = 0; j < d; ++j) y[r * d + j] = x[r * d + j] * scale * w[j];
  }
  return y;
}

class RmsNormTest : public DeviceTestWithParam<ShapeCase> {};

TEST_P(RmsNormTest, MatchesReference) {
  const auto& [shape, dtype] = GetParam();
  const int64_t d = shape.back(), rows = shape.numel() / d;
  auto xv = random_values(shape.numel(), 11, -3.0f, 3.0f);
  auto wv = random_values(d, 12, 0.5f, 1.5f);
  Graph g;
  Tensor x = g.input("x", shape, dtype);
  g.output("y", g.rms_norm(x, g.constant("w", make_tensor({d}, wv, dtype)), 1e-5f));
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 1u);
  auto out = ex.run({{"x", make_tensor(shape, xv, dtype)}});
  auto want = rms_norm_ref(stored(xv, dtype), rows, d, stored(wv, dtype), 1e-5);
  EXPECT_TRUE(all_close(out["y"], want, default_tolerance(dtype)));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want)));
}

// D = 1, odd and prime widths, SmolLM2's 576 and a width above any workgroup (4099); row counts
// that are primes, and 301 rows (several rows per workgroup on CPU devices, the last one short).
// On CPU devices rows of whole texels (D % 4 == 0) take layer norm's row kernel in its RMS form
// (shaders/layer_norm_rows.comp), other rows shaders/rms_norm.comp: both kinds of D are here.
INSTANTIATE_TEST_SUITE_P(
    Shapes, RmsNormTest,
    ::testing::Values(ShapeCase{{1}, DType::f32}, ShapeCase{{7, 1}, DType::f32},
                      ShapeCase{{5}, DType::f32}, ShapeCase{{3, 7}, DType::f32},
                      ShapeCase{{2, 3, 64}, DType::f32}, ShapeCase{{5, 257}, DType::f32},
                      ShapeCase{{2, 3, 5, 67}, DType::f32}, ShapeCase{{7, 576}, DType::f32},
                      ShapeCase{{2, 4099}, DType::f32}, ShapeCase{{301, 576}, DType::f32},
                      ShapeCase{{1}, DType::f16}, ShapeCase{{13, 31}, DType::f16},
                      ShapeCase{{7, 576}, DType::f16}, ShapeCase{{301, 67}, DType::f16},
                      // Rows of whole texels beyond the row kernel's registers on CPU devices
                      // (D > 8 * 32 * 4): two passes, several rows per workgroup.
                      ShapeCase{{2, 4100}, DType::f32}, ShapeCase{{301, 1100}, DType::f32},
                      ShapeCase{{2, 4100}, DType::f16}),
    shape_case_name);

// A zero row gives zeros (eps keeps the scale finite); rows of large values (|x| ~ 1e4, squares
// ~ 1e8 summed in fp32) and tiny ones (1e-3, where eps = 1e-5 is not negligible) stay accurate.
TEST_F(DeviceTest, RmsNormZeroLargeAndTinyRows) {
  const int64_t d = 576;
  std::vector<float> xv(3 * d);
  auto noise = random_values(d, 13, -1.0f, 1.0f);
  for (int64_t j = 0; j < d; ++j) {
    xv[j] = 0.0f;
    xv[d + j] = 1e4f * noise[j];
    xv[2 * d + j] = 1e-3f * noise[j];
  }
  auto wv = random_values(d, 14, -2.0f, 2.0f);
  Graph g;
  Tensor x = g.input("x", {3, d});
  g.output("y", g.rms_norm(x, g.constant("w", make_tensor({d}, wv, DType::f32))));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor({3, d}, xv, DType::f32)}});
  auto want = rms_norm_ref(stored(xv, DType::f32), 3, d, stored(wv, DType::f32), 1e-5);
  EXPECT_TRUE(all_close(out["y"], want, default_tolerance(DType::f32)));
  for (int64_t j = 0; j < d; ++j) EXPECT_EQ(out["y"].to_f32()[j], 0.0f);
}

// Tensors beyond one binding go in windows of rows: a device whose binding limit is lowered to
// 8 KiB (VKFORMER_MAX_BINDING_BYTES) splits 37 rows of 576 f32 (2304 bytes each) into several
// dispatches, on the CPU and the GPU configuration.
TEST_F(DeviceTest, RmsNormOverWindowsOfRows) {
  const int64_t rows = 37, d = 576;
  auto xv = random_values(rows * d, 15, -2.0f, 2.0f), wv = random_values(d, 16, 0.5f, 1.5f);
  const auto want = rms_norm_ref(stored(xv, DType::f32), rows, d, stored(wv, DType::f32), 1e-5);
  for (const char* as_gpu : {"0", "1"}) {
    SCOPED_TRACE(std::string("VKFORMER_TUNING_AS_GPU=") + as_gpu);
    Device dev = open_test_device_with_env(
        {{"VKFORMER_MAX_BINDING_BYTES", "8192"}, {"VKFORMER_TUNING_AS_GPU", as_gpu}});
    Graph g;
    Tensor x = g.input("x", {rows, d});
    g.output("y", g.rms_norm(x, g.constant("w", make_tensor({d}, wv, DType::f32))));
    Executor ex(dev, g);
    EXPECT_GT(ex.stats().dispatches, 1u);
    auto out = ex.run({{"x", make_tensor({rows, d}, xv, DType::f32)}});
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(DType::f32)));
  }
}

TEST_F(DeviceTest, RmsNormRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 8});
  Tensor w7 = g.input("w7", {7});
  Tensor w16 = g.input("w16", {8}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.rms_norm(x, w7); }, ErrorCode::shape_mismatch, "weight must be [8], got [7]"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm(x, w16); }, ErrorCode::shape_mismatch, "weight must be f32"));
  Tensor w = g.input("w", {8});
  EXPECT_TRUE(fails_with([&] { g.rms_norm(x, w, -1.0f); }, ErrorCode::invalid_argument, "eps must be >= 0"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm(x, w, NAN); }, ErrorCode::invalid_argument, "eps is"));
}

// rms_norm_add: residual + rms_norm(x) in one dispatch (Gemma's post-norms), in both kernels (row
// kernel for whole texels on CPU devices, rms_norm.comp for odd D and GPUs), f16 (the sum in fp32,
// one rounding), and over windows of rows (every operand, the residual included, windowed alike).
TEST_F(DeviceTest, RmsNormAddMatchesReference) {
  for (const ShapeCase& c : {ShapeCase{{1, 640}, DType::f32}, ShapeCase{{3, 67}, DType::f32},
                             ShapeCase{{301, 576}, DType::f32}, ShapeCase{{2, 4100}, DType::f32},
                             ShapeCase{{7, 576}, DType::f16}, ShapeCase{{5, 31}, DType::f16}}) {
    SCOPED_TRACE(shape_name(c.shape, c.dtype));
    const int64_t d = c.shape.back(), rows = c.shape.numel() / d;
    auto xv = random_values(c.shape.numel(), 21, -3.0f, 3.0f), rv = random_values(c.shape.numel(), 22, -5.0f, 5.0f);
    auto wv = random_values(d, 23, 0.5f, 1.5f);
    Graph g;
    Tensor x = g.input("x", c.shape, c.dtype), r = g.input("r", c.shape, c.dtype);
    g.output("y", g.rms_norm_add(x, g.constant("w", make_tensor({d}, wv, c.dtype)), r, 1e-6f));
    Executor ex(device(), g);
    EXPECT_EQ(ex.stats().dispatches, 1u);
    auto out = ex.run({{"x", make_tensor(c.shape, xv, c.dtype)}, {"r", make_tensor(c.shape, rv, c.dtype)}});
    auto want = rms_norm_ref(stored(xv, c.dtype), rows, d, stored(wv, c.dtype), 1e-6);
    const auto rs = stored(rv, c.dtype);
    for (size_t i = 0; i < want.size(); ++i) want[i] += rs[i];
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(c.dtype)));
    RecordProperty("max_abs_error_" + shape_name(c.shape, c.dtype), sci(max_abs_error(out["y"], want)));
  }
}

TEST_F(DeviceTest, RmsNormAddOverWindowsOfRows) {
  const int64_t rows = 37, d = 576;
  auto xv = random_values(rows * d, 24, -2.0f, 2.0f), rv = random_values(rows * d, 25, -2.0f, 2.0f);
  auto wv = random_values(d, 26, 0.5f, 1.5f);
  auto want = rms_norm_ref(stored(xv, DType::f32), rows, d, stored(wv, DType::f32), 1e-5);
  for (size_t i = 0; i < want.size(); ++i) want[i] += stored(rv, DType::f32)[i];
  for (const char* as_gpu : {"0", "1"}) {
    SCOPED_TRACE(std::string("VKFORMER_TUNING_AS_GPU=") + as_gpu);
    Device dev = open_test_device_with_env(
        {{"VKFORMER_MAX_BINDING_BYTES", "8192"}, {"VKFORMER_TUNING_AS_GPU", as_gpu}});
    Graph g;
    Tensor x = g.input("x", {rows, d}), r = g.input("r", {rows, d});
    g.output("y", g.rms_norm_add(x, g.constant("w", make_tensor({d}, wv, DType::f32)), r));
    Executor ex(dev, g);
    EXPECT_GT(ex.stats().dispatches, 1u);
    auto out = ex.run({{"x", make_tensor({rows, d}, xv, DType::f32)}, {"r", make_tensor({rows, d}, rv, DType::f32)}});
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(DType::f32)));
  }
}

TEST_F(DeviceTest, RmsNormAddRejectsBadResidual) {
  Graph g;
  Tensor x = g.input("x", {2, 8}), w = g.input("w", {8});
  Tensor r3 = g.input("r3", {3, 8}), r16 = g.input("r16", {2, 8}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.rms_norm_add(x, w, r3); }, ErrorCode::shape_mismatch,
                         "x is [2,8] f32: residual must have its shape, got [3,8]"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm_add(x, w, r16); }, ErrorCode::shape_mismatch, "residual must be f32"));
}

// rms_norm_qk: a packed qkv's query heads normed with one weight, key heads with another, value
// heads copied bit for bit; shapes with several tokens, head dims odd and whole texels, f16, and
// windows of whole tokens under a small binding limit on the CPU and GPU configurations.
std::vector<double> rms_norm_qk_ref(const std::vector<double>& x, int64_t tokens, int heads, int kv_heads, int64_t d,
                                    const std::vector<double>& wq, const std::vector<double>& wk) {
  std::vector<double> y = x;
  const int64_t period = heads + 2 * kv_heads;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads + kv_heads; ++h) {
      const int64_t at = (t * period + h) * d;
      const std::vector<double> row(x.begin() + at, x.begin() + at + d);
      const std::vector<double> normed = rms_norm_ref(row, 1, d, h < heads ? wq : wk, 1e-6);
      std::copy(normed.begin(), normed.end(), y.begin() + at);
    }
  return y;
}

TEST_F(DeviceTest, RmsNormQkMatchesReference) {
  struct Case {
    int64_t batch, tokens;
    int heads, kv_heads;
    int64_t d;
    DType dtype;
  };
  for (const Case& c : {Case{1, 1, 4, 1, 256, DType::f32}, Case{2, 3, 4, 2, 8, DType::f32},
                        Case{1, 5, 3, 3, 67, DType::f32}, Case{1, 301, 2, 1, 64, DType::f32},
                        Case{1, 3, 4, 2, 64, DType::f16}}) {
    const Shape shape{c.batch, c.tokens, (c.heads + 2 * c.kv_heads) * c.d};
    SCOPED_TRACE(shape_name(shape, c.dtype) + " heads " + std::to_string(c.heads) + "+" + std::to_string(c.kv_heads));
    auto xv = random_values(shape.numel(), 31, -3.0f, 3.0f);
    auto wq = random_values(c.d, 32, 0.5f, 1.5f), wk = random_values(c.d, 33, -1.5f, -0.5f);
    Graph g;
    Tensor x = g.input("qkv", shape, c.dtype);
    g.output("y", g.rms_norm_qk(x, c.heads, c.kv_heads, g.constant("wq", make_tensor({c.d}, wq, c.dtype)),
                                g.constant("wk", make_tensor({c.d}, wk, c.dtype)), 1e-6f));
    Executor ex(device(), g);
    EXPECT_EQ(ex.stats().dispatches, 1u);
    auto out = ex.run({{"qkv", make_tensor(shape, xv, c.dtype)}});
    const auto in = stored(xv, c.dtype);
    auto want = rms_norm_qk_ref(in, c.batch * c.tokens, c.heads, c.kv_heads, c.d, stored(wq, c.dtype),
                                stored(wk, c.dtype));
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(c.dtype)));
    // The value heads are copies.
    const std::vector<float> got = out["y"].to_f32();
    const int64_t period = c.heads + 2 * c.kv_heads;
    for (int64_t t = 0; t < c.batch * c.tokens; ++t)
      for (int64_t j = (c.heads + c.kv_heads) * c.d; j < period * c.d; ++j)
        ASSERT_EQ(got[t * period * c.d + j], static_cast<float>(in[t * period * c.d + j])) << "token " << t << " " << j;
  }
}

TEST_F(DeviceTest, RmsNormQkOverWindowsOfTokens) {
  const int64_t tokens = 37, d = 64;
  const int heads = 3, kv_heads = 1;
  const Shape shape{1, tokens, (heads + 2 * kv_heads) * d};  // 1280 bytes a token
  auto xv = random_values(shape.numel(), 34, -2.0f, 2.0f);
  auto wq = random_values(d, 35, 0.5f, 1.5f), wk = random_values(d, 36, 0.5f, 1.5f);
  const auto want = rms_norm_qk_ref(stored(xv, DType::f32), tokens, heads, kv_heads, d, stored(wq, DType::f32),
                                    stored(wk, DType::f32));
  for (const char* as_gpu : {"0", "1"}) {
    SCOPED_TRACE(std::string("VKFORMER_TUNING_AS_GPU=") + as_gpu);
    Device dev = open_test_device_with_env(
        {{"VKFORMER_MAX_BINDING_BYTES", "8192"}, {"VKFORMER_TUNING_AS_GPU", as_gpu}});
    Graph g;
    Tensor x = g.input("qkv", shape);
    g.output("y", g.rms_norm_qk(x, heads, kv_heads, g.constant("wq", make_tensor({d}, wq, DType::f32)),
                                g.constant("wk", make_tensor({d}, wk, DType::f32)), 1e-6f));
    Executor ex(dev, g);
    EXPECT_GT(ex.stats().dispatches, 1u);
    auto out = ex.run({{"qkv", make_tensor(shape, xv, DType::f32)}});
    EXPECT_TRUE(all_close(out["y"], want, default_tolerance(DType::f32)));
  }
}

TEST_F(DeviceTest, RmsNormQkRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("qkv", {1, 2, 48});  // 4 + 2 x 1 heads of 8
  Tensor w8 = g.input("w8", {8}), w7 = g.input("w7", {7}), w16 = g.input("w16", {8}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.rms_norm_qk(x, 4, 1, w8, w7); }, ErrorCode::shape_mismatch,
                         "q_weight and k_weight must be [D] with the last dim (H + 2 Hkv) D, got [8] and [7]"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm_qk(x, 3, 1, w8, w8); }, ErrorCode::shape_mismatch, "for 3 + 2 x 1 heads"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm_qk(x, 4, 1, w8, w16); }, ErrorCode::shape_mismatch, "k_weight must be f32"));
  EXPECT_TRUE(fails_with([&] { g.rms_norm_qk(x, 4, 0, w8, w8); }, ErrorCode::invalid_argument,
                         "heads and kv_heads must be >= 1, got 4 and 0"));
}

// ---------------------------------------------------------------------------------------------
// silu, mul, swiglu

class GatedTest : public DeviceTestWithParam<ShapeCase> {};

TEST_P(GatedTest, SiluMulSwigluMatchReference) {
  const auto& [shape, dtype] = GetParam();
  const int64_t d = shape.back();
  auto av = random_values(shape.numel(), 21, -8.0f, 8.0f);
  auto bv = random_values(shape.numel(), 22, -3.0f, 3.0f);
  auto rv = random_values(d, 23, -2.0f, 2.0f);
  Graph g;
  Tensor a = g.input("a", shape, dtype);
  Tensor b = g.input("b", shape, dtype);
  Tensor row = g.input("row", {d}, dtype);
  g.output("silu", g.silu(a));
  g.output("mul", g.mul(a, b));
  g.output("mul_row", g.mul(a, row));
  g.output("row_mul", g.mul(row, a));  // the broadcast operand first
  g.output("swiglu", g.swiglu(a, b));
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 5u);
  auto out = ex.run({{"a", make_tensor(shape, av, dtype)},
                     {"b", make_tensor(shape, bv, dtype)},
                     {"row", make_tensor({d}, rv, dtype)}});
  auto as = stored(av, dtype), bs = stored(bv, dtype), rs = stored(rv, dtype);
  std::vector<double> silu(as.size()), mul(as.size()), mul_row(as.size()), swiglu(as.size());
  for (size_t i = 0; i < as.size(); ++i) {
    silu[i] = silu_ref(as[i]);
    mul[i] = as[i] * bs[i];
    mul_row[i] = as[i] * rs[i % d];
    swiglu[i] = silu_ref(as[i]) * bs[i];
  }
  const Tolerance tol = default_tolerance(dtype);
  EXPECT_TRUE(all_close(out["silu"], silu, tol));
  EXPECT_TRUE(all_close(out["mul"], mul, tol));
  EXPECT_TRUE(all_close(out["mul_row"], mul_row, tol));
  EXPECT_TRUE(all_close(out["row_mul"], mul_row, tol));
  EXPECT_TRUE(all_close(out["swiglu"], swiglu, tol));
  RecordProperty("swiglu_max_abs_error", sci(max_abs_error(out["swiglu"], swiglu)));
}

// Odd element counts (scalar kernels) and whole vec4s (1536: SmolLM2's FFN width).
INSTANTIATE_TEST_SUITE_P(
    Shapes, GatedTest,
    ::testing::Values(ShapeCase{{1}, DType::f32}, ShapeCase{{7}, DType::f32},
                      ShapeCase{{3, 257}, DType::f32}, ShapeCase{{2, 3, 5, 67}, DType::f32},
                      ShapeCase{{5, 1536}, DType::f32}, ShapeCase{{1}, DType::f16},
                      ShapeCase{{13, 31}, DType::f16}, ShapeCase{{5, 1536}, DType::f16}),
    shape_case_name);

// silu at the ends of its range: -100 and -1000 (exp(-x) overflows: the limit -0), 100, 0.
TEST_F(DeviceTest, SiluSaturates) {
  const std::vector<float> x{-1000.0f, -100.0f, -20.0f, 0.0f, 20.0f, 100.0f, 1000.0f};
  Graph g;
  Tensor t = g.input("x", {7});
  g.output("y", g.silu(t));
  Executor ex(device(), g);
  auto y = ex.run({{"x", HostTensor::from_f32({7}, x)}})["y"].to_f32();
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = silu_ref(x[i]);
    EXPECT_FALSE(std::isnan(y[i])) << "silu(" << x[i] << ")";
    EXPECT_NEAR(y[i], want, 1e-6 * std::max(1.0, std::abs(want))) << "silu(" << x[i] << ")";
  }
}

// silu fused into linear's epilogue (Activation::silu), as in gate = silu(x W_gateᵀ).
TEST_F(DeviceTest, LinearWithSiluMatchesReference) {
  const int64_t m = 5, k = 67, n = 37;
  auto xv = random_values(m * k, 31), wv = random_values(n * k, 32);
  Graph g;
  Tensor x = g.input("x", {m, k});
  Tensor w = g.constant("w", make_tensor({n, k}, wv, DType::f32));
  g.output("y", g.linear(x, w, {}, Activation::silu));
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor({m, k}, xv, DType::f32)}});
  std::vector<double> want(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (int64_t c = 0; c < k; ++c) s += double(xv[i * k + c]) * double(wv[j * k + c]);
      want[i * n + j] = silu_ref(s);
    }
  EXPECT_TRUE(all_close(out["y"], want, default_tolerance(DType::f32)));
}

TEST_F(DeviceTest, GatedOpsRejectBadArguments) {
  Graph g;
  Tensor a = g.input("a", {2, 8});
  Tensor b = g.input("b", {2, 7});
  Tensor h = g.input("h", {2, 8}, DType::f16);
  Tensor row = g.input("row", {8});
  EXPECT_TRUE(fails_with([&] { g.mul(a, b); }, ErrorCode::shape_mismatch, "do not broadcast"));
  EXPECT_TRUE(fails_with([&] { g.mul(a, h); }, ErrorCode::shape_mismatch, "dtypes differ"));
  EXPECT_TRUE(fails_with([&] { g.swiglu(a, b); }, ErrorCode::shape_mismatch, "same shape and dtype"));
  EXPECT_TRUE(fails_with([&] { g.swiglu(a, row); }, ErrorCode::shape_mismatch, "same shape and dtype"));
  EXPECT_TRUE(fails_with([&] { g.swiglu(a, h); }, ErrorCode::shape_mismatch, "same shape and dtype"));
  Tensor ids = g.input("ids", {2}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.silu(ids); }, ErrorCode::shape_mismatch, "must be f32 or f16"));
}

// ---------------------------------------------------------------------------------------------
// rope

struct RopeCase {
  Shape shape;  // [B, H, S, D]
  DType dtype;
  RopeOptions::Style style;
  int64_t dims;  // -1: D
  double base;
  int64_t offset;
  int32_t run_offset;  // >= 0: passed as offset_tensor at run time
};

std::string rope_name(const ::testing::TestParamInfo<RopeCase>& info) {
  const RopeCase& c = info.param;
  std::string s = shape_name(c.shape, c.dtype);
  s += c.style == RopeOptions::Style::neox ? "_neox" : "_interleaved";
  if (c.dims >= 0) s += "_dims" + std::to_string(c.dims);
  s += "_pos" + std::to_string(c.offset + std::max(c.run_offset, 0));
  if (c.run_offset >= 0) s += "_runtime";
  return s;
}

// The exact rotation in double and each element's tolerance (see the file's comment).
struct RopeWant {
  std::vector<double> value, tol;
};

RopeWant rope_ref(const std::vector<double>& x, const Shape& shape, RopeOptions::Style style,
                  int64_t dims, double base, int64_t first_pos, DType dtype) {
  const int64_t d = shape.back(), s = shape[-2], rows = shape.numel() / d;
  RopeWant w{x, std::vector<double>(x.size(), 0.0)};
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(first_pos + r % s);
    for (int64_t i = 0; i < dims / 2; ++i) {
      const int64_t ia = r * d + (style == RopeOptions::Style::neox ? i : 2 * i);
      const int64_t ib = ia + (style == RopeOptions::Style::neox ? dims / 2 : 1);
      const double theta = pos * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(dims));
      const double xa = x[ia], xb = x[ib];
      w.value[ia] = xa * std::cos(theta) - xb * std::sin(theta);
      w.value[ib] = xa * std::sin(theta) + xb * std::cos(theta);
      const double t = (std::abs(xa) + std::abs(xb)) * (theta * std::ldexp(1.0, -22) + 4e-6);
      w.tol[ia] = w.tol[ib] = t;
    }
  }
  for (size_t e = 0; e < x.size(); ++e)
    w.tol[e] += dtype == DType::f16 ? std::abs(w.value[e]) * std::ldexp(1.0, -11) + 1e-7 : 1e-7;
  return w;
}

::testing::AssertionResult rope_close(const HostTensor& got, const RopeWant& want) {
  auto g = got.to_f32();
  double worst = -1.0;
  size_t at = 0;
  for (size_t e = 0; e < g.size(); ++e) {
    const double excess = std::abs(g[e] - want.value[e]) - want.tol[e];
    if (!(excess <= 0.0) && (worst < 0.0 || !(excess <= worst))) worst = std::isnan(excess) ? 1e30 : excess, at = e;
  }
  if (worst < 0.0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "element " << at << ": got " << g[at] << ", want "
                                       << want.value[at] << " within " << want.tol[at];
}

class RopeTest : public DeviceTestWithParam<RopeCase> {};

TEST_P(RopeTest, MatchesExactRotation) {
  const RopeCase& c = GetParam();
  auto xv = random_values(c.shape.numel(), 41, -2.0f, 2.0f);
  Graph g;
  Tensor x = g.input("x", c.shape, c.dtype);
  RopeOptions o{.style = c.style, .dims = c.dims, .freq_base = c.base, .offset = c.offset};
  std::map<std::string, HostTensor> inputs{{"x", make_tensor(c.shape, xv, c.dtype)}};
  if (c.run_offset >= 0) {
    o.offset_tensor = g.input("pos", {1}, DType::i32);
    inputs.emplace("pos", HostTensor::from_i32({1}, std::vector<int32_t>{c.run_offset}));
  }
  g.output("y", g.rope(x, o));
  Executor ex(device(), g);
  EXPECT_EQ(ex.stats().dispatches, 1u);
  auto out = ex.run(inputs);
  const int64_t dims = c.dims < 0 ? c.shape.back() : c.dims;
  auto want = rope_ref(stored(xv, c.dtype), c.shape, c.style, dims, c.base,
                       c.offset + std::max(c.run_offset, 0), c.dtype);
  EXPECT_TRUE(rope_close(out["y"], want));
  RecordProperty("max_abs_error", sci(max_abs_error(out["y"], want.value)));
}

using Style = RopeOptions::Style;
// One element pair; SmolLM2's heads (D = 64, base 100000) at positions 0..6 and near 8000,
// static and at run time; a partial rotation (dims 32 of 64; dims 4 of an odd D = 7, whose
// three last columns pass through); 300 rows of D = 128 (more items than a workgroup).
INSTANTIATE_TEST_SUITE_P(
    Cases, RopeTest,
    ::testing::Values(
        RopeCase{{1, 1, 1, 2}, DType::f32, Style::interleaved, -1, 10000.0, 3, -1},
        RopeCase{{2, 3, 7, 64}, DType::f32, Style::interleaved, -1, 100000.0, 0, -1},
        RopeCase{{2, 3, 7, 64}, DType::f32, Style::neox, -1, 100000.0, 0, -1},
        RopeCase{{1, 9, 11, 64}, DType::f32, Style::interleaved, -1, 100000.0, 7990, -1},
        RopeCase{{1, 9, 11, 64}, DType::f32, Style::neox, -1, 100000.0, 0, 7990},
        RopeCase{{1, 3, 1, 64}, DType::f32, Style::interleaved, -1, 100000.0, 5, 8000},
        RopeCase{{2, 2, 5, 64}, DType::f32, Style::neox, 32, 10000.0, 2, -1},
        RopeCase{{1, 3, 13, 7}, DType::f32, Style::interleaved, 4, 10000.0, 0, 17},
        RopeCase{{1, 3, 13, 7}, DType::f32, Style::neox, 4, 10000.0, 0, -1},
        RopeCase{{1, 2, 150, 128}, DType::f32, Style::neox, -1, 500000.0, 1000, -1},
        RopeCase{{2, 3, 7, 64}, DType::f16, Style::interleaved, -1, 100000.0, 0, 4000},
        RopeCase{{1, 3, 13, 7}, DType::f16, Style::neox, 6, 10000.0, 40, -1}),
    rope_name);

// Linear scaling (freq_scale: Gemma 3's global layers, rope.scaling.type linear) and per-pair
// divisors (freq_factors: Llama 3.1's rope_freqs) are the rotation of pos at
// inv_freq_i · freq_scale / freq_factors[i]: the same exact rotation at a base-rotation of
// positions scaled per pair, checked pair by pair against rope_ref on a one-pair slice.
TEST_F(DeviceTest, RopeFreqScaleAndFactorsRotateByTheScaledFrequencies) {
  const Shape shape{1, 2, 9, 8};
  auto xv = random_values(shape.numel(), 43, -2.0f, 2.0f);
  const std::vector<float> factors = {1.0f, 2.5f, 8.0f, 0.5f};
  const double scale = 0.125, base = 500000.0;
  Graph g;
  Tensor x = g.input("x", shape);
  RopeOptions o;
  o.style = RopeOptions::Style::neox;
  o.freq_base = base;
  o.freq_scale = scale;
  o.freq_factors = factors;
  o.offset = 100;
  g.output("y", g.rope(x, o));
  Executor ex(device(), g);
  auto y = ex.run({{"x", make_tensor(shape, xv, DType::f32)}})["y"].to_f32();
  const std::vector<double> xs = stored(xv, DType::f32);
  double worst = 0;
  for (int64_t r = 0; r < shape.numel() / 8; ++r) {
    const double pos = static_cast<double>(100 + r % 9);
    for (int64_t i = 0; i < 4; ++i) {
      const double theta = pos * std::pow(base, -2.0 * static_cast<double>(i) / 8.0) * scale / factors[i];
      const double a = xs[r * 8 + i], b = xs[r * 8 + i + 4];
      worst = std::max(worst, std::abs(y[r * 8 + i] - (a * std::cos(theta) - b * std::sin(theta))));
      worst = std::max(worst, std::abs(y[r * 8 + i + 4] - (a * std::sin(theta) + b * std::cos(theta))));
    }
  }
  EXPECT_LE(worst, 1e-5);
  auto bad = [&](auto edit) {
    Graph b;
    RopeOptions r = o;
    edit(r);
    b.rope(b.input("x", shape), r);
  };
  EXPECT_TRUE(fails_with([&] { bad([](RopeOptions& r) { r.freq_factors = {1.0f, 2.0f}; }); },
                         ErrorCode::invalid_argument, "freq_factors has 2 values, expected dims / 2 = 4"));
  EXPECT_TRUE(fails_with([&] { bad([](RopeOptions& r) { r.freq_factors[2] = 0.0f; }); },
                         ErrorCode::invalid_argument, "freq_factors[2] is 0.000000, expected a finite number > 0"));
  EXPECT_TRUE(fails_with([&] { bad([](RopeOptions& r) { r.freq_scale = -1.0; }); }, ErrorCode::invalid_argument,
                         "freq_scale must be a finite number > 0"));
}

// One recording serves every decoding step: the run-time offset moves, the graph does not.
TEST_F(DeviceTest, RopeRunTimeOffsetReplays) {
  const Shape shape{1, 3, 1, 64};
  auto xv = random_values(shape.numel(), 42, -1.0f, 1.0f);
  Graph g;
  Tensor x = g.input("x", shape);
  Tensor pos = g.input("pos", {1}, DType::i32);
  RopeOptions o;
  o.freq_base = 100000.0;
  o.offset_tensor = pos;
  g.output("y", g.rope(x, o));
  Executor ex(device(), g);
  for (int32_t p : {0, 1, 17, 1023, 4095}) {
    auto out = ex.run({{"x", make_tensor(shape, xv, DType::f32)},
                       {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{p})}});
    auto want = rope_ref(stored(xv, DType::f32), shape, Style::interleaved, 64, 100000.0, p, DType::f32);
    EXPECT_TRUE(rope_close(out["y"], want)) << "position " << p;
  }
  EXPECT_EQ(ex.stats().recordings, 1u);
}

TEST_F(DeviceTest, RopeRejectsBadArguments) {
  Graph g;
  Tensor x = g.input("x", {1, 2, 3, 8});
  auto with = [](auto f) {
    RopeOptions o;
    f(o);
    return o;
  };
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([](RopeOptions& o) { o.dims = 7; })); },
                         ErrorCode::shape_mismatch, "dims must be even and in [2, 8]"));
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([](RopeOptions& o) { o.dims = 10; })); },
                         ErrorCode::shape_mismatch, "got 10"));
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([](RopeOptions& o) { o.freq_base = 0.0; })); },
                         ErrorCode::invalid_argument, "freq_base must be"));
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([](RopeOptions& o) { o.offset = -1; })); },
                         ErrorCode::invalid_argument, "must lie in [0, 2^24]"));
  Tensor f = g.input("f", {1}, DType::f32);
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([&](RopeOptions& o) { o.offset_tensor = f; })); },
                         ErrorCode::shape_mismatch, "offset_tensor must be i32"));
  Tensor two = g.input("two", {2}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.rope(x, with([&](RopeOptions& o) { o.offset_tensor = two; })); },
                         ErrorCode::shape_mismatch, "one i32 value"));
  Tensor ids = g.input("ids", {1, 2, 3, 8}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.rope(ids); }, ErrorCode::shape_mismatch, "must be f32 or f16"));

  // A graph-input offset that puts a position below 0 is refused when it is set.
  Graph h;
  Tensor hx = h.input("x", {1, 1, 3, 8});
  RopeOptions o;
  o.offset = 2;
  o.offset_tensor = h.input("pos", {1}, DType::i32);
  h.output("y", h.rope(hx, o));
  Executor ex(device(), h);
  ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{-2}));  // position 0: fine
  EXPECT_TRUE(fails_with(
      [&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{-3})); },
      ErrorCode::invalid_argument, "positions within [0, 2^24]"));
  // Positions past 2^24 (no longer exact in fp32) likewise; a constant offset is checked when
  // the graph compiles.
  EXPECT_TRUE(fails_with(
      [&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{(1 << 24) - 4})); },
      ErrorCode::invalid_argument, "positions within [0, 2^24]"));
  Graph c;
  RopeOptions co;
  co.offset_tensor = c.constant("pos", HostTensor::from_i32({1}, std::vector<int32_t>{-1}));
  c.output("y", c.rope(c.input("x", {1, 1, 3, 8}), co));
  EXPECT_TRUE(fails_with([&] { Executor bad(device(), c); }, ErrorCode::invalid_argument,
                         "constant index -1"));
}

}  // namespace
}  // namespace vkformer::testing
