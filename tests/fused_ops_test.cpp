// The fused ops a decoding step is built from, against double-precision references written here:
// Graph::linear with LinearOptions (pre-norm, gated pair, residual, with bias and activation) for
// every quantized weight type, float weights and both activation dtypes, and rope_kv_cache
// (packed and separate projections, grouped-query heads, both pairings, partial rotation, caches
// in windows, replayed positions). Where the device's kernel fuses (shaders/matmul_wq_vec.comp:
// quantized weights, one row, CPU devices) the op is one dispatch; elsewhere the fallback (rms_norm,
// the product, shaders/linear_epilogue.comp) must give the same values, which the same
// references check with the forced general path and the GPU tuning. ctest also runs this binary
// with VKFORMER_TUNING_AS_GPU=1 and with VKFORMER_NO_SUBGROUP_OPS=1.
//
// Linear tolerances, per element: activations uniform in [-1, 1) (the norm's input in [-2, 2)),
// h the normalized input (or x), S = sqrt(K) max|h| max|w| + max|bias| the scale of a product.
// fp32 accumulation of K products errs by about sqrt(K) 2^-24 S; we allow 8x that, as
// tests/quant_matmul_test.cpp does (its note on raw block sums holds here too), plus 2^-21
// relative. The fused norm sums K squares in fp32 (per lane over K / 32 blocks, then across the
// subgroup) and takes rsqrt: (K / 32 + 16) 2^-24 relative. f16 activations: the fallback stores
// the normalized row and the gate/up product in f16, sqrt(K) 2^-11 max|h| max|w| and 2^-11 |p|
// more, and the output rounds (2^-11 relative). A gated output y = act(g) u errs by
// 1.1 e_g |u| + |act(g)| e_u (|act'| <= 1.1 for silu).
//
// rope_kv_cache: the exact rotation in double with tests/llama_ops_test.cpp's tolerance (the
// angle in fp32, cos/sin and the range reduction), the copied values (v, pass-through columns)
// exactly, and every cache row outside [p, p + S) unchanged.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "device_impl.hpp"
#include "kernel_table.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/half.hpp"

namespace vkformer::testing {
namespace {

// ---------------------------------------------------------------------------------------------
// linear with LinearOptions

// Random blocks of a quantized type or random values for a float type (test_util.hpp).
using Weight = WeightMatrix;

struct Fusions {
  bool norm = false, gated = false, residual = false, bias = false;
  Activation activation = Activation::none;
};

struct LinearCase {
  DType weight, act;
  int64_t m, n, k;  // out [m, n]; the weight is [2n, k] when gated
  Fusions f;
};

std::string case_name(const LinearCase& c) {
  std::string s = std::string(dtype_name(c.weight)) + " weight, " + std::string(dtype_name(c.act)) +
                  " x [" + std::to_string(c.m) + "," + std::to_string(c.k) + "] -> n " +
                  std::to_string(c.n) + ":";
  if (c.f.norm) s += " norm";
  if (c.f.gated) s += " gated";
  if (c.f.bias) s += " bias";
  if (c.f.activation == Activation::silu) s += " silu";
  if (c.f.activation == Activation::relu) s += " relu";
  if (c.f.residual) s += " residual";
  return s;
}

double activate(double v, Activation a) {
  if (a == Activation::silu) return v / (1.0 + std::exp(-v));
  if (a == Activation::relu) return std::max(v, 0.0);
  return v;
}

// The dispatches one such linear takes when fused, or with the fallback.
size_t fused_dispatches() { return 1; }
size_t fallback_dispatches(const LinearCase& c) {
  return (c.f.norm ? 1 : 0) + 1 + (c.f.gated || c.f.residual ? 1 : 0);
}
// Prompt rows (M > 1) on the tiled texel kernel: the pre-norm apart, the gate and the residual
// in the product's epilogue.
size_t tiled_dispatches(const LinearCase& c) { return (c.f.norm ? 1 : 0) + 1; }

// Runs the case on `device` and checks every output against the reference; returns the
// executor's dispatch count.
size_t check_linear(Device& device, const LinearCase& c, uint32_t seed = 11) {
  SCOPED_TRACE(case_name(c));
  const int64_t rows = c.f.gated ? 2 * c.n : c.n;
  // Float weights in the activations' dtype take the float kernels; others their own.
  const Weight w = random_weight(c.weight, rows, c.k, seed);
  const auto xv = random_values(static_cast<size_t>(c.m * c.k), seed + 1, -2.0f, 2.0f);
  const auto gv = random_values(static_cast<size_t>(c.k), seed + 2, 0.5f, 1.5f);
  const auto bv = random_values(static_cast<size_t>(rows), seed + 3);
  const auto rv = random_values(static_cast<size_t>(c.m * c.n), seed + 4);

  Graph g;
  Tensor x = g.input("x", {c.m, c.k}, c.act);
  LinearOptions o;
  o.activation = c.f.activation;
  o.gated = c.f.gated;
  if (c.f.norm) {
    o.norm = g.input("gamma", {c.k}, c.act);
    o.norm_eps = 1e-5f;
  }
  if (c.f.bias) o.bias = g.input("bias", {rows}, c.act);
  if (c.f.residual) o.residual = g.input("residual", {c.m, c.n}, c.act);
  g.output("y", g.linear(x, g.constant("w", w.raw), o));
  Executor ex(device, g);
  std::map<std::string, HostTensor> in = {{"x", make_tensor({c.m, c.k}, xv, c.act)}};
  if (c.f.norm) in.emplace("gamma", make_tensor({c.k}, gv, c.act));
  if (c.f.bias) in.emplace("bias", make_tensor({rows}, bv, c.act));
  if (c.f.residual) in.emplace("residual", make_tensor({c.m, c.n}, rv, c.act));
  const HostTensor y = ex.run(in).at("y");
  EXPECT_EQ(y.shape(), (Shape{c.m, c.n}));
  EXPECT_EQ(y.dtype(), c.act);

  const auto xs = stored(xv, c.act), gs = stored(gv, c.act), bs = stored(bv, c.act),
             rs = stored(rv, c.act);
  std::vector<double> h = xs;
  for (int64_t i = 0; i < c.m && c.f.norm; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < c.k; ++j) ss += xs[i * c.k + j] * xs[i * c.k + j];
    const double r = 1.0 / std::sqrt(ss / static_cast<double>(c.k) + 1e-5);
    for (int64_t j = 0; j < c.k; ++j) h[i * c.k + j] = xs[i * c.k + j] * r * gs[j];
  }
  double max_h = 0, max_w = 0, max_b = 0;
  for (double v : h) max_h = std::max(max_h, std::abs(v));
  for (double v : w.values) max_w = std::max(max_w, std::abs(v));
  for (double v : bs) max_b = c.f.bias ? std::max(max_b, std::abs(v)) : 0.0;
  const double sk = std::sqrt(static_cast<double>(c.k));
  const double scale = sk * max_h * max_w + max_b;
  const double rel = std::ldexp(1.0, -21) + (c.f.norm ? (c.k / 32.0 + 16) * std::ldexp(1.0, -24) : 0.0);
  const bool f16 = c.act == DType::f16;
  std::vector<double> want(static_cast<size_t>(c.m * c.n)), tol(want.size());
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      auto product = [&](int64_t row) {
        double s = 0;
        for (int64_t k = 0; k < c.k; ++k) s += h[i * c.k + k] * w.values[row * c.k + k];
        return s + (c.f.bias ? bs[row] : 0.0);
      };
      auto error = [&](double p) {
        return 8 * sk * std::ldexp(1.0, -24) * scale + rel * std::abs(p) +
               (f16 ? sk * std::ldexp(1.0, -11) * max_h * max_w + std::ldexp(1.0, -11) * std::abs(p) : 0.0);
      };
      const double p = product(j);
      double v, e;
      if (c.f.gated) {
        const double u = product(c.n + j), eg = error(p), eu = error(u);
        v = activate(p, c.f.activation) * u;
        e = 1.1 * eg * (std::abs(u) + eu) + std::abs(activate(p, c.f.activation)) * eu;
      } else {
        v = activate(p, c.f.activation);
        e = 1.1 * error(p);
      }
      if (c.f.residual) v += rs[i * c.n + j];
      e += std::ldexp(1.0, -22) * std::abs(v) + (f16 ? std::ldexp(1.0, -11) * std::abs(v) + std::ldexp(1.0, -25) : 0.0);
      want[i * c.n + j] = v;
      tol[i * c.n + j] = e;
    }
  const std::vector<float> got = y.to_f32();
  double worst = 0, worst_ratio = 0;
  size_t at = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double err = std::abs(got[e] - want[e]);
    if (!(err <= tol[e]) && (worst_ratio == 0 || err / tol[e] > worst_ratio)) {
      worst_ratio = std::isnan(err) ? 1e30 : err / tol[e];
      at = e;
    }
    worst = std::max(worst, err);
  }
  EXPECT_EQ(worst_ratio, 0.0) << "element " << at << ": got " << got[at] << ", want " << want[at]
                              << " within " << tol[at];
  std::printf("[ fused ] %-66s max abs error %.3g (scale %.3g), %zu dispatch(es)\n",
              case_name(c).c_str(), worst, scale, ex.stats().dispatches);
  return ex.stats().dispatches;
}

// Whether the device's tuning takes quantized one-row linears to the fusing kernel: the texel
// path (CPU devices), not forced elsewhere, and its kernel built and supported (subgroup
// arithmetic and shuffles).
bool fuses(Device& device, DType weight) {
  const kernels::MatmulTuning& t = device.impl().tuning().matmul;
  const auto* vec = kernels::find_variant(kernels::Kernel::matmul_wq_vec_q4_1, DType::f32);
  return is_quantized(weight) && t.weight_tiles.texel && t.texel_tiles.subgroup > 0 &&
         (!t.forced_path || *t.forced_path == "texel") && vec &&
         device.impl().pipelines().supported(*vec);
}

const Fusions kFusionSets[] = {
    {true, false, false, false, Activation::none},   // pre-norm
    {false, true, false, false, Activation::silu},   // SwiGLU
    {false, false, true, false, Activation::none},   // residual
    {true, true, false, true, Activation::silu},     // the FFN's gate/up: norm, SwiGLU, bias
    {false, false, true, true, Activation::relu},    // bias, activation, then the residual
    {true, true, true, false, Activation::silu},     // everything at once
};

// Every quantized type and float weights (f32 under f16 activations and f16 under f32 take the
// mixed kernels, the activations' own type the float ones), both activation types, one row (a
// decoding step: fused on CPU devices) and three (the fallback), N odd, K of a few blocks. The
// fusion sets are split in halves by parity, (set + type + act + m) even: each type meets every
// set twice, once with each activation type and each M (the two combinations of one parity), and
// each (activation type, M) meets every set with half of the types; 108 cases instead of 216.
TEST_F(DeviceTest, LinearFusionsMatchReference) {
  const DType weights[] = {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k, DType::q6_k,
                           DType::q5_k, DType::f32,  DType::f16};
  const DType acts[] = {DType::f32, DType::f16};
  const int64_t ms[] = {1, 3};
  for (size_t wi = 0; wi < std::size(weights); ++wi)
    for (size_t ai = 0; ai < std::size(acts); ++ai)
      for (size_t mi = 0; mi < std::size(ms); ++mi)
        for (size_t fi = 0; fi < std::size(kFusionSets); ++fi) {
          if ((fi + wi + ai + mi) % 2) continue;
          const DType w = weights[wi], act = acts[ai];
          const int64_t m = ms[mi];
          const Fusions& f = kFusionSets[fi];
          const int64_t k = is_k_quant(w) ? 512 : 96;
          const LinearCase c{w, act, m, 19, k, f};
          const size_t dispatches = check_linear(device(), c);
          if (m == 1 && fuses(device(), w)) EXPECT_EQ(dispatches, fused_dispatches()) << case_name(c);
          else if (fuses(device(), w)) EXPECT_EQ(dispatches, tiled_dispatches(c)) << case_name(c);
          else if (is_quantized(w)) EXPECT_EQ(dispatches, fallback_dispatches(c)) << case_name(c);
        }
}

// A prompt's rows on the tiled texel kernel with the gate and the residual in its epilogue
// (CPU devices; elsewhere the fallback, checked the same): SmolLM2's FFN and output shapes at
// M = 17 (one row past a tile of 16) and 64 (a prompt chunk), and blocks that leave partial
// tiles both ways: 3 x 3 (a gated lane takes 2 gate and 2 up columns) and 5 x 2.
TEST_F(DeviceTest, LinearFusionsOnPromptRows) {
  const Fusions ffn{true, true, false, false, Activation::silu}, down{false, false, true, false, Activation::none};
  const Fusions all{false, true, true, true, Activation::silu};
  for (DType act : {DType::f32, DType::f16})
    for (int64_t m : {17, 64}) {
      if (act == DType::f16 && m == 17) continue;
      for (const Fusions& f : {ffn, down}) {
        const LinearCase c{DType::q4_1, act, m, f.gated ? 1536 : 576, f.gated ? 576 : 1536, f};
        const size_t dispatches = check_linear(device(), c);
        if (fuses(device(), c.weight)) EXPECT_EQ(dispatches, tiled_dispatches(c)) << case_name(c);
      }
      check_linear(device(), {DType::q6_k, act, m, 131, 512, all});
      check_linear(device(), {DType::q5_0, act, m, 67, 96, all});
    }
  for (const char* block : {"3x3/2", "5x2/2"}) {
    SCOPED_TRACE(block);
    Device d = open_test_device_with_env({{"VKFORMER_MATMUL_WQ_TEXEL", block}});
    for (DType w : {DType::q4_1, DType::q4_k})
      for (const Fusions& f : {kFusionSets[1], kFusionSets[4], all})
        check_linear(d, {w, DType::f32, 19, 37, is_k_quant(w) ? 256 : 96, f});
  }
}

// The texel kernel's 4-column runs (QUADS: TN a multiple of 8, N a multiple of 4; a run's outputs
// in one 4-wide store, the residual as texels): N = 100 leaves a partial column tile (and, gated,
// a lane's second run of gate rows past N), odd M a partial row tile, with every fusion of the
// epilogue, at the default block (16 x 8), 8 x 16 (two runs gated, four not), 8 x 8 and 4 x 8 (the
// blocks of TN 8 that matmul.wq_texel.block may choose). N = 98 (not a multiple of 4) takes one
// output at a time; 17 x 98 residuals end inside a texel.
TEST_F(DeviceTest, LinearFusionsInFourColumnRuns) {
  const Fusions bias_res{false, false, true, true, Activation::relu};
  const Fusions gated_bias{false, true, false, true, Activation::silu};
  const Fusions all{false, true, true, true, Activation::silu};
  for (const char* block : {"", "8x16/2", "8x8/2", "4x8/2"}) {
    SCOPED_TRACE(block);
    Device d = *block ? open_test_device_with_env({{"VKFORMER_MATMUL_WQ_TEXEL", block}}) : device();
    for (DType act : {DType::f32, DType::f16})
      for (int64_t m : {17, 40})
        for (const Fusions& f : {bias_res, gated_bias, all, kFusionSets[3]})
          for (DType w : {DType::q4_1, DType::q8_0, DType::q4_k}) {
            if (act == DType::f16 && w != DType::q4_1) continue;
            const LinearCase c{w, act, m, 100, is_k_quant(w) ? 256 : 96, f};
            const size_t dispatches = check_linear(d, c);
            if (fuses(d, w)) EXPECT_EQ(dispatches, tiled_dispatches(c)) << case_name(c);
          }
    check_linear(d, {DType::q4_1, DType::f32, 40, 98, 96, all});
    for (DType act : {DType::f32, DType::f16}) {
      const LinearCase odd{DType::q5_0, act, 17, 98, 96, bias_res};
      const size_t dispatches = check_linear(d, odd);
      if (fuses(d, odd.weight)) EXPECT_EQ(dispatches, tiled_dispatches(odd)) << case_name(odd);
    }
  }
}

// The SmolLM2 shapes (many workgroups, K of 18 and 48 blocks: rows that start at every word of
// a 16-byte texel) and Llama-3.2-1B's k-quant widths, with all fusions.
TEST_F(DeviceTest, LinearFusionsAtModelShapes) {
  const Fusions ffn{true, true, false, false, Activation::silu}, down{false, false, true, false, Activation::none};
  for (DType act : {DType::f32, DType::f16}) {
    check_linear(device(), {DType::q4_1, act, 1, 1536, 576, ffn});
    check_linear(device(), {DType::q4_1, act, 1, 576, 1536, down});
    check_linear(device(), {DType::q8_0, act, 1, 2053, 576, {true, false, false, false, Activation::none}});
    check_linear(device(), {DType::q4_0, act, 1, 965, 576, {true, false, false, false, Activation::none}});
    check_linear(device(), {DType::q5_0, act, 1, 130, 1536, ffn});
    check_linear(device(), {DType::q4_k, act, 1, 257, 2048, ffn});
    check_linear(device(), {DType::q6_k, act, 1, 255, 1536, down});
  }
}

// The tests above run the mat-vec kernel that streams the weight (shaders/matmul_wq_rows.comp,
// the default for every size): rounds that deal whole blocks to the lanes (K of 3 blocks: groups
// of 8 rows; 18: 4 rows; 48 or 8 super-blocks: 1 row, 2 when gated), rows past N, the gate and
// up halves of a group. These run the lanes-on-rows mat-vec (shaders/matmul_wq_vec.comp), which
// VKFORMER_MATMUL_WQ_STREAM_BYTES above the weights' size selects (as K beyond the rows
// kernel's rounds does).
TEST_F(DeviceTest, LinearFusionsOnTheLanesOnRowsKernel) {
  Device d = open_test_device_with_env({{"VKFORMER_MATMUL_WQ_STREAM_BYTES", "1000000000"}});
  for (DType w : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k, DType::q6_k})
    for (DType act : {DType::f32, DType::f16})
      for (const Fusions& f : kFusionSets) {
        const LinearCase c{w, act, 1, 19, is_k_quant(w) ? 512 : 96, f};
        const size_t dispatches = check_linear(d, c);
        if (fuses(d, w)) EXPECT_EQ(dispatches, fused_dispatches()) << case_name(c);
      }
  for (DType act : {DType::f32, DType::f16}) {
    check_linear(d, {DType::q8_0, act, 1, 2053, 576, {true, false, false, false, Activation::none}});
    check_linear(d, {DType::q4_1, act, 1, 1537, 576, {true, true, false, false, Activation::silu}});
    check_linear(d, {DType::q4_1, act, 1, 575, 1536, {false, false, true, true, Activation::none}});
    check_linear(d, {DType::q6_k, act, 1, 131, 2048, {true, true, true, false, Activation::silu}});
    check_linear(d, {DType::q5_0, act, 1, 33, 96, {false, false, false, true, Activation::relu}});
  }
}

// A weight beyond one binding (a large vocabulary's output projection) is read in windows of its
// rows (VKFORMER_MAX_BINDING_BYTES of 64 KiB: 20 and 19 windows here); one row's pre-norm (with a
// bias) is then done by every window's mat-vec, with no rms_norm dispatch of its own, on the
// streaming kernel and the lanes-on-rows one; the GPU tuning keeps the separate norm.
TEST_F(DeviceTest, LinearPreNormOverWindowsOfTheWeight) {
  const Fusions none{false, false, false, false, Activation::none};
  const Fusions norm{true, false, false, true, Activation::none};
  const std::vector<std::pair<const char*, const char*>> variants[] = {
      {{"VKFORMER_MAX_BINDING_BYTES", "65536"}},
      {{"VKFORMER_MAX_BINDING_BYTES", "65536"}, {"VKFORMER_MATMUL_WQ_STREAM_BYTES", "1000000000"}},
      {{"VKFORMER_MAX_BINDING_BYTES", "65536"}, {"VKFORMER_TUNING_AS_GPU", "1"}},
  };
  for (const auto& env : variants) {
    SCOPED_TRACE(std::string(env.back().first) + "=" + env.back().second);
    Device d = open_test_device_with_env(env);
    for (DType act : {DType::f32, DType::f16})
      for (const LinearCase& c : {LinearCase{DType::q8_0, act, 1, 2053, 576, norm},
                                  LinearCase{DType::q4_k, act, 1, 4099, 512, norm}}) {
        LinearCase plain = c;
        plain.f = none;
        const size_t windows = check_linear(d, plain), dispatches = check_linear(d, c);
        EXPECT_GT(windows, 1u) << case_name(c);
        EXPECT_EQ(dispatches, windows + (fuses(d, c.weight) ? 0 : 1)) << case_name(c);
      }
  }
}

// The fallback where the device's tuning has no fusing kernel: the storage-buffer kernels
// (VKFORMER_MATMUL_PATH=general) and the GPU tuning, one row, each quantized type: the same
// values, in rms_norm + product + epilogue dispatches.
TEST_F(DeviceTest, LinearFusionsFallBackToSeparateKernels) {
  const std::vector<std::pair<const char*, const char*>> variants[] = {
      {{"VKFORMER_MATMUL_PATH", "general"}},
      {{"VKFORMER_TUNING_AS_GPU", "1"}},
  };
  for (const auto& env : variants) {
    SCOPED_TRACE(std::string(env[0].first) + "=" + env[0].second);
    Device d = open_test_device_with_env(env);
    for (DType w : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k, DType::q6_k})
      for (const Fusions& f : {kFusionSets[3], kFusionSets[5]}) {
        const LinearCase c{w, DType::f32, 1, 19, is_k_quant(w) ? 256 : 96, f};
        EXPECT_EQ(check_linear(d, c), fallback_dispatches(c)) << case_name(c);
      }
  }
}

// The residual in the cooperative-matrix GEMMs' epilogue (shaders/matmul_coopmat.comp through the
// emulation, forced): f16 activations with quantized (a 32-element and a super-block type), bf16
// and f16 weights, with bias and an activation, and after a pre-norm (one row). The product and its residual are one dispatch (the norm one
// more); a gated pair still takes linear_epilogue.
TEST_F(DeviceTest, LinearResidualInTheCoopmatEpilogue) {
  // 64 x 64 tiles, slices of 32: the emulation's loops stay within llvmpipe's 65535 iterations
  // per invocation (shaders/coopmat.glsl) at K = 256.
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"},
                                          {"VKFORMER_MATMUL_COOPMAT", "16x16x16/2x2/2x2/2"},
                                          {"VKFORMER_MATMUL_PATH", "coopmat"}});
  for (DType w : {DType::q4_0, DType::q5_k, DType::bf16, DType::f16}) {
    const int64_t k = is_k_quant(w) ? 256 : 96;
    EXPECT_EQ(check_linear(dev, {w, DType::f16, 37, 29, k, {false, false, true, true, Activation::relu}}), 1u);
    EXPECT_EQ(check_linear(dev, {w, DType::f16, 1, 29, k, {true, false, true, false, Activation::none}}), 2u);
  }
  EXPECT_EQ(check_linear(dev, {DType::q4_k, DType::f16, 37, 29, 256, {false, true, true, false, Activation::silu}}), 2u);
}

TEST_F(DeviceTest, LinearFusionsRejectBadArguments) {
  Graph g;
  Tensor x = g.input("x", {2, 64});
  Tensor w = g.input("w", {6, 64});
  Tensor odd = g.input("odd", {5, 64});
  LinearOptions o;
  o.gated = true;
  EXPECT_TRUE(fails_with([&] { g.linear(x, odd, o); }, ErrorCode::shape_mismatch, "even number of rows"));
  o.bias = g.input("b3", {3});
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, o); }, ErrorCode::shape_mismatch, "bias must be [6]"));
  LinearOptions r;
  r.residual = g.input("r", {2, 5});
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, r); }, ErrorCode::shape_mismatch, "residual must be [2,6]"));
  r.residual = g.input("r16", {2, 6}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, r); }, ErrorCode::shape_mismatch, "residual must be [2,6] f32"));
  LinearOptions n;
  n.norm = g.input("gamma", {63});
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, n); }, ErrorCode::shape_mismatch, "norm must be [64]"));
  n.norm = g.input("gamma16", {64}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, n); }, ErrorCode::shape_mismatch, "norm must be f32"));
  n.norm = g.input("gamma32", {64});
  n.norm_eps = -1.0f;
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, n); }, ErrorCode::invalid_argument, "norm_eps must be >= 0"));
  Graph other;
  LinearOptions foreign;
  foreign.residual = other.input("r", {2, 6});
  EXPECT_TRUE(fails_with([&] { g.linear(x, w, foreign); }, ErrorCode::invalid_argument,
                         "'residual' is not a tensor of this graph"));
}

// ---------------------------------------------------------------------------------------------
// rope_kv_cache

struct RopeCacheCase {
  int64_t b, heads, kv_heads, s, d, t;
  int64_t dims;  // -1: d
  RopeOptions::Style style;
  DType dtype;
  bool packed;
  std::vector<int32_t> positions;  // one run each, replayed
  int64_t offset = 0;              // RopeOptions::offset
};

std::string case_name(const RopeCacheCase& c) {
  return std::string(c.packed ? "packed" : "apart") + " B" + std::to_string(c.b) + " H" +
         std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " S" + std::to_string(c.s) +
         " D" + std::to_string(c.d) + " T" + std::to_string(c.t) +
         (c.dims >= 0 ? " dims" + std::to_string(c.dims) : "") +
         (c.style == RopeOptions::Style::neox ? " neox " : " interleaved ") +
         std::string(dtype_name(c.dtype));
}

// Rotates row `x` (d values) at position pos as rope does, with the tolerance of each output.
void rotate(const double* x, double* y, double* tol, int64_t d, int64_t dims, RopeOptions::Style style,
            double base, int64_t pos, DType dtype) {
  for (int64_t j = 0; j < d; ++j) y[j] = x[j], tol[j] = 0.0;
  for (int64_t i = 0; i < dims / 2; ++i) {
    const int64_t ia = style == RopeOptions::Style::neox ? i : 2 * i;
    const int64_t ib = ia + (style == RopeOptions::Style::neox ? dims / 2 : 1);
    const double theta = static_cast<double>(pos) * std::pow(base, -2.0 * i / static_cast<double>(dims));
    y[ia] = x[ia] * std::cos(theta) - x[ib] * std::sin(theta);
    y[ib] = x[ia] * std::sin(theta) + x[ib] * std::cos(theta);
    tol[ia] = tol[ib] = (std::abs(x[ia]) + std::abs(x[ib])) * (theta * std::ldexp(1.0, -22) + 4e-6);
  }
  for (int64_t j = 0; j < d; ++j)
    if (tol[j] > 0 && dtype == DType::f16) tol[j] += std::abs(y[j]) * std::ldexp(1.0, -11) + 1e-7;
}

void check_rope_kv_cache(Device& device, const RopeCacheCase& c, bool windows = false) {
  SCOPED_TRACE(case_name(c));
  const int64_t B = c.b, H = c.heads, Hk = c.kv_heads, S = c.s, D = c.d, T = c.t;
  const int64_t dims = c.dims < 0 ? D : c.dims;
  const double base = 10000.0;
  const Shape cache_shape{B, Hk, T, D};
  // Caches start with known values, so rows outside [p, p + S) can be checked unchanged.
  const auto k0 = random_values(static_cast<size_t>(cache_shape.numel()), 5, -3.0f, 3.0f);
  const auto v0 = random_values(static_cast<size_t>(cache_shape.numel()), 6, -3.0f, 3.0f);
  DeviceTensor cache_k = device.upload(make_tensor(cache_shape, k0, c.dtype));
  DeviceTensor cache_v = device.upload(make_tensor(cache_shape, v0, c.dtype));
  std::vector<double> want_k = stored(k0, c.dtype), want_v = stored(v0, c.dtype);

  Graph g;
  Tensor position = g.input("position", {1}, DType::i32);
  RopeOptions rope;
  rope.style = c.style;
  rope.dims = c.dims;
  rope.freq_base = base;
  rope.offset = c.offset;
  Tensor ck = g.external("cache_k", cache_k), cv = g.external("cache_v", cache_v);
  const int64_t width = (H + 2 * Hk) * D;
  RopeKvCache r;
  if (c.packed) {
    r = g.rope_kv_cache(g.input("qkv", {B, S, width}, c.dtype), static_cast<int>(H),
                        static_cast<int>(Hk), ck, cv, position, rope);
  } else {
    r = g.rope_kv_cache(g.input("q", {B, S, H * D}, c.dtype), g.input("k", {B, S, Hk * D}, c.dtype),
                        g.input("v", {B, S, Hk * D}, c.dtype), static_cast<int>(H),
                        static_cast<int>(Hk), ck, cv, position, rope);
  }
  ASSERT_EQ(r.q.shape, (Shape{B, H, S, D}));
  g.output("rotated_q", r.q);
  // The caches after the write, read by ops as attention would.
  g.output("k_all", g.copy(r.k_cache));
  g.output("v_all", g.copy(r.v_cache));
  Executor ex(device, g);
  if (!windows) EXPECT_EQ(ex.stats().dispatches, 3u);  // the op, and the two copies

  uint32_t seed = 100;
  for (int32_t p : c.positions) {
    SCOPED_TRACE("position " + std::to_string(p));
    const auto qkv = random_values(static_cast<size_t>(B * S * width), seed++, -2.0f, 2.0f);
    std::map<std::string, HostTensor> in = {
        {"position", HostTensor::from_i32({1}, std::vector<int32_t>{p})}};
    // Columns of the packed rows: H query heads, Hk key heads, Hk value heads.
    auto part = [&](int64_t first, int64_t cols) {
      std::vector<float> out;
      for (int64_t row = 0; row < B * S; ++row)
        out.insert(out.end(), qkv.begin() + row * width + first, qkv.begin() + row * width + first + cols);
      return out;
    };
    if (c.packed) {
      in.emplace("qkv", make_tensor({B, S, width}, qkv, c.dtype));
    } else {
      in.emplace("q", make_tensor({B, S, H * D}, part(0, H * D), c.dtype));
      in.emplace("k", make_tensor({B, S, Hk * D}, part(H * D, Hk * D), c.dtype));
      in.emplace("v", make_tensor({B, S, Hk * D}, part((H + Hk) * D, Hk * D), c.dtype));
    }
    auto out = ex.run(in);
    const auto xs = stored(qkv, c.dtype);
    std::vector<double> want_q(static_cast<size_t>(B * H * S * D)), tol_q(want_q.size());
    std::vector<double> tol_k(want_k.size(), 0.0);
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t s = 0; s < S; ++s) {
        const double* row = xs.data() + (bb * S + s) * width;
        const int64_t pos = p + c.offset + s;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t at = ((bb * H + h) * S + s) * D;
          rotate(row + h * D, &want_q[at], &tol_q[at], D, dims, c.style, base, pos, c.dtype);
        }
        for (int64_t h = 0; h < Hk; ++h) {
          const int64_t at = ((bb * Hk + h) * T + p + s) * D;
          rotate(row + (H + h) * D, &want_k[at], &tol_k[at], D, dims, c.style, base, pos, c.dtype);
          for (int64_t j = 0; j < D; ++j) want_v[at + j] = row[(H + Hk + h) * D + j];
        }
      }
    auto close = [](const HostTensor& got, const std::vector<double>& want, const std::vector<double>& tol) {
      const std::vector<float> g32 = got.to_f32();
      for (size_t e = 0; e < g32.size(); ++e)
        if (!(std::abs(g32[e] - want[e]) <= tol[e]))
          return ::testing::AssertionFailure() << "element " << e << ": got " << g32[e] << ", want "
                                               << want[e] << " within " << tol[e];
      return ::testing::AssertionSuccess();
    };
    EXPECT_TRUE(close(out.at("rotated_q"), want_q, tol_q));
    EXPECT_TRUE(close(out.at("k_all"), want_k, tol_k));  // copied columns and other rows exact
    EXPECT_TRUE(close(out.at("v_all"), want_v, std::vector<double>(want_v.size(), 0.0)));
    // The rows a later run does not write keep these values (a rotated key is no longer exact).
    const std::vector<float> k_now = out.at("k_all").to_f32();
    want_k.assign(k_now.begin(), k_now.end());
  }
  EXPECT_EQ(ex.stats().recordings, 1u);
}

// Grouped-query (6 query heads on 2 KV heads, SmolLM2's 9 on 3) and multi-head, one new row (a
// decoding step, replayed at several positions) and chunks of 5, 21 and 37 (CPU devices take 16
// rows per workgroup: whole and partial groups of rows), both pairings, a partial rotation with
// pass-through columns (dims 4 of an odd D 7), f16, a static offset, two batches.
TEST_F(DeviceTest, RopeKvCacheMatchesReference) {
  using Style = RopeOptions::Style;
  const RopeCacheCase cases[] = {
      {1, 9, 3, 1, 64, 40, -1, Style::interleaved, DType::f32, true, {0, 1, 2, 39}},
      {1, 9, 3, 1, 64, 40, -1, Style::neox, DType::f32, false, {7, 8}},
      {1, 6, 2, 5, 16, 23, -1, Style::neox, DType::f32, true, {0, 5, 18}},
      {2, 4, 4, 3, 7, 11, 4, Style::interleaved, DType::f32, false, {2, 8}},
      {2, 6, 2, 5, 16, 23, 8, Style::interleaved, DType::f16, true, {0, 17}},
      {1, 2, 1, 1, 128, 9000, -1, Style::neox, DType::f16, false, {8990}, 3},
      {1, 9, 3, 37, 64, 80, -1, Style::interleaved, DType::f32, true, {0, 43}},
      {2, 6, 2, 21, 16, 30, 8, Style::neox, DType::f16, false, {0, 9}},
  };
  for (const RopeCacheCase& c : cases) check_rope_kv_cache(device(), c);
}

// Caches larger than one binding (VKFORMER_MAX_BINDING_BYTES): a dispatch per window of whole
// (batch, KV head) slices, each writing its queries too.
TEST_F(DeviceTest, RopeKvCacheInWindows) {
  Device d = open_test_device_with_env({{"VKFORMER_MAX_BINDING_BYTES", "4096"}});
  check_rope_kv_cache(d, {2, 4, 2, 3, 16, 64, -1, RopeOptions::Style::neox, DType::f32, true, {0, 61}},
                      true);
}

// A decoding step's rope_kv_cache whose rotated q only its attention reads is done inside the
// attention's dispatch (src/graph/executor_build.cpp; the texel rows kernel on CPU devices, the
// split-K decoding kernel on GPUs): its output against the double-precision rope and attention,
// the caches' new rows against the rotated keys and the values (other rows unchanged), and the
// same graph with the rotated q also an output (so not fused) to within an f16/f32 ulp.
struct DecodeRopeCase {
  int64_t b, heads, kv_heads, d, t;
  int64_t dims;  // -1: d
  RopeOptions::Style style;
  DType dtype;
  std::vector<std::pair<int32_t, int32_t>> steps;  // (position, key_length), replayed in turn
  // With a weight type: the output is linear(concat_heads(attention), W_O [n, H·D], residual).
  std::optional<DType> out_proj = std::nullopt;
  int64_t n = 0;
};

// y = residual + heads · W_Oᵀ against the double reference, where the heads' rows err by up to
// `bound` each (the attention's own tolerance above, their rounding to the activations' type
// included), plus the product's fp32 accumulation (tests/quant_matmul_test.cpp's 8 sqrt(K) 2^-24
// scale) and y's rounding; and fused against apart (the same rows, the product summed in another
// order: the heads' rows within 3 ulps, as above, through |W_O|, and the fp32 sums and y's
// rounding twice).
void check_out_proj(const DecodeRopeCase& c, const WeightMatrix& w_o, const std::vector<double>& residual,
                    const std::vector<double>& heads, double bound, const std::vector<float>& got,
                    const std::vector<float>& got_apart) {
  const int64_t N = c.n, K = c.heads * c.d;
  const double ulp = c.dtype == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -23);
  double max_h = 0, max_w = 0;
  for (double v : heads) max_h = std::max(max_h, std::abs(v));
  for (double v : w_o.values) max_w = std::max(max_w, std::abs(v));
  const double fp32_sums = 8 * std::sqrt(static_cast<double>(K)) * std::ldexp(1.0, -24) * max_h * max_w;
  for (int64_t bb = 0; bb < c.b; ++bb)
    for (int64_t n = 0; n < N; ++n) {
      double y = residual[static_cast<size_t>(bb * N + n)], w_abs = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double wv = w_o.values[static_cast<size_t>(n * K + k)];
        y += wv * heads[static_cast<size_t>(bb * K + k)];
        w_abs += std::abs(wv);
      }
      const size_t at = static_cast<size_t>(bb * N + n);
      const double tol = w_abs * bound + fp32_sums + ulp * std::abs(y);
      ASSERT_NEAR(got[at], y, tol) << "y row " << bb << " column " << n;
      ASSERT_NEAR(got[at], got_apart[at], w_abs * 3.0 * ulp * max_h + 2 * fp32_sums + 2 * ulp * std::abs(y))
          << "fused against apart, y row " << bb << " column " << n;
    }
}

void check_rope_in_attention(Device& device, const DecodeRopeCase& c, size_t dispatches_saved) {
  const int64_t B = c.b, H = c.heads, Hk = c.kv_heads, D = c.d, T = c.t, G = H / Hk;
  const int64_t dims = c.dims < 0 ? D : c.dims, width = (H + 2 * Hk) * D;
  SCOPED_TRACE("B" + std::to_string(B) + " H" + std::to_string(H) + "/" + std::to_string(Hk) + " D" +
               std::to_string(D) + " dims" + std::to_string(dims) +
               (c.style == RopeOptions::Style::neox ? " neox " : " interleaved ") + std::string(dtype_name(c.dtype)));
  const Shape cache_shape{B, Hk, T, D};
  const auto k0 = random_values(static_cast<size_t>(cache_shape.numel()), 7, -2.0f, 2.0f);
  const auto v0 = random_values(static_cast<size_t>(cache_shape.numel()), 8, -3.0f, 3.0f);
  // Two copies of the caches: the fused graph's and the unfused one's.
  DeviceTensor caches[2][2];
  for (auto& pair : caches) {
    pair[0] = device.upload(make_tensor(cache_shape, k0, c.dtype));
    pair[1] = device.upload(make_tensor(cache_shape, v0, c.dtype));
  }
  std::vector<double> want_k = stored(k0, c.dtype), want_v = stored(v0, c.dtype);
  RopeOptions rope;
  rope.style = c.style;
  rope.dims = c.dims;
  const int64_t N = c.n, K = H * D;
  const WeightMatrix w_o = c.out_proj ? random_weight(*c.out_proj, N, K, 41) : WeightMatrix{};
  const auto residual = random_values(static_cast<size_t>(B * N), 42, -4.0f, 4.0f);
  auto build = [&](int which) {
    Graph g;
    RopeKvCache r = g.rope_kv_cache(g.input("qkv", {B, 1, width}, c.dtype), static_cast<int>(H),
                                    static_cast<int>(Hk), g.external("cache_k", caches[which][0]),
                                    g.external("cache_v", caches[which][1]),
                                    g.input("position", {1}, DType::i32), rope);
    AttentionOptions o;
    o.key_length = g.input("key_length", {1}, DType::i32);
    Tensor out = g.attention(r.q, r.k_cache, r.v_cache, o);
    if (c.out_proj) {
      LinearOptions proj;
      proj.residual = g.input("residual", {B, 1, N}, c.dtype);
      out = g.linear(g.concat_heads(out), g.constant("w_o", w_o.raw), proj);
    }
    g.output("out", out);
    if (which == 1) g.output("rotated_q", r.q);  // a second reader of q: not fused
    return g;
  };
  Executor fused(device, build(0)), apart(device, build(1));
  EXPECT_EQ(fused.stats().dispatches + dispatches_saved, apart.stats().dispatches);

  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  const double ulp = c.dtype == DType::f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -22);
  uint32_t seed = 300;
  for (const auto& [p, length] : c.steps) {
    SCOPED_TRACE("position " + std::to_string(p) + ", key_length " + std::to_string(length));
    const auto qkv = random_values(static_cast<size_t>(B * width), seed++, -2.0f, 2.0f);
    std::map<std::string, HostTensor> in = {
        {"qkv", make_tensor({B, 1, width}, qkv, c.dtype)},
        {"position", HostTensor::from_i32({1}, std::vector<int32_t>{p})},
        {"key_length", HostTensor::from_i32({1}, std::vector<int32_t>{length})}};
    if (c.out_proj) in.emplace("residual", make_tensor({B, 1, N}, residual, c.dtype));
    const std::vector<float> got = fused.run(in).at("out").to_f32();
    const std::vector<float> got_apart = apart.run(in).at("out").to_f32();
    // The reference: q and the new key rotated in double and stored as the caches store them.
    const auto xs = stored(qkv, c.dtype);
    std::vector<double> q(static_cast<size_t>(B * H * D)), tol(static_cast<size_t>(D));
    std::vector<double> k_tol(want_k.size(), 0.0);
    for (int64_t bb = 0; bb < B; ++bb) {
      const double* row = xs.data() + bb * width;
      for (int64_t h = 0; h < H; ++h) {
        rotate(row + h * D, &q[static_cast<size_t>((bb * H + h) * D)], tol.data(), D, dims, c.style, 10000.0, p,
               c.dtype);
      }
      for (int64_t h = 0; h < Hk; ++h) {
        const int64_t at = ((bb * Hk + h) * T + p) * D;
        rotate(row + (H + h) * D, &want_k[static_cast<size_t>(at)], &k_tol[static_cast<size_t>(at)], D, dims,
               c.style, 10000.0, p, c.dtype);
        for (int64_t j = 0; j < D; ++j) want_v[static_cast<size_t>(at + j)] = row[(H + Hk + h) * D + j];
      }
    }
    // q and the new keys as the kernels hold them (rounded to T), then attention in double over
    // keys [0, key_length): what remains is fp32 arithmetic and the output's rounding (|v| <= 3).
    auto round_to_t = [&](std::vector<double>& x) {
      x = stored(std::vector<float>(x.begin(), x.end()), c.dtype);
    };
    round_to_t(q);
    std::vector<double> k_ref = want_k;
    round_to_t(k_ref);
    const double bound = c.dtype == DType::f16 ? 4e-3 : 1e-4;
    std::vector<double> heads(static_cast<size_t>(B * H * D));  // the attention in double
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t kv = bb * Hk + h / G;
        std::vector<double> score(static_cast<size_t>(length));
        double m = -INFINITY;
        for (int64_t j = 0; j < length; ++j) {
          double s = 0.0;
          for (int64_t e = 0; e < D; ++e)
            s += q[static_cast<size_t>((bb * H + h) * D + e)] * k_ref[static_cast<size_t>((kv * T + j) * D + e)];
          score[static_cast<size_t>(j)] = s * scale;
          m = std::max(m, s * scale);
        }
        double l = 0.0;
        for (double& s : score) l += (s = std::exp(s - m));
        for (int64_t e = 0; e < D; ++e) {
          double o = 0.0;
          for (int64_t j = 0; j < length; ++j)
            o += score[static_cast<size_t>(j)] * want_v[static_cast<size_t>((kv * T + j) * D + e)];
          o /= l;
          const size_t at = static_cast<size_t>((bb * H + h) * D + e);
          heads[at] = o;
          if (c.out_proj) continue;
          ASSERT_NEAR(got[at], o, bound) << "head " << h << " column " << e;
          ASSERT_NEAR(got[at], got_apart[at], 3.0 * ulp) << "fused against apart, head " << h << " column " << e;
        }
      }
    if (c.out_proj) check_out_proj(c, w_o, stored(residual, c.dtype), heads, bound, got, got_apart);
    // The caches' rows: the new one rotated (values exact), every other one unchanged.
    const std::vector<float> k_now = device.download(caches[0][0]).to_f32();
    const std::vector<float> v_now = device.download(caches[0][1]).to_f32();
    for (size_t e = 0; e < k_now.size(); ++e) {
      ASSERT_LE(std::abs(k_now[e] - want_k[e]), k_tol[e]) << "cache_k element " << e;
      ASSERT_EQ(v_now[e], want_v[e]) << "cache_v element " << e;
    }
    want_k.assign(k_now.begin(), k_now.end());  // a rotated key is exact only to its tolerance
  }
}

// SmolLM2's heads (9 on 3, D 64, interleaved pairs), f16 with a partial rotation (dims 32 of 64,
// neox) over two batches, and 4 query heads on one (Gemma 3 270M's grouping); positions at the
// first row and the last, and a key_length short of the new row (written, not read). On CPU
// devices the texel rows kernel takes it (one dispatch: the op and the attention), except without
// subgroup operations (the op's own dispatch first, as before).
TEST_F(DeviceTest, RopeKvCacheInsideDecodeAttention) {
  using Style = RopeOptions::Style;
  const size_t saved = std::getenv("VKFORMER_NO_SUBGROUP_OPS") ? 0 : 1;
  const DecodeRopeCase cases[] = {
      {1, 9, 3, 64, 40, -1, Style::interleaved, DType::f32, {{0, 1}, {39, 40}, {20, 20}}},
      {2, 4, 2, 64, 24, 32, Style::neox, DType::f16, {{3, 4}, {23, 24}}},
      {1, 4, 1, 32, 12, -1, Style::neox, DType::f32, {{11, 12}}},
  };
  for (const DecodeRopeCase& c : cases) check_rope_in_attention(device(), c, saved);
}

// The output projection with its residual inside the decode attention too (src/graph/
// executor_build.cpp; the texel rows kernel's OUT_PROJ variants on CPU devices, each KV head's
// workgroup a slice of W_O's columns, the last to finish adding the partial rows): SmolLM2's
// heads with q4_1 (slices of 6 blocks, 4 rows of W_O a round, N not a multiple of 4), f16 with
// q4_k slices of half a 256-value super-block (8 heads on 4), q8_0 on two KV heads and q5_0 on
// one (Gemma 3's grouping: the linear stays its own dispatch), with the projection inside from 2
// workgroups on (the default asks for the host's CPU count). Elsewhere (the GPU tuning's split-K
// kernel, no subgroup operations) the linear is emitted after the attention.
TEST_F(DeviceTest, OutputProjectionInsideDecodeAttention) {
  using Style = RopeOptions::Style;
  Device d = open_test_device_with_env({{"VKFORMER_ATTENTION_OUT_PROJ_MIN_WORKGROUPS", "2"}});
  const bool rows_kernel = !std::getenv("VKFORMER_NO_SUBGROUP_OPS") && !std::getenv("VKFORMER_TUNING_AS_GPU");
  const size_t rope_saved = std::getenv("VKFORMER_NO_SUBGROUP_OPS") ? 0 : 1, proj_saved = rows_kernel ? 1 : 0;
  const DecodeRopeCase cases[] = {
      {1, 9, 3, 64, 40, -1, Style::interleaved, DType::f32, {{0, 1}, {39, 40}, {20, 20}}, DType::q4_1, 75},
      {1, 8, 4, 64, 24, 32, Style::neox, DType::f16, {{3, 4}, {23, 24}}, DType::q4_k, 37},
      {1, 4, 2, 32, 12, -1, Style::neox, DType::f32, {{11, 12}, {5, 6}}, DType::q8_0, 16},
  };
  for (const DecodeRopeCase& c : cases) check_rope_in_attention(d, c, rope_saved + proj_saved);
  check_rope_in_attention(d, {1, 4, 1, 32, 12, -1, Style::neox, DType::f16, {{11, 12}}, DType::q5_0, 24}, rope_saved);
  // Never (0): the linear apart, the same values.
  Device never = open_test_device_with_env({{"VKFORMER_ATTENTION_OUT_PROJ_MIN_WORKGROUPS", "0"}});
  check_rope_in_attention(never, cases[0], rope_saved);
}

// The same on the split-K decoding kernel (GPUs' decode path, forced here), one key range (its
// own variant) and three (the new row in the last range: the others neither read nor write it).
TEST_F(DeviceTest, RopeKvCacheInsideSplitDecodeAttention) {
  using Style = RopeOptions::Style;
  Device one = open_test_device_with_env({{"VKFORMER_ATTENTION_DECODE", "64x16/1"}});
  check_rope_in_attention(one, {1, 9, 3, 64, 40, -1, Style::interleaved, DType::f32, {{0, 1}, {20, 20}}}, 1);
  Device three = open_test_device_with_env({{"VKFORMER_ATTENTION_DECODE", "64x16/3"}});
  check_rope_in_attention(three, {2, 4, 2, 64, 24, 32, Style::neox, DType::f16, {{3, 4}, {23, 24}}}, 1);
}

TEST_F(DeviceTest, RopeKvCacheRejectsBadArguments) {
  Device& dev = device();
  DeviceTensor k = dev.allocate({1, 2, 8, 4}, DType::f32), v = dev.allocate({1, 2, 8, 4}, DType::f32);
  DeviceTensor v3 = dev.allocate({1, 3, 8, 4}, DType::f32);
  Graph g;
  Tensor ck = g.external("k", k), cv = g.external("v", v), cv3 = g.external("v3", v3);
  Tensor pos = g.input("pos", {1}, DType::i32);
  Tensor qkv = g.input("qkv", {1, 2, 32});  // (4 + 2 * 2) * 4
  RopeOptions rope;
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 3, 2, ck, cv, pos, rope); }, ErrorCode::shape_mismatch,
                         "expected [B, S, (H + 2 Hkv) D]"));
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 4, 2, ck, cv3, pos, rope); }, ErrorCode::shape_mismatch,
                         "must both be [B, 2, T, D]"));
  Tensor not_external = g.input("c", {1, 2, 8, 4});
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 4, 2, not_external, cv, pos, rope); },
                         ErrorCode::shape_mismatch, "made by Graph::external"));
  Tensor qkv20 = g.input("qkv20", {1, 2, 20});  // 3 query heads on one KV head: not the caches' 2
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv20, 3, 1, ck, cv, pos, rope); }, ErrorCode::shape_mismatch,
                         "must both be [B, 1, T, D]"));
  Tensor q = g.input("q", {1, 2, 16}), kk = g.input("kk", {1, 2, 8}), vv = g.input("vv", {1, 3, 8});
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(q, kk, vv, 4, 2, ck, cv, pos, rope); }, ErrorCode::shape_mismatch,
                         "v is [1,3,8] f32"));
  Tensor q16 = g.input("q16", {1, 2, 16}, DType::f16);
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(q16, kk, kk, 4, 2, ck, cv, pos, rope); },
                         ErrorCode::shape_mismatch, "in q's dtype"));
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(q, kk, kk, 3, 2, ck, cv, pos, rope); }, ErrorCode::shape_mismatch,
                         "must be a multiple of kv_heads"));
  RopeOptions with_tensor;
  with_tensor.offset_tensor = pos;
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 4, 2, ck, cv, pos, with_tensor); },
                         ErrorCode::invalid_argument, "offset_tensor must be empty"));
  RopeOptions odd;
  odd.dims = 3;
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 4, 2, ck, cv, pos, odd); }, ErrorCode::shape_mismatch,
                         "dims must be even"));
  Tensor fpos = g.input("fpos", {1});
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(qkv, 4, 2, ck, cv, fpos, rope); }, ErrorCode::shape_mismatch,
                         "position must be i32"));

  // A position whose rows do not fit the cache is refused when it is set.
  Graph h;
  RopeKvCache r = h.rope_kv_cache(h.input("qkv", {1, 2, 32}), 4, 2, h.external("k", k), h.external("v", v),
                                  h.input("pos", {1}, DType::i32), rope);
  h.output("q", r.q);
  Executor ex(dev, h);
  ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{6}));  // rows 6, 7: fine
  EXPECT_TRUE(fails_with([&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{7})); },
                         ErrorCode::invalid_argument, "new row(s) in a cache of 8 rows"));
  EXPECT_TRUE(fails_with([&] { ex.set_input("pos", HostTensor::from_i32({1}, std::vector<int32_t>{-1})); },
                         ErrorCode::invalid_argument, "new row(s) in a cache of 8 rows"));
}

}  // namespace
}  // namespace vkformer::testing
