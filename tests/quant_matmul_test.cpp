// Weights in another dtype than the activations (ggml's q8_0, q4_0, q4_1 and q5_0 blocks, the
// q4_k and q6_k super-blocks, bf16, and f16 or f32 weights under the other float type), dequantized on the fly by matmul/linear and
// embedding, against a double-precision reference.
//
// The quantized weights are tests/golden_quant/weights.gguf (tests/fixtures/make_quant_golden.py): the
// `gguf` package quantized them (the k-quants, which it cannot quantize, are random blocks with
// model-like scales), and its own dequantization sits next to each tensor. First the
// host side is checked bit for bit against it (GgufFile::read_raw, HostTensor::to_f32 through
// dequantize_row); then the reference multiplies gguf's dequantized values in fp64, so the
// device's arithmetic is all that is measured.
//
// Tolerances (as tests/matmul_test.cpp, whose reasoning holds here): activations uniform in
// [-1, 1), S = |alpha| * sqrt(K) * max|x| * max|w| + max|bias| the scale of the outputs; fp32
// accumulation of K products errs by about sqrt(K) * 2^-24 * S, and we allow 8x that plus a
// relative 2^-21 for alpha, bias and the activation. The mat-vec kernel applies a block's scale
// once to its raw sums (q4_0: d * (sum q*x - 8 * sum x)): those sums reach 15 * 32 * max|x| = 60
// max|w| max|x| / d per block before the subtraction, an error of 60 * 2^-24 max|w| max|x| per
// block, sqrt(K / 32) * 60 * 2^-24 ... over a row, which is below the allowance above for every
// K >= 32 (8 * K versus 10.6 * sqrt(K)). f16 activations add the output rounding: 2^-11
// relative, 2^-25 absolute. Embedding rows are exact: the kernel computes ggml's products
// (d * q + m unfused), so they equal gguf's dequantization bit for bit.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "executor_impl.hpp"
#include "tuning_matmul.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/gguf.hpp"
#include "vkformer/half.hpp"

namespace vkformer::testing {
namespace {

const GgufFile& golden() {
  static const GgufFile file(std::filesystem::path(VKF_QUANT_GOLDEN_DIR) / "weights.gguf");
  return file;
}

const DType kWeightTypes[] = {DType::bf16, DType::q8_0, DType::q4_0, DType::q4_1,
                              DType::q5_0, DType::q4_k, DType::q6_k, DType::q5_k};
const DType kQuantTypes[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k,
                             DType::q6_k, DType::q5_k};
using ShapeNK = std::pair<int64_t, int64_t>;
// [N, K] as in tests/fixtures/make_quant_golden.py: K = 1, 3 and 18 blocks of 32, or 1, 2 and 3
// super-blocks of 256 for the k-quants.
const std::vector<ShapeNK> kShapes = {{17, 32}, {65, 96}, {19, 576}};
const std::vector<ShapeNK> kKShapes = {{17, 256}, {65, 512}, {19, 768}};
const std::vector<ShapeNK>& shapes_for(DType t) { return is_k_quant(t) ? kKShapes : kShapes; }
// A K of the 32-block shapes in the type's golden shapes (the one at the same place).
int64_t k_for(DType t, int64_t k) {
  if (!is_k_quant(t)) return k;
  for (size_t i = 0; i < kShapes.size(); ++i)
    if (kShapes[i].second == k) return kKShapes[i].second;
  return k;
}

std::string tensor_name(DType t, int64_t n, int64_t k) {
  return std::string(dtype_name(t)) + "." + std::to_string(n) + "x" + std::to_string(k);
}

// The first `rows` rows of a golden weight (rows are contiguous whole blocks), and gguf's
// dequantization of them.
using Weight = WeightMatrix;  // test_util.hpp
Weight golden_weight(DType t, int64_t n, int64_t k, int64_t rows) {
  const std::string name = tensor_name(t, n, k);
  HostTensor all = golden().read_raw(name);
  const uint64_t row_bytes = dtype_bytes(t, k);
  Weight w;
  w.raw = HostTensor::from_bytes({rows, k}, t,
                                 std::span<const std::byte>(all.data(), rows * row_bytes));
  const std::vector<float> deq = golden().read_f32(name + ".dequant").to_f32();
  w.values.assign(deq.begin(), deq.begin() + rows * k);
  return w;
}

TEST(QuantGolden, ReadRawKeepsTheBlocksAndDequantizesLikeGguf) {
  for (DType t : kWeightTypes)
    for (auto [n, k] : shapes_for(t)) {
      SCOPED_TRACE(tensor_name(t, n, k));
      HostTensor raw = golden().read_raw(tensor_name(t, n, k));
      EXPECT_EQ(raw.dtype(), t);
      EXPECT_EQ(raw.shape(), (Shape{n, k}));
      EXPECT_EQ(raw.nbytes(), dtype_bytes(t, n * k));
      const GgufTensorInfo& info = golden().tensor(tensor_name(t, n, k));
      ASSERT_EQ(raw.nbytes(), info.nbytes);
      EXPECT_EQ(std::memcmp(raw.data(), golden().tensor_bytes(info).data(), raw.nbytes()), 0);
      const std::vector<float> mine = raw.to_f32();
      const std::vector<float> theirs = golden().read_f32(tensor_name(t, n, k) + ".dequant").to_f32();
      ASSERT_EQ(mine.size(), theirs.size());
      EXPECT_EQ(std::memcmp(mine.data(), theirs.data(), mine.size() * 4), 0)
          << "vkformer's dequantization differs from gguf's";
      for (int64_t i : {int64_t{0}, k - 1, n * k / 2 + 5, n * k - 1})
        EXPECT_EQ(raw.f32_at(i), theirs[i]) << "element " << i;
      // Whole-block sizes (ggml-common.h): q8_0 34, q4_0 18, q4_1 20, q5_0 22 bytes per 32
      // elements, q4_k 144, q5_k 176 and q6_k 210 per 256; bf16 2 per element.
      const std::map<DType, std::pair<int, int>> sizes = {
          {DType::q8_0, {34, 32}},   {DType::q4_0, {18, 32}},   {DType::q4_1, {20, 32}},
          {DType::q5_0, {22, 32}},   {DType::q4_k, {144, 256}}, {DType::q6_k, {210, 256}},
          {DType::q5_k, {176, 256}}, {DType::bf16, {2, 1}}};
      const auto [bytes, per] = sizes.at(t);
      EXPECT_EQ(raw.nbytes(), uint64_t(n) * (k / per) * bytes);
    }
}

TEST(QuantGolden, BadBytesAndUnsupportedTypesAreNamed) {
  std::vector<std::byte> bytes(19);
  EXPECT_TRUE(fails_with([&] { HostTensor::from_bytes({1, 32}, DType::q4_0, bytes); },
                         ErrorCode::shape_mismatch, "takes 18 bytes, got 19"));
  EXPECT_TRUE(fails_with([&] { HostTensor(Shape{2, 40}, DType::q8_0); }, ErrorCode::shape_mismatch,
                         "multiple of 32"));
  EXPECT_TRUE(fails_with([&] { HostTensor(Shape{2, 288}, DType::q4_k); }, ErrorCode::shape_mismatch,
                         "multiple of 256"));
  EXPECT_TRUE(fails_with([&] { HostTensor::from_bytes({1, 256}, DType::q6_k, bytes); },
                         ErrorCode::shape_mismatch, "takes 210 bytes, got 19"));
  EXPECT_TRUE(fails_with([&] { HostTensor::from_f32({256}, std::vector<float>(256), DType::q4_k); },
                         ErrorCode::unsupported, "does not quantize to q4_k"));
  EXPECT_TRUE(fails_with([&] { HostTensor::from_f32({32}, std::vector<float>(32), DType::q4_1); },
                         ErrorCode::unsupported, "does not quantize to q4_1"));
  const GgufFile all(std::filesystem::path(VKF_GGUF_DIR) / "all_types.gguf");
  EXPECT_TRUE(fails_with([&] { all.read_raw("t.q3_k"); }, ErrorCode::format, "'t.q3_k'"));
  EXPECT_TRUE(fails_with([&] { all.read_raw("t.q3_k"); }, ErrorCode::format, "Q3_K"));
  EXPECT_TRUE(fails_with([&] { all.read_raw("t.q5_1"); }, ErrorCode::format, "Q5_1"));
  EXPECT_EQ(all.read_raw("t.q5_k").dtype(), DType::q5_k);
  EXPECT_EQ(dtype_from_ggml(GgmlType::Q5_K), DType::q5_k);
  EXPECT_EQ(ggml_type_of(DType::q5_k), GgmlType::Q5_K);
  EXPECT_EQ(all.read_raw("t.q4_k").dtype(), DType::q4_k);
  EXPECT_EQ(all.read_raw("t.q6_k").dtype(), DType::q6_k);
  EXPECT_EQ(dtype_from_ggml(GgmlType::Q4_1), DType::q4_1);
  EXPECT_EQ(dtype_from_ggml(GgmlType::Q5_0), DType::q5_0);
  EXPECT_EQ(ggml_type_of(DType::q4_k), GgmlType::Q4_K);
  EXPECT_EQ(ggml_type_of(DType::q6_k), GgmlType::Q6_K);
  EXPECT_EQ(ggml_type_of(DType::q8_0), GgmlType::Q8_0);
}

struct Case {
  DType weight;
  DType act;
  int64_t m, n, k;
  bool bias = false;
  float alpha = 1.0f;
  Activation activation = Activation::none;
  // The kernel stages the dequantized weights as f16 (the cooperative-matrix GEMM): each rounds
  // by up to 2^-11 relative, sqrt(K) 2^-11 |alpha| max|x| max|w| more over a row (twice that
  // allowed, for the activation's slope).
  bool weights_in_f16 = false;
  // The kernel quantizes x to 8 bits per 32-value block (the integer-dot mat-vec): checked
  // against the bound that allows (check_int8_x below), not the tolerance above.
  bool int8_x = false;
};

std::string case_name(const Case& c) {
  return std::string(dtype_name(c.weight)) + " weight, " + std::string(dtype_name(c.act)) +
         " x: [" + std::to_string(c.m) + "," + std::to_string(c.k) + "] x [" +
         std::to_string(c.n) + "," + std::to_string(c.k) + "]T" + (c.bias ? " +bias" : "") +
         (c.alpha != 1.0f ? " alpha" : "") + (c.activation == Activation::silu   ? " silu"
          : c.activation == Activation::relu ? " relu"
          : c.activation == Activation::gelu ? " gelu"
                                             : "");
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

// The weight of a case: golden blocks (the first n rows of the golden tensor with n or more rows
// and this K) or, for f32/f16 weights, random values in that dtype.
Weight case_weight(const Case& c, uint32_t seed) {
  if (!is_float(c.weight)) {
    for (auto [n, k] : shapes_for(c.weight))
      if (k == c.k && n >= c.n) return golden_weight(c.weight, n, k, c.n);
    ADD_FAILURE() << "no golden weight for " << case_name(c);
    return {};
  }
  auto v = random_values(c.n * c.k, seed);
  return {make_tensor({c.n, c.k}, v, c.weight), stored(v, c.weight)};
}

double activate(Activation a, double s) {
  return a == Activation::silu   ? silu(s)
         : a == Activation::relu ? std::max(s, 0.0)
         : a == Activation::gelu ? 0.5 * s * (1.0 + std::erf(s / std::sqrt(2.0)))
                                 : s;
}

// The bound of 8-bit activations. Each block's x̂ = dx * q (|x - x̂| <= dx/2, dx = max|x_b| / 127)
// enters every product, and the kernel computes Σ w·x̂ exactly up to fp32 rounding, so an output
// differs from the fp64 reference of x by at most
//   fp32 + |alpha| * slope * Σ_b dx_b / 2 * Σ_{e in b} |w_e|,
// slope the activation's steepest (1 for none and relu, 1.1 for silu, 1.13 for gelu: 1.15), fp32
// the float tolerance of the case (`tol`). And it must equal the fp64 reference of x̂ within fp32
// and one rounding step (the largest dx_b |w_e|) of an element whose x / dx may sit on a
// rounding boundary in fp32 and not in fp64 (one a row allowed, of ~1e-7 each): what tells a
// wrong rounding or a wrong block's scale (well within the worst-case bound: a random row's
// errors mostly cancel) from the right ones.
void check_int8_x(const Case& c, const HostTensor& y, const std::vector<double>& want,
                  const std::vector<double>& xs, const std::vector<double>& bs, const Weight& w,
                  const Tolerance& tol) {
  const double slope = c.activation == Activation::none || c.activation == Activation::relu ? 1.0 : 1.15;
  std::vector<double> dx;
  const std::vector<double> xq = int8_blocks(xs, dx);
  const std::vector<float> got = y.to_f32();
  const int64_t blocks = c.k / 32;
  double worst_bound = 0, worst_exact = 0, max_err = 0;
  int failures = 0;
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double bound = 0, step = 0, sq = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        double wsum = 0, wmax = 0;
        for (int64_t e = b * 32; e < b * 32 + 32; ++e) {
          wsum += std::abs(w.values[j * c.k + e]);
          wmax = std::max(wmax, std::abs(w.values[j * c.k + e]));
          sq += xq[i * c.k + e] * w.values[j * c.k + e];
        }
        bound += dx[i * blocks + b] / 2 * wsum;
        step = std::max(step, dx[i * blocks + b] * wmax);
      }
      const double scale = std::abs(c.alpha) * slope;
      const double exact = activate(c.activation, c.alpha * sq + (c.bias ? bs[j] : 0.0));
      const double v = got[i * c.n + j], ref = want[i * c.n + j];
      const double fp32 = tol.atol + tol.rtol * std::abs(ref);
      const double err = std::abs(v - ref), err_exact = std::abs(v - exact);
      max_err = std::max(max_err, err);
      worst_bound = std::max(worst_bound, err / (fp32 + scale * bound));
      worst_exact = std::max(worst_exact, err_exact / (fp32 + tol.rtol * std::abs(exact) + scale * step));
      if ((err > fp32 + scale * bound || err_exact > fp32 + tol.rtol * std::abs(exact) + scale * step) &&
          failures++ < 3)
        ADD_FAILURE() << case_name(c) << ": y[" << i << "," << j << "] = " << v << ", fp64 " << ref
                      << " (bound " << fp32 + scale * bound << "), of 8-bit x " << exact
                      << " (within " << fp32 + scale * step << ")";
    }
  EXPECT_EQ(failures, 0);
  std::printf("[ int8 x   ] %-52s max abs error %.3g: %.2f of the 8-bit bound, %.2f of one step from x^\n",
              case_name(c).c_str(), max_err, worst_bound, worst_exact);
}

// Checks case c on `device`; `kernels` (if given) receives the name of every kernel it ran.
void check(Device& device, const Case& c, uint32_t seed = 7, const Weight* given = nullptr,
           std::vector<std::string>* kernels = nullptr) {
  SCOPED_TRACE(case_name(c));
  const Weight w = given ? *given : case_weight(c, seed);
  const auto xv = random_values(c.m * c.k, seed + 1), bv = random_values(c.n, seed + 2);
  Graph g;
  Tensor x = g.input("x", {c.m, c.k}, c.act);
  Tensor weight = g.constant("w", w.raw);
  MatmulOptions options;
  options.transpose_b = true;
  options.alpha = c.alpha;
  options.activation = c.activation;
  if (c.bias) options.bias = g.input("bias", {c.n}, c.act);
  g.output("y", g.matmul(x, weight, options));
  // The executor's implementation, whose program says which kernels ran.
  ExecutorImpl ex(device, g, {});
  ex.set_input("x", make_tensor({c.m, c.k}, xv, c.act));
  if (c.bias) ex.set_input("bias", make_tensor({c.n}, bv, c.act));
  ex.run();
  const HostTensor y = ex.output("y");
  // The integer-dot mat-vec quantizes x to 8 bits: where it ran (forced, or taken on a device
  // that accelerates it), its bound applies.
  bool int8_x = c.int8_x;
  for (const Dispatch& d : ex.program().dispatches) {
    if (kernels) kernels->push_back(d.kernel->name);
    int8_x |= std::string(d.kernel->name).starts_with("matmul_wq_idot");
  }
  ASSERT_EQ(y.dtype(), c.act);
  ASSERT_EQ(y.shape(), (Shape{c.m, c.n}));

  const auto xs = stored(xv, c.act), bs = stored(bv, c.act);
  std::vector<double> want(c.m * c.n);
  double max_x = 0, max_w = 0, max_b = 0;
  for (double v : xs) max_x = std::max(max_x, std::abs(v));
  for (double v : w.values) max_w = std::max(max_w, std::abs(v));
  for (double v : bs) max_b = std::max(max_b, std::abs(v));
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t k = 0; k < c.k; ++k) s += xs[i * c.k + k] * w.values[j * c.k + k];
      want[i * c.n + j] = activate(c.activation, c.alpha * s + (c.bias ? bs[j] : 0.0));
    }
  const double scale = std::abs(c.alpha) * std::sqrt(double(c.k)) * max_x * max_w +
                       (c.bias ? max_b : 0.0);
  Tolerance tol{8 * std::sqrt(double(c.k)) * std::ldexp(1.0, -24) * scale, std::ldexp(1.0, -21)};
  if (c.act == DType::f16) tol = {tol.atol + std::ldexp(1.0, -25), tol.rtol + std::ldexp(1.0, -11)};
  if (c.weights_in_f16)
    tol.atol += 2 * std::sqrt(double(c.k)) * std::ldexp(1.0, -11) * std::abs(c.alpha) * max_x * max_w;
  if (int8_x) return check_int8_x(c, y, want, xs, bs, w, tol);
  EXPECT_TRUE(all_close(y, want, tol));
  const double err = max_abs_error(y, want);
  std::printf("[ quant mm ] %-52s max abs error %.3g (%.3g of scale %.3g; atol %.3g)\n",
              case_name(c).c_str(), err, err / scale, scale, tol.atol);
}

// Every quantized and bf16 type, both activation dtypes, the golden shapes (K = 32, 96, 576 or
// 256, 512, 768; N odd, past a tile, and rows subsets 1 and 3), M = 1 (mat-vec), 3, 17 and 65
// (tiled).
TEST_F(DeviceTest, QuantizedLinearMatchesReference) {
  for (DType t : kWeightTypes)
    for (DType act : {DType::f32, DType::f16})
      for (auto [n, k] : shapes_for(t))
        for (int64_t m : {1, 3, 65}) check(device(), {t, act, m, n, k});
}

TEST_F(DeviceTest, QuantizedLinearRowSubsetsAndLargerM) {
  for (DType t : kWeightTypes) {
    check(device(), {t, DType::f32, 1, 1, k_for(t, 576)});
    check(device(), {t, DType::f32, 17, 3, k_for(t, 96)});
    check(device(), {t, DType::f16, 1, 3, k_for(t, 96)});
    check(device(), {t, DType::f32, 130, 65, k_for(t, 96)});
  }
}

// alpha, the bias and the activation, which each weight kernel applies as it stores (specialization
// constants), in three epilogues: bias alone; alpha 0.5, bias and silu; alpha -2 and relu without
// bias. Five weight types (0-, 1- and 8-bit blocks, bf16, k-quants) x both activation dtypes x M = 1
// (the mat-vec kernels) and 17 (tiled) as a pairwise design, the epilogue (t + a + m) mod 3: every
// type meets every epilogue, and every epilogue both dtypes and both M; 20 cases instead of all 60,
// which spent a minute on lavapipe re-checking the same store code.
TEST_F(DeviceTest, QuantizedLinearEpilogues) {
  const DType types[] = {DType::q4_1, DType::q8_0, DType::bf16, DType::q4_k, DType::q6_k};
  const DType acts[] = {DType::f32, DType::f16};
  const int64_t ms[] = {1, 17};
  for (size_t ti = 0; ti < std::size(types); ++ti)
    for (size_t ai = 0; ai < std::size(acts); ++ai)
      for (size_t mi = 0; mi < std::size(ms); ++mi) {
        const DType t = types[ti], act = acts[ai];
        const int64_t m = ms[mi];
        switch ((ti + ai + mi) % 3) {
          case 0: check(device(), {t, act, m, 65, k_for(t, 96), true}); break;
          case 1: check(device(), {t, act, m, 19, k_for(t, 576), true, 0.5f, Activation::silu}); break;
          default: check(device(), {t, act, m, 17, k_for(t, 32), false, -2.0f, Activation::relu});
        }
      }
}

// On CPU devices the quantized types run shaders/matmul_wq_texel.comp (M > 1) and
// matmul_wq_rows.comp or matmul_wq_vec.comp (M = 1), A and W through texel views, at every size above, which all fit
// the device's texel views; forcing the general or gemv matmul path, or a texel limit below the
// operands' size, sends them to the storage-buffer kernels instead (both tunings: the GPU one has
// no texel path). M = 1, 9 (within a tile of 16 rows), 17 (one past), columns past one
// subgroup's; the overridden blocks 3 x 2 take 9 and 17 in several tiles.
TEST_F(DeviceTest, QuantizedLinearTexelAndStorageFallbacks) {
  const kernels::MatmulTuning& tuning = device().impl().tuning().matmul;
  const bool texel_tuned = device().impl().tuning().cpu_device;
  EXPECT_EQ(tuning.weight_tiles.texel, texel_tuned && tuning.texel_tiles.subgroup > 0);
  if (tuning.weight_tiles.texel) {
    // The largest operand above (a [130, 96] f32, the [65, 576] weights) fits in a texel view.
    EXPECT_GE(device().info().max_texel_buffer_elements, uint64_t(65 * 576 * 34 / 32 / 4 + 1));
  }
  const std::vector<std::pair<const char*, const char*>> variants[] = {
      {{"VKFORMER_MATMUL_PATH", "general"}},
      {{"VKFORMER_MATMUL_PATH", "gemv"}},
      {{"VKFORMER_MATMUL_WQ_TEXEL_LIMIT", "100"}},  // a [1, 576] is 144 texels, W more
      {{"VKFORMER_MATMUL_WQ_TEXEL", "3x2/3"}},      // texel blocks that do not divide the shapes
      {{"VKFORMER_MATMUL_WQ_STREAM_BYTES", "1000000000"}},  // mat-vecs with lanes on rows
  };
  for (const auto& env : variants) {
    SCOPED_TRACE(std::string(env[0].first) + "=" + env[0].second);
    Device d = open_test_device_with_env(env);
    for (DType t : kQuantTypes)
      for (int64_t m : {1, 9, 17}) {
        check(d, {t, DType::f32, m, 65, k_for(t, 96), true});
        check(d, {t, DType::f16, m, 19, k_for(t, 576)});
      }
  }
}

// The SmolLM2 shapes' scale on the texel kernel: many workgroups (N = 2053, a prime), K = 1536
// (48 blocks or 6 super-blocks; rows of odd halfwords for q4_0, q5_0 and q8_0, and an odd
// number of q6_k's 105-halfword super-blocks, so every other row starts at an odd halfword),
// M = 1 and 9. The weights: random blocks with model-like f16 scales (test_util's random_weight),
// which the host dequantizes bit-exact as gguf does (above).
TEST_F(DeviceTest, QuantizedLinearLargeRandomBlocks) {
  for (DType t : kQuantTypes) {
    const Weight w = random_weight(t, 2053, 1536, 5);
    for (int64_t m : {1, 9}) check(device(), {t, DType::f32, m, 2053, 1536, true}, 3, &w);
  }
}

// The overrides of the quantized texel kernel parse strictly and name what is wrong.
TEST_F(DeviceTest, QuantizedTexelOverridesAreCheckedErrors) {
  auto read = [&] { kernels::tuning_for(device().info()); };
  for (const char* bad : {"0x4/4", "8x4", "8x4/4junk", "8x4/", "-8x4/4", "16x16/4", "8x4/0",
                          "8x4/129"})
    env_error("VKFORMER_MATMUL_WQ_TEXEL", bad, read);
  EXPECT_NE(env_error("VKFORMER_MATMUL_WQ_TEXEL", "16x16/4", read).find("TM*TN"), std::string::npos);
  for (const char* bad : {"0", "-1", "many"}) env_error("VKFORMER_MATMUL_WQ_TEXEL_LIMIT", bad, read);
  ScopedEnv blocks("VKFORMER_MATMUL_WQ_TEXEL", "5x3/7");
  ScopedEnv limit("VKFORMER_MATMUL_WQ_TEXEL_LIMIT", "1000");
  const kernels::MatmulWeightTiles w = kernels::tuning_for(device().info()).matmul.weight_tiles;
  EXPECT_EQ(w.texel_tm, 5u);
  EXPECT_EQ(w.texel_tn, 3u);
  EXPECT_EQ(w.texel_gemv_tn, 7u);
  EXPECT_EQ(w.texel_limit, 1000u);
}

// ---- The integer-dot mat-vec (shaders/matmul_wq_idot.comp): taken on devices that accelerate
// packed 8-bit dot products, here by VKFORMER_MATMUL_INTEGER_DOT (lavapipe has the feature, not
// the acceleration). Each case must run the weight type's integer-dot kernel and nothing else,
// within the bound of 8-bit activations (check_int8_x).

void check_idot(Device& dev, Case c, uint32_t seed = 7, const Weight* given = nullptr) {
  c.int8_x = true;
  std::vector<std::string> kernels;
  check(dev, c, seed, given, &kernels);
  ASSERT_FALSE(kernels.empty()) << case_name(c);
  for (const std::string& k : kernels)
    EXPECT_EQ(k, "matmul_wq_idot_" + std::string(dtype_name(c.weight)) + "_" +
                     std::string(dtype_name(c.act)))
        << case_name(c);
}

// Every quantized type at its golden shapes (N odd; K of 1, 3 and 18 blocks or 1, 2 and 3
// super-blocks), one row in f32 and f16; 3 rows (one workgroup's rows, f32) and 11 (two groups
// of 8 rows, the second partial; the dtypes taking turns by type) at one shape each, with the
// epilogues: each (type, dtype, rows) is a pipeline lavapipe compiles, ~0.5 s each.
TEST_F(DeviceTest, IntegerDotMatVecEveryQuantType) {
  Device dev = open_test_device_with_env({{"VKFORMER_MATMUL_INTEGER_DOT", "16"}});
  if (!dev.info().integer_dot_product) {  // its kernels cannot run: the other mat-vecs do
    std::vector<std::string> kernels;
    check(dev, {DType::q4_0, DType::f32, 1, 65, 96}, 7, nullptr, &kernels);
    for (const std::string& k : kernels) EXPECT_EQ(k.find("idot"), std::string::npos) << k;
    return;
  }
  size_t turn = 0;
  for (DType t : kQuantTypes) {
    const auto& shapes = shapes_for(t);
    for (auto [n, k] : shapes) check_idot(dev, {t, DType::f32, 1, n, k});
    check_idot(dev, {t, DType::f16, 1, shapes[2].first, shapes[2].second, true});
    check_idot(dev, {t, DType::f32, 3, shapes[1].first, shapes[1].second, true, 0.5f, Activation::silu});
    const DType act = turn++ % 2 ? DType::f16 : DType::f32;
    check_idot(dev, {t, act, 11, shapes[2].first, shapes[2].second, act == DType::f32, -2.0f,
                     Activation::relu});
  }
}

// K past one pass of the kernel's shared memory (72 blocks: passes of 64 and 8), on random
// blocks with model-like scales, one and five rows, bias and gelu.
TEST_F(DeviceTest, IntegerDotMatVecLongRows) {
  Device dev = open_test_device_with_env({{"VKFORMER_MATMUL_INTEGER_DOT", "8"}});
  if (!dev.info().integer_dot_product) return;  // IntegerDotMatVecEveryQuantType checks the choice
  for (DType t : {DType::q4_0, DType::q8_0, DType::q6_k, DType::q5_k}) {
    const Weight w = random_weight(t, 37, 2304, 9);
    for (int64_t m : {1, 5})
      check_idot(dev, {t, DType::f32, m, 37, 2304, true, 1.0f, Activation::gelu}, 3, &w);
  }
}

// Unquantized weights in the other float dtype: f16 weights under f32 activations and f32
// weights under f16 ones (odd K, which only the quantized types must avoid).
TEST_F(DeviceTest, MixedFloatWeightsMatchReference) {
  for (auto [w, act] : {std::pair{DType::f16, DType::f32}, std::pair{DType::f32, DType::f16}})
    for (int64_t m : {1, 3, 33})
      for (auto [n, k] : {std::pair<int64_t, int64_t>{17, 33}, {65, 96}, {5, 1}}) {
        check(device(), {w, act, m, n, k});
        check(device(), {w, act, m, n, k, true, 1.0f, Activation::silu});
      }
}

// x [B, S, K] folds into M rows; a linear() with a quantized weight from a graph input too.
TEST_F(DeviceTest, QuantizedLinearFoldsBatchesAndTakesInputs) {
  const Weight w = golden_weight(DType::q4_0, 65, 96, 65);
  const auto xv = random_values(2 * 3 * 96, 3);
  Graph g;
  Tensor x = g.input("x", {2, 3, 96}, DType::f32);
  Tensor wt = g.input("w", {65, 96}, DType::q4_0);
  g.output("y", g.linear(x, wt));
  Executor ex(device(), g);
  const HostTensor y = ex.run({{"x", make_tensor({2, 3, 96}, xv, DType::f32)}, {"w", w.raw}}).at("y");
  ASSERT_EQ(y.shape(), (Shape{2, 3, 65}));
  std::vector<double> want(6 * 65);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 65; ++j) {
      double s = 0;
      for (int k = 0; k < 96; ++k) s += double(xv[i * 96 + k]) * w.values[j * 96 + k];
      want[i * 65 + j] = s;
    }
  EXPECT_TRUE(all_close(y, want, {1e-5, 1e-6}));
}

// Each table type: ids at the first and the last row and in between, rows equal gguf's
// dequantization exactly; then an id past the end.
TEST_F(DeviceTest, EmbeddingFromQuantizedTables) {
  for (DType t : kWeightTypes) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t d = k_for(t, 96);
    const Weight w = golden_weight(t, 65, d, 65);
    const std::vector<int32_t> ids = {0, 64, 7, 64, 0, 33};
    Graph g;
    Tensor idt = g.input("ids", {2, 3}, DType::i32);
    Tensor emb = g.embedding(idt, g.constant("table", w.raw));
    EXPECT_EQ(emb.dtype, DType::f32);
    g.output("y", emb);
    Executor ex(device(), g);
    const HostTensor y = ex.run({{"ids", HostTensor::from_i32({2, 3}, ids)}}).at("y");
    ASSERT_EQ(y.shape(), (Shape{2, 3, d}));
    const std::vector<float> got = y.to_f32();
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < d; ++j)
        ASSERT_EQ(got[i * d + j], static_cast<float>(w.values[ids[i] * d + j]))
            << "token " << i << " (id " << ids[i] << ") column " << j;
    const std::vector<int32_t> bad = {0, 1, 2, 65, 4, 5};
    EXPECT_TRUE(fails_with([&] { ex.set_input("ids", HostTensor::from_i32({2, 3}, bad)); },
                           ErrorCode::invalid_argument, "[0, 65)"));
  }
}

// A computed table (an activation): picking the last real row of a padded block by a run-time
// index, in f32 and f16.
TEST_F(DeviceTest, EmbeddingFromAComputedTable) {
  for (DType dt : {DType::f32, DType::f16}) {
    const auto v = random_values(5 * 40, 11);
    Graph g;
    Tensor rows = g.input("rows", {5, 40}, dt);
    Tensor idx = g.input("idx", {1}, DType::i32);
    g.output("y", g.embedding(idx, g.scale(rows, 0.5f)));
    Executor ex(device(), g);
    for (int32_t pick : {0, 3, 4}) {
      const std::vector<int32_t> one = {pick};
      const HostTensor y = ex.run({{"rows", make_tensor({5, 40}, v, dt)},
                                   {"idx", HostTensor::from_i32({1}, one)}}).at("y");
      ASSERT_EQ(y.shape(), (Shape{1, 40}));
      ASSERT_EQ(y.dtype(), dt);
      const auto s = stored(v, dt);
      std::vector<double> want(s.begin() + pick * 40, s.begin() + pick * 40 + 40);
      for (double& x : want) x *= 0.5;
      EXPECT_TRUE(all_close(y, want, default_tolerance(dt))) << "row " << pick;
    }
  }
}

// Weights and tables larger than one binding (4096 bytes here) are bound as windows of whole
// rows (src/ops/windows.hpp), each ending on a whole 32-bit word; x and out by rows too.
TEST_F(DeviceTest, QuantizedWeightsInWindows) {
  Device windowed = open_test_device_with_env({{"VKFORMER_MAX_BINDING_BYTES", "4096"}});
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0})
    check(windowed, {t, DType::f32, 1, 19, 576, true});  // mat-vec: 6,156 to 11,628 bytes
  // Rows of 432 and 420 bytes: q6_k's super-blocks start at odd halfwords within a window.
  check(windowed, {DType::q4_k, DType::f32, 1, 19, 768, true});
  check(windowed, {DType::q6_k, DType::f32, 1, 65, 512, true});
  for (int64_t m : {3, 17}) check(windowed, {DType::q8_0, DType::f32, m, 65, 96, true});
  const Weight w = golden_weight(DType::q8_0, 65, 96, 65);  // 6,630 bytes, rows of 102
  const std::vector<int32_t> ids = {64, 0, 33};
  Graph g;
  Tensor idt = g.input("ids", {3}, DType::i32);
  g.output("y", g.embedding(idt, g.constant("table", w.raw)));
  Executor ex(windowed, g);
  const std::vector<float> got = ex.run({{"ids", HostTensor::from_i32({3}, ids)}}).at("y").to_f32();
  for (size_t i = 0; i < ids.size(); ++i)
    for (int j = 0; j < 96; ++j)
      ASSERT_EQ(got[i * 96 + j], static_cast<float>(w.values[ids[i] * 96 + j])) << i << "," << j;
}

// Other ops refuse quantized tensors by name, as do shapes the weight kernels cannot take.
TEST_F(DeviceTest, QuantizedTensorsElsewhereAreClearErrors) {
  Graph g;
  Tensor q = g.input("w", {3, 64}, DType::q4_0);
  Tensor x = g.input("x", {2, 64}, DType::f32);
  EXPECT_TRUE(fails_with([&] { g.softmax(q); }, ErrorCode::shape_mismatch, "q4_0"));
  EXPECT_TRUE(fails_with([&] { g.softmax(q); }, ErrorCode::shape_mismatch, "softmax"));
  EXPECT_TRUE(fails_with([&] { g.add(x, q); }, ErrorCode::shape_mismatch, "q4_0"));
  EXPECT_TRUE(fails_with([&] { g.reshape(q, {64, 3}); }, ErrorCode::shape_mismatch, "quantized"));
  EXPECT_TRUE(fails_with([&] { g.matmul(q, x, {.transpose_b = true}); }, ErrorCode::shape_mismatch,
                         "q4_0"));
  Tensor q2 = g.input("w2", {64, 3}, DType::q8_0);
  EXPECT_TRUE(fails_with([&] { g.matmul(x, q2); }, ErrorCode::shape_mismatch, "transpose_b"));
  Tensor odd = g.input("odd", {3, 40}, DType::q4_1);
  Tensor x40 = g.input("x40", {2, 40}, DType::f32);
  EXPECT_TRUE(fails_with([&] { g.linear(x40, odd); }, ErrorCode::shape_mismatch, "whole blocks"));
  Tensor ids = g.input("ids", {2}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.embedding(ids, odd); }, ErrorCode::shape_mismatch, "whole blocks"));
  // A k-quant's rows are whole 256-element super-blocks.
  Tensor k96 = g.input("k", {3, 96}, DType::q4_k);
  Tensor x96 = g.input("x96", {2, 96}, DType::f32);
  EXPECT_TRUE(fails_with([&] { g.linear(x96, k96); }, ErrorCode::shape_mismatch, "blocks of 256"));
  EXPECT_TRUE(fails_with([&] { g.embedding(ids, k96); }, ErrorCode::shape_mismatch, "blocks of 256"));
  EXPECT_TRUE(fails_with([&] { g.embedding(ids, ids); }, ErrorCode::shape_mismatch, "i32"));
}

// ---- Prompt processing on cooperative matrices (shaders/matmul_coopmat.comp with WEIGHTS),
// through the emulated fragment: every weight type, every configuration the tuning can choose,
// every epilogue, windows. Each case must run the weight type's emulated kernel and nothing else.

Device open_coopmat(const std::string& tiles, const char* max_binding = nullptr) {
  std::vector<std::pair<const char*, const char*>> env = {{"VKFORMER_COOPMAT", "emulate"},
                                                          {"VKFORMER_MATMUL_PATH", "coopmat"}};
  if (!tiles.empty()) env.push_back({"VKFORMER_MATMUL_COOPMAT", tiles.c_str()});
  if (max_binding) env.push_back({"VKFORMER_MAX_BINDING_BYTES", max_binding});
  return open_test_device_with_env(env);
}

// Runs c on `dev` and expects only the weight type's emulated cooperative-matrix kernel.
void check_coopmat(Device& dev, Case c, uint32_t seed = 7) {
  c.weights_in_f16 = true;
  std::vector<std::string> kernels;
  check(dev, c, seed, nullptr, &kernels);
  ASSERT_FALSE(kernels.empty()) << case_name(c);
  for (const std::string& k : kernels)
    EXPECT_EQ(k, "matmul_wq_coopmat_emu_" + std::string(dtype_name(c.weight)) + "_f16") << case_name(c);
}

// Every weight type at its golden shapes (N odd; K of 1, 3 and 18 blocks, or 1, 2 and 3
// super-blocks, so K is not a multiple of the 32- or 64-wide slices), M within one 64-row tile,
// past it, and one row.
TEST_F(DeviceTest, QuantCoopmatEveryWeightType) {
  Device dev = open_coopmat("16x16x16/2x2/2x2/2");
  for (DType t : kWeightTypes)
    for (auto [n, k] : shapes_for(t))
      for (int64_t m : {1, 17, 67}) check_coopmat(dev, {t, DType::f16, m, n, k, m == 17});
}

// llvmpipe ends an invocation's loops after 65535 iterations in all (coopmat.glsl's Rules), and
// the emulation's products take about (LM·LK + LK·LN + LM·LN·(1 + LK/4)) / SG of them each, SG
// lavapipe's 8: a case beyond ~50,000 comes back partial through no fault of the kernel (at
// 16x8x16/2x2/4x4/1, K 512: 512 products of 128; at the static 16x16x16/2x2/4x4/1, K 256: 256
// of 224, zeros out).
bool within_emulation_loops(const kernels::MatmulCoopmatTiles& t, int64_t k) {
  const uint64_t per_product = (t.m * t.k + t.k * t.n + t.m * t.n * (1 + t.k / 4)) / 8;
  const uint64_t products = uint64_t(k + t.bk() - 1) / t.bk() * t.config.bk_tiles * t.config.tiles_m * t.config.tiles_n;
  return products * per_product <= 50000;
}

// Every configuration of the tuning (kernels::coopmat_configs() at every emulated MMA shape), each
// with M and N past one output tile and K past two slices, the weight types taking turns; a type
// whose K (512 for the super-block types) the emulation cannot run at a configuration gives its
// turn to the next (the tiling and edges do not depend on the weight type).
TEST_F(DeviceTest, QuantCoopmatEveryConfiguration) {
  size_t i = 0;
  for (const vk::MmaShape& s : vk::emulated_mma_shapes())
    for (const kernels::CoopmatConfig& f : kernels::coopmat_configs()) {
      kernels::MatmulCoopmatTiles t;
      t.m = s.m, t.n = s.n, t.k = s.k, t.config = f;
      const std::string tiles = t.str().substr(0, t.str().rfind('/'));
      SCOPED_TRACE(tiles);
      Device dev = open_coopmat(tiles);
      DType w = kWeightTypes[i++ % std::size(kWeightTypes)];
      for (size_t turn = 0; turn < std::size(kWeightTypes) && !within_emulation_loops(t, k_for(w, 96)); ++turn)
        w = kWeightTypes[i++ % std::size(kWeightTypes)];
      ASSERT_TRUE(within_emulation_loops(t, k_for(w, 96))) << "no weight type fits the emulation here";
      const int64_t m = t.bm() + 3, n = std::min<int64_t>(t.bn() + 5, 65);
      check_coopmat(dev, {w, DType::f16, m, n, k_for(w, 96), true, -0.75f, Activation::relu});
    }
}

// Every epilogue: alpha, bias, each activation, for a 32-element and a super-block type.
TEST_F(DeviceTest, QuantCoopmatEveryEpilogue) {
  Device dev = open_coopmat("16x8x16/2x2/2x2/2");
  for (DType t : {DType::q4_0, DType::q6_k})
    for (Activation act : {Activation::none, Activation::relu, Activation::gelu, Activation::silu})
      for (bool bias : {false, true})
        check_coopmat(dev, {t, DType::f16, 37, 19, k_for(t, 576), bias, bias ? 1.0f : -1.5f, act});
}

// Weights and rows larger than one binding (8 KiB): windows of x's rows (and out's) and of weight
// rows (q6_k's [65, 512]: 27 KiB, super-blocks at odd halfwords), each its own dispatch.
TEST_F(DeviceTest, QuantCoopmatBindingWindows) {
  Device dev = open_coopmat("16x16x16/2x2/2x2/2", "8192");
  check_coopmat(dev, {DType::q6_k, DType::f16, 40, 65, 512, true});
  // 16 outputs a row (32 bytes) keep every window of rows 16-byte aligned; 19 (38 bytes) would
  // need windows of 8 rows, 9 KiB of x, which the 8 KiB binding cannot take (a clear error).
  check_coopmat(dev, {DType::q4_0, DType::f16, 40, 16, 576});
}

// Without VKFORMER_MATMUL_PATH the emulation takes prompts (M of a tile or more) and leaves one
// row (decoding) and f32 activations to the other kernels; without VKFORMER_COOPMAT=emulate
// lavapipe never takes it.
TEST_F(DeviceTest, QuantCoopmatChosenLikeTheF16Gemm) {
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"}});
  // A 32-element type: the static table's 128x128 tiles take super-blocks past llvmpipe's loop
  // limit in the emulation (within_emulation_loops).
  check_coopmat(dev, {DType::q4_0, DType::f16, 33, 65, 96});
  for (const Case& c : {Case{DType::q4_k, DType::f16, 1, 65, 512}, Case{DType::q4_k, DType::f32, 33, 65, 512}}) {
    std::vector<std::string> kernels;
    check(dev, c, 7, nullptr, &kernels);
    for (const std::string& k : kernels) EXPECT_EQ(k.find("coopmat"), std::string::npos) << case_name(c);
  }
  std::vector<std::string> kernels;
  check(device(), {DType::q4_k, DType::f16, 33, 65, 512}, 7, nullptr, &kernels);
  for (const std::string& k : kernels) EXPECT_EQ(k.find("coopmat"), std::string::npos);
}

}  // namespace
}  // namespace vkformer::testing
