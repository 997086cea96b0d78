// Flash attention on cooperative matrices (shaders/attention_flash.comp) through the emulated
// fragment (shaders/coopmat.glsl), and split-K flash decoding (attention_flash_decode.comp +
// attention_flash_combine.comp), against the double-precision reference (reference.hpp), on
// whatever device the tests have (lavapipe in CI): every configuration of kernels::flash_configs()
// with every emulated MMA shape, emulated subgroups of 4 to 128, every head dim the models use,
// every mask kind, key_length, grouped-query attention, f16 and f32 storage, batches, binding
// windows; every decode configuration with several split counts. Then the static tables on
// made-up devices (an H100's limits), and the overrides' errors.
//
// The emulation lays fragments out neither row- nor column-major, differently for A, B and
// accumulators, so a kernel that assumes a layout fails here.
//
// Run time on lavapipe is mostly compiling pipelines (each configuration, head dim, mask kind
// and dtype is one), so the sweeps use emulated subgroups of 32 (the H100's; a third of the
// compile time of lavapipe's own 8, whose layout the subgroup tests cover) and share pipelines
// where they can. Shapes stay small for another reason: llvmpipe ends every loop of a shader
// invocation once all its loops together have run 65535 iterations (LP_MAX_TGSI_LOOP_ITERATIONS),
// and the emulation's loops over fragment elements count; a workgroup of subgroups of 32 gets
// through about 10 blocks of 64 keys at head dim 64 before its results are cut short (the
// emulated matmul meets the same cap at K of about 1400 with subgroups of 8).
//
// Tolerances (atol + rtol * |want|, both 5e-3 in every case): f16 storage rounds the output to
// 11 bits and the probabilities to f16 for the P·V product (2^-11 relative each); f32 storage
// through flash rounds q, k and v to f16 when staging them (logits off by ~1e-3 at D = 128 and
// |q|, |k| <= 1.5), accumulating in fp32 throughout. Split-K decoding is fp32 throughout:
// f32 storage is held to 2e-5 + 1e-5 * |want| as the scalar fused kernels are.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attention_inputs.hpp"
#include "coopmat.hpp"
#include "device_impl.hpp"
#include "made_up_devices.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tunables.hpp"
#include "tuning.hpp"
#include "tuning_cache.hpp"

namespace vkformer::testing {
namespace {

using Path = AttentionOptions::Path;
using vk::CoopmatApi;
using kernels::DecodeConfig;
using kernels::FlashConfig;
using vk::MmaShape;

constexpr Tolerance kFlashTolerance{5e-3, 5e-3};
constexpr Tolerance kDecodeF32Tolerance{2e-5, 1e-5};

struct Case {
  std::string name;
  int64_t B, H, Sq, Sk, D, Dv;
  DType dtype = DType::f16;
  bool causal = false;
  std::optional<Shape> mask;  // random in [-2, 2], a tenth -inf
  bool key_padding = false;
  int32_t key_length = -1;  // -1: no key_length tensor
  int64_t Hkv = 0;          // 0: H
  float scale = 0.0f;       // 0: 1 / sqrt(D)
  // Nonzero: huge logits from the mask instead. Even rows: +extreme at one key, -extreme at the
  // others (all the weight on one key, exp(-2 extreme) = 0 elsewhere); odd rows: 0 or -extreme
  // (a softmax over the 0 keys). Never several keys at +extreme or only -extreme in a row: fp32
  // cannot tell 1e10 + s from 1e10 + s', so such ties would depend on rounding, not on overflow.
  float extreme = 0.0f;
  int64_t hidden_row = -1;  // this query row of the mask is -inf throughout (a masked row)
  bool causal_at_key_length = false;  // causal aligned to key_length instead of Sk
};


struct Outcome {
  HostTensor got;
  std::vector<double> want;
  size_t dispatches = 0;
};

Outcome run_case(Device& dev, const Case& c, Path path = Path::fused) {
  Graph g;
  std::map<std::string, HostTensor> inputs;
  const RandomQkv qkv(g, inputs, {c.B, c.H, c.Hkv ? c.Hkv : c.H, c.Sq, c.Sk, c.D, c.Dv}, c.dtype);
  const Tensor q = qkv.q, k = qkv.k, v = qkv.v;
  AttentionOptions o;
  o.path = path;
  ref::SoftmaxMasks m;
  set_scale_and_causal(c, o, m);
  std::vector<double> mask_expanded;
  if (c.mask) {
    const Shape& ms = *c.mask;
    auto mv = random_values(ms.numel(), 4, -2.0f, 2.0f);
    const auto pick = random_values(ms.numel(), 5, 0.0f, 1.0f);
    const int64_t cols = ms[ms.rank() - 1], rows = ms.rank() >= 2 ? ms[ms.rank() - 2] : 1;
    for (size_t i = 0; i < mv.size(); ++i) {
      const int64_t row = static_cast<int64_t>(i) / cols % rows, col = static_cast<int64_t>(i) % cols;
      if (c.extreme != 0.0f && row % 2 == 0)
        mv[i] = col == (row * 7) % cols ? c.extreme : -c.extreme;
      else if (c.extreme != 0.0f)
        mv[i] = col == 0 || pick[i] < 0.5f ? 0.0f : -c.extreme;
      else if (pick[i] < 0.1f)
        mv[i] = -std::numeric_limits<float>::infinity();
    }
    if (c.hidden_row >= 0) {  // the row's entries in every leading index of the mask
      for (int64_t lead = 0; lead < ms.numel() / (rows * cols); ++lead)
        for (int64_t j = 0; j < cols; ++j)
          mv[(lead * rows + c.hidden_row) * cols + j] = -std::numeric_limits<float>::infinity();
    }
    o.mask = g.input("mask", ms, c.dtype);
    inputs.emplace("mask", make_tensor(ms, mv, c.dtype));
    mask_expanded = broadcast_to(stored(mv, c.dtype), ms, {c.B, c.H, c.Sq, c.Sk});
    m.mask = &mask_expanded;
  }
  std::vector<int32_t> padding;
  if (c.key_padding) {
    const auto pick = random_values(static_cast<size_t>(c.B * c.Sk), 6, 0.0f, 1.0f);
    for (float x : pick) padding.push_back(x < 0.3f ? 1 : 0);
    o.key_padding_mask = g.input("padding", {c.B, c.Sk}, DType::i32);
    inputs.emplace("padding", HostTensor::from_i32({c.B, c.Sk}, padding));
    m.key_padding = &padding;
  }
  add_key_length(g, inputs, o, m, c.key_length);
  g.output("y", g.attention(q, k, v, o));
  Executor ex(dev, g);
  Outcome r;
  r.got = ex.run(inputs)["y"];
  r.dispatches = ex.stats().dispatches;
  r.want = qkv.reference(m);
  return r;
}

kernels::AttentionProblem problem_of(const Case& c) {
  return {c.B, c.H, c.Sq, c.Sk, c.D, c.Dv, c.Hkv ? c.Hkv : c.H};
}

// ---- Flash attention through the emulation ----

// Fails the test for every message the validation layer reported on `dev` (DeviceTest's
// TearDown checks only the devices opened during the test; those below live longer).
void expect_no_validation_messages(Device& dev) {
  for (const auto& m : dev.take_validation_messages())
    ADD_FAILURE() << "Vulkan validation " << m.severity << ": " << m.text;
}

// A device whose attention takes flash attention through the emulation (`flash`: the
// VKFORMER_ATTENTION_FLASH value), never split-K decoding: one per setting for the whole binary,
// so that tests sharing a setting compile their pipelines once.
Device& open_flash(const std::string& flash) {
  static std::map<std::string, Device> devices;
  auto it = devices.find(flash);
  if (it == devices.end()) {
    std::vector<std::pair<const char*, const char*>> env = {
        {"VKFORMER_COOPMAT", "emulate"}, {"VKFORMER_ATTENTION_DECODE", "off"}};
    if (!flash.empty()) env.push_back({"VKFORMER_ATTENTION_FLASH", flash.c_str()});
    it = devices.emplace(flash, open_test_device_with_env(env)).first;
  }
  return it->second;
}

// Runs `c` on `dev`, which must take flash attention for it, against the reference.
void check_flash(Device& dev, const Case& c) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(c.dtype)));
  const kernels::AttentionTiles& t = dev.impl().tuning().attention;
  ASSERT_EQ(t.flash.api, CoopmatApi::emulated);
  kernels::FlashLaunch launch;
  ASSERT_TRUE(kernels::flash_launch_for(t.flash, dev.info(), problem_of(c), c.dtype, &launch))
      << "flash attention does not take " << c.name;
  const Outcome r = run_case(dev, c);
  expect_no_validation_messages(dev);
  EXPECT_EQ(r.dispatches, 1u);
  EXPECT_TRUE(all_close(r.got, r.want, kFlashTolerance)) << launch.str();
  ::testing::Test::RecordProperty(c.name + "_max_abs_error", sci(max_abs_error(r.got, r.want)));
}

std::string param_name(std::string s) {
  for (char& ch : s)
    if (ch == '/' || ch == ' ') ch = '_';
  return s;
}

// Every configuration with 16x16x16 (what every table takes where the device offers it, as the
// H100 does) and with one of the other emulated shapes in turn (16x8x16, 16x8x8: NVIDIA's NV
// list has only 16x8x8), emulated subgroups of 32.
std::vector<std::string> every_flash_configuration() {
  std::vector<std::string> out;
  const std::vector<MmaShape>& shapes = vk::emulated_mma_shapes();
  size_t other = 1;
  for (const FlashConfig& c : kernels::flash_configs()) {
    out.push_back(c.str() + "/" + shapes.front().str() + "/32");
    out.push_back(c.str() + "/" + shapes[other].str() + "/32");
    other = other + 1 < shapes.size() ? other + 1 : 1;
  }
  return out;
}

class FlashConfigTest : public DeviceTestWithParam<std::string> {};

// Three row blocks (the last partly used), three key blocks (the last with 7 keys), causal (the
// early row blocks skip the last key blocks), a mask per batch and key padding, grouped-query
// heads (4 on 2), f16. With the 16x16x16 shape and one row tile per subgroup (what head dims
// above 64 take) also f32 storage with 4 query heads on one KV head, D != Dv (not multiples of
// 8: scalar loads) and key_length cutting into the second key block, at head dim 64 (or the
// smallest above it that fits): the wide heads are FlashHeadDimTest's, through the table's
// choice, and a kernel for D = 128 in f32 took a CPU device's compiler 40 s per configuration.
TEST_P(FlashConfigTest, MatchesReference) {
  Device& dev = open_flash(GetParam());
  const kernels::FlashTiles& t = dev.impl().tuning().attention.flash;
  ASSERT_TRUE(t.forced);
  const int64_t bc = t.forced->bc;
  const int64_t br = int64_t(t.shape.m) * t.forced->row_tiles * t.forced->warps;
  check_flash(dev, {"blocks_causal_mask", 2, 4, 2 * br + 5, 2 * bc + 7, 64, 64, DType::f16, true,
                    Shape{2, 1, 2 * br + 5, 2 * bc + 7}, true, -1, 2});
  if (!(t.shape == MmaShape{16, 16, 16}) || t.forced->row_tiles > 1) return;
  int64_t d = 0;
  for (int64_t want : {64, 80, 96, 128}) {
    kernels::FlashLaunch l;
    if (kernels::flash_launch_for(t, dev.info(), {1, 4, 9, 9, want, want - 4, 1}, DType::f32, &l)) {
      d = want;
      break;
    }
  }
  ASSERT_GT(d, 0) << GetParam() << " fits no head dim from 64 to 128 on this device";
  check_flash(dev, {"gqa_f32_key_length", 1, 4, br + 3, 2 * bc + 1, d, d - 4, DType::f32, false,
                    std::nullopt, false, static_cast<int32_t>(bc + 5), 1});
}

INSTANTIATE_TEST_SUITE_P(Emulated, FlashConfigTest, ::testing::ValuesIn(every_flash_configuration()),
                         [](const auto& info) { return param_name(info.param); });

// Emulated subgroups of the other sizes the kernel must take: 8 (lavapipe's own: two rows per
// lane in the softmax), 16 (one lane per row), 64 and 128 (four and eight lanes per row; a 16 x 8
// B fragment of 128 elements, so some lanes hold none).
class FlashSubgroupTest : public DeviceTestWithParam<std::string> {};

TEST_P(FlashSubgroupTest, MatchesReference) {
  Device& dev = open_flash(GetParam());
  check_flash(dev, {"causal_mask_gqa", 2, 4, 37, 40, 64, 64, DType::f16, true, Shape{37, 40},
                    false, -1, 2});
}

INSTANTIATE_TEST_SUITE_P(Emulated, FlashSubgroupTest,
                         ::testing::Values("2x2x32/16x8x16/8", "2x2x32/16x16x16/16",
                                           "2x1x32/16x16x16/64",
                                           "2x1x64/16x8x8/128"),
                         [](const auto& info) { return param_name(info.param); });

// Every head dim of the supported models with the configuration the table chooses on this
// device (the first that fits; here with emulated subgroups of 32), f16.
class FlashHeadDimTest : public DeviceTestWithParam<int64_t> {};

TEST_P(FlashHeadDimTest, TableChoiceMatchesReference) {
  const int64_t d = GetParam();
  kernels::FlashTiles t;
  {
    ScopedEnv emulate("VKFORMER_COOPMAT", "emulate");
    t = kernels::tuning_for(device().info()).attention.flash;
  }
  t.subgroup = 32;
  kernels::FlashLaunch l;
  ASSERT_TRUE(kernels::flash_launch_for(t, device().info(), {1, 2, 41, 50, d, d}, DType::f16, &l));
  Device& dev = open_flash(l.config.str() + "/" + l.shape.str() + "/32");
  check_flash(dev, {"head_dim_" + std::to_string(d), 1, 2, 41, 50, d, d, DType::f16, true});
}

// (64 is the sweep's above.)
INSTANTIATE_TEST_SUITE_P(Emulated, FlashHeadDimTest, ::testing::Values(32, 80, 96, 128, 256));

// The cases, on one configuration with two row tiles per subgroup.
class FlashCaseTest : public DeviceTestWithParam<Case> {};

TEST_P(FlashCaseTest, MatchesReference) {
  Device& dev = open_flash("2x2x32/16x8x16/32");
  check_flash(dev, GetParam());
}

std::vector<Case> flash_cases() {
  std::vector<Case> base = {
      {"one_query_one_key", 1, 1, 1, 1, 64, 64},
      {"smaller_than_a_block", 1, 2, 3, 5, 64, 64},
      {"odd_sizes_batches", 3, 2, 71, 53, 64, 64},
      {"causal_sq_lt_sk", 2, 2, 19, 83, 64, 64, DType::f16, true},
      // Rows 0..20 of 50 see no key at all (row i sees keys j <= i - 21): zeros.
      {"causal_sq_gt_sk", 1, 2, 50, 29, 64, 64, DType::f16, true},
      {"mask_per_head", 2, 3, 21, 40, 64, 64, DType::f16, false, Shape{2, 3, 21, 40}},
      {"mask_keys_only_padding", 2, 2, 17, 35, 64, 64, DType::f16, true, Shape{2, 1, 1, 35}, true,
       35},
      {"masked_row", 1, 2, 20, 40, 64, 64, DType::f16, true, Shape{20, 40}, false, 40, 0, 0.0f,
       0.0f, 7},
      {"key_length", 2, 2, 33, 70, 64, 64, DType::f16, false, std::nullopt, false, 45},
      {"key_length_zero", 1, 2, 9, 40, 64, 64, DType::f16, false, std::nullopt, false, 0},
      {"key_length_causal_mask", 1, 2, 40, 40, 64, 64, DType::f16, true, Shape{40, 40}, false, 23},
      // Causal aligned to key_length: a 40-row chunk at position 15 of 83 cache rows, GQA.
      {"causal_at_key_length", 1, 4, 40, 83, 64, 64, DType::f16, true, std::nullopt, false, 55, 2,
       0.0f, 0.0f, -1, true},
      // Logits of +-6e4 (the f16 mask's range).
      {"huge_mask_logits", 1, 2, 18, 37, 64, 64, DType::f16, false, Shape{18, 37}, false, -1, 0,
       0.0f, 6e4f},
      {"gqa_4_to_1", 2, 4, 25, 31, 64, 64, DType::f16, true, Shape{2, 4, 25, 31}, true, 27, 1},
      {"gqa_8_to_2", 1, 8, 19, 26, 64, 64, DType::f16, false, std::nullopt, false, -1, 2, 0.3f},
      {"head_dims_odd", 1, 2, 21, 30, 40, 24},
      // f32 storage, staged as f16; logits of +-1e10 from the mask; a masked row.
      {"f32_extreme_logits", 1, 2, 18, 37, 64, 64, DType::f32, false, Shape{1, 1, 18, 37}, false,
       -1, 0, 0.0f, 1e10f},
      {"f32_masked_row_gqa", 2, 4, 20, 33, 64, 64, DType::f32, true, Shape{20, 33}, true, 30, 2,
       0.0f, 0.0f, 3},
      {"f32_batches", 3, 2, 35, 35, 64, 64, DType::f32, true, Shape{3, 1, 35, 35}, true, 35},
  };
  return base;
}

INSTANTIATE_TEST_SUITE_P(Emulated, FlashCaseTest, ::testing::ValuesIn(flash_cases()),
                         [](const auto& info) {
                           return info.param.name + "_" + std::string(dtype_name(info.param.dtype));
                         });

// key_length is read at run time: one recording, the cache's valid length changing between
// replays (0 included: zeros).
TEST_F(DeviceTest, FlashKeyLengthIsReadAtRunTime) {
  Device& dev = open_flash("2x2x32/16x8x16/32");
  const int64_t B = 1, H = 2, Sq = 20, Sk = 70, D = 64;
  const Shape qs{B, H, Sq, D}, ks{B, H, Sk, D};
  const auto qv = random_values(qs.numel(), 7), kv = random_values(ks.numel(), 8),
             vv = random_values(ks.numel(), 9);
  Graph g;
  Tensor q = g.input("q", qs, DType::f16), k = g.input("k", ks, DType::f16),
         v = g.input("v", ks, DType::f16);
  AttentionOptions o;
  o.key_length = g.input("key_length", {1}, DType::i32);
  o.causal = true;
  o.path = Path::fused;
  g.output("y", g.attention(q, k, v, o));
  Executor ex(dev, g);
  ex.set_input("q", make_tensor(qs, qv, DType::f16));
  ex.set_input("k", make_tensor(ks, kv, DType::f16));
  ex.set_input("v", make_tensor(ks, vv, DType::f16));
  for (int32_t len : {70, 33, 0, 64, 1}) {
    SCOPED_TRACE("key_length " + std::to_string(len));
    ex.set_input("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{len}));
    ex.run();
    ref::SoftmaxMasks m;
    m.scale = 1.0f / std::sqrt(static_cast<float>(D));
    m.causal = true;
    m.key_length = len;
    const auto want = ref::attention(stored(qv, DType::f16), stored(kv, DType::f16),
                                     stored(vv, DType::f16), B, H, Sq, Sk, D, D, m);
    EXPECT_TRUE(all_close(ex.output("y"), want, kFlashTolerance));
  }
  EXPECT_EQ(ex.stats().recordings, 1u);
}

// q, k, v and out larger than one binding (4 KiB here): windows of whole (b, KV head) slices,
// each its own dispatch; the mask is bound whole.
TEST_F(DeviceTest, FlashBindingWindows) {
  Device dev = open_test_device_with_env({{"VKFORMER_COOPMAT", "emulate"},
                                          {"VKFORMER_ATTENTION_DECODE", "off"},
                                          {"VKFORMER_ATTENTION_FLASH", "2x2x32/16x8x16/32"},
                                          {"VKFORMER_MAX_BINDING_BYTES", "4096"}});
  const Case c{"windows", 2, 6, 20, 30, 32, 32, DType::f16, true, Shape{20, 30}, true, 25, 2};
  const Outcome r = run_case(dev, c);
  EXPECT_GT(r.dispatches, 1u);
  EXPECT_TRUE(all_close(r.got, r.want, kFlashTolerance));
}

// Path::automatic takes flash attention where the device has it (here: asked for through the
// emulation) for f16, not for f32 unless asked; without VKFORMER_COOPMAT=emulate a device
// without cooperative matrices never takes it.
TEST_F(DeviceTest, FlashAutomaticOnlyWhereTheDeviceHasIt) {
  const Case c{"automatic", 1, 2, 40, 40, 64, 64, DType::f16, true};
  {
    ScopedEnv emulate("VKFORMER_COOPMAT", "emulate");
    const kernels::AttentionTiles t = kernels::tuning_for(device().info()).attention;
    ASSERT_EQ(t.flash.api, CoopmatApi::emulated);
    EXPECT_FALSE(t.flash.f32_storage);
    kernels::FlashLaunch l;
    EXPECT_TRUE(kernels::flash_launch_for(t.flash, device().info(), problem_of(c), DType::f16, &l));
    EXPECT_FALSE(kernels::flash_launch_for(t.flash, device().info(), problem_of(c), DType::f32, &l));
  }
  // (A forced configuration: the table's choice on lavapipe would be one more slow pipeline.)
  Device& dev = open_flash("2x2x32/16x8x16/32");
  const Outcome r = run_case(dev, c, Path::automatic);
  expect_no_validation_messages(dev);
  EXPECT_EQ(r.dispatches, 1u);
  EXPECT_TRUE(all_close(r.got, r.want, kFlashTolerance));
  const kernels::AttentionTiles plain = device().impl().tuning().attention;
  EXPECT_EQ(plain.flash.api, vk::coopmat_api(device().info()));
  {
    ScopedEnv off("VKFORMER_COOPMAT", "off");
    EXPECT_FALSE(kernels::tuning_for(device().info()).attention.flash.usable());
  }
  {
    ScopedEnv emulate("VKFORMER_COOPMAT", "emulate"), off("VKFORMER_ATTENTION_FLASH", "off");
    EXPECT_FALSE(kernels::tuning_for(device().info()).attention.flash.usable());
  }
  {  // a forced scalar tiling turns flash attention off unless it is forced too
    ScopedEnv emulate("VKFORMER_COOPMAT", "emulate"), tiles("VKFORMER_ATTENTION_TILES", "tiles/32x5x7");
    EXPECT_FALSE(kernels::tuning_for(device().info()).attention.flash.usable());
    ScopedEnv flash("VKFORMER_ATTENTION_FLASH", "2x1x32");
    EXPECT_TRUE(kernels::tuning_for(device().info()).attention.flash.usable());
  }
}

// ---- Split-K flash decoding ----

// A device whose attention takes split-K decoding with `decode` (VKFORMER_ATTENTION_DECODE),
// one per setting as above.
Device& open_decode(const std::string& decode) {
  static std::map<std::string, Device> devices;
  auto it = devices.find(decode);
  if (it == devices.end())
    it = devices.emplace(decode, open_test_device_with_env({{"VKFORMER_ATTENTION_DECODE",
                                                             decode.c_str()}})).first;
  return it->second;
}

void check_decode(Device& dev, const Case& c, uint32_t want_splits) {
  SCOPED_TRACE(c.name + " " + std::string(dtype_name(c.dtype)));
  kernels::DecodeLaunch launch;
  ASSERT_TRUE(kernels::decode_launch_for(dev.impl().tuning().attention.decode, dev.info(),
                                    problem_of(c), &launch))
      << "split-K decoding does not take " << c.name;
  EXPECT_EQ(launch.splits, want_splits);
  const Outcome r = run_case(dev, c);
  expect_no_validation_messages(dev);
  EXPECT_EQ(r.dispatches, want_splits > 1 ? 2u : 1u);
  EXPECT_TRUE(all_close(r.got, r.want,
                        c.dtype == DType::f32 ? kDecodeF32Tolerance : kFlashTolerance))
      << launch.str();
}

// Every decode configuration: one query row against 100 keys of which key_length = 37 are valid,
// in one range (one dispatch, normalized there), f32; grouped heads (8 on 2: four rows per
// workgroup) with a mask per head and key padding in 7 ranges, f16; two causal query rows over
// 57 keys in 16 ranges of 4 keys, the last of them empty, f32.
class DecodeConfigTest : public DeviceTestWithParam<std::string> {};

TEST_P(DecodeConfigTest, MatchesReference) {
  {
    Device& dev = open_decode(GetParam() + "/1");
    check_decode(dev, {"one_row_key_length", 2, 2, 1, 100, 64, 64, DType::f32, false,
                       std::nullopt, false, 37},
                 1);
  }
  {
    Device& dev = open_decode(GetParam() + "/7");
    check_decode(dev, {"gqa_mask_per_head", 1, 8, 1, 90, 64, 48, DType::f16, false,
                       Shape{1, 8, 1, 90}, true, -1, 2},
                 7);
  }
  Device& dev = open_decode(GetParam() + "/16");
  check_decode(dev, {"causal_two_rows", 1, 3, 2, 57, 40, 40, DType::f32, true, Shape{2, 57}}, 16);
}

INSTANTIATE_TEST_SUITE_P(Decode, DecodeConfigTest, ::testing::Values("128x32", "64x64", "64x16"),
                         [](const auto& info) { return param_name(info.param); });

// Splits that get no keys: key_length 0 (every range empty: zeros), fewer keys than ranges, a
// masked row, logits of +-1e10, head dim 128 with the device's own split count.
TEST_F(DeviceTest, DecodeEmptyRangesAndExtremes) {
  {
    Device& dev = open_decode("128x32/7");
    check_decode(dev, {"key_length_zero", 1, 2, 1, 50, 64, 64, DType::f32, false, std::nullopt,
                       false, 0},
                 7);
    check_decode(dev, {"fewer_keys_than_splits", 1, 2, 1, 50, 64, 64, DType::f32, false,
                       std::nullopt, false, 4},
                 7);
    check_decode(dev, {"masked_row_extreme", 1, 2, 3, 60, 64, 64, DType::f32, false, Shape{3, 60},
                       false, -1, 0, 0.0f, 1e10f, 1},
                 7);
  }
  Device& dev = open_decode("128x32");
  const Case c{"device_splits_d128", 1, 4, 1, 700, 128, 128, DType::f16, false, std::nullopt,
               false, 650, 1};
  kernels::DecodeLaunch l;
  ASSERT_TRUE(kernels::decode_launch_for(dev.impl().tuning().attention.decode, dev.info(),
                                    problem_of(c), &l));
  check_decode(dev, c, l.splits);
}

// ---- Tuned choices (src/kernels/tunables_attention.cpp) ----

// What `vkformer tune` may keep for flash attention, split-K decoding and the cooperative-matrix
// matmul is applied: under a tuning trial (what the tuning cache does in every later process) a
// newly opened device's executor creates the pipeline of the tuned configuration, which the
// static table would not have taken for the same problem, and matches the reference. The
// device is taken as a GPU (VKFORMER_TUNING_AS_GPU: split-K decoding on) with emulated
// cooperative matrices (the emulation's subgroups are lavapipe's 8 here). The correctness of
// every candidate is the configuration sweeps' above (and coopmat_test's for matmul).
class TunedChoiceTest : public DeviceTest {
 protected:
  void SetUp() override {
    DeviceTest::SetUp();
    for (const char* name : {"VKFORMER_ATTENTION_FLASH", "VKFORMER_ATTENTION_DECODE",
                             "VKFORMER_ATTENTION_TILES", "VKFORMER_MATMUL_COOPMAT",
                             "VKFORMER_MATMUL_PATH"})
      env_.push_back(std::make_unique<ScopedEnv>(name, ""));
    env_.push_back(std::make_unique<ScopedEnv>("VKFORMER_TUNING_AS_GPU", "1"));
    env_.push_back(std::make_unique<ScopedEnv>("VKFORMER_COOPMAT", "emulate"));
    base_ = kernels::tuning_for(device().info(), /*tuned=*/false);
  }

  // The candidate `text` of tunable `id` on this device (the test fails where it is not one).
  std::string candidate(const std::string& id, const std::string& text) {
    const kernels::Tunable* t = kernels::find_tunable(id);
    if (!t) {
      ADD_FAILURE() << "no tunable " << id;
      return text;
    }
    std::string all;
    for (const kernels::TunableValue& v : t->candidates(device().info(), base_)) {
      if (v.text == text) return text;
      all += " " + v.text;
    }
    ADD_FAILURE() << id << " = " << text << " is not a candidate here; candidates:" << all;
    return text;
  }

  // A device opened under the trial {id = value}, as the tuning cache would open it.
  Device open_tuned(const std::string& id, const std::string& value) {
    kernels::ScopedTuningTrial trial({{id, value}});
    return open_test_device_with_env({});
  }

  // The specialization constants of every pipeline of `variant` that `dev` created.
  static std::vector<std::vector<uint32_t>> specs(Device& dev, const std::string& variant) {
    std::vector<std::vector<uint32_t>> out;
    for (const auto& p : dev.impl().pipelines().created())
      if (p.variant == variant) out.push_back(p.spec);
    return out;
  }

  kernels::Tuning base_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

// attention.flash = 1x1x16 (one subgroup, one MMA step of keys), where the table takes a larger
// workgroup: shaders/attention_flash.comp specialized with WARPS 1, ROW_TILES 1, BC 16.
TEST_F(TunedChoiceTest, FlashConfiguration) {
  const Case c{"tuned_flash", 1, 4, 37, 45, 64, 64, DType::f16, true, std::nullopt, false, -1, 2};
  const FlashConfig want{1, 1, 16};
  kernels::FlashLaunch table;
  ASSERT_TRUE(kernels::flash_launch_for(base_.attention.flash, device().info(), problem_of(c),
                                   c.dtype, &table));
  ASSERT_NE(table.config, want) << "the table takes " << table.str() << " already";
  Device dev = open_tuned("attention.flash", candidate("attention.flash", want.str()));
  const Outcome r = run_case(dev, c);
  expect_no_validation_messages(dev);
  EXPECT_TRUE(all_close(r.got, r.want, kFlashTolerance));
  const auto got = specs(dev, "attention_flash_emu_f16");
  ASSERT_EQ(got.size(), 1u) << "one flash pipeline";
  EXPECT_EQ((std::vector<uint32_t>{got[0][5], got[0][6], got[0][7]}),
            (std::vector<uint32_t>{want.warps, want.row_tiles, want.bc}));
}

// attention.decode = 64x16 where the table takes 128x32 at head dim 64: the decoding kernel
// specialized with 64 invocations and tiles of 16 keys.
TEST_F(TunedChoiceTest, DecodeConfiguration) {
  const Case c{"tuned_decode", 1, 4, 1, 300, 64, 64, DType::f32, false, std::nullopt, false, 290, 1};
  const DecodeConfig want{64, 16};
  kernels::DecodeLaunch table;
  ASSERT_TRUE(kernels::decode_launch_for(base_.attention.decode, device().info(), problem_of(c), &table));
  ASSERT_NE(table.config, want) << "the table takes " << table.str() << " already";
  Device dev = open_tuned("attention.decode", candidate("attention.decode", want.str()));
  const Outcome r = run_case(dev, c);
  expect_no_validation_messages(dev);
  EXPECT_TRUE(all_close(r.got, r.want, kDecodeF32Tolerance));
  std::vector<std::vector<uint32_t>> got = specs(dev, "attention_flash_decode_f32");
  for (auto& s : specs(dev, "attention_flash_decode_split_f32")) got.push_back(s);
  ASSERT_EQ(got.size(), 1u) << "one decoding pipeline";
  EXPECT_EQ(got[0][0], want.workgroup);
  EXPECT_EQ(got[0][2], want.tile_keys);
}

// attention.decode.split = 0 (never split) where the table splits 300 keys of one KV head in
// two: one dispatch of the unsplit kernel instead of the split one and the combine.
TEST_F(TunedChoiceTest, DecodeSplits) {
  const Case c{"tuned_splits", 1, 4, 1, 300, 64, 64, DType::f32, false, std::nullopt, false, -1, 1};
  kernels::DecodeLaunch table;
  ASSERT_TRUE(kernels::decode_launch_for(base_.attention.decode, device().info(), problem_of(c), &table));
  ASSERT_GT(table.splits, 1u) << table.str();
  Device dev = open_tuned("attention.decode.split", candidate("attention.decode.split", "0"));
  const Outcome r = run_case(dev, c);
  expect_no_validation_messages(dev);
  EXPECT_TRUE(all_close(r.got, r.want, kDecodeF32Tolerance));
  EXPECT_EQ(r.dispatches, 1u);
  EXPECT_EQ(specs(dev, "attention_flash_decode_f32").size(), 1u);
  EXPECT_TRUE(specs(dev, "attention_flash_decode_split_f32").empty());
}

// matmul.coopmat = the last configuration of the list with the table's MMA shape, where the
// table takes the first: shaders/matmul_coopmat.comp specialized with its subgroups and tiles.
TEST_F(TunedChoiceTest, CoopmatMatmulConfiguration) {
  kernels::MatmulCoopmatTiles want = base_.matmul.coopmat_tiles;
  ASSERT_TRUE(want.usable());
  ASSERT_NE(want.config, kernels::coopmat_configs().back());
  want.config = kernels::coopmat_configs().back();
  Device dev = open_tuned("matmul.coopmat", candidate("matmul.coopmat", want.str()));
  const int64_t m = 40, n = 48, k = 40;
  const auto av = random_values(m * k, 11), bv = random_values(k * n, 12);
  Graph g;
  Tensor a = g.input("a", {m, k}, DType::f16), b = g.input("b", {k, n}, DType::f16);
  g.output("y", g.matmul(a, b));
  Executor ex(dev, g);
  const HostTensor y = ex.run({{"a", make_tensor({m, k}, av, DType::f16)},
                               {"b", make_tensor({k, n}, bv, DType::f16)}})
                           .at("y");
  expect_no_validation_messages(dev);
  EXPECT_TRUE(all_close(y, ref::matmul(stored(av, DType::f16), stored(bv, DType::f16), 1, 1, m, n,
                                       k, false, nullptr, 1.0),
                        Tolerance{1e-3, 1e-3}));
  const auto got = specs(dev, "matmul_coopmat_emu_f16");
  ASSERT_EQ(got.size(), 1u) << "one cooperative-matrix pipeline";
  const kernels::CoopmatConfig& f = want.config;
  EXPECT_EQ((std::vector<uint32_t>(got[0].begin() + 2, got[0].begin() + 10)),
            (std::vector<uint32_t>{want.m, want.n, want.k, f.warps_m, f.warps_n, f.tiles_m,
                                   f.tiles_n, f.bk_tiles}));
}

// ---- The static tables (pure functions of made-up devices) ----

DeviceInfo made_up_h100() {
  DeviceInfo d = made_up_discrete_gpu("made-up H100", 132);
  d.cooperative_matrix_khr = true;
  d.cooperative_matrix_khr_shapes = {{16, 8, 16, "f16", "f16", "f32", "f32"},
                                     {16, 8, 8, "f16", "f16", "f32", "f32"},
                                     {16, 16, 16, "f16", "f16", "f32", "f32"}};
  return d;
}

DeviceInfo made_up_lavapipe() {
  DeviceInfo d = made_up_cpu();
  d.name = "made-up lavapipe";
  return d;
}

// What the table picks on an H100 (subgroup 32, 48 KiB, 16x16x16, 132 multiprocessors) for the
// GPU issue's shapes: b1 h16 s2048 takes 64 query rows x 64 keys per workgroup for head dims up
// to 64 (128 rows would leave 256 workgroups, under two per multiprocessor) and 64 x 32 above;
// b1 h8 d64 takes 32 x 64 (512 workgroups). f32 storage only where asked.
TEST(FlashTuning, H100TablePerHeadDim) {
  ScopedEnv no_coopmat("VKFORMER_COOPMAT", ""), no_flash("VKFORMER_ATTENTION_FLASH", ""),
      no_tiles("VKFORMER_ATTENTION_TILES", "");
  const DeviceInfo d = made_up_h100();
  const kernels::AttentionTiles t = kernels::attention_tiles_for(d, false, true);
  ASSERT_EQ(t.flash.api, CoopmatApi::khr);
  EXPECT_EQ(t.flash.shape, (MmaShape{16, 16, 16}));
  EXPECT_EQ(t.flash.subgroup, 32u);
  EXPECT_EQ(t.flash.target_workgroups, 264u);
  EXPECT_FALSE(t.flash.f32_storage);
  const std::pair<int64_t, const char*> want[] = {
      {32, "16x16x16/2x2x64/32 d32 dv32"},   {64, "16x16x16/2x2x64/32 d64 dv64"},
      {80, "16x16x16/4x1x32/32 d80 dv80"},   {96, "16x16x16/4x1x32/32 d96 dv96"},
      {128, "16x16x16/4x1x32/32 d128 dv128"}, {256, "16x16x16/4x1x32/32 d256 dv256"}};
  for (const auto& [dim, str] : want) {
    kernels::FlashLaunch l;
    ASSERT_TRUE(kernels::flash_launch_for(t.flash, d, {1, 16, 2048, 2048, dim, dim}, DType::f16, &l))
        << dim;
    EXPECT_EQ(l.str(), str);
    EXPECT_LE(l.shared_bytes(), d.shared_memory_bytes);
    EXPECT_FALSE(kernels::flash_launch_for(t.flash, d, {1, 16, 2048, 2048, dim, dim}, DType::f32, &l));
  }
  kernels::FlashLaunch h8;
  ASSERT_TRUE(kernels::flash_launch_for(t.flash, d, {1, 8, 2048, 2048, 64, 64}, DType::f16, &h8));
  EXPECT_EQ(h8.str(), "16x16x16/2x1x64/32 d64 dv64");
  // Enough work for the largest workgroups: 128 query rows.
  ASSERT_TRUE(kernels::flash_launch_for(t.flash, d, {8, 12, 512, 512, 64, 64}, DType::f16, &h8));
  EXPECT_EQ(h8.config, kernels::flash_configs().front());
  kernels::FlashLaunch l;
  EXPECT_FALSE(kernels::flash_launch_for(t.flash, d, {1, 1, 64, 64, 300, 300}, DType::f16, &l));
  // Less shared memory: the first configuration that fits (a problem with many workgroups).
  DeviceInfo small = d;
  small.shared_memory_bytes = 16 * 1024;
  ASSERT_TRUE(kernels::flash_launch_for(t.flash, small, {64, 16, 512, 64, 128, 128}, DType::f16, &l));
  EXPECT_LE(l.shared_bytes(), 16u * 1024);
  for (const FlashConfig& c : kernels::flash_configs()) {
    if (c == l.config) break;
    kernels::FlashLaunch bigger = l;
    bigger.config = c;
    EXPECT_FALSE(kernels::flash_config_fits(bigger, small, nullptr)) << bigger.str() << " passed over";
  }
}

// The emulation needs more shared memory than the real kernel (its scratch); every entry of the
// list still fits lavapipe's 32 KiB at head dim 64 with every emulated shape and subgroup size,
// so the tests above run all of them.
TEST(FlashTuning, EveryConfigurationFitsLavapipeInTheEmulation) {
  const DeviceInfo d = made_up_lavapipe();
  for (const MmaShape& s : vk::emulated_mma_shapes())
    for (const FlashConfig& c : kernels::flash_configs())
      for (uint32_t sg = 4; sg <= 128; sg *= 2) {
        kernels::FlashLaunch l;
        l.api = CoopmatApi::emulated;
        l.shape = s, l.subgroup = sg, l.config = c, l.d_cap = l.dv_cap = 64;
        std::string why;
        EXPECT_TRUE(kernels::flash_config_fits(l, d, &why)) << why;
      }
}

TEST(FlashTuning, EmulatedOnlyWhenAskedNvOnlyWhereKhrIsAbsent) {
  ScopedEnv no_flash("VKFORMER_ATTENTION_FLASH", ""), no_tiles("VKFORMER_ATTENTION_TILES", "");
  {
    ScopedEnv no_coopmat("VKFORMER_COOPMAT", "");
    EXPECT_EQ(kernels::attention_tiles_for(made_up_lavapipe(), true, true).flash.api, CoopmatApi::none);
    DeviceInfo nv = made_up_h100();
    nv.cooperative_matrix_khr = false;
    nv.cooperative_matrix_khr_shapes.clear();
    nv.cooperative_matrix_nv = true;
    nv.cooperative_matrix_nv_shapes = {{16, 8, 8, "f16", "f16", "f32", "f32"}};
    const kernels::FlashTiles t = kernels::attention_tiles_for(nv, false, true).flash;
    EXPECT_EQ(t.api, CoopmatApi::nv);
    EXPECT_EQ(t.shape, (MmaShape{16, 8, 8}));
  }
  ScopedEnv emulate("VKFORMER_COOPMAT", "emulate");
  const kernels::FlashTiles t = kernels::attention_tiles_for(made_up_lavapipe(), true, true).flash;
  EXPECT_EQ(t.api, CoopmatApi::emulated);
  EXPECT_EQ(t.subgroup, 8u);
  EXPECT_EQ(kernels::attention_tiles_for(made_up_h100(), false, true).flash.api, CoopmatApi::emulated);
}

// Split-K decoding: GPUs split a decoding step's keys until about two workgroups per compute
// unit run, in ranges of at least 128 keys; CPU devices keep their kernels unless asked.
TEST(DecodeTuning, SplitsOnGpusOnly) {
  ScopedEnv no_decode("VKFORMER_ATTENTION_DECODE", ""), no_tiles("VKFORMER_ATTENTION_TILES", "");
  const DeviceInfo d = made_up_h100();
  const kernels::DecodeTiles t = kernels::attention_tiles_for(d, false, true).decode;
  ASSERT_TRUE(t.enabled);
  EXPECT_EQ(t.target_workgroups, 264u);
  kernels::DecodeLaunch l;
  // SmolLM2-135M (9 heads on 3, D 64) at 1024 keys: 8 ranges of 128 keys (not 88).
  ASSERT_TRUE(kernels::decode_launch_for(t, d, {1, 9, 1, 1024, 64, 64, 3}, &l));
  EXPECT_EQ(l.str(), "128x32/8 rows 3 d64 dv64");
  // Llama-3.2-1B (32 on 8, D 64) at 8192 keys: 33 ranges wanted, 32 at most.
  ASSERT_TRUE(kernels::decode_launch_for(t, d, {1, 32, 1, 8192, 64, 64, 8}, &l));
  EXPECT_EQ(l.splits, 32u);
  EXPECT_EQ(l.rows, 4u);
  // Enough (batch, KV head) pairs: no split. Short caches: none either.
  ASSERT_TRUE(kernels::decode_launch_for(t, d, {64, 8, 1, 8192, 128, 128, 8}, &l));
  EXPECT_EQ(l.splits, 1u);
  ASSERT_TRUE(kernels::decode_launch_for(t, d, {1, 8, 1, 200, 128, 128, 8}, &l));
  EXPECT_EQ(l.splits, 1u);
  // More than 16 query rows per KV head: flash or the scalar kernels.
  EXPECT_FALSE(kernels::decode_launch_for(t, d, {1, 8, 17, 1024, 64, 64}, &l));
  EXPECT_FALSE(kernels::decode_launch_for(t, d, {1, 32, 3, 1024, 64, 64, 4}, &l));
  // Head dim 256 takes the configuration with 16-key tiles.
  ASSERT_TRUE(kernels::decode_launch_for(t, d, {1, 16, 1, 4096, 256, 256, 1}, &l));
  EXPECT_EQ(l.config, (DecodeConfig{64, 16}));
  EXPECT_LE(l.shared_bytes(), d.shared_memory_bytes);
  EXPECT_FALSE(kernels::attention_tiles_for(made_up_lavapipe(), true, true).decode.enabled);
}

// ---- The overrides' errors name the rule ----

TEST(FlashTuning, EnvErrorsNameTheRule) {
  const DeviceInfo d = made_up_lavapipe();
  auto error = [&](const char* name, const char* value) {
    return env_error(name, value, [&] { kernels::attention_tiles_for(d, true, true); });
  };
  {
    ScopedEnv no_coopmat("VKFORMER_COOPMAT", "");
    const std::string what = error("VKFORMER_ATTENTION_FLASH", "2x1x32");
    EXPECT_NE(what.find("VKFORMER_COOPMAT=emulate"), std::string::npos) << what;
  }
  ScopedEnv emulate("VKFORMER_COOPMAT", "emulate");
  auto read = [&] { kernels::attention_tiles_for(d, true, true); };
  expect_env_rules(
      "VKFORMER_ATTENTION_FLASH",
      {{"2x1x24", "BC 24 is not a multiple of 16"},
       {"0x1x32", "W is 0, expected 1 to 16"},
       {"2x9x32", "R is 9, expected 1 to 8"},
       {"2x1x32/32x32x32", "MMA shape 32x32x32 is not one that emulated cooperative matrices offer"},
       {"2x1x32/16x16x16/12", "SG 12 is not a power of two from 4 to 128"},
       {"16x1x32/16x16x16/128", "SG*W = 2048 invocations, above maxComputeWorkGroupInvocations"},
       {"4x8x512", "bytes of shared memory"},
       {"fast", "expected off, WxRxBC, WxRxBC/MxNxK or WxRxBC/MxNxK/SG"}},
      read);
  expect_env_rules("VKFORMER_ATTENTION_DECODE",
                   {{"128", "expected off, WGxTK or WGxTK/SPLITS"},
                    {"0x32", "WG is 0, expected 1 to 65536"},
                    {"128x0", "TK is 0, expected 1 to 1024"},
                    {"2048x32", "above maxComputeWorkGroupInvocations"},
                    {"128x32/5000", "SPLITS is 5000, expected 0 to 1024"}},
                   read);
}

}  // namespace
}  // namespace vkformer::testing
