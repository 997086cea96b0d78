// The matmul path table (src/kernels/matmul_paths*.cpp) as a pure function of made-up devices:
// which path each list chooses for a problem, whether the chosen kernel takes linear's fusions,
// and the rules of the table itself. What each path computes is checked against the references
// by matmul_test, coopmat_test, quant_matmul_test and fused_ops_test; the float list's choices
// also by matmul_test's MatmulPlan cases.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "made_up_devices.hpp"
#include "matmul_paths.hpp"

namespace vkformer::testing {
namespace {

using namespace kernels;

// A CPU device like lavapipe, and a discrete GPU with NV cooperative matrices (16x16x16, f16
// into f32).
MatmulTuning cpu_tuning() { return matmul_tuning_for(made_up_cpu(), true); }
MatmulTuning gpu_tuning() {
  return matmul_tuning_for(made_up_nv_gpu({{16, 16, 16, "f16", "f16", "f32", "f32"}}), false);
}

const KernelSupport kAll = [](Kernel, DType) { return true; };

// x [m, k] of `act` times a weight [n, k] of `w`, bound whole.
MatmulProblem weights(uint64_t m, uint64_t n, uint64_t k, DType w = DType::q4_1,
                      DType act = DType::f32) {
  MatmulProblem p;
  p.m = m, p.n = n, p.k = k;
  p.transpose_b = true;
  p.dtype = act;
  p.weight = w;
  p.a_bytes = m * k * dtype_size(act);
  p.b_bytes = dtype_bytes(w, static_cast<int64_t>(n * k));
  p.max_texels = 1u << 27;
  return p;
}

MatmulProblem with_fusions(MatmulProblem p, bool norm, bool gated, bool residual) {
  p.fusions = {norm, gated, residual};
  p.residual_bytes = residual ? p.m * p.n * dtype_size(p.dtype) : 0;
  return p;
}

std::string chosen(const MatmulTuning& t, const MatmulProblem& p,
                   const KernelSupport& s = kAll) {
  return std::string(plan_matmul(t, p, s).path);
}

// Whether the path chosen for `p` also does its fusions.
bool fused(const MatmulTuning& t, const MatmulProblem& p) {
  const MatmulQuery q{t, p, kAll};
  const MatmulPathEntry& path = choose_matmul_path(q);
  return path.fuses && path.fuses(q);
}

TEST(MatmulPaths, CpuDecodingStreamsTheWeightsUnlessSmallOrLongRows) {
  MatmulTuning t = cpu_tuning();
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_rows");     // SmolLM2's attention projections
  EXPECT_EQ(chosen(t, weights(1, 49152, 576)), "wq_rows");   // ... and its output head
  // More rounds of x blocks than a lane keeps (K of 392 blocks: 49 rounds of 8 lanes, above 48):
  // lanes on rows.
  EXPECT_EQ(chosen(t, weights(1, 64, 32 * 392)), "wq_vec");
  t.weight_tiles.texel_gemv_stream_bytes = 1u << 20;  // only weights of 1 MiB and more stream
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_vec");
  EXPECT_EQ(chosen(t, weights(1, 4096, 576)), "wq_rows");
}

TEST(MatmulPaths, CpuPromptsTakeTheTexelKernelElseStorageBuffers) {
  const MatmulTuning t = cpu_tuning();
  EXPECT_EQ(chosen(t, weights(64, 576, 576)), "wq_texel");
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::q8_0, DType::f16)), "wq_texel");
  // Weights without texel kernels (bf16, float weights in the other float type) and kernels the
  // device cannot run: the storage-buffer mat-vec for one row, the tiled kernel for more.
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::bf16)), "wq_tiled");
  EXPECT_EQ(chosen(t, weights(1, 576, 576, DType::f16)), "wq_gemv");
  const KernelSupport no_texel = [](Kernel k, DType) {
    return k != Kernel::matmul_wq_texel_q4_1 && k != Kernel::matmul_wq_vec_q4_1;
  };
  EXPECT_EQ(chosen(t, weights(64, 576, 576), no_texel), "wq_tiled");
  EXPECT_EQ(chosen(t, weights(1, 576, 576), no_texel), "wq_gemv");
  // The rows kernel needs the vec kernel's conditions and its own.
  const KernelSupport no_rows = [](Kernel k, DType) { return k != Kernel::matmul_wq_rows_q4_1; };
  EXPECT_EQ(chosen(t, weights(1, 576, 576), no_rows), "wq_vec");
}

TEST(MatmulPaths, TexelViewsLimitTheTexelKernels) {
  MatmulTuning t = cpu_tuning();
  const MatmulProblem p = weights(64, 576, 576);
  t.weight_tiles.texel_limit = (p.b_bytes + 15) / 16;  // w just fits
  EXPECT_EQ(chosen(t, p), "wq_texel");
  t.weight_tiles.texel_limit -= 1;
  EXPECT_EQ(chosen(t, p), "wq_tiled");
  MatmulProblem x = weights(256, 576, 576);
  x.max_texels = x.a_bytes / (4 * 4);  // a just fits the device's views (and w, smaller)
  EXPECT_EQ(chosen(cpu_tuning(), x), "wq_texel");
  x.max_texels -= 1;
  EXPECT_EQ(chosen(cpu_tuning(), x), "wq_tiled");
}

TEST(MatmulPaths, ForcedFloatPathsSteerTheWeightPaths) {
  MatmulTuning t = cpu_tuning();
  t.forced_path = "general";  // the storage-buffer kernels
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_gemv");
  EXPECT_EQ(chosen(t, weights(64, 576, 576)), "wq_tiled");
  t.forced_path = "gemv";
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_gemv");
  t.forced_path = "texel";
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_rows");
  EXPECT_EQ(chosen(t, weights(64, 576, 576)), "wq_texel");
}

TEST(MatmulPaths, GpuWeightsTakeCooperativeMatricesForF16Prompts) {
  MatmulTuning t = gpu_tuning();
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_gemv");
  EXPECT_EQ(chosen(t, weights(64, 576, 576)), "wq_tiled");                      // f32
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::q4_1, DType::f16)), "wq_coopmat");
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::bf16, DType::f16)), "wq_coopmat");
  EXPECT_EQ(chosen(t, weights(8, 576, 576, DType::q4_1, DType::f16)), "wq_tiled");  // < one tile
  t.forced_path = "coopmat";  // any size
  EXPECT_EQ(chosen(t, weights(8, 576, 576, DType::q4_1, DType::f16)), "wq_coopmat");
  t.forced_path = "general";
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::q4_1, DType::f16)), "wq_tiled");
  t.forced_path = "gemv";  // does not apply to 64 rows: the automatic choice
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::q4_1, DType::f16)), "wq_coopmat");
}

// The integer-dot mat-vec (wq_idot) where the tuning takes it (VKFORMER_MATMUL_INTEGER_DOT,
// `vkformer tune`; off by default until a GPU has measured it): products of up to its rows of every
// quantized type, before the mat-vec and tiled kernels; never where its kernel cannot run here or
// a float path is forced.
TEST(MatmulPaths, IntegerDotMatVecWhereTheDeviceAcceleratesIt) {
  DeviceInfo gpu = made_up_nv_gpu({{16, 16, 16, "f16", "f16", "f32", "f32"}});
  gpu.integer_dot_product = true;
  EXPECT_EQ(matmul_tuning_for(gpu, false).weight_tiles.integer_dot_rows, 0u);  // not accelerated
  EXPECT_EQ(chosen(matmul_tuning_for(gpu, false), weights(1, 576, 576)), "wq_gemv");
  gpu.integer_dot_4x8_packed_signed_accelerated = true;
  MatmulTuning t = matmul_tuning_for(gpu, false);
  EXPECT_EQ(t.weight_tiles.integer_dot_rows, 0u);  // off until a GPU run has measured it
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_gemv");
  t.weight_tiles.integer_dot_rows = 8;  // as `vkformer tune` sets it where it is faster
  for (DType w : {DType::q8_0, DType::q4_0, DType::q4_1, DType::q5_0, DType::q4_k, DType::q5_k,
                  DType::q6_k})
    for (DType act : {DType::f32, DType::f16}) {
      EXPECT_EQ(chosen(t, weights(1, 576, 768, w, act)), "wq_idot") << dtype_name(w);
      EXPECT_EQ(chosen(t, weights(8, 576, 768, w, act)), "wq_idot") << dtype_name(w);
    }
  EXPECT_EQ(chosen(t, weights(9, 576, 576)), "wq_tiled");
  EXPECT_EQ(chosen(t, weights(64, 576, 576, DType::q4_1, DType::f16)), "wq_coopmat");
  // Weights without its kernel (bf16, float weights), a device without the feature (its kernels
  // unsupported), a forced float path.
  EXPECT_EQ(chosen(t, weights(1, 576, 576, DType::bf16)), "wq_gemv");
  EXPECT_EQ(chosen(t, weights(1, 576, 576, DType::f16)), "wq_gemv");
  const KernelSupport no_idot = [](Kernel k, DType) { return k != Kernel::matmul_wq_idot_q4_1; };
  EXPECT_EQ(chosen(t, weights(1, 576, 576), no_idot), "wq_gemv");
  t.forced_path = "general";
  EXPECT_EQ(chosen(t, weights(1, 576, 576)), "wq_gemv");
  // lavapipe-like: the texel mat-vec, unless the tuning takes integer dots for a few rows.
  DeviceInfo cpu = made_up_cpu();
  cpu.integer_dot_product = true;
  MatmulTuning c = matmul_tuning_for(cpu, true);
  EXPECT_EQ(c.weight_tiles.integer_dot_rows, 0u);
  EXPECT_EQ(chosen(c, weights(1, 576, 576)), "wq_rows");
  c.weight_tiles.integer_dot_rows = 4;
  EXPECT_EQ(chosen(c, weights(1, 576, 576)), "wq_idot");
  EXPECT_EQ(chosen(c, weights(4, 576, 576)), "wq_idot");
  EXPECT_EQ(chosen(c, weights(5, 576, 576)), "wq_texel");
  // Its kernel does bias and activation; linear's fusions are emitted apart.
  c.weight_tiles.integer_dot_rows = 8;
  EXPECT_FALSE(fused(c, with_fusions(weights(1, 576, 576), true, true, true)));
}

TEST(MatmulPaths, TheChosenKernelTakesTheFusionsItCan) {
  const MatmulTuning cpu = cpu_tuning();
  // Decoding: every fusion, with whole bindings.
  EXPECT_TRUE(fused(cpu, with_fusions(weights(1, 576, 576), true, true, true)));
  EXPECT_TRUE(fused(cpu, with_fusions(weights(1, 576, 576), true, false, false)));
  MatmulProblem windows = with_fusions(weights(1, 576, 576), false, false, true);
  windows.whole = false;
  EXPECT_FALSE(fused(cpu, windows));
  // Prompts on the texel kernel: the gated pair and the residual, not the pre-norm.
  EXPECT_TRUE(fused(cpu, with_fusions(weights(64, 576, 576), false, true, true)));
  EXPECT_FALSE(fused(cpu, with_fusions(weights(64, 576, 576), true, false, false)));
  // Cooperative matrices: the residual alone.
  const MatmulTuning gpu = gpu_tuning();
  const MatmulProblem f16 = weights(64, 576, 576, DType::q4_1, DType::f16);
  EXPECT_TRUE(fused(gpu, with_fusions(f16, false, false, true)));
  EXPECT_FALSE(fused(gpu, with_fusions(f16, false, true, false)));
  EXPECT_FALSE(fused(gpu, with_fusions(f16, true, false, true)));
  // The storage-buffer kernels: none.
  EXPECT_FALSE(fused(gpu, with_fusions(weights(1, 576, 576), false, false, true)));
  // Float b: the f16 GEMM on cooperative matrices takes the residual.
  MatmulProblem f = f16;
  f.weight.reset();
  f.b_bytes = f.a_bytes;
  EXPECT_EQ(chosen(gpu, f), "coopmat");
  EXPECT_TRUE(fused(gpu, with_fusions(f, false, false, true)));
}

// Every list ends with a path that runs any problem, whatever the device; names are unique (they
// are what VKFORMER_MATMUL_PATH and the tests say); every path can be asked and emitted.
TEST(MatmulPaths, EachListEndsWithAPathForEveryProblem) {
  std::set<std::string> names;
  for (const bool weight : {false, true}) {
    const auto list = weight ? weight_matmul_paths() : float_matmul_paths();
    ASSERT_FALSE(list.empty());
    for (const MatmulPathEntry& path : list) {
      EXPECT_TRUE(names.insert(std::string(path.name)).second) << path.name;
      EXPECT_NE(path.can, nullptr) << path.name;
      EXPECT_NE(path.emit, nullptr) << path.name;
    }
    const MatmulPathEntry& last = list.back();
    EXPECT_EQ(last.takes, nullptr) << last.name;
    const KernelSupport none = [](Kernel, DType) { return false; };
    for (const MatmulTuning& t : {cpu_tuning(), gpu_tuning()})
      for (MatmulProblem p : {weights(1, 7, 32), weights(1000, 3, 64, DType::bf16, DType::f16)}) {
        if (!weight) p.weight.reset();
        EXPECT_TRUE(last.can({t, p, none})) << last.name;
        EXPECT_EQ(plan_matmul(t, p, none).path, last.name);
      }
  }
  for (const char* forceable : {"general", "texel", "gemv", "coopmat"})
    EXPECT_TRUE(names.count(forceable)) << forceable;
}

}  // namespace
}  // namespace vkformer::testing
