// matmul and linear against the double-precision reference: shapes with 1, primes, sizes that are
// not multiples of any tile, K up to 300, batches, numpy-broadcast batch dims, transpose_b, bias,
// alpha, relu and gelu, in f32 and f16; the GPU (shared memory) tiling and odd tilings run here
// too through VKFORMER_MATMUL_TILES; and the shape errors.
//
// Tolerances. Inputs are uniform in [-1, 1); f16 references are computed from the stored
// (rounded) inputs, so only the kernel's own arithmetic is measured. With S = |alpha| * sqrt(K) *
// max|a| * max|b| + max|bias| (the scale of the outputs), fp32 accumulation of K products errs by
// about sqrt(K) * 2^-24 * S (rounding errors add like a random walk); we allow 8x that, plus a
// relative 2^-21 for alpha, bias and the activation (and erf's 1.5e-7 approximation error, which
// the absolute term covers). f16 adds the output rounding: 2^-11 relative, 2^-25 absolute near 0.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "reference.hpp"
#include "test_device.hpp"
#include "tuning.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

struct MatmulCase {
  Shape a, b;
  bool transpose_b = false;
  bool bias = false;
  float alpha = 1.0f;
  Activation act = Activation::none;
  DType dtype = DType::f32;
};

MatmulCase tb(MatmulCase c) { return c.transpose_b = true, c; }
MatmulCase with_bias(MatmulCase c) { return c.bias = true, c; }
MatmulCase with(MatmulCase c, float alpha, Activation act) { return c.alpha = alpha, c.act = act, c; }
MatmulCase f16(MatmulCase c) { return c.dtype = DType::f16, c; }

std::string shape_name(const Shape& s) {
  std::string r;
  for (auto d : s.dims()) r += std::to_string(d) + "x";
  r.pop_back();
  return r;
}

std::string case_name(const MatmulCase& c) {
  static const char* acts[] = {"", "_relu", "_gelu"};
  std::string s = shape_name(c.a) + "_by_" + shape_name(c.b) + (c.transpose_b ? "T" : "");
  if (c.bias) s += "_bias";
  if (c.alpha != 1.0f) s += "_alpha";
  s += acts[static_cast<int>(c.act)];
  return s + "_" + std::string(dtype_name(c.dtype));
}

Shape leading(const Shape& s) {
  auto d = s.dims();
  d.resize(d.size() - 2);
  return Shape(d);
}

// Index of the matrix of a tensor with batch dims `in` used by flat batch z of `out` (numpy
// broadcasting: right-aligned, dims of 1 repeat).
int64_t batch_source(const Shape& in, const Shape& out, int64_t z) {
  int64_t idx = 0, stride = 1;
  for (int d = out.rank() - 1; d >= 0; --d) {
    int64_t c = z % out[d];
    z /= out[d];
    int di = d - (out.rank() - in.rank());
    if (di < 0) continue;
    if (in[di] != 1) idx += c * stride;
    stride *= in[di];
  }
  return idx;
}

// Copies every batch's matrix out of a broadcast tensor, so the reference sees full batches.
std::vector<double> expand(const std::vector<double>& v, const Shape& s, const Shape& batch) {
  int64_t matrix = s[-2] * s[-1];
  std::vector<double> out;
  out.reserve(batch.numel() * matrix);
  for (int64_t z = 0; z < batch.numel(); ++z) {
    int64_t src = batch_source(leading(s), batch, z);
    out.insert(out.end(), v.begin() + src * matrix, v.begin() + (src + 1) * matrix);
  }
  return out;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  return m;
}

struct Outcome {
  double max_error = 0;  // max abs error
  double scale = 0;      // S above
};

// Builds and runs the matmul of `c` on `device` and compares it with the reference.
Outcome check_matmul(Device& device, const MatmulCase& c, uint32_t seed = 1) {
  auto av = random_values(c.a.numel(), seed), bv = random_values(c.b.numel(), seed + 1);
  int64_t n = c.transpose_b ? c.b[-2] : c.b[-1];
  auto biasv = random_values(n, seed + 2);
  Graph g;
  Tensor a = g.input("a", c.a, c.dtype), b = g.input("b", c.b, c.dtype);
  MatmulOptions options;
  options.transpose_b = c.transpose_b;
  options.alpha = c.alpha;
  options.activation = c.act;
  if (c.bias) options.bias = g.input("bias", {n}, c.dtype);
  Tensor o = g.matmul(a, b, options);
  g.output("o", o);
  Executor ex(device, g);
  std::map<std::string, HostTensor> inputs = {{"a", make_tensor(c.a, av, c.dtype)},
                                              {"b", make_tensor(c.b, bv, c.dtype)}};
  if (c.bias) inputs.emplace("bias", make_tensor({n}, biasv, c.dtype));
  auto out = ex.run(inputs);

  // The reference, over full (expanded) batches.
  Shape batch;
  EXPECT_TRUE(broadcast_shapes(leading(c.a), leading(c.b), &batch));
  int64_t m = c.a[-2], k = c.a[-1];
  auto want_dims = batch.dims();
  want_dims.push_back(m);
  want_dims.push_back(n);
  EXPECT_EQ(o.shape, Shape(want_dims));
  auto as = stored(av, c.dtype), bs = stored(bv, c.dtype), biass = stored(biasv, c.dtype);
  auto want = ref::matmul(expand(as, c.a, batch), expand(bs, c.b, batch), batch.numel(),
                          batch.numel(), m, n, k, c.transpose_b, c.bias ? &biass : nullptr,
                          c.alpha);
  for (double& w : want)
    w = c.act == Activation::relu ? ref::relu(w) : c.act == Activation::gelu ? ref::gelu(w) : w;

  Outcome r;
  r.scale = std::abs(c.alpha) * std::sqrt(double(k)) * max_abs(as) * max_abs(bs) +
            (c.bias ? max_abs(biass) : 0.0);
  Tolerance tol{8 * std::sqrt(double(k)) * std::ldexp(1.0, -24) * r.scale, std::ldexp(1.0, -21)};
  if (c.dtype == DType::f16) tol = {tol.atol + std::ldexp(1.0, -25), tol.rtol + std::ldexp(1.0, -11)};
  EXPECT_TRUE(all_close(out.at("o"), want, tol)) << case_name(c);
  r.max_error = max_abs_error(out.at("o"), want);
  std::printf("[ matmul   ] %-44s max abs error %.3g (%.3g of scale %.3g; atol %.3g)\n",
              case_name(c).c_str(), r.max_error, r.max_error / r.scale, r.scale, tol.atol);
  return r;
}

class MatmulTest : public DeviceTestWithParam<MatmulCase> {};

TEST_P(MatmulTest, MatchesReference) { check_matmul(device(), GetParam()); }

const MatmulCase kCases[] = {
    // Degenerate and prime sizes.
    {{1, 1}, {1, 1}},
    {{1, 31}, {31, 13}},
    {{7, 13}, {13, 1}},
    {{13, 1}, {1, 7}},
    {{7, 13}, {13, 31}},
    f16({{7, 13}, {13, 31}}),
    tb({{31, 7}, {13, 7}}),
    // Not multiples of any tile; K up to 300.
    {{65, 100}, {100, 129}},
    f16(with_bias({{65, 100}, {100, 129}})),
    with(tb({{100, 65}, {129, 65}}), 0.5f, Activation::gelu),
    {{33, 300}, {300, 17}},
    f16(tb({{33, 300}, {17, 300}})),
    // Batches, rank 3 and 4.
    {{3, 13, 31}, {3, 31, 7}},
    f16({{3, 13, 31}, {3, 31, 7}}),
    with(tb({{2, 3, 13, 16}, {2, 3, 11, 16}}), 0.25f, Activation::none),  // Q·Kᵀ
    {{2, 3, 13, 11}, {2, 3, 11, 16}},                                       // P·V
    // Broadcast batch dims: a shared b (linear layers), a shared a, dims of 1 on either side.
    with_bias({{2, 9, 65}, {65, 31}}),
    with(with_bias(tb({{2, 3, 5, 17}, {23, 17}})), 1.0f, Activation::gelu),
    f16(with(with_bias(tb({{2, 3, 5, 17}, {23, 17}})), 1.0f, Activation::relu)),
    {{13, 31}, {3, 31, 7}},
    {{1, 13, 31}, {4, 31, 7}},
    {{2, 1, 7, 13}, {1, 3, 13, 5}},
    f16(tb({{2, 1, 7, 13}, {1, 3, 5, 13}})),
    {{4, 1, 5, 7}, {6, 7, 3}},
    {{3, 5, 7}, {2, 1, 7, 4}},
    // alpha, bias and activations together.
    with(with_bias({{17, 29}, {29, 19}}), -0.75f, Activation::relu),
    f16(with(with_bias({{17, 29}, {29, 19}}), 2.0f, Activation::gelu)),
};

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulTest, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return case_name(info.param); });

TEST_F(DeviceTest, LinearIsMatmulWithTransposedWeight) {
  Shape xs{2, 7, 31}, ws{13, 31};
  auto xv = random_values(xs.numel(), 11), wv = random_values(ws.numel(), 12),
       bv = random_values(13, 13);
  Graph g;
  Tensor x = g.input("x", xs), w = g.input("w", ws), b = g.input("b", {13});
  Tensor y = g.linear(x, w, b, Activation::gelu);
  ASSERT_EQ(y.shape, (Shape{2, 7, 13}));
  g.output("y", y);
  Executor ex(device(), g);
  auto out = ex.run({{"x", make_tensor(xs, xv, DType::f32)},
                     {"w", make_tensor(ws, wv, DType::f32)},
                     {"b", make_tensor({13}, bv, DType::f32)}});
  auto xd = stored(xv, DType::f32), wd = stored(wv, DType::f32), bd = stored(bv, DType::f32);
  auto want = ref::matmul(xd, wd, 2, 1, 7, 13, 31, true, &bd, 1.0);
  for (double& v : want) v = ref::gelu(v);
  double scale = std::sqrt(31.0) + 1.0;
  EXPECT_TRUE(all_close(out.at("y"), want, {8 * std::sqrt(31.0) * std::ldexp(1.0, -24) * scale,
                                            std::ldexp(1.0, -21)}));
}

// More batches than the z dimension of a grid may have: the lowering splits the dispatch.
TEST_F(DeviceTest, MatmulBatchBeyondGridLimit) {
  int64_t batch = int64_t(device().info().max_workgroup_count[2]) + 2;
  if (batch > 70000) GTEST_SKIP() << "z grid limit " << batch - 2 << " makes this test too slow";
  check_matmul(device(), {{batch, 2, 3}, {batch, 3, 2}});
}

// More row tiles than the y dimension of a grid may have (a batch folded into M on small tiles).
TEST_F(DeviceTest, MatmulRowsBeyondGridLimit) {
  int64_t rows = int64_t(device().info().max_workgroup_count[1]) *
                     vk::tuning_for(device().info()).matmul.bm + 3;
  if (rows > (int64_t(1) << 23)) GTEST_SKIP() << rows << " rows make this test too slow";
  check_matmul(device(), {{rows, 2}, {2, 3}});
}

// The tiling a device gets is a tuning choice; VKFORMER_MATMUL_TILES overrides it, so the GPU
// tiling (shared memory, barriers) and odd tilings run on whatever device the tests have.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

Device open_device_with_tiles(const char* tiles) {
  ScopedEnv env("VKFORMER_MATMUL_TILES", tiles);
  DeviceOptions options;
  const char* v = std::getenv("VKFORMER_TEST_VALIDATION");
  options.validation = !(v && std::string(v) == "0");
  options.sync_validation = options.validation;
  options.selector = std::to_string(test_device().info().index);
  return Device::open(options);
}

class MatmulTilingTest : public DeviceTestWithParam<const char*> {};

TEST_P(MatmulTilingTest, MatchesReference) {
  Device dev = open_device_with_tiles(GetParam());
  // Three pipelines per tiling (compiling them dominates the time on CPU devices).
  const MatmulCase cases[] = {
      {{1, 1}, {1, 1}},
      {{3, 70, 9}, {3, 9, 65}},
      with(with_bias(tb({{65, 100}, {129, 100}})), 0.5f, Activation::gelu),
      f16({{2, 1, 7, 13}, {1, 3, 13, 5}}),
  };
  for (const auto& c : cases) check_matmul(dev, c, 5);
  for (const auto& m : dev.take_validation_messages())
    ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
}

INSTANTIATE_TEST_SUITE_P(
    Tilings, MatmulTilingTest,
    ::testing::Values("64x64x16/4x4",          // the GPU default: 256 invocations
                      "24x40x5/3x5",           // tiles and blocks that are not powers of two
                      "8x8x4/1x1",             // one output per invocation
                      "1x4x3/1x4",             // one invocation per workgroup
                      "4x16x1/4x2/direct",     // the CPU default
                      "12x24x1/3x3/direct"),   // direct with rows spread over invocations
    [](const auto& info) {
      std::string s = info.param;
      for (char& ch : s)
        if (ch == 'x' || ch == '/') ch = '_';
      return s;
    });

TEST_F(DeviceTest, MatmulTilesEnvSetsTheTiling) {
  const DeviceInfo& info = device().info();
  {
    ScopedEnv env("VKFORMER_MATMUL_TILES", "24x40x5/3x5");
    vk::MatmulTiles t = vk::tuning_for(info).matmul;
    EXPECT_EQ(t.bm, 24u);
    EXPECT_EQ(t.bn, 40u);
    EXPECT_EQ(t.bk, 5u);
    EXPECT_EQ(t.tm, 3u);
    EXPECT_EQ(t.tn, 5u);
    EXPECT_TRUE(t.shared_memory);
    EXPECT_EQ(t.invocations(), 64u);
  }
  {
    ScopedEnv env("VKFORMER_MATMUL_TILES", "12x24x1/3x3/direct");
    vk::MatmulTiles t = vk::tuning_for(info).matmul;
    EXPECT_FALSE(t.shared_memory);
    EXPECT_EQ(t.invocations(), 32u);
  }
}

TEST_F(DeviceTest, MatmulTilesEnvRejectsATilingThatDoesNotFit) {
  try {
    open_device_with_tiles("64x64x16/3x4");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("VKFORMER_MATMUL_TILES"), std::string::npos) << e.what();
  }
}

// Shape errors name the op and both shapes.
std::string matmul_error(const Shape& as, const Shape& bs, MatmulOptions options = {},
                         DType bdtype = DType::f32) {
  Graph g;
  Tensor a = g.input("a", as), b = g.input("b", bs, bdtype);
  try {
    g.matmul(a, b, options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::shape_mismatch) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "expected a shape error for " << as.str() << " x " << bs.str();
  return "";
}

TEST_F(DeviceTest, MatmulShapeErrorsNameBothShapes) {
  EXPECT_EQ(matmul_error({2, 3, 5}, {4, 6}), "matmul: a is [2,3,5], b is [4,6]: inner dims 5 != 4");
  EXPECT_EQ(matmul_error({3, 5}, {6, 4}, {.transpose_b = true}),
            "matmul: a is [3,5], b is [6,4] (transposed): inner dims 5 != 4");
  EXPECT_EQ(matmul_error({2, 3, 5, 6}, {4, 6, 2}),
            "matmul: a is [2,3,5,6], b is [4,6,2]: batch dims [2,3] and [4] do not broadcast");
  EXPECT_EQ(matmul_error({5}, {5, 2}), "matmul: a is [5], b is [5,2]: a must have rank 2 to 4");
  std::string dtype = matmul_error({3, 5}, {5, 2}, {}, DType::f16);
  EXPECT_NE(dtype.find("[3,5] f32"), std::string::npos) << dtype;
  EXPECT_NE(dtype.find("[5,2] f16"), std::string::npos) << dtype;

  Graph g;
  Tensor a = g.input("a", {2, 3, 5}), b = g.input("b", {5, 6}), bias = g.input("bias", {5});
  try {
    g.matmul(a, b, {.bias = bias});
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "matmul: bias must be [6] f32 (a [2,3,5] · b [5,6] is [2,3,6]), got [5] f32");
  }
}

TEST_F(DeviceTest, LinearShapeErrorsNameXAndWeight) {
  Graph g;
  Tensor x = g.input("x", {2, 7, 31}), w = g.input("w", {13, 30}), w3 = g.input("w3", {1, 13, 31});
  Graph::Scope scope(g, "encoder");
  try {
    g.linear(x, w);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "encoder/linear: x is [2,7,31], weight is [13,30] (transposed): inner dims 31 != 30");
  }
  try {
    g.linear(x, w3);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::shape_mismatch);
    EXPECT_NE(std::string(e.what()).find("[1,13,31]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vkformer::testing
