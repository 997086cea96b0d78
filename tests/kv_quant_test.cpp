// KV caches in their own types (f32, f16, q8_0, q4_0; llama.cpp's --cache-type-k/v and ggml's
// block layouts): the write (rope_kv_cache into quantized caches) and every attention kernel
// variant that reads them, against the double-precision reference on the same bytes.
//
// Readers: the caches are quantized here by the test's own ggml reference quantizer, uploaded as
// q8_0 / q4_0 blocks, and the reference attention (reference.hpp) runs on those blocks
// dequantized exactly as the layout says (d * q, d * (q - 8), d the f16 scale), so the only
// differences are the kernels' fp32 arithmetic: f32 activations are held to the scalar fused
// kernels' 2e-5 + 1e-5 |want|, f16 ones to 5e-3 + 5e-3 |want| (output and q rounded to f16).
// Each variant: the rows kernel with subgroup shuffles (lavapipe's choice for prompts and
// decoding) and without, split-K decoding in one range and in several, long rows over 4096 keys,
// the tiled GPU kernel (forced); the unfused chain refuses them naming the options.
//
// Write: rope_kv_cache rotates q and k and stores k and v rows in the caches' types; each
// stored block is checked against the rotation in double: its scale is the block's amax / 127
// (q8_0) or signed max / -8 (q4_0) to f16's rounding, and each value within half a step (q8_0)
// or one step (q4_0, whose top code 15 is clamped: the value + 8.5 of a block's far end can
// reach 16.5) of the exact rotated value, plus the code times the scale's f16 rounding.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "attention_inputs.hpp"
#include "kv_layouts.hpp"
#include "reference.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/half.hpp"

namespace vkformer::testing {
namespace {

using Path = AttentionOptions::Path;

// ---- The test's own ggml reference quantizer and dequantizer ----

// x (whole rows, a multiple of 32 values for the block types) stored as `type`.
std::vector<std::byte> quantize(DType type, const std::vector<float>& x) {
  std::vector<std::byte> out(dtype_bytes(type, static_cast<int64_t>(x.size())));
  auto put16 = [&](size_t at, uint16_t h) { std::memcpy(out.data() + at, &h, 2); };
  if (type == DType::f32) {
    std::memcpy(out.data(), x.data(), x.size() * 4);
  } else if (type == DType::f16) {
    for (size_t i = 0; i < x.size(); ++i) put16(2 * i, float_to_half(x[i]));
  } else if (type == DType::q8_0) {  // ggml quantize_row_q8_0_ref
    for (size_t blk = 0; blk < x.size() / 32; ++blk) {
      float amax = 0.0f;
      for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[blk * 32 + j]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      put16(blk * 34, float_to_half(d));
      for (int j = 0; j < 32; ++j)
        out[blk * 34 + 2 + j] = static_cast<std::byte>(static_cast<int8_t>(std::round(x[blk * 32 + j] * id)));
    }
  } else {  // q4_0: ggml quantize_row_q4_0_ref
    for (size_t blk = 0; blk < x.size() / 32; ++blk) {
      float amax = 0.0f, max = 0.0f;
      for (int j = 0; j < 32; ++j)
        if (amax < std::abs(x[blk * 32 + j])) amax = std::abs(x[blk * 32 + j]), max = x[blk * 32 + j];
      const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      put16(blk * 18, float_to_half(d));
      for (int j = 0; j < 16; ++j) {
        const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(x[blk * 32 + j] * id + 8.5f)));
        const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(x[blk * 32 + 16 + j] * id + 8.5f)));
        out[blk * 18 + 2 + j] = static_cast<std::byte>(lo | (hi << 4));
      }
    }
  }
  return out;
}

// ---- Readers ----

struct KvCase {
  std::string name;
  int64_t B, H, Hkv, Sq, Sk, D;
  DType act, k_type, v_type;
  bool causal = false;
  int32_t key_length = -1;  // -1: none
};

std::string describe_case(const KvCase& c) {
  return c.name + " act " + std::string(dtype_name(c.act)) + " k " + std::string(dtype_name(c.k_type)) +
         " v " + std::string(dtype_name(c.v_type));
}

struct Run {
  HostTensor got;
  std::vector<double> want;
};

Run run_attention(Device& dev, const KvCase& c, Path path = Path::automatic) {
  const Shape qs{c.B, c.H, c.Sq, c.D}, ks{c.B, c.Hkv, c.Sk, c.D};
  const auto qv = random_values(static_cast<size_t>(qs.numel()), 11, -1.5f, 1.5f);
  const auto kv = random_values(static_cast<size_t>(ks.numel()), 12, -1.5f, 1.5f);
  const auto vv = random_values(static_cast<size_t>(ks.numel()), 13, -1.0f, 1.0f);
  const std::vector<std::byte> kb = quantize(c.k_type, kv), vb = quantize(c.v_type, vv);
  Graph g;
  Tensor q = g.input("q", qs, c.act), k = g.input("k", ks, c.k_type), v = g.input("v", ks, c.v_type);
  std::map<std::string, HostTensor> in{{"q", make_tensor(qs, qv, c.act)},
                                       {"k", HostTensor::from_bytes(ks, c.k_type, kb)},
                                       {"v", HostTensor::from_bytes(ks, c.v_type, vb)}};
  AttentionOptions o;
  o.causal = c.causal;
  o.path = path;
  ref::SoftmaxMasks m;
  m.scale = 1.0f / std::sqrt(static_cast<float>(c.D));  // the op's default, in fp32
  m.causal = c.causal;
  add_key_length(g, in, o, m, c.key_length);
  g.output("y", g.attention(q, k, v, o));
  Executor ex(dev, g);
  Run r;
  r.got = ex.run(in)["y"];
  const size_t n = static_cast<size_t>(ks.numel());
  r.want = ref::attention(stored(qv, c.act), ref::repeat_kv(dequantize(c.k_type, kb.data(), n), c.B, c.H, c.Hkv, c.Sk, c.D),
                          ref::repeat_kv(dequantize(c.v_type, vb.data(), n), c.B, c.H, c.Hkv, c.Sk, c.D), c.B, c.H,
                          c.Sq, c.Sk, c.D, c.D, m);
  return r;
}

Tolerance tolerance_for(DType act) { return act == DType::f32 ? Tolerance{2e-5, 1e-5} : Tolerance{5e-3, 5e-3}; }

void check(Device& dev, const KvCase& c) {
  SCOPED_TRACE(describe_case(c));
  const Run r = run_attention(dev, c);
  for (const auto& msg : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << msg.text;
  EXPECT_TRUE(all_close(r.got, r.want, tolerance_for(c.act)));
  ::testing::Test::RecordProperty(c.name + "_max_abs_error", sci(max_abs_error(r.got, r.want)));
}

// The types of each case: both caches q8_0, both q4_0, K q8_0 with V f16, K q4_0 with V q8_0;
// f32 and f16 activations; and a plain f32 cache under f16 activations (the conversion kernels'
// float types).
struct Types {
  DType act, k, v;
};
const Types kTypes[] = {{DType::f32, DType::q8_0, DType::q8_0}, {DType::f32, DType::q4_0, DType::q4_0},
                        {DType::f16, DType::q8_0, DType::f16},  {DType::f16, DType::q4_0, DType::q8_0},
                        {DType::f16, DType::f32, DType::f32}};

// Small shapes the models take: a decoding step of grouped heads (9 on 3, SmolLM2's), a causal
// prompt chunk of 13 rows (a partial block of rows), key_length below the cache rows.
std::vector<KvCase> cases_for(const Types& t) {
  return {{"decode_gqa", 1, 9, 3, 1, 70, 64, t.act, t.k, t.v, false, 45},
          {"chunk_causal", 1, 4, 2, 13, 40, 64, t.act, t.k, t.v, true, -1},
          {"two_batches_d128", 2, 2, 1, 3, 33, 128, t.act, t.k, t.v, false, 30}};
}

Device& open_with(const std::string& tiles, const std::string& decode) {
  static std::map<std::string, Device> devices;
  const std::string key = tiles + "|" + decode;
  auto it = devices.find(key);
  if (it == devices.end()) {
    std::vector<std::pair<const char*, const char*>> env;
    static std::map<std::string, std::string> keep;  // the strings outlive the call
    if (!tiles.empty()) env.push_back({"VKFORMER_ATTENTION_TILES", (keep[key + "t"] = tiles).c_str()});
    if (!decode.empty()) env.push_back({"VKFORMER_ATTENTION_DECODE", (keep[key + "d"] = decode).c_str()});
    it = devices.emplace(key, open_test_device_with_env(env)).first;
  }
  return it->second;
}

// The rows kernel as the device chooses it (lavapipe: 8 lanes with shuffles, texel buffers for
// float caches; the KV_QUANT variant reads the caches as words) for prompts and decoding.
// Every type pair on a decoding step; the prompt chunk and the wide heads on two pairs (each
// case and type pair is a pipeline to compile: seconds each on lavapipe).
TEST_F(DeviceTest, RowsKernelReadsEveryCacheType) {
  for (const Types& t : kTypes) check(device(), cases_for(t)[0]);
  for (const Types& t : {kTypes[0], kTypes[3]}) check(device(), cases_for(t)[1]);
  check(device(), cases_for(kTypes[1])[2]);
}

// The rows kernel without subgroup shuffles (every lane loads every key, a 32-element block at
// a time): K and V q8_0, K q4_0, and both q4_0 in 4 blocks a row (blocks at even and odd
// halfwords in each).
TEST_F(DeviceTest, RowsKernelWithoutShufflesReadsQuantizedCaches) {
  Device& dev = open_with("rows/8x2", "off");
  check(dev, cases_for(kTypes[0])[1]);
  check(dev, cases_for(kTypes[3])[0]);
  check(dev, cases_for(kTypes[1])[2]);
}

// Split-K decoding (shaders/attention_flash_decode.comp): one range, and 5 ranges combined.
TEST_F(DeviceTest, SplitDecodingReadsQuantizedCaches) {
  for (const char* decode : {"64x32/1", "64x16/5"}) {
    SCOPED_TRACE(decode);
    Device& dev = open_with("", decode);
    for (const Types& t : {kTypes[0], kTypes[2], kTypes[4]}) check(dev, cases_for(t)[0]);
    check(dev, {"two_rows", 2, 4, 2, 2, 50, 64, DType::f32, DType::q4_0, DType::q8_0, true, 50});
  }
}

// Rows over 4096 keys, where a per-element bug in the block addressing of a long binding or the
// online softmax over many blocks would show: rows kernel and split decoding.
TEST_F(DeviceTest, LongRowsOverFourThousandKeys) {
  const KvCase decode{"long_decode", 1, 2, 1, 1, 4200, 64, DType::f32, DType::q8_0, DType::q4_0, false, 4133};
  check(device(), decode);
  check(open_with("", "64x32/4"), decode);
  check(device(), {"long_chunk", 1, 2, 2, 9, 4100, 64, DType::f16, DType::q4_0, DType::q8_0, true, -1});
}

// The tiled kernel (GPUs' scalar path, here forced on lavapipe): K/V tiles dequantized into
// shared memory.
TEST_F(DeviceTest, TiledKernelReadsQuantizedCaches) {
  Device& dev = open_with("tiles/64x16x16", "off");
  check(dev, cases_for(kTypes[0])[1]);
  check(dev, cases_for(kTypes[3])[0]);
}

// The unfused chain cannot read quantized caches: it says so, naming the options.
TEST_F(DeviceTest, UnfusedPathNamesTheOptions) {
  const KvCase c{"chunk", 1, 2, 2, 5, 16, 64, DType::f32, DType::q8_0, DType::q8_0};
  EXPECT_TRUE(fails_with([&] { run_attention(device(), c, Path::unfused); }, ErrorCode::unsupported,
                         "the unfused attention path (matmul, softmax, matmul) cannot read a KV cache of k q8_0, v q8_0"));
  EXPECT_TRUE(fails_with([&] { run_attention(device(), c, Path::unfused); }, ErrorCode::unsupported,
                         "--cache-type-k/--cache-type-v"));
}

TEST_F(DeviceTest, AttentionRejectsCachesItCannotRead) {
  Graph g;
  Tensor q = g.input("q", {1, 2, 1, 48}), k = g.input("k", {1, 2, 8, 48}, DType::q8_0);
  Tensor k64 = g.input("k64", {1, 2, 8, 64}, DType::q4_k), q64 = g.input("q64", {1, 2, 1, 64});
  EXPECT_TRUE(fails_with([&] { g.attention(q, k, k); }, ErrorCode::shape_mismatch,
                         "k is [1,2,8,48] q8_0: k and v in another dtype than q's (f32) need a head dim that is a multiple of 32"));
  EXPECT_TRUE(fails_with([&] { g.attention(q64, k64, k64); }, ErrorCode::shape_mismatch,
                         "or a KV cache type (f32, f16, q8_0, q4_0)"));
}

// ---- The write ----

struct WriteCase {
  int64_t B, H, Hkv, S, D, T;
  RopeOptions::Style style;
  DType act, k_type, v_type;
  std::vector<int32_t> positions;
  KvRotation rot = {};  // the attention rotation: q, k and v multiplied by Hadamard blocks
};

// Rotates x (D values) to `pos` in double (all D dims rotated).
std::vector<double> rotated(const double* x, int64_t D, RopeOptions::Style style, double base, int64_t pos) {
  return rope_row(std::vector<double>(x, x + D), static_cast<double>(pos),
                  {.neox = style == RopeOptions::Style::neox, .base = base});
}

// Block `blk` of `type` in `bytes` against the exact values `want` (32 of them): the scale and
// every value (see the file comment). `slack`: the kernel's own rounding of the inputs (fp32
// rotation, f16 activations) relative to the block's largest value.
::testing::AssertionResult block_matches(DType type, const std::byte* bytes, size_t blk, const double* want,
                                         double slack) {
  double amax = 0.0, max = 0.0;
  for (int j = 0; j < 32; ++j)
    if (std::abs(want[j]) > amax) amax = std::abs(want[j]), max = want[j];
  const std::vector<double> got = dequantize(type, bytes + blk * (type == DType::q8_0 ? 34 : 18), 32);
  const double d = type == DType::q8_0 ? half_at(bytes + blk * 34) : half_at(bytes + blk * 18);
  const double want_d = type == DType::q8_0 ? amax / 127.0 : max / -8.0;
  // f16 rounds the scale to 11 bits; the inputs' own rounding moves amax by `slack`.
  if (!(std::abs(d - want_d) <= std::abs(want_d) * (std::ldexp(1.0, -11) + slack) + 1e-12))
    return ::testing::AssertionFailure() << "block " << blk << ": scale " << d << ", want " << want_d;
  // Codes are rounded against the unrounded scale and multiplied by the f16 one: up to the
  // largest code (127, 8) times f16's relative rounding more.
  const double steps = type == DType::q8_0 ? 0.5 + 127 * std::ldexp(1.0, -11) : 1.0 + 8 * std::ldexp(1.0, -11);
  for (int j = 0; j < 32; ++j) {
    const double bound = std::abs(d) * (steps + 1e-3) + amax * slack + 1e-12;
    if (!(std::abs(got[j] - want[j]) <= bound))
      return ::testing::AssertionFailure() << "block " << blk << " element " << j << ": got " << got[j]
                                           << ", want " << want[j] << " within " << bound << " (d " << d << ")";
  }
  return ::testing::AssertionSuccess();
}

void check_write(Device& dev, const WriteCase& c) {
  SCOPED_TRACE("B" + std::to_string(c.B) + " H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " S" +
               std::to_string(c.S) + " D" + std::to_string(c.D) + " act " + std::string(dtype_name(c.act)) +
               " k " + std::string(dtype_name(c.k_type)) + " v " + std::string(dtype_name(c.v_type)) + " rotation " +
               std::to_string(c.rot.k) + "/" + std::to_string(c.rot.v));
  const Shape cache{c.B, c.Hkv, c.T, c.D};
  DeviceTensor ck = dev.allocate(cache, c.k_type), cv = dev.allocate(cache, c.v_type);
  Graph g;
  RopeOptions rope;
  rope.style = c.style;
  rope.freq_base = 10000.0;
  const int64_t width = (c.H + 2 * c.Hkv) * c.D;
  RopeKvCache r = g.rope_kv_cache(g.input("qkv", {c.B, c.S, width}, c.act), static_cast<int>(c.H),
                                  static_cast<int>(c.Hkv), g.external("k", ck), g.external("v", cv),
                                  g.input("position", {1}, DType::i32), rope, {}, c.rot);
  g.output("q", r.q);
  Executor ex(dev, g);
  uint32_t seed = 40;
  for (int32_t p : c.positions) {
    SCOPED_TRACE("position " + std::to_string(p));
    const auto qkv = random_values(static_cast<size_t>(c.B * c.S * width), seed++, -2.0f, 2.0f);
    auto out = ex.run({{"qkv", make_tensor({c.B, c.S, width}, qkv, c.act)},
                       {"position", HostTensor::from_i32({1}, std::vector<int32_t>{p})}});
    for (const auto& msg : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << msg.text;
    const HostTensor kh = dev.download(ck), vh = dev.download(cv);
    const std::vector<double> xs = stored(qkv, c.act);
    // fp32 rotation (angles to ~4e-6 of the value at these positions) and f16 inputs' rounding.
    const double slack = 1e-5 + (c.act == DType::f16 ? std::ldexp(1.0, -10) : 0.0);
    const std::vector<float> q_got = out.at("q").to_f32();
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < c.S; ++s) {
        const double* row = xs.data() + (b * c.S + s) * width;
        for (int64_t h = 0; h < c.H; ++h) {  // the queries stay in the activations' type
          const std::vector<double> wq = hadamard_blocks(rotated(row + h * c.D, c.D, c.style, 10000.0, p + s), c.rot.k);
          for (int64_t j = 0; j < c.D; ++j) {
            const double got = q_got[static_cast<size_t>(((b * c.H + h) * c.S + s) * c.D + j)];
            ASSERT_NEAR(got, wq[static_cast<size_t>(j)], 4.0 * slack * (1.0 + std::abs(wq[static_cast<size_t>(j)])));
          }
        }
        for (int64_t g2 = 0; g2 < c.Hkv; ++g2) {
          const int64_t cache_row = (b * c.Hkv + g2) * c.T + p + s;
          const std::vector<double> wk = hadamard_blocks(rotated(row + (c.H + g2) * c.D, c.D, c.style, 10000.0, p + s), c.rot.k);
          const std::vector<double> wv_rot = hadamard_blocks(std::vector<double>(row + (c.H + c.Hkv + g2) * c.D, row + (c.H + c.Hkv + g2 + 1) * c.D), c.rot.v);
          const double* wv = wv_rot.data();
          for (int64_t blk = 0; blk < c.D / 32; ++blk) {
            const size_t at = static_cast<size_t>(cache_row * c.D / 32 + blk);
            if (is_quantized(c.k_type)) {
              ASSERT_TRUE(block_matches(c.k_type, kh.data(), at, wk.data() + blk * 32, slack));
            }
            if (is_quantized(c.v_type)) {
              ASSERT_TRUE(block_matches(c.v_type, vh.data(), at, wv + blk * 32, slack));
            }
          }
          if (!is_quantized(c.k_type) || !is_quantized(c.v_type)) {  // float caches: the values
            const std::vector<double> gk = dequantize(c.k_type, kh.data() + dtype_bytes(c.k_type, cache_row * c.D), static_cast<size_t>(c.D));
            const std::vector<double> gv = dequantize(c.v_type, vh.data() + dtype_bytes(c.v_type, cache_row * c.D), static_cast<size_t>(c.D));
            for (int64_t j = 0; j < c.D; ++j) {
              const double rel = c.k_type == DType::f16 || c.act == DType::f16 ? std::ldexp(1.0, -10) : 0.0;
              if (!is_quantized(c.k_type))
                ASSERT_NEAR(gk[static_cast<size_t>(j)], wk[static_cast<size_t>(j)], (slack + rel) * (1 + std::abs(wk[static_cast<size_t>(j)])));
              if (!is_quantized(c.v_type))
                ASSERT_NEAR(gv[static_cast<size_t>(j)], wv[j], rel * (1 + std::abs(wv[j])));
            }
          }
        }
      }
  }
}

// A decoding step and a chunk of 21 rows (CPU devices: 16 rows per workgroup, a whole and a
// partial group), grouped heads, both pairings, D 64 (2 blocks a row) and 96 (3: rows not word
// aligned in q8_0 and q4_0), both activation types; mixed cache types; two batches.
TEST_F(DeviceTest, RopeKvCacheQuantizesAsItWrites) {
  using Style = RopeOptions::Style;
  const WriteCase cases[] = {
      {1, 9, 3, 1, 64, 40, Style::interleaved, DType::f32, DType::q8_0, DType::q8_0, {0, 1, 39}},
      {1, 4, 2, 21, 96, 50, Style::neox, DType::f32, DType::q4_0, DType::q4_0, {0, 29}},
      {2, 4, 2, 5, 64, 20, Style::neox, DType::f16, DType::q8_0, DType::q4_0, {3}},
      {1, 6, 2, 3, 64, 12, Style::interleaved, DType::f16, DType::q4_0, DType::f16, {9}},
      {1, 2, 1, 2, 32, 8, Style::interleaved, DType::f16, DType::f32, DType::q8_0, {6}},
  };
  for (const WriteCase& c : cases) check_write(device(), c);
}

// The attention rotation (KvRotation, llama.cpp's for quantized caches): the queries and the
// stored blocks are those of the rotated rows, q and k by blocks of the whole head or of part of
// it, v by 64; a decoding step and a chunk of 21 rows (a whole and a partial workgroup of rows),
// grouped heads, both pairings, both activation types, a float cache beside a quantized one.
TEST_F(DeviceTest, RopeKvCacheRotatesBeforeItQuantizes) {
  using Style = RopeOptions::Style;
  const WriteCase cases[] = {
      {1, 9, 3, 1, 64, 40, Style::interleaved, DType::f32, DType::q8_0, DType::q8_0, {0, 1, 39}, {64, 64}},
      {1, 4, 2, 21, 128, 50, Style::neox, DType::f32, DType::q4_0, DType::q4_0, {0, 29}, {128, 64}},
      {2, 4, 1, 5, 256, 20, Style::neox, DType::f16, DType::q4_0, DType::q8_0, {3}, {256, 64}},
      {1, 6, 2, 3, 64, 12, Style::interleaved, DType::f16, DType::q4_0, DType::f16, {9}, {64, 0}},
      {1, 2, 1, 2, 64, 8, Style::interleaved, DType::f32, DType::f16, DType::q8_0, {6}, {0, 64}},
  };
  for (const WriteCase& c : cases) check_write(device(), c);
}

TEST_F(DeviceTest, RopeKvCacheRejectsCachesItCannotWrite) {
  Device& dev = device();
  DeviceTensor kq = dev.allocate({1, 1, 8, 64}, DType::q4_1), vq = dev.allocate({1, 1, 8, 64}, DType::q8_0);
  Graph g;
  Tensor pos = g.input("pos", {1}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.rope_kv_cache(g.input("qkv", {1, 1, 192}), 1, 1, g.external("kq", kq),
                                               g.external("vq", vq), pos, RopeOptions{}); },
                         ErrorCode::shape_mismatch, "cache_k is [1,1,8,64] q4_1: a KV cache holds f32, f16, q8_0 or q4_0"));
}

}  // namespace
}  // namespace vkformer::testing
