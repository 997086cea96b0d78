// attention, fused (flash-attention kernels) and unfused (matmul -> softmax -> matmul), against
// the double-precision reference and against each other, with every mask kind and key_length.
// The fused kernel a device gets is a tuning choice (kernels::AttentionTiles: the register kernel
// attention_rows on CPU devices, the shared-memory tiles of attention.comp on GPUs);
// VKFORMER_ATTENTION_TILES overrides it, so AttentionTilingTest runs every kernel and variant
// (tiles, rows with and without shuffles or texel reads) on whatever device the tests have.
//
// Tolerances (atol + rtol * |want|): f32 atol 2e-5, rtol 1e-5 (fp32 dot products of up to
// D = 256 terms against double; measured max abs error 1e-6 on lavapipe); f16 atol 5e-3, rtol
// 5e-3 (the output, and on the unfused path the scores and probabilities, are stored as f16:
// 2^-11 relative each; measured max 7e-4). Fused and unfused agree to the same tolerances.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>

#include "attention_inputs.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "tuning.hpp"

namespace vkformer::testing {
namespace {

using Path = AttentionOptions::Path;

Tolerance attention_tolerance(DType dtype) {
  return dtype == DType::f16 ? Tolerance{5e-3, 5e-3} : Tolerance{2e-5, 1e-5};
}

struct AttentionCase {
  std::string name;
  int64_t B, H, Sq, Sk, D, Dv;
  DType dtype = DType::f32;
  bool causal = false;
  std::optional<Shape> mask;
  bool key_padding = false;
  int32_t key_length = -1;  // -1: no key_length tensor
  float scale = 0.0f;       // 0: 1/sqrt(D)
  int64_t Hkv = 0;          // heads of k and v (grouped-query attention); 0: H
  float softcap = 0.0f;     // > 0: soft-capped scores (fused paths only: no "unfused" output)
  bool causal_at_key_length = false;  // causal aligned to key_length instead of Sk
};

void PrintTo(const AttentionCase& c, std::ostream* os) { *os << c.name; }

std::string case_name(const ::testing::TestParamInfo<AttentionCase>& info) {
  return info.param.name + "_" + std::string(dtype_name(info.param.dtype));
}

struct Result {
  HostTensor fused, unfused, automatic;
  std::vector<double> want;
};

// Whether Path::automatic takes the unfused chain on this device: few-query problems (decoding
// steps) per the tuning, and everything whose scores fit one binding where the tuning prefers it.
bool automatic_is_unfused(const DeviceInfo& info, int64_t B, int64_t H, int64_t Sq, int64_t Sk,
                          DType dtype) {
  const kernels::AttentionTiles t = kernels::tuning_for(info).attention;
  const uint64_t score_bytes = uint64_t(B * H * Sq * Sk) * dtype_size(dtype);
  return Sq <= t.automatic_unfused_max_queries ||
         (t.automatic_unfused_where_it_fits && score_bytes <= info.max_storage_buffer_range);
}

Result run_case(Device& device, const AttentionCase& c, bool with_automatic = true) {
  Graph g;
  std::map<std::string, HostTensor> inputs;
  const RandomQkv qkv(g, inputs, {c.B, c.H, c.Hkv ? c.Hkv : c.H, c.Sq, c.Sk, c.D, c.Dv}, c.dtype);
  const Tensor q = qkv.q, k = qkv.k, v = qkv.v;
  AttentionOptions o;
  ref::SoftmaxMasks m;
  set_scale_and_causal(c, o, m);
  o.softcap = c.softcap;
  m.softcap = c.softcap;
  std::vector<double> mask_expanded;
  if (c.mask) {
    auto mv = random_values(c.mask->numel(), 4, -2.0f, 2.0f);
    auto pick = random_values(c.mask->numel(), 5, 0.0f, 1.0f);
    for (size_t i = 0; i < mv.size(); ++i)
      if (pick[i] < 0.1f) mv[i] = -std::numeric_limits<float>::infinity();
    o.mask = g.input("mask", *c.mask, c.dtype);
    inputs.emplace("mask", make_tensor(*c.mask, mv, c.dtype));
    mask_expanded = broadcast_to(stored(mv, c.dtype), *c.mask, {c.B, c.H, c.Sq, c.Sk});
    m.mask = &mask_expanded;
  }
  std::vector<int32_t> padding;
  if (c.key_padding) {
    auto pick = random_values(static_cast<size_t>(c.B * c.Sk), 6, 0.0f, 1.0f);
    for (float p : pick) padding.push_back(p < 0.3f ? 1 : 0);
    if (c.B > 1)  // batch 1 has every key padded: its rows are fully masked
      for (int64_t j = 0; j < c.Sk; ++j) padding[c.Sk + j] = 1;
    o.key_padding_mask = g.input("padding", {c.B, c.Sk}, DType::i32);
    inputs.emplace("padding", HostTensor::from_i32({c.B, c.Sk}, padding));
    m.key_padding = &padding;
  }
  add_key_length(g, inputs, o, m, c.key_length);
  o.path = Path::fused;
  g.output("fused", g.attention(q, k, v, o));
  o.path = Path::unfused;
  if (c.softcap == 0.0f) g.output("unfused", g.attention(q, k, v, o));
  if (with_automatic) {
    o.path = Path::automatic;
    g.output("automatic", g.attention(q, k, v, o));
  }
  Executor ex(device, g);
  auto out = ex.run(inputs);
  Result r{out["fused"], out["unfused"], with_automatic ? out["automatic"] : HostTensor{}, {}};
  r.want = qkv.reference(m);
  return r;
}

std::vector<double> as_double(const HostTensor& t) {
  auto f = t.to_f32();
  return {f.begin(), f.end()};
}

class AttentionTest : public DeviceTestWithParam<AttentionCase> {};

TEST_P(AttentionTest, FusedAndUnfusedMatchReference) {
  const AttentionCase& c = GetParam();
  Result r = run_case(device(), c);
  Tolerance tol = attention_tolerance(c.dtype);
  EXPECT_TRUE(all_close(r.fused, r.want, tol)) << "fused";
  EXPECT_TRUE(all_close(r.unfused, r.want, tol)) << "unfused";
  EXPECT_TRUE(all_close(r.fused, as_double(r.unfused), tol)) << "fused vs unfused";
  // Path::automatic takes the fused kernel, except where the device's tuning leaves the problem
  // to the unfused chain (decoding steps on CPU devices).
  // A grouped-query decoding step is lowered as Hkv heads of H / Hkv query rows each.
  const bool stacked = c.Sq == 1 && c.Hkv && c.Hkv != c.H;
  const bool auto_unfused =
      stacked ? automatic_is_unfused(device().info(), c.B, c.Hkv, c.H / c.Hkv, c.Sk, c.dtype)
              : automatic_is_unfused(device().info(), c.B, c.H, c.Sq, c.Sk, c.dtype);
  EXPECT_TRUE(all_close(r.automatic, as_double(auto_unfused ? r.unfused : r.fused), {0.0, 0.0}))
      << "automatic is " << (auto_unfused ? "unfused" : "fused");
  RecordProperty("fused_max_abs_error", sci(max_abs_error(r.fused, r.want)));
  RecordProperty("unfused_max_abs_error", sci(max_abs_error(r.unfused, r.want)));
}

std::vector<AttentionCase> attention_cases() {
  const Shape none{};
  std::vector<AttentionCase> base = {
      {"all_ones", 1, 1, 1, 1, 1, 1},
      {"tiny_causal", 1, 1, 3, 3, 4, 4, DType::f32, true},
      {"causal_sq_lt_sk", 2, 3, 17, 31, 16, 16, DType::f32, true},
      {"causal_sq_gt_sk", 2, 2, 31, 17, 8, 8, DType::f32, true},
      {"mask_2d", 1, 2, 37, 37, 64, 64, DType::f32, false, Shape{37, 37}},
      {"mask_b1qk_padding", 2, 2, 13, 29, 32, 24, DType::f32, false, Shape{2, 1, 13, 29}, true},
      {"all_masks", 2, 3, 5, 7, 7, 5, DType::f32, true, Shape{2, 3, 5, 7}, true},
      {"decode_key_length", 1, 1, 1, 53, 128, 128, DType::f32, false, {}, false, 29},
      {"everything", 2, 2, 7, 40, 64, 48, DType::f32, true, Shape{1, 1, 7, 40}, true, 23, 0.3f},
      {"key_length_zero", 1, 2, 3, 11, 8, 8, DType::f32, false, {}, false, 0},
      {"multi_tile", 1, 1, 67, 71, 128, 128, DType::f32, true},
      {"head_dim_256", 1, 2, 37, 9, 256, 256, DType::f32, false, Shape{37, 9}},
      {"head_dim_80", 1, 1, 43, 47, 80, 80},
      {"mask_keys_only", 3, 2, 11, 19, 16, 16, DType::f32, false, Shape{3, 1, 1, 19}},
      // Dv = 32 with D = 48: the texel kernel's output columns spread over the lanes (one texel
      // per lane and row), every mask, and a last row block that is only partly used.
      {"columns_dv_32", 2, 2, 19, 40, 48, 32, DType::f32, true, Shape{2, 1, 19, 40}, true, 37},
      // Grouped-query attention: SmolLM2's heads (9 query heads on 3 KV heads, D = 64) in a
      // decoding step against a cache of which key_length keys are valid, and a causal prompt;
      // one KV head for 4 query heads with every mask (a per-head mask tells the heads apart).
      {"gqa_9_3_decode_key_length", 1, 9, 1, 40, 64, 64, DType::f32, false, {}, false, 29, 0.0f, 3},
      {"gqa_9_3_causal", 1, 9, 7, 7, 64, 64, DType::f32, true, {}, false, -1, 0.0f, 3},
      {"gqa_4_1_all_masks", 2, 4, 5, 11, 16, 12, DType::f32, true, Shape{2, 4, 5, 11}, true, 9,
       0.0f, 1},
      // Causal aligned to key_length (a prompt chunk at position key_length - Sq of a longer
      // cache): SmolLM2's heads with a 64-row chunk at position 26 of 100 cache rows (row i sees
      // keys j <= 26 + i, not 36 + i as aligned to Sk); every mask with D != Dv; and a
      // key_length below Sq, whose first rows see no key at all (zeros).
      {"causal_at_key_length_gqa_9_3", 1, 9, 64, 100, 64, 64, DType::f32, true, {}, false, 90,
       0.0f, 3, 0.0f, true},
      {"causal_at_key_length_all_masks", 2, 2, 7, 40, 64, 48, DType::f32, true, Shape{1, 1, 7, 40},
       true, 23, 0.3f, 0, 0.0f, true},
      {"causal_at_key_length_short", 1, 2, 9, 16, 8, 8, DType::f32, true, {}, false, 5, 0.0f, 0,
       0.0f, true},
  };
  // f16 storage for the cases where it meets something of its own: every mask kind and
  // key_length together (D != Dv, a head dim that is not a multiple of 4), fully masked rows
  // (zeros, not NaN), a decoding step plain and grouped, several tiles of wide heads, the widest
  // head and the texel kernel's column spread, causal at key_length. The other cases differ from
  // these in shape only, which the f32 runs cover; each case compiles its own pipelines, which
  // is most of this suite's time on CPU devices.
  const char* f16_too[] = {"all_masks", "everything", "key_length_zero", "decode_key_length",
                           "multi_tile", "head_dim_256", "columns_dv_32", "gqa_9_3_decode_key_length",
                           "causal_at_key_length_all_masks"};
  std::vector<AttentionCase> all = base;
  for (AttentionCase c : base)
    if (std::find(std::begin(f16_too), std::end(f16_too), c.name) != std::end(f16_too)) {
      c.dtype = DType::f16;
      all.push_back(c);
    }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Cases, AttentionTest, ::testing::ValuesIn(attention_cases()), case_name);

// Every fused kernel and variant on the test device, through VKFORMER_ATTENTION_TILES.
// A device opened with the tiling `tiles` (the same physical device as the other tests), or
// nullopt where the device cannot run it (no subgroup shuffles, no texel buffers).
std::optional<Device> open_device_with_tiles(const char* tiles) {
  try {
    return open_test_device_with_env({{"VKFORMER_ATTENTION_TILES", tiles}});
  } catch (const Error& e) {
    if (e.code() != ErrorCode::invalid_argument) throw;
    return std::nullopt;
  }
}

class AttentionTilingTest : public DeviceTestWithParam<const char*> {};

TEST_P(AttentionTilingTest, MatchesReference) {
  std::optional<Device> dev = open_device_with_tiles(GetParam());
  if (!dev) GTEST_SKIP() << GetParam() << " does not fit device " << device().info().name;
  // Six pipelines per tiling (compiling them dominates the time on CPU devices): every mask
  // and key_length with D != Dv, f16, a head dim that is not a multiple of 4 (buffer loads
  // instead of texels), several key tiles and row blocks of wide heads, grouped-query heads, and
  // causal attention aligned to key_length.
  const AttentionCase cases[] = {
      {"everything", 2, 2, 7, 40, 64, 48, DType::f32, true, Shape{1, 1, 7, 40}, true, 23, 0.3f},
      {"mask_b1qk_padding", 2, 2, 13, 29, 32, 24, DType::f16, false, Shape{2, 1, 13, 29}, true},
      {"all_masks", 2, 3, 5, 7, 7, 5, DType::f32, true, Shape{2, 3, 5, 7}, true},
      {"multi_tile", 1, 1, 67, 71, 128, 128, DType::f32, true},
      {"gqa_6_2_all_masks", 2, 6, 5, 19, 16, 12, DType::f32, true, Shape{2, 6, 5, 19}, true, 17,
       0.0f, 2},
      {"causal_at_key_length_gqa", 1, 6, 37, 60, 64, 64, DType::f32, true, Shape{1, 1, 37, 60},
       true, 50, 0.0f, 2, 0.0f, true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = run_case(*dev, c, false);
    Tolerance tol = attention_tolerance(c.dtype);
    EXPECT_TRUE(all_close(r.fused, r.want, tol)) << "fused";
    EXPECT_TRUE(all_close(r.fused, as_double(r.unfused), tol)) << "fused vs unfused";
  }
}

// Soft-capped scores (AttentionOptions::softcap, Gemma 2's cap · tanh(x / cap) before the mask)
// on every fused kernel and variant: every mask and key_length with a cap that bends most
// scores (|q·k · 0.3| reaches ~5 here, the cap is 1), and a grouped decoding step over a KV
// cache as BatchedLanguageModel runs one (a mask row per sequence, stacked query heads).
TEST_P(AttentionTilingTest, SoftCappedMatchesReference) {
  std::optional<Device> dev = open_device_with_tiles(GetParam());
  if (!dev) GTEST_SKIP() << GetParam() << " does not fit device " << device().info().name;
  const AttentionCase cases[] = {
      {"softcap_everything", 2, 2, 7, 40, 64, 48, DType::f32, true, Shape{1, 1, 7, 40}, true, 23, 0.3f, 0,
       1.0f},
      {"softcap_gqa_decode", 2, 6, 1, 33, 16, 8, DType::f16, false, Shape{2, 1, 1, 33}, false, 30, 0.0f, 2,
       0.5f},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    Result r = run_case(*dev, c, false);
    EXPECT_TRUE(all_close(r.fused, r.want, attention_tolerance(c.dtype))) << "fused";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tilings, AttentionTilingTest,
    ::testing::Values("tiles/128x32x32",  // the GPU default
                      "tiles/32x5x7",     // row and key tiles that are not powers of two
                      "rows/8x1",         // the CPU kernel without shuffles: every lane loads
                      "rows/8x3/shuffle", // shuffled buffer loads, 3 rows per invocation
                      "rows/8x4/texel"),  // the lavapipe default
    [](const auto& info) {
      std::string s = info.param;
      for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '/' || (s[i] == 'x' && i > 0 && std::isdigit(static_cast<unsigned char>(s[i - 1]))))
          s[i] = '_';
      return s;
    });

TEST_F(DeviceTest, AttentionTilesEnvSetsTheTiling) {
  const DeviceInfo& info = device().info();
  {
    ScopedEnv env("VKFORMER_ATTENTION_TILES", "tiles/32x5x7");
    kernels::AttentionTiles t = kernels::tuning_for(info).attention;
    EXPECT_EQ(t.kernel, kernels::AttentionTiles::Kernel::tiles);
    EXPECT_EQ(t.invocations, 32u);
    EXPECT_EQ(t.br, 5u);
    EXPECT_EQ(t.bc, 7u);
  }
  {
    ScopedEnv env("VKFORMER_ATTENTION_TILES", "rows/8x3");
    kernels::AttentionTiles t = kernels::tuning_for(info).attention;
    EXPECT_EQ(t.kernel, kernels::AttentionTiles::Kernel::rows);
    EXPECT_EQ(t.lanes, 8u);
    EXPECT_EQ(t.rows_per_lane, 3u);
    EXPECT_FALSE(t.shuffle);
    EXPECT_FALSE(t.texel);
  }
  for (const char* bad : {"tiles/0x1x1", "tiles/16x17x8", "rows/8x0", "rows/8x2/fast", "tiles",
                          "rows/100000x1"}) {
    ScopedEnv env("VKFORMER_ATTENTION_TILES", bad);
    EXPECT_THROW(kernels::tuning_for(info), Error) << bad;
  }
}

// The override parses strictly (sscanf accepted "rows/8x1junk" and wrapped numbers past 32 bits,
// and a key tile of 4294967295 overflowed the shared-memory size and crashed lavapipe).
TEST_F(DeviceTest, AttentionTilesEnvRejectsTrailingJunkAndOverflow) {
  auto read = [&] { kernels::tuning_for(device().info()); };
  for (const char* bad : {"tiles/64x16x16/junk", "rows/8x1junk", "rows/8x2/", "rows/8x2/shufflex",
                          "tiles/-1x1x1", "rows/4294967304x1", "tiles/32x5x4294967295"})
    env_error("VKFORMER_ATTENTION_TILES", bad, read);
}

// Each rejection names the rule that failed with its numbers, and a device limit with its value.
TEST(AttentionTuning, TilesEnvErrorsNameTheFailedRule) {
  DeviceInfo info;
  info.name = "made-up";
  info.subgroup_size = info.min_subgroup_size = info.max_subgroup_size = 8;
  info.subgroup_arithmetic = info.subgroup_shuffle = true;
  info.max_workgroup_size = {1024, 1024, 64};
  info.max_workgroup_invocations = 512;
  info.max_texel_buffer_elements = 0;
  auto error = [&](const char* value, bool subgroup_ops) {
    return env_error("VKFORMER_ATTENTION_TILES", value,
                     [&] { kernels::attention_tiles_for(info, true, subgroup_ops); });
  };
  expect_env_rules(
      "VKFORMER_ATTENTION_TILES",
      {{"tiles/16x17x8", "BR 17 is above WG 16"},
       {"tiles/32x5x70000", "BC is 70000, expected 1 to 65536"},
       {"tiles/1024x32x32",
        "WG = 1024 invocations, above maxComputeWorkGroupInvocations = 512 of device 'made-up'"},
       {"rows/8x0", "ROWS is 0, expected 1 to 8"},
       {"rows/4x2/shuffle",
        "LANES equal to the fixed subgroup size: LANES is 4, device 'made-up' has subgroups of 8"},
       {"rows/8x2/texel",
        "/texel needs texel buffers: device 'made-up' has maxTexelBufferElements = 0"}},
      [&] { kernels::attention_tiles_for(info, true, true); });
  const std::string what = error("rows/8x2/shuffle", false);
  EXPECT_NE(what.find("/shuffle and /texel need subgroup operations"), std::string::npos) << what;
}

// VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES moves the automatic path's line between the unfused
// chain and the fused kernel: a decoding step (one query) then lowers to one dispatch or three.
TEST_F(DeviceTest, AttentionUnfusedMaxQueriesEnvPicksTheDecodePath) {
  // The tuning is fixed when a device opens, so each setting gets a device of its own.
  auto dispatches = [&](const char* max_queries) {
    Device dev = open_test_device_with_env({{"VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES", max_queries}});
    Graph g;
    Tensor q = g.input("q", {1, 2, 1, 8}), kv = g.input("kv", {1, 2, 16, 8});
    g.output("y", g.attention(q, kv, kv));
    return Executor(dev, g).stats().dispatches;
  };
  // Devices whose fused kernel is the slow path keep the unfused chain wherever it fits.
  const bool fused_at_0 = !kernels::tuning_for(device().info()).attention.automatic_unfused_where_it_fits;
  EXPECT_EQ(dispatches("0"), fused_at_0 ? 1u : 3u);
  EXPECT_EQ(dispatches("1"), 3u);  // q·kᵀ, softmax, p·v
  for (const char* bad : {"-1", "two", "1x"}) {
    ScopedEnv env("VKFORMER_ATTENTION_UNFUSED_MAX_QUERIES", bad);
    EXPECT_THROW(kernels::tuning_for(device().info()), Error) << bad;
  }
}

// The worked example from the project notes: Q, K, V [3, 4], scale 1/sqrt(4), causal.
TEST_F(DeviceTest, WorkedExampleBothPaths) {
  const std::vector<float> q = {-1.6964f, 1.3355f,  -0.5133f, 0.0674f, 1.6595f, -0.4445f,
                                -0.1917f, 1.7729f,  -0.1650f, -2.9899f, -3.8893f, 1.2756f};
  const std::vector<float> k = {0.6023f,  -0.7260f, 1.1799f,  0.2383f, -0.6521f, 4.4224f,
                                -3.7460f, -1.2657f, -0.7106f, -4.3429f, 4.2984f, -2.3664f};
  const std::vector<float> v = {-0.9285f, 0.3301f, 1.8359f,  -1.3448f, 0.4676f, -0.1512f,
                                -0.5678f, 0.8648f, 0.6143f,  2.6772f,  -1.3256f, -3.2423f};
  const std::vector<double> want = {-0.9285, 0.3301, 1.8359, -1.3448, -0.8651, 0.3083,
                                    1.7268,  -1.2445, 0.1139, 0.0517,  0.0270,  0.1830};
  const Shape s{1, 1, 3, 4};
  Graph g;
  Tensor qt = g.input("q", s), kt = g.input("k", s), vt = g.input("v", s);
  AttentionOptions o;
  o.causal = true;  // scale 0: 1/sqrt(4)
  o.path = Path::fused;
  g.output("fused", g.attention(qt, kt, vt, o));
  o.path = Path::unfused;
  g.output("unfused", g.attention(qt, kt, vt, o));
  Executor ex(device(), g);
  auto out = ex.run({{"q", HostTensor::from_f32(s, q)},
                     {"k", HostTensor::from_f32(s, k)},
                     {"v", HostTensor::from_f32(s, v)}});
  EXPECT_TRUE(all_close(out["fused"], want, {2e-4, 0.0}));
  EXPECT_TRUE(all_close(out["unfused"], want, {2e-4, 0.0}));
}

TEST_F(DeviceTest, KeyLengthIsReadAtRunTime) {
  // A KV cache preallocated to 16 keys; the valid length changes between replays.
  const int64_t B = 1, H = 2, Sq = 1, Sk = 16, D = 8;
  const Shape qs{B, H, Sq, D}, ks{B, H, Sk, D};
  auto qv = random_values(qs.numel(), 7), kv = random_values(ks.numel(), 8),
       vv = random_values(ks.numel(), 9);
  Graph g;
  Tensor q = g.input("q", qs), k = g.input("k", ks), v = g.input("v", ks);
  Tensor kl = g.input("key_length", {1}, DType::i32);
  AttentionOptions o;
  o.key_length = kl;
  o.path = Path::fused;
  g.output("fused", g.attention(q, k, v, o));
  o.path = Path::unfused;
  g.output("unfused", g.attention(q, k, v, o));
  Executor ex(device(), g);
  ex.set_input("q", HostTensor::from_f32(qs, qv));
  ex.set_input("k", HostTensor::from_f32(ks, kv));
  ex.set_input("v", HostTensor::from_f32(ks, vv));
  for (int32_t len : {5, 16, 1, 0, 11}) {
    SCOPED_TRACE("key_length " + std::to_string(len));
    ex.set_input("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{len}));
    ex.run();
    ref::SoftmaxMasks m;
    m.scale = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(D)));
    m.key_length = len;
    auto want = ref::attention(stored(qv, DType::f32), stored(kv, DType::f32),
                               stored(vv, DType::f32), B, H, Sq, Sk, D, D, m);
    Tolerance tol = attention_tolerance(DType::f32);
    EXPECT_TRUE(all_close(ex.output("fused"), want, tol));
    EXPECT_TRUE(all_close(ex.output("unfused"), want, tol));
  }
  EXPECT_EQ(ex.stats().recordings, 1u);
  EXPECT_EQ(ex.stats().runs, 5u);
  // Outside [0, Sk] is refused when the input is set.
  EXPECT_THROW(ex.set_input("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{17})), Error);
  EXPECT_THROW(ex.set_input("key_length", HostTensor::from_i32({1}, std::vector<int32_t>{-1})), Error);
}

TEST_F(DeviceTest, MoreWorkgroupsThanOneGridDimension) {
  // 70001 (b, h) pairs of one query each: the fused grid spills from x into y.
  const int64_t H = 70001, Sk = 3, D = 2;
  Graph g;
  std::map<std::string, HostTensor> inputs;
  const RandomQkv qkv(g, inputs, {1, H, H, 1, Sk, D, D}, DType::f32);
  AttentionOptions o;
  o.path = Path::fused;
  g.output("o", g.attention(qkv.q, qkv.k, qkv.v, o));
  Executor ex(device(), g);
  auto out = ex.run(inputs);
  ref::SoftmaxMasks m;
  m.scale = 1.0f / std::sqrt(static_cast<float>(D));
  EXPECT_TRUE(all_close(out["o"], qkv.reference(m), attention_tolerance(DType::f32)));
}

TEST_F(DeviceTest, AutomaticPathFollowsTheTuning) {
  const Shape s{2, 2, 9, 64};
  Graph g;
  Tensor q = g.input("q", s), k = g.input("k", s), v = g.input("v", s);
  AttentionOptions o;
  o.causal = true;
  o.key_padding_mask = g.input("padding", {2, 9}, DType::i32);
  g.output("o", g.attention(q, k, v, o));
  Executor ex(device(), g);
  const bool unfused = automatic_is_unfused(device().info(), 2, 2, 9, 9, DType::f32);
  EXPECT_EQ(ex.stats().dispatches, unfused ? 3u : 1u);
}

// CPU devices whose subgroup shuffles are not one vector permute (lavapipe beyond 8 lanes) take
// the unfused chain wherever its scores fit one binding; lavapipe's 8 lanes and GPUs stay fused.
TEST(AttentionTuning, WideCpuSubgroupsPreferTheUnfusedChainWhereItFits) {
  ScopedEnv as_cpu("VKFORMER_TUNING_AS_GPU", "0"), no_override("VKFORMER_ATTENTION_TILES", "");
  DeviceInfo info;
  info.name = "made-up";
  info.type = "cpu";
  info.subgroup_size = info.min_subgroup_size = info.max_subgroup_size = 8;
  info.subgroup_arithmetic = info.subgroup_shuffle = true;
  info.max_workgroup_size = {1024, 1024, 64};
  info.max_workgroup_invocations = 1024;
  info.max_texel_buffer_elements = 1u << 27;
  info.shared_memory_bytes = 32768;
  info.max_storage_buffer_range = uint64_t(128) << 20;
  EXPECT_FALSE(kernels::tuning_for(info).attention.automatic_unfused_where_it_fits);
  EXPECT_FALSE(automatic_is_unfused(info, 1, 8, 1024, 1024, DType::f32));
  info.subgroup_size = info.min_subgroup_size = info.max_subgroup_size = 16;
  EXPECT_TRUE(kernels::tuning_for(info).attention.automatic_unfused_where_it_fits);
  EXPECT_TRUE(automatic_is_unfused(info, 1, 8, 1024, 1024, DType::f32));       // 32 MiB of scores
  EXPECT_FALSE(automatic_is_unfused(info, 1, 8, 4096, 4096, DType::f32));      // 512 MiB: fused
  info.type = "discrete";
  EXPECT_FALSE(kernels::tuning_for(info).attention.automatic_unfused_where_it_fits);
}

// The fused path never materializes the Sq x Sk scores: its memory grows linearly with the
// sequence length (inputs and output only), where the unfused chain's grows with its square.
TEST_F(DeviceTest, FusedMemoryIsLinearInSequenceLength) {
  auto activation_bytes = [&](int64_t S, Path path) {
    const Shape s{1, 8, S, 64};
    Graph g;
    Tensor q = g.input("q", s), k = g.input("k", s), v = g.input("v", s);
    AttentionOptions o;
    o.causal = true;
    o.path = path;
    g.output("o", g.attention(q, k, v, o));
    return Executor(device(), g).stats().activation_bytes;
  };
  const uint64_t fused_1k = activation_bytes(1024, Path::fused);
  const uint64_t fused_4k = activation_bytes(4096, Path::fused);
  EXPECT_LE(fused_4k, 4 * fused_1k + 4096);  // alignment slack
  EXPECT_LT(fused_4k, uint64_t(8) * 4096 * 4096 * 4 / 8);  // far below one score matrix
  EXPECT_EQ(activation_bytes(4096, Path::automatic), fused_4k);
  EXPECT_GT(activation_bytes(1024, Path::unfused), 4 * fused_1k);
}

// A decoding step (one query) goes the way the device's tuning says: unfused on CPU devices,
// where the fused kernel would compute the one row in every lane of a workgroup.
TEST_F(DeviceTest, AutomaticDecodingStepFollowsTheTuning) {
  const Shape qs{2, 2, 1, 64}, ks{2, 2, 17, 64};
  Graph g;
  Tensor q = g.input("q", qs), k = g.input("k", ks), v = g.input("v", ks);
  g.output("o", g.attention(q, k, v));
  Executor ex(device(), g);
  const bool unfused = kernels::tuning_for(device().info()).attention.automatic_unfused_max_queries >= 1;
  EXPECT_EQ(ex.stats().dispatches, unfused ? 3u : 1u);
}

TEST_F(DeviceTest, AutomaticFallsBackToUnfusedForWideHeads) {
  const int64_t D = 300;
  Graph g;
  std::map<std::string, HostTensor> inputs;
  const RandomQkv qkv(g, inputs, {1, 1, 1, 3, 3, D, D}, DType::f32);
  AttentionOptions o;
  o.causal = true;
  g.output("o", g.attention(qkv.q, qkv.k, qkv.v, o));
  Executor ex(device(), g);
  auto out = ex.run(inputs);
  ref::SoftmaxMasks m;
  m.scale = 1.0f / std::sqrt(static_cast<float>(D));
  m.causal = true;
  EXPECT_TRUE(all_close(out["o"], qkv.reference(m), attention_tolerance(DType::f32)));
  EXPECT_EQ(ex.stats().dispatches, 3u);  // matmul, softmax, matmul

  o.path = Path::fused;
  EXPECT_TRUE(fails_with([&] { g.attention(qkv.q, qkv.k, qkv.v, o); }, ErrorCode::unsupported, "300"));
}

TEST_F(DeviceTest, AttentionRejectsBadShapes) {
  Graph g;
  Tensor q = g.input("q", {2, 3, 5, 8}), k = g.input("k", {2, 3, 7, 8}),
         v = g.input("v", {2, 3, 7, 4});
  auto expect_error = [&](Tensor q2, Tensor k2, Tensor v2, AttentionOptions o, const char* fragment) {
    EXPECT_TRUE(fails_with([&] { g.attention(q2, k2, v2, o); }, ErrorCode::shape_mismatch, fragment));
  };
  EXPECT_EQ(g.attention(q, k, v).shape, Shape({2, 3, 5, 4}));
  expect_error(q, g.input("k1", {2, 3, 7, 9}), v, {}, "[2,3,7,9]");
  expect_error(q, k, g.input("v1", {2, 3, 6, 4}), {}, "[2,3,6,4]");
  expect_error(g.input("q1", {3, 5, 8}), k, v, {}, "rank");
  expect_error(q, k, g.input("v2", {2, 3, 7, 4}, DType::f16), {}, "dtype");
  AttentionOptions o;
  o.mask = g.input("m1", {5, 6});
  expect_error(q, k, v, o, "[5,6]");
  o = {};
  o.key_padding_mask = g.input("p1", {2, 5}, DType::i32);
  expect_error(q, k, v, o, "[2,5]");
  o = {};
  o.key_length = g.input("l1", {2}, DType::i32);
  expect_error(q, k, v, o, "key_length");
  o.key_length = g.input("l2", {1});
  expect_error(q, k, v, o, "i32");
  // Grouped-query attention: Hkv must divide H, and v must have k's heads.
  expect_error(q, g.input("k2", {2, 2, 7, 8}), g.input("v3", {2, 2, 7, 4}), {}, "Hkv dividing H = 3");
  Tensor q6 = g.input("q6", {2, 6, 5, 8});
  EXPECT_EQ(g.attention(q6, g.input("k3", {2, 3, 7, 8}), g.input("v4", {2, 3, 7, 4})).shape,
            Shape({2, 6, 5, 4}));
  expect_error(q6, g.input("k4", {2, 3, 7, 8}), g.input("v5", {2, 2, 7, 4}), {}, "[2,3,7,Dv]");
}

// A grouped-query decoding step runs the group's query heads as the rows of one block per KV
// head: on CPU devices, where one query alone goes unfused (three dispatches), the automatic path
// then takes the fused kernel for 9 query heads on 3 KV heads, as for 3 queries. A per-head mask
// keeps the heads apart (no stacking), and multi-head attention is unchanged.
TEST_F(DeviceTest, AutomaticGroupedDecodingStepStacksTheGroup) {
  const kernels::AttentionTiles t = kernels::tuning_for(device().info()).attention;
  auto dispatches = [&](int64_t H, int64_t Hkv, std::optional<Shape> mask) {
    Graph g;
    Tensor q = g.input("q", {1, H, 1, 64}), k = g.input("k", {1, Hkv, 40, 64});
    AttentionOptions o;
    o.causal = true;
    if (mask) o.mask = g.input("mask", *mask);
    g.output("y", g.attention(q, k, k, o));
    return Executor(device(), g).stats().dispatches;
  };
  const bool stacked_unfused = 3 <= t.automatic_unfused_max_queries || t.automatic_unfused_where_it_fits;
  const bool single_unfused = 1 <= t.automatic_unfused_max_queries || t.automatic_unfused_where_it_fits;
  EXPECT_EQ(dispatches(9, 3, std::nullopt), stacked_unfused ? 3u : 1u);
  EXPECT_EQ(dispatches(9, 3, Shape{1, 1, 1, 40}), stacked_unfused ? 3u : 1u);
  EXPECT_EQ(dispatches(9, 3, Shape{1, 9, 1, 40}), single_unfused ? 3u : 1u);
  EXPECT_EQ(dispatches(9, 9, std::nullopt), single_unfused ? 3u : 1u);
}

// The unfused chain has no soft-capping step: asking it for one is refused by name, and a bad
// cap when the graph is built.
TEST_F(DeviceTest, SoftCappedAttentionRefusesTheUnfusedPathAndBadCaps) {
  Graph g;
  Tensor q = g.input("q", {1, 2, 3, 8}, DType::f32), k = g.input("k", {1, 2, 5, 8}, DType::f32);
  AttentionOptions o;
  o.softcap = 30.0f;
  o.path = Path::unfused;
  g.output("out", g.attention(q, k, k, o));
  EXPECT_TRUE(fails_with([&] { Executor ex(device(), g); }, ErrorCode::unsupported,
                         "soft-capped attention (softcap) needs a fused attention path"));
  Graph bad;
  Tensor bq = bad.input("q", {1, 2, 3, 8}, DType::f32), bk = bad.input("k", {1, 2, 5, 8}, DType::f32);
  for (float cap : {-1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    AttentionOptions b;
    b.softcap = cap;
    EXPECT_TRUE(fails_with([&] { bad.attention(bq, bk, bk, b); }, ErrorCode::invalid_argument,
                           "softcap must be a finite number >= 0"));
  }
}

// A grouped-query decoding step with a mask per head (not stacked) and one shared by the heads
// (stacked), causal on: both paths against the reference.
TEST_F(DeviceTest, GroupedDecodingStepWithMasksMatchesReference) {
  for (Shape mask : {Shape{1, 6, 1, 33}, Shape{2, 1, 1, 33}, Shape{33}}) {
    SCOPED_TRACE(mask.str());
    AttentionCase c{"gqa_decode_mask", 2, 6, 1, 33, 16, 8, DType::f32, true, mask, true, 30, 0.0f, 2};
    Result r = run_case(device(), c);
    Tolerance tol = attention_tolerance(c.dtype);
    EXPECT_TRUE(all_close(r.fused, r.want, tol)) << "fused";
    EXPECT_TRUE(all_close(r.unfused, r.want, tol)) << "unfused";
    EXPECT_TRUE(all_close(r.automatic, r.want, tol)) << "automatic";
  }
}

// A decoding step of a grouped-query model (SmolLM2's 9 query heads on 3 KV heads, D = 64):
// K/V rows appended to [1, 3, 1024, 64] caches by update_cache at a run-time position, then
// attention over the first key_length = position + 1 keys. The fused path is one dispatch for
// the attention whatever the cache length (K and V are read in place, never repeated per query
// head), or two where split-K decoding splits the keys (GPUs), the unfused one three; both
// match the reference at every step of one recording.
TEST_F(DeviceTest, GroupedQueryDecodeStepsOverAKvCache) {
  const int64_t H = 9, Hkv = 3, T = 1024, D = 64;
  const auto kc = random_values(Hkv * T * D, 51), vc = random_values(Hkv * T * D, 52);
  for (Path path : {Path::fused, Path::unfused}) {
    SCOPED_TRACE(path == Path::fused ? "fused" : "unfused");
    DeviceTensor kcache = device().upload(make_tensor({1, Hkv, T, D}, kc, DType::f32));
    DeviceTensor vcache = device().upload(make_tensor({1, Hkv, T, D}, vc, DType::f32));
    Graph g;
    Tensor q = g.input("q", {1, H, 1, D});
    Tensor k_new = g.input("k_new", {1, Hkv, 1, D}), v_new = g.input("v_new", {1, Hkv, 1, D});
    Tensor pos = g.input("pos", {1}, DType::i32), len = g.input("len", {1}, DType::i32);
    Tensor k = g.update_cache(g.external("k", kcache), k_new, pos);
    Tensor v = g.update_cache(g.external("v", vcache), v_new, pos);
    AttentionOptions o;
    o.key_length = len;
    o.path = path;
    g.output("y", g.attention(q, k, v, o));
    Executor ex(device(), g);
    kernels::DecodeLaunch decode;
    const bool split = kernels::decode_launch_for(kernels::tuning_for(device().info()).attention.decode,
                                             device().info(), {1, H, 1, T, D, D, Hkv}, &decode) &&
                       decode.splits > 1;
    EXPECT_EQ(ex.stats().dispatches, 2u + (path == Path::fused ? (split ? 2u : 1u) : 3u));
    std::vector<double> keys(kc.begin(), kc.end()), values(vc.begin(), vc.end());
    for (int32_t p : {0, 1, 500, 1023}) {
      SCOPED_TRACE("position " + std::to_string(p));
      const auto qv = random_values(H * D, 53 + p), knv = random_values(Hkv * D, 54 + p),
                 vnv = random_values(Hkv * D, 55 + p);
      auto out = ex.run({{"q", make_tensor({1, H, 1, D}, qv, DType::f32)},
                         {"k_new", make_tensor({1, Hkv, 1, D}, knv, DType::f32)},
                         {"v_new", make_tensor({1, Hkv, 1, D}, vnv, DType::f32)},
                         {"pos", HostTensor::from_i32({1}, std::vector<int32_t>{p})},
                         {"len", HostTensor::from_i32({1}, std::vector<int32_t>{p + 1})}});
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          keys[(h * T + p) * D + d] = knv[h * D + d];
          values[(h * T + p) * D + d] = vnv[h * D + d];
        }
      ref::SoftmaxMasks m;
      m.scale = 1.0f / std::sqrt(static_cast<float>(D));
      m.key_length = p + 1;
      const auto want = ref::attention(stored(qv, DType::f32), ref::repeat_kv(keys, 1, H, Hkv, T, D),
                                       ref::repeat_kv(values, 1, H, Hkv, T, D), 1, H, 1, T, D, D, m);
      EXPECT_TRUE(all_close(out["y"], want, attention_tolerance(DType::f32)));
    }
    EXPECT_EQ(ex.stats().recordings, 1u);
  }
}

}  // namespace
}  // namespace vkformer::testing
