// matmul and linear against the double-precision reference: shapes with 1, primes, sizes that are
// not multiples of any tile, K up to 300, batches, numpy-broadcast batch dims, transpose_b, bias,
// alpha, relu and gelu, in f32 and f16; and the shape errors. Every path runs on whatever device
// the tests have: the device's own choice per shape, and the others forced through
// VKFORMER_MATMUL_PATH / _TILES / _SPLIT_K / _TEXEL (the GPU tiling with shared memory, split-K,
// GEMV and odd texel blocks on a CPU device). The path choice itself (kernels::plan_matmul) is tested
// as a pure function on made-up devices, cooperative matrices included; the cooperative-matrix
// kernel runs on the device's own cooperative matrices where it has them, and through the
// emulation in every configuration in tests/coopmat_test.cpp.
//
// Tolerances: tests/matmul_check.hpp.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <tuple>

#include "device_impl.hpp"
#include "kernel_table.hpp"
#include "made_up_devices.hpp"
#include "matmul.hpp"
#include "matmul_check.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tuning.hpp"

namespace vkformer::testing {
namespace {

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

// K, and N unless B is transposed, multiples of 4: what the texel kernel takes (CPU devices
// choose it for these). Covers M of 1 (the block shrinks), rows and columns past a block, K
// shorter than a fetch batch and K with a quad left over after the batches, batches with their own
// B, broadcast batch dims, a shared B folded into M, bias, alpha and activations, f16.
const MatmulCase kQuadCases[] = {
    tb({{1, 4}, {1, 4}}),
    tb({{5, 8}, {17, 8}}),
    with(with_bias(tb({{13, 12}, {33, 12}})), 0.5f, Activation::gelu),
    with(tb({{2, 3, 20, 36}, {2, 3, 9, 36}}), 0.125f, Activation::none),  // Q·Kᵀ
    with(with_bias(tb({{2, 9, 100}, {31, 100}})), 1.0f, Activation::relu),
    tb({{2, 1, 7, 16}, {1, 3, 5, 16}}),
    f16(with(with_bias(tb({{13, 12}, {33, 12}})), 0.5f, Activation::gelu)),
    f16(tb({{3, 40}, {70, 40}})),
    {{1, 4}, {4, 4}},
    {{9, 8}, {8, 36}},
    with_bias({{3, 13, 12}, {3, 12, 132}}),
    with({{33, 300}, {300, 20}}, -0.75f, Activation::relu),
    f16({{9, 8}, {8, 36}}),
    f16(with_bias({{17, 28}, {28, 44}})),
};

class MatmulQuadTest : public DeviceTestWithParam<MatmulCase> {};

TEST_P(MatmulQuadTest, MatchesReference) {
  const MatmulCase& c = GetParam();
  if (device().impl().tuning().matmul.prefer_texel &&
      kernels_on(device())(kernels::Kernel::matmul_texel, c.dtype))
    EXPECT_EQ(plan_on(device(), c).path, "texel") << case_name(c);
  check_matmul(device(), c);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulQuadTest, ::testing::ValuesIn(kQuadCases),
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
                     kernels::tuning_for(device().info()).matmul.tiles.bm + 3;
  if (rows > (int64_t(1) << 23)) GTEST_SKIP() << rows << " rows make this test too slow";
  check_matmul(device(), {{rows, 2}, {2, 3}});
}

// The tiling a device gets is a tuning choice; VKFORMER_MATMUL_TILES overrides it, so the GPU
// tiling (shared memory, barriers) and odd tilings run on whatever device the tests have.
Device open_device_with_tiles(const char* tiles) {
  return open_test_device_with_env({{"VKFORMER_MATMUL_TILES", tiles}});
}

class MatmulTilingTest : public DeviceTestWithParam<const char*> {};

TEST_P(MatmulTilingTest, MatchesReference) {
  Device dev = open_device_with_tiles(GetParam());
  // Few pipelines per tiling (compiling them dominates the time on CPU devices). With shared
  // memory, the 65x100 and 2x33x20 cases load 4-wide (B transposed and not).
  const MatmulCase cases[] = {
      {{1, 1}, {1, 1}},
      {{3, 70, 9}, {3, 9, 65}},
      with(with_bias(tb({{65, 100}, {129, 100}})), 0.5f, Activation::gelu),
      f16({{2, 1, 7, 13}, {1, 3, 13, 5}}),
      {{2, 33, 20}, {2, 20, 36}},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(plan_on(dev, c).path, "general") << case_name(c);
    check_matmul(dev, c, 5);
  }
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

// The other paths, forced: each opens its own device with the environment set.
struct ForcedPath {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
  const char* path;  // what the cases below take (those that it cannot run are marked)
  std::vector<MatmulCase> cases;
  std::vector<MatmulCase> fallback_cases;  // the forced path cannot run these
};

Device open_device_with_env(const std::vector<std::pair<const char*, const char*>>& env) {
  return open_test_device_with_env(env);
}

const ForcedPath kForcedPaths[] = {
    // GEMV (GPUs, M <= 8): B transposed with 4-wide loads (K % 4 == 0) and without, B not
    // transposed (batched, and shared with the batch folded into M), bias, activations, f16.
    {"gemv",
     {{"VKFORMER_MATMUL_PATH", "gemv"}},
     "gemv",
     {tb({{1, 36}, {20, 36}}),
      with(with_bias(tb({{3, 13}, {9, 13}})), 0.5f, Activation::gelu),
      {{2, 1, 16}, {2, 16, 5}},
      with({{2, 3, 20}, {20, 7}}, -2.0f, Activation::relu),
      f16(with_bias(tb({{4, 8}, {5, 8}}))),
      f16({{8, 300}, {300, 130}})},
     {{{9, 5}, {5, 3}}}},
    // Split-K on the shared-memory tiling: 3 K ranges, or fewer where K has fewer BK slices;
    // 4-wide loads and not, batches, bias and activations applied by the reduction, f16.
    {"split_k",
     {{"VKFORMER_MATMUL_TILES", "32x32x8/4x4"}, {"VKFORMER_MATMUL_SPLIT_K", "3"}},
     "general",
     {{{5, 40}, {40, 7}},
      with(with_bias(tb({{33, 20}, {17, 20}})), 0.5f, Activation::gelu),
      {{2, 3, 9, 12}, {2, 3, 12, 10}},
      f16(with_bias({{7, 64}, {64, 12}})),
      {{4, 3}, {3, 5}}},
     {}},
    // Texel blocks that do not divide the subgroup: 5 rows x 3 columns, 3 quads a batch (A fetches
    // straddle batches' rows); without transposition 3 rows x 8 columns (two texels a k).
    {"texel_odd_blocks",
     {{"VKFORMER_MATMUL_PATH", "texel"}, {"VKFORMER_MATMUL_TEXEL", "5x3x3/3x8x1"}},
     "texel",
     {tb({{1, 4}, {1, 4}}),
      with(with_bias(tb({{13, 28}, {33, 28}})), 0.5f, Activation::gelu),
      tb({{2, 3, 20, 36}, {2, 3, 9, 36}}),
      {{9, 8}, {8, 36}},
      f16(with_bias({{3, 13, 12}, {3, 12, 132}}))},
     {{{7, 13}, {13, 31}}}},
    // B [K, N] transposed first (from M = 1 here), then read as the Linear layout: batched,
    // broadcast and shared B, bias, f16.
    {"texel_transpose_b_first",
     {{"VKFORMER_MATMUL_PATH", "texel"}, {"VKFORMER_MATMUL_TEXEL", "16x2x4/16x4x2/1"}},
     "texel",
     {{{1, 4}, {4, 4}},
      {{9, 8}, {8, 36}},
      f16(with_bias({{3, 13, 12}, {3, 12, 132}})),
      with({{2, 1, 7, 16}, {1, 3, 16, 8}}, 1.0f, Activation::gelu),
      {{2, 5, 12}, {12, 20}}},
     {}},
};

class MatmulForcedPathTest : public DeviceTestWithParam<ForcedPath> {};

TEST_P(MatmulForcedPathTest, MatchesReference) {
  const ForcedPath& f = GetParam();
  Device dev = open_device_with_env(f.env);
  for (const auto& c : f.cases) {
    kernels::MatmulPlan plan = plan_on(dev, c);
    if (std::string(f.path) == "texel" && !kernels_on(dev)(kernels::Kernel::matmul_texel, c.dtype)) {
      GTEST_SKIP() << "device '" << dev.info().name << "' cannot run the texel kernel";
    }
    EXPECT_EQ(plan.path, f.path) << case_name(c);
    if (std::string(f.name) == "texel_transpose_b_first")
      EXPECT_TRUE(plan.transpose_b_first) << case_name(c);
    check_matmul(dev, c, 7);
  }
  for (const auto& c : f.fallback_cases) {
    EXPECT_NE(plan_on(dev, c).path, f.path) << case_name(c);
    check_matmul(dev, c, 7);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, MatmulForcedPathTest, ::testing::ValuesIn(kForcedPaths),
                         [](const auto& info) { return std::string(info.param.name); });

// The split-K case above really splits: 40 = 5 slices of 8 in 3 ranges.
TEST_F(DeviceTest, MatmulSplitKPlan) {
  Device dev = open_device_with_env(
      {{"VKFORMER_MATMUL_TILES", "32x32x8/4x4"}, {"VKFORMER_MATMUL_SPLIT_K", "3"}});
  EXPECT_EQ(plan_on(dev, {{5, 40}, {40, 7}}).splits, 3u);
  EXPECT_EQ(plan_on(dev, {{4, 3}, {3, 5}}).splits, 1u);  // one slice
}

// Forcing cooperative matrices runs them where the device offers them; elsewhere the request
// falls back to another kernel, and the results are right either way.
TEST_F(DeviceTest, MatmulCoopmatWhereSupportedElseFallsBack) {
  Device dev = open_device_with_env({{"VKFORMER_MATMUL_PATH", "coopmat"}});
  const MatmulCase c = f16(with(with_bias(tb({{70, 96}, {40, 96}})), 0.5f, Activation::gelu));
  const bool usable = vk::coopmat_api(dev.info()) != vk::CoopmatApi::none;
  if (!usable) {
    EXPECT_NE(plan_on(dev, c).path, "coopmat")
        << "device '" << dev.info().name << "' has no usable cooperative matrices";
    std::printf("[ note ] '%s' has no cooperative matrices: checked the fallback here (the "
                "kernel runs through the emulation in coopmat_test)\n", dev.info().name.c_str());
  }
  check_matmul(dev, c, 9);
  check_matmul(dev, f16({{2, 33, 40}, {2, 40, 17}}), 9);
}

TEST_F(DeviceTest, MatmulTilesEnvSetsTheTiling) {
  const DeviceInfo& info = device().info();
  {
    ScopedEnv env("VKFORMER_MATMUL_TILES", "24x40x5/3x5");
    kernels::MatmulTiles t = kernels::tuning_for(info).matmul.tiles;
    EXPECT_EQ(std::tie(t.bm, t.bn, t.bk, t.tm, t.tn), std::make_tuple(24u, 40u, 5u, 3u, 5u));
    EXPECT_TRUE(t.shared_memory);
    EXPECT_EQ(t.invocations(), 64u);
  }
  {
    ScopedEnv env("VKFORMER_MATMUL_TILES", "12x24x1/3x3/direct");
    kernels::MatmulTiles t = kernels::tuning_for(info).matmul.tiles;
    EXPECT_FALSE(t.shared_memory);
    EXPECT_EQ(t.invocations(), 32u);
    EXPECT_EQ(kernels::tuning_for(info).matmul.forced_path, "general");
  }
  {
    ScopedEnv env("VKFORMER_MATMUL_TEXEL", "5x3x3/3x8x1");
    kernels::MatmulTexelTiles t = kernels::tuning_for(info).matmul.texel_tiles;
    EXPECT_EQ(std::tie(t.tm, t.tn, t.qb, t.tm_nn, t.tn_nn, t.qb_nn), std::make_tuple(5u, 3u, 3u, 3u, 8u, 1u));
  }
}

TEST_F(DeviceTest, MatmulPathEnvRejectsNonsense) {
  for (auto [name, value] : {std::pair{"VKFORMER_MATMUL_PATH", "fast"},
                             std::pair{"VKFORMER_MATMUL_SPLIT_K", "0"},
                             std::pair{"VKFORMER_MATMUL_TEXEL", "12x2x2/8x3x2"}}) {
    ScopedEnv env(name, value);
    EXPECT_TRUE(fails_with([&] { kernels::tuning_for(device().info()); }, ErrorCode::invalid_argument, name))
        << name << "=" << value;
  }
}

TEST_F(DeviceTest, MatmulTilesEnvRejectsATilingThatDoesNotFit) {
  EXPECT_TRUE(fails_with([] { open_device_with_tiles("64x64x16/3x4"); }, ErrorCode::invalid_argument,
                         "VKFORMER_MATMUL_TILES"));
}

// The overrides parse strictly: no sign, nothing past 32 bits, nothing after the last field.
// (sscanf's %u took "-4" as 4294967292, and 32-bit products wrapped into tilings that "fit":
// lavapipe then crashed or tried to allocate 32 GB.)
TEST_F(DeviceTest, MatmulEnvRejectsSignsOverflowAndTrailingJunk) {
  auto read = [&] { kernels::tuning_for(device().info()); };
  for (const char* bad : {"-4x-4x4/4x4x4", "65536x65536x4/4x4x4", "4294967296x1x1/4x4x4",
                          "+4x4x4/4x4x4", "4x4x4/4x4x4junk", "4x4x4/4x4x4/", "4x4x4/4x4x4/-1"})
    env_error("VKFORMER_MATMUL_TEXEL", bad, read);
  for (const char* bad : {"4294967295x8x8/4294967295x1", "8x8x8/1x1junk", "8x8x8/1x1/",
                          "8x8x8/1x1/directly", "8x8x8/-1x1"})
    env_error("VKFORMER_MATMUL_TILES", bad, read);
  ScopedEnv env("VKFORMER_MATMUL_TEXEL", "16x2x4/16x4x2/0");  // M = 0: never transpose B first
  EXPECT_EQ(kernels::tuning_for(device().info()).matmul.texel_tiles.transpose_min_m, 0u);
}

// Each rejection names the rule that failed with its numbers, and a device limit with its value.
TEST_F(DeviceTest, MatmulEnvErrorsNameTheFailedRule) {
  const DeviceInfo& info = device().info();
  auto read = [&] { kernels::tuning_for(info); };
  expect_env_rules(
      "VKFORMER_MATMUL_TILES",
      {{"63x64x16/4x4", "BM 63 is not a multiple of TM 4"},
       {"64x30x16/4x4", "BN 30 is not a multiple of TN 4"},
       {"0x64x16/4x4", "BM is 0, expected 1 to 65536"},
       {"64x64x16/4x65537", "TN is 65537, expected 1 to 65536"},
       {"1024x1024x1/1x1", "(BM/TM)*(BN/TN) = 1048576 invocations, above "
                           "maxComputeWorkGroupInvocations = " +
                               std::to_string(info.max_workgroup_invocations)},
       {"64x64x65536/4x4", "4*BK*(BM+BN+2) = 34078720 bytes of shared memory, above "
                           "maxComputeSharedMemorySize = " +
                               std::to_string(info.shared_memory_bytes)}},
      read);
  expect_env_rules(
      "VKFORMER_MATMUL_TEXEL",
      {{"12x2x2/8x3x2", "TN 3 of the second block (B not transposed) is not a multiple of 4"},
       {"16x16x4/16x4x2", "TM*TN of the first block (B transposed) is 256, expected at most 128"},
       {"65536x65536x4/4x4x4", "TM of the first block (B transposed) is 65536, expected 1 to 128"},
       {"16x2x4/16x4x17", "QB of the second block (B not transposed) is 17, expected 1 to 16"}},
      read);
}

// Shape errors name the op and both shapes.
std::string matmul_error(const Shape& as, const Shape& bs, MatmulOptions options = {},
                         DType bdtype = DType::f32) {
  Graph g;
  Tensor a = g.input("a", as), b = g.input("b", bs, bdtype);
  return error_message([&] { g.matmul(a, b, options); }, ErrorCode::shape_mismatch);
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
  EXPECT_EQ(error_message([&] { g.matmul(a, b, {.bias = bias}); }, ErrorCode::shape_mismatch),
            "matmul: bias must be [6] f32 (a [2,3,5] · b [5,6] is [2,3,6]), got [5] f32");
}

TEST_F(DeviceTest, LinearShapeErrorsNameXAndWeight) {
  Graph g;
  Tensor x = g.input("x", {2, 7, 31}), w = g.input("w", {13, 30}), w3 = g.input("w3", {1, 13, 31});
  Graph::Scope scope(g, "encoder");
  EXPECT_EQ(error_message([&] { g.linear(x, w); }, ErrorCode::shape_mismatch),
            "encoder/linear: x is [2,7,31], weight is [13,30] (transposed): inner dims 31 != 30");
  EXPECT_TRUE(fails_with([&] { g.linear(x, w3); }, ErrorCode::shape_mismatch, "[1,13,31]"));
}

// The path choice as a pure function of made-up devices' tunings and the shape.
DeviceInfo made_up_gpu() {
  return made_up_nv_gpu({{16, 8, 16, "f16", "f16", "f16", "f16"},
                         {16, 8, 8, "f16", "f16", "f32", "f32"},
                         {16, 16, 16, "f16", "f16", "f32", "f32"}});
}

kernels::MatmulProblem problem(uint64_t m, uint64_t n, uint64_t k, bool transpose_b = true,
                          DType dtype = DType::f32, uint64_t batch = 1) {
  kernels::MatmulProblem p;
  p.m = m, p.n = n, p.k = k, p.batch = batch, p.transpose_b = transpose_b, p.dtype = dtype;
  return p;
}

const kernels::KernelSupport kAllKernels = [](kernels::Kernel, DType) { return true; };

// Every kernel but these.
kernels::KernelSupport all_but(std::vector<kernels::Kernel> missing) {
  return [missing](kernels::Kernel k, DType) {
    return std::find(missing.begin(), missing.end(), k) == missing.end();
  };
}

TEST(MatmulPlan, GpuPicksCooperativeMatricesForF16) {
  kernels::MatmulTuning t = kernels::matmul_tuning_for(made_up_gpu(), false);
  EXPECT_EQ(t.coopmat_tiles.m, 16u);  // 16x16x16 preferred over the other f32 shape
  EXPECT_EQ(t.coopmat_tiles.n, 16u);
  EXPECT_EQ(t.coopmat_tiles.k, 16u);
  EXPECT_EQ(t.coopmat_tiles.subgroup, 32u);
  EXPECT_EQ(kernels::plan_matmul(t, problem(1024, 1024, 1024, true, DType::f16), kAllKernels).path,
            "coopmat");
  EXPECT_EQ(kernels::plan_matmul(t, problem(512, 512, 64, false, DType::f16), kAllKernels).path,
            "coopmat");
  // Not where the kernel cannot run, for f32, for shapes smaller than one MMA tile, or for the
  // small M of decoding (GEMV).
  const kernels::KernelSupport no_coopmat = all_but({kernels::Kernel::matmul_coopmat_nv});
  EXPECT_EQ(kernels::plan_matmul(t, problem(1024, 1024, 1024, true, DType::f16), no_coopmat).path,
            "general");
  EXPECT_EQ(kernels::plan_matmul(t, problem(1024, 1024, 1024), kAllKernels).path,
            "general");
  EXPECT_EQ(kernels::plan_matmul(t, problem(12, 1024, 1024, true, DType::f16), kAllKernels).path,
            "general");
  EXPECT_EQ(kernels::plan_matmul(t, problem(4, 1024, 1024, true, DType::f16), kAllKernels).path,
            "gemv");
}

TEST(MatmulPlan, CooperativeMatricesNeedAnF16ToF32Shape) {
  DeviceInfo d = made_up_gpu();
  d.cooperative_matrix_nv_shapes = {{16, 8, 16, "f16", "f16", "f16", "f16"}};
  kernels::MatmulTuning t = kernels::matmul_tuning_for(d, false);
  EXPECT_EQ(t.coopmat_tiles.m, 0u);
  EXPECT_EQ(kernels::plan_matmul(t, problem(1024, 1024, 1024, true, DType::f16), kAllKernels).path,
            "general");
  d.cooperative_matrix_nv_shapes = {{16, 8, 8, "f16", "f16", "f32", "f32"}};
  t = kernels::matmul_tuning_for(d, false);
  EXPECT_EQ(t.coopmat_tiles.m, 16u);
  EXPECT_EQ(t.coopmat_tiles.n, 8u);
  EXPECT_EQ(t.coopmat_tiles.k, 8u);
  EXPECT_LE(t.coopmat_tiles.shared_bytes(), d.shared_memory_bytes);
  d.cooperative_matrix_nv = false;  // shapes without the extension: never
  EXPECT_EQ(kernels::matmul_tuning_for(d, false).coopmat_tiles.m, 0u);
}

TEST(MatmulPlan, GpuSmallMIsGemv) {
  kernels::MatmulTuning t = kernels::matmul_tuning_for(made_up_gpu(), false);
  for (uint64_t m : {1, 2, 3, 8}) {
    kernels::MatmulPlan plan = kernels::plan_matmul(t, problem(m, 4096, 4096), kAllKernels);
    EXPECT_EQ(plan.path, "gemv") << m;
    EXPECT_GE(plan.gemv_m, m);
    EXPECT_LE(plan.gemv_m, 8u);
  }
  EXPECT_EQ(kernels::plan_matmul(t, problem(9, 4096, 4096), kAllKernels).path, "general");
  const kernels::KernelSupport no_gemv = all_but({kernels::Kernel::matmul_gemv});
  EXPECT_EQ(kernels::plan_matmul(t, problem(1, 4096, 4096), no_gemv).path, "general");
}

TEST(MatmulPlan, GpuSplitsKWhenTheOutputCannotFillTheDevice) {
  DeviceInfo d = made_up_gpu();
  kernels::MatmulTuning t = kernels::matmul_tuning_for(d, false);
  EXPECT_EQ(t.tiles.bm, 128u);  // discrete: 128 x 128 tiles of 8 x 8
  EXPECT_EQ(t.tiles.tm, 8u);
  EXPECT_EQ(t.split_k.target_workgroups, 216u);  // 2 per compute unit
  // One tile, K = 4096: as many splits as allowed.
  kernels::MatmulPlan plan = kernels::plan_matmul(t, problem(64, 64, 4096), kAllKernels);
  EXPECT_EQ(plan.path, "general");
  EXPECT_EQ(plan.splits, 16u);
  EXPECT_TRUE(plan.vec4);
  // 1024 x 1024: 64 tiles, so 4 splits (216 / 64 rounded up, K / 256 = 4).
  EXPECT_EQ(kernels::plan_matmul(t, problem(1024, 1024, 1024), kAllKernels).splits, 4u);
  // Enough tiles, or K too short to split, or a batch that fills the device: no split.
  EXPECT_EQ(kernels::plan_matmul(t, problem(4096, 4096, 4096), kAllKernels).splits, 1u);
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 300), kAllKernels).splits, 1u);
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 4096, true, DType::f32, 512), kAllKernels).splits,
            1u);
  const kernels::KernelSupport no_split = all_but({kernels::Kernel::matmul_split});
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 4096), no_split).splits, 1u);
  // Odd N without transposition: no 4-wide loads.
  EXPECT_FALSE(kernels::plan_matmul(t, problem(256, 255, 256, false), kAllKernels).vec4);
  // Unknown compute units: a guess by device type.
  d.compute_units = 0;
  EXPECT_EQ(kernels::matmul_tuning_for(d, false).split_k.target_workgroups, 128u);
}

TEST(MatmulPlan, CpuPrefersTexelWhereItFits) {
  DeviceInfo d = made_up_cpu();
  kernels::MatmulTuning t = kernels::matmul_tuning_for(d, true);
  EXPECT_TRUE(t.prefer_texel);
  EXPECT_FALSE(t.prefer_gemv);
  EXPECT_EQ(t.split_k.target_workgroups, 0u);
  EXPECT_FALSE(t.tiles.shared_memory);
  kernels::MatmulPlan plan = kernels::plan_matmul(t, problem(1024, 1024, 1024), kAllKernels);
  EXPECT_EQ(plan.path, "texel");
  EXPECT_EQ(plan.tm, t.texel_tiles.tm);
  EXPECT_EQ(plan.tn, t.texel_tiles.tn);
  EXPECT_EQ(plan.qb, t.texel_tiles.qb);
  plan = kernels::plan_matmul(t, problem(1024, 1024, 1024, false), kAllKernels);
  EXPECT_EQ(plan.path, "texel");
  EXPECT_EQ(plan.tm, t.texel_tiles.tm);  // transposed first: the transposed blocks
  EXPECT_EQ(plan.tn, t.texel_tiles.tn);
  EXPECT_TRUE(plan.transpose_b_first);
  plan = kernels::plan_matmul(t, problem(512, 1024, 1024, false), kAllKernels);
  EXPECT_EQ(plan.path, "texel");
  EXPECT_FALSE(plan.transpose_b_first);  // too few rows to pay for the pass over B
  EXPECT_EQ(plan.tm, t.texel_tiles.tm_nn);
  EXPECT_EQ(plan.tn, t.texel_tiles.tn_nn);
  EXPECT_EQ(plan.tn % 4, 0u);
  const kernels::KernelSupport no_transpose = all_but({kernels::Kernel::matmul_transpose});
  EXPECT_FALSE(kernels::plan_matmul(t, problem(1024, 1024, 1024, false), no_transpose).transpose_b_first);
  // Small M shrinks the block; one row for decoding.
  EXPECT_EQ(kernels::plan_matmul(t, problem(1, 1024, 1024), kAllKernels).tm, 1u);
  EXPECT_EQ(kernels::plan_matmul(t, problem(3, 1024, 1024), kAllKernels).tm, 4u);
  // K (or N without transposition) not a multiple of 4, too many texels, no kernel: general.
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 30), kAllKernels).path, "general");
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 66, 32, false), kAllKernels).path,
            "general");
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 66, 32, true), kAllKernels).path,
            "texel");
  kernels::MatmulProblem big = problem(64, 64, 32);
  big.a_bytes = 64 * 32 * 4;
  big.max_texels = 64 * 32 / 4 - 1;  // one texel short of a
  EXPECT_EQ(kernels::plan_matmul(t, big, kAllKernels).path, "general");
  const kernels::KernelSupport no_texel = all_but({kernels::Kernel::matmul_texel});
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 32), no_texel).path, "general");
}

TEST(MatmulPlan, TexelNeedsFixedSubgroupsWithShuffles) {
  DeviceInfo d = made_up_cpu();
  d.subgroup_shuffle = false;
  EXPECT_EQ(kernels::matmul_tuning_for(d, true).texel_tiles.subgroup, 0u);
  d = made_up_cpu();
  d.min_subgroup_size = 4;  // varying subgroup size
  kernels::MatmulTuning t = kernels::matmul_tuning_for(d, true);
  EXPECT_FALSE(t.prefer_texel);
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 32), kAllKernels).path, "general");
}

TEST(MatmulPlan, ForcedPathsApplyWhereTheyFit) {
  kernels::MatmulTuning t = kernels::matmul_tuning_for(made_up_cpu(), true);
  t.forced_path = "gemv";
  EXPECT_EQ(kernels::plan_matmul(t, problem(8, 64, 32), kAllKernels).path, "gemv");
  EXPECT_EQ(kernels::plan_matmul(t, problem(9, 64, 32), kAllKernels).path, "texel");
  t.forced_path = "coopmat";  // the CPU has none
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 32, true, DType::f16), kAllKernels).path,
            "texel");
  t.forced_path = "general";
  EXPECT_EQ(kernels::plan_matmul(t, problem(64, 64, 32), kAllKernels).path, "general");
}

}  // namespace
}  // namespace vkformer::testing
