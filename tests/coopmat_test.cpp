// Cooperative matrices: which API and MMA shape a device gets (src/vk/coopmat.cpp), the static
// tiling table, and the f16 GEMM (shaders/matmul_coopmat.comp) through the emulated fragment
// (shaders/coopmat.glsl) in every configuration the tuning can choose, on whatever device the
// tests have (lavapipe in CI), against the double-precision reference (tolerances in
// tests/matmul_check.hpp): every MMA shape x every entry of kernels::coopmat_configs(), subgroup sizes
// 4 to 128, M, N, K odd, prime and below one MMA tile, batches with broadcast batch strides,
// binding windows, transposed and plain B (16-byte and scalar loads), every epilogue.
//
// The emulation lays fragments out neither row- nor column-major, differently per operand, so a
// kernel that assumes a layout fails here.
#include <cstdio>
#include <string>
#include <vector>

#include "coopmat.hpp"
#include "device_impl.hpp"
#include "made_up_devices.hpp"
#include "matmul_check.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tuning.hpp"

namespace vkformer::testing {
namespace {

using vk::CoopmatApi;
using kernels::CoopmatConfig;
using vk::MmaShape;

// ---- Which API and which shape (pure functions of made-up devices) ----

DeviceInfo made_up_gpu() {
  DeviceInfo d = made_up_discrete_gpu("made-up GPU", 132);
  // The H100's lists (../shared/GPU.md), in a driver's order.
  d.cooperative_matrix_khr = true;
  d.cooperative_matrix_khr_shapes = {{16, 8, 16, "f16", "f16", "f16", "f16"},
                                     {16, 8, 16, "f16", "f16", "f32", "f32"},
                                     {16, 8, 8, "f16", "f16", "f32", "f32"},
                                     {16, 16, 16, "f16", "f16", "f32", "f32"},
                                     {16, 16, 32, "u8", "u8", "u32", "u32"}};
  d.cooperative_matrix_nv = true;
  d.cooperative_matrix_nv_shapes = {{16, 8, 8, "f16", "f16", "f32", "f32"}};
  return d;
}

TEST(CoopmatShapes, KhrWhereOfferedNvOnlyWhereKhrIsAbsent) {
  DeviceInfo d = made_up_gpu();
  EXPECT_EQ(vk::coopmat_api(d), CoopmatApi::khr);
  d.cooperative_matrix_khr = false;
  d.cooperative_matrix_khr_shapes.clear();
  EXPECT_EQ(vk::coopmat_api(d), CoopmatApi::nv);
  EXPECT_EQ(vk::coopmat_mnk(d, CoopmatApi::nv, vk::kCoopmatF16F32), (MmaShape{16, 8, 8}));
  d.cooperative_matrix_nv_shapes.clear();  // an opened device without the feature keeps none
  EXPECT_EQ(vk::coopmat_api(d), CoopmatApi::none);
  EXPECT_FALSE(vk::coopmat_mnk(d, CoopmatApi::none, vk::kCoopmatF16F32));
}

TEST(CoopmatShapes, SixteenCubedWhereOfferedElseTheLargest) {
  DeviceInfo d = made_up_gpu();
  EXPECT_EQ(vk::coopmat_mnk(d, CoopmatApi::khr, vk::kCoopmatF16F32), (MmaShape{16, 16, 16}));
  d.cooperative_matrix_khr_shapes.erase(d.cooperative_matrix_khr_shapes.begin() + 3);
  EXPECT_EQ(vk::coopmat_mnk(d, CoopmatApi::khr, vk::kCoopmatF16F32), (MmaShape{16, 8, 16}));
  // Only matching component types, and never saturating ones.
  const std::vector<MmaShape> f16 = vk::coopmat_shapes(d, CoopmatApi::khr, vk::kCoopmatF16F32);
  EXPECT_EQ(f16, (std::vector<MmaShape>{{16, 8, 16}, {16, 8, 8}}));
  EXPECT_EQ(vk::coopmat_shapes(d, CoopmatApi::khr, {"u8", "u8", "u32", "u32"}),
            (std::vector<MmaShape>{{16, 16, 32}}));
  d.cooperative_matrix_khr_shapes.back().saturating = true;
  EXPECT_TRUE(vk::coopmat_shapes(d, CoopmatApi::khr, {"u8", "u8", "u32", "u32"}).empty());
  d.cooperative_matrix_khr_shapes = {{16, 8, 16, "f16", "f16", "f16", "f16"}};
  EXPECT_FALSE(vk::coopmat_mnk(d, CoopmatApi::khr, vk::kCoopmatF16F32));
  // The emulation offers the H100's f16 shapes.
  EXPECT_EQ(vk::coopmat_shapes(d, CoopmatApi::emulated, vk::kCoopmatF16F32),
            vk::emulated_mma_shapes());
  EXPECT_EQ(vk::coopmat_mnk(d, CoopmatApi::emulated, vk::kCoopmatF16F32), (MmaShape{16, 16, 16}));
}

// ---- The static table ----

TEST(CoopmatTuning, TakesTheFirstConfigurationThatFits) {
  DeviceInfo d = made_up_gpu();
  kernels::MatmulCoopmatTiles t = kernels::matmul_tuning_for(d, false).coopmat_tiles;
  EXPECT_EQ(t.api, CoopmatApi::khr);
  EXPECT_EQ(t.str(), "16x16x16/2x2/4x4/1/32");  // 128 x 128 tiles
  EXPECT_EQ(t.bm(), 128u);
  EXPECT_EQ(t.bn(), 128u);
  EXPECT_EQ(t.config, kernels::coopmat_configs().front());
  // Less shared memory or smaller workgroups: the first entry that fits.
  d.shared_memory_bytes = 16 * 1024;
  t = kernels::matmul_tuning_for(d, false).coopmat_tiles;
  EXPECT_LE(t.shared_bytes(), 16u * 1024);
  EXPECT_NE(t.config, kernels::coopmat_configs().front());
  for (const CoopmatConfig& c : kernels::coopmat_configs()) {
    if (c == t.config) break;
    kernels::MatmulCoopmatTiles bigger = t;
    bigger.config = c;
    EXPECT_GT(bigger.shared_bytes(), 16u * 1024) << bigger.str() << " fits but was passed over";
  }
  d = made_up_gpu();
  d.max_workgroup_invocations = 32;
  t = kernels::matmul_tuning_for(d, false).coopmat_tiles;
  EXPECT_EQ(t.str(), "16x16x16/1x1/1x1/1/32");
  d.max_workgroup_invocations = 16;  // not even one subgroup
  EXPECT_FALSE(kernels::matmul_tuning_for(d, false).coopmat_tiles.usable());
}

// The emulation needs more shared memory than the real kernels (its scratch); every entry of the
// table still fits lavapipe's 32 KiB with every emulated shape and subgroup size, so the tests
// below can run all of them.
TEST(CoopmatTuning, EveryConfigurationFitsLavapipeInTheEmulation) {
  for (const MmaShape& s : vk::emulated_mma_shapes())
    for (const CoopmatConfig& c : kernels::coopmat_configs())
      for (uint32_t sg = 4; sg <= 128; sg *= 2) {
        kernels::MatmulCoopmatTiles t;
        t.api = CoopmatApi::emulated;
        t.m = s.m, t.n = s.n, t.k = s.k, t.subgroup = sg, t.config = c;
        EXPECT_LE(t.shared_bytes(), 32u * 1024) << t.str();
        EXPECT_LE(t.invocations(), 1024u) << t.str();
      }
}

TEST(CoopmatTuning, EmulatedOnlyWhenAsked) {
  DeviceInfo cpu = made_up_gpu();
  cpu.type = "cpu";
  cpu.cooperative_matrix_khr = cpu.cooperative_matrix_nv = false;
  cpu.cooperative_matrix_khr_shapes.clear();
  cpu.cooperative_matrix_nv_shapes.clear();
  cpu.subgroup_size = cpu.min_subgroup_size = cpu.max_subgroup_size = 8;
  cpu.shared_memory_bytes = 32 * 1024;
  EXPECT_EQ(kernels::matmul_tuning_for(cpu, true).coopmat_tiles.api, CoopmatApi::none);
  EXPECT_EQ(kernels::matmul_tuning_for(made_up_gpu(), false).coopmat_tiles.api, CoopmatApi::khr);
  {
    ScopedEnv env("VKFORMER_COOPMAT", "emulate");
    const kernels::MatmulCoopmatTiles t = kernels::matmul_tuning_for(cpu, true).coopmat_tiles;
    EXPECT_EQ(t.api, CoopmatApi::emulated);
    EXPECT_EQ(t.subgroup, 8u);  // the device's, where it is one the emulation takes
    EXPECT_LE(t.shared_bytes(), cpu.shared_memory_bytes);
    EXPECT_EQ(kernels::matmul_tuning_for(made_up_gpu(), false).coopmat_tiles.api, CoopmatApi::emulated);
  }
  {
    ScopedEnv env("VKFORMER_COOPMAT", "off");
    EXPECT_EQ(kernels::matmul_tuning_for(made_up_gpu(), false).coopmat_tiles.api, CoopmatApi::none);
  }
}

// ---- The kernel, through the emulation ----

Device open_emulated(const std::string& tiles) {
  return open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"},
                                    {"VKFORMER_MATMUL_COOPMAT", tiles.c_str()},
                                    {"VKFORMER_MATMUL_PATH", "coopmat"}});
}

// Runs `cases` on `dev`, each of which must take the emulated cooperative-matrix kernel.
void check_emulated(Device& dev, const std::vector<MatmulCase>& cases, uint32_t seed) {
  const kernels::MatmulCoopmatTiles& t = dev.impl().tuning().matmul.coopmat_tiles;
  ASSERT_EQ(t.api, CoopmatApi::emulated);
  for (const MatmulCase& c : cases) {
    EXPECT_EQ(plan_on(dev, c).path, "coopmat") << case_name(c) << " " << t.str();
    check_matmul(dev, c, seed);
  }
}

std::string param_name(std::string s) {
  for (char& ch : s)
    if (ch == '/') ch = '_';
  return s;
}

// Every MMA shape with every configuration of the table (at the device's subgroup size): two
// row and two column tiles with rows and columns left over, three slices of K with an odd rest
// (scalar loads) and plain B, bias, alpha and relu; then transposed B over a batch, K a multiple
// of 8 (16-byte loads), fewer columns than one tile, gelu.
std::vector<std::string> every_configuration() {
  std::vector<std::string> out;
  for (const MmaShape& s : vk::emulated_mma_shapes())
    for (const CoopmatConfig& c : kernels::coopmat_configs()) {
      kernels::MatmulCoopmatTiles t;
      t.m = s.m, t.n = s.n, t.k = s.k, t.config = c;
      out.push_back(t.str().substr(0, t.str().rfind('/')));  // without the subgroup size
    }
  return out;
}

class CoopmatConfigTest : public DeviceTestWithParam<std::string> {};

TEST_P(CoopmatConfigTest, MatchesReference) {
  Device dev = open_emulated(GetParam());
  const kernels::MatmulCoopmatTiles& t = dev.impl().tuning().matmul.coopmat_tiles;
  const int64_t bm = t.bm(), bn = t.bn(), bk = t.bk();
  check_emulated(dev,
                 {f16(with(with_bias({{bm + 3, 2 * bk + 3}, {2 * bk + 3, bn + 5}}), -0.75f,
                           Activation::relu)),
                  f16(with(tb({{2, 13, bk + 8}, {2, std::max<int64_t>(bn - 3, 1), bk + 8}}), 1.0f,
                           Activation::gelu))},
                 3);
}

INSTANTIATE_TEST_SUITE_P(Emulated, CoopmatConfigTest, ::testing::ValuesIn(every_configuration()),
                         [](const auto& info) { return param_name(info.param); });

// Emulated subgroups of every size the kernels must take (the device's own size, 8 on lavapipe,
// runs above); 128 invocations share a 16 x 8 B fragment of 64 elements, so half hold none.
class CoopmatSubgroupTest : public DeviceTestWithParam<std::string> {};

TEST_P(CoopmatSubgroupTest, MatchesReference) {
  Device dev = open_emulated(GetParam());
  check_emulated(dev,
                 {f16(with(with_bias(tb({{45, 40}, {37, 40}})), 0.5f, Activation::gelu)),
                  f16({{2, 19, 27}, {2, 27, 21}})},
                 4);
}

INSTANTIATE_TEST_SUITE_P(Emulated, CoopmatSubgroupTest,
                         ::testing::Values("16x16x16/2x2/2x2/2/4", "16x16x16/2x2/2x2/2/16",
                                           "16x8x16/2x2/2x2/2/32", "16x16x16/1x2/3x1/2/64",
                                           "16x8x8/1x2/3x1/2/128"),
                         [](const auto& info) { return param_name(info.param); });

// K of many slices (16 and 18 of 32): the two stages alternate many times.
TEST_F(DeviceTest, CoopmatManySlicesOfK) {
  Device dev = open_emulated("16x16x16/2x2/2x2/2");
  check_emulated(dev, {f16({{37, 512}, {512, 29}}), f16(tb({{19, 576}, {23, 576}}))}, 10);
}

// Shapes smaller than one MMA tile in each dimension, and vectors.
TEST_F(DeviceTest, CoopmatSmallerThanOneMmaTile) {
  Device dev = open_emulated("16x16x16/2x2/2x2/2");
  check_emulated(dev,
                 {f16({{1, 1}, {1, 1}}), f16({{3, 7}, {7, 5}}), f16(tb({{5, 3}, {11, 3}})),
                  f16({{1, 40}, {40, 3}}), f16(tb({{20, 8}, {1, 8}}))},
                 5);
}

// Every epilogue: no activation, relu and gelu, each with and without bias, alpha 1 and not.
TEST_F(DeviceTest, CoopmatEveryEpilogue) {
  Device dev = open_emulated("16x8x16/2x2/2x2/2");
  std::vector<MatmulCase> cases;
  for (Activation act : {Activation::none, Activation::relu, Activation::gelu}) {
    cases.push_back(f16(with(with_bias({{37, 24}, {24, 29}}), 1.0f, act)));
    cases.push_back(f16(with(tb({{37, 24}, {29, 24}}), -1.5f, act)));
  }
  check_emulated(dev, cases, 6);
}

// Batches: each operand with its own matrices, one broadcast over a batch dim (stride 0), a B
// shared by every batch (folded into M), batches of transposed B. K of 36: a multiple of 4 but
// not of 8, so the loads are scalar.
TEST_F(DeviceTest, CoopmatBatches) {
  Device dev = open_emulated("16x16x16/2x2/2x2/2");
  check_emulated(dev,
                 {f16({{2, 3, 13, 24}, {3, 24, 9}}), f16({{1, 13, 36}, {4, 36, 16}}),
                  f16(tb({{2, 1, 7, 13}, {1, 3, 5, 13}})), f16(with_bias({{2, 9, 40}, {40, 31}})),
                  f16({{4, 1, 5, 7}, {6, 7, 3}})},
                 7);
}

// Tensors larger than one binding may span (4 KiB here): rows of A and out, rows of a transposed
// B (out's columns, stored with its row stride) and whole batches, each window its own dispatch.
TEST_F(DeviceTest, CoopmatBindingWindows) {
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"},
                                          {"VKFORMER_MATMUL_COOPMAT", "16x16x16/2x2/2x2/2"},
                                          {"VKFORMER_MATMUL_PATH", "coopmat"},
                                          {"VKFORMER_MAX_BINDING_BYTES", "4096"}});
  check_emulated(dev,
                 {f16({{150, 16}, {16, 24}}), f16(with_bias(tb({{5, 40}, {120, 40}}))),
                  f16({{6, 20, 40}, {6, 40, 10}})},
                 8);
}

// Without VKFORMER_MATMUL_PATH the emulation is taken where cooperative matrices would be: f16
// products of at least one MMA tile, not f32 or smaller ones. Without VKFORMER_COOPMAT=emulate it
// never is: a device without cooperative matrices has none.
TEST_F(DeviceTest, CoopmatEmulationOnlyWhenAsked) {
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"}});
  EXPECT_EQ(dev.impl().tuning().matmul.coopmat_tiles.api, CoopmatApi::emulated);
  EXPECT_EQ(plan_on(dev, f16({{64, 64}, {64, 64}})).path, "coopmat");
  EXPECT_NE(plan_on(dev, {{64, 64}, {64, 64}}).path, "coopmat");
  EXPECT_NE(plan_on(dev, f16({{64, 8}, {8, 64}})).path, "coopmat");
  check_matmul(dev, f16(with_bias(tb({{64, 64}, {48, 64}}))), 9);
  EXPECT_NE(device().impl().tuning().matmul.coopmat_tiles.api, CoopmatApi::emulated);
  EXPECT_EQ(device().impl().tuning().matmul.coopmat_tiles.api,
            vk::coopmat_api(device().info()));
}

// ---- The overrides' errors name the rule ----

TEST_F(DeviceTest, CoopmatEnvErrorsNameTheRule) {
  const DeviceInfo& info = device().info();
  auto error = [&](const char* name, const char* value) {
    return env_error(name, value, [&] { kernels::tuning_for(info); });
  };
  EXPECT_NE(error("VKFORMER_COOPMAT", "fast").find("expected auto, emulate or off"),
            std::string::npos);
  if (vk::coopmat_api(info) == CoopmatApi::none) {
    const std::string what = error("VKFORMER_MATMUL_COOPMAT", "16x16x16/2x2/2x2/2");
    EXPECT_NE(what.find("VKFORMER_COOPMAT=emulate"), std::string::npos) << what;
  }
  ScopedEnv emulate("VKFORMER_COOPMAT", "emulate");
  expect_env_rules(
      "VKFORMER_MATMUL_COOPMAT",
      {{"32x32x32/2x2/2x2/2", "MMA shape 32x32x32 is not one that emulated cooperative matrices "
                              "offer for f16 x f16 + f32 here (16x16x16, 16x8x16, 16x8x8)"},
       {"16x16x16/2x2/2x2/2/12", "SG 12 is not a power of two from 4 to 128"},
       {"16x16x16/2x2/2x2/2/256", "SG 256 is not a power of two from 4 to 128"},
       {"16x16x16/0x2/2x2/2", "WM is 0, expected 1 to 16"},
       {"16x16x16/2x2/2x17/2", "TN is 17, expected 1 to 16"},
       {"16x16x16/16x16/1x1/1/128",
        "SG*WM*WN = 32768 invocations, above maxComputeWorkGroupInvocations = " +
            std::to_string(info.max_workgroup_invocations)},
       {"16x16x16/2x2/8x8/8", "bytes of shared memory, above maxComputeSharedMemorySize = " +
                                  std::to_string(info.shared_memory_bytes)},
       {"16x16x16/2x2", "expected MxNxK/WMxWN/TMxTN/BK or MxNxK/WMxWN/TMxTN/BK/SG"}},
      [&] { kernels::tuning_for(info); });
}

}  // namespace
}  // namespace vkformer::testing
