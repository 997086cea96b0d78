// The context shift (Graph::rope_shift, LanguageModel::shift; issue 37 item 3), per rope family:
// interleaved pairs (Llama), NeoX halves (Qwen2, Gemma), Llama 3's frequency factors, Gemma 3's
// two bases (global 1e6 with linear scaling, sliding 1e4), partial rope dims; keys in f32, f16,
// q8_0 and q4_0, with and without the attention rotation.
//
// Op: the caches are written by rope_kv_cache at positions 0..19, then shifted by {keep 4,
// discard 7, end 20}. Each moved key is checked against double precision:
//   * against the key rope would store directly at its new position p' (rope(p', k)): f32
//     keys within 1e-5 of the row's largest value; f16 and quantized ones within their own
//     rounding (two f16 roundings; a block step and a half: the write's and the re-quantization's);
//   * against the exact re-rotation of the bytes that were stored (dequantized, out of the
//     rotation, turned by -discard, back in, rounded to the type): within 1e-5 of the row's
//     largest value plus half a step (f16: half an ulp; q8_0/q4_0: half/one quantization step
//     of the block, as ggml's quantizer rounds) — the kernel's arithmetic alone.
// Values move byte for byte; rows below keep are untouched. Written with 4 query heads per KV head.
// One item's shift (a server's slot) moves that item's rows alone (see its test).
//
// Model: with f32 caches, a shifted model's next logits equal those of a fresh model that ran
// only the kept tokens (1e-4 of the largest logit), on the converted family models whose
// sliding windows make that exact (see the test).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kv_layouts.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/half.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

// The quantization step of element i's block; for f16 an ulp of the value; 0 for f32.
double step_at(DType type, const std::byte* bytes, size_t i, double value) {
  if (type == DType::f16) return std::ldexp(std::max(std::abs(value), 6.1e-5), -10);
  return block_step(type, bytes, i);
}

struct Family {
  std::string name;
  RopeOptions::Style style;
  double base, scale;
  int64_t dims;  // -1: the whole head
  bool factors;  // Llama 3's per-pair frequency factors
};

// x rotated by `pos` (possibly negative) as rope with these options computes it, in double.
std::vector<double> rope(std::vector<double> x, const Family& f, const std::vector<float>& factors, double pos) {
  return rope_row(std::move(x), pos,
                  {.neox = f.style == RopeOptions::Style::neox, .base = f.base, .scale = f.scale, .dims = f.dims, .factors = factors});
}

struct ShiftCase {
  Family family;
  int64_t Hkv, D;
  DType k_type, v_type;
  int rotation;  // the keys' KvRotation block
};

constexpr int32_t kKeep = 4, kDiscard = 7, kEnd = 20;

void check_shift(Device& dev, const ShiftCase& c) {
  const Family& f = c.family;
  SCOPED_TRACE(f.name + " D" + std::to_string(c.D) + " k " + std::string(dtype_name(c.k_type)) + " v " +
               std::string(dtype_name(c.v_type)) + " rotation " + std::to_string(c.rotation));
  const int64_t H = 4 * c.Hkv, T = 24, width = (H + 2 * c.Hkv) * c.D;
  std::vector<float> factors;
  RopeOptions ro;
  ro.style = f.style;
  ro.freq_base = f.base;
  ro.freq_scale = f.scale;
  ro.dims = f.dims;
  if (f.factors) {
    const int64_t dims = f.dims < 0 ? c.D : f.dims;
    for (int64_t i = 0; i < dims / 2; ++i) factors.push_back(1.0f + static_cast<float>(i % 5));
    ro.freq_factors = factors;
  }
  DeviceTensor ck = dev.allocate({1, c.Hkv, T, c.D}, c.k_type), cv = dev.allocate({1, c.Hkv, T, c.D}, c.v_type);
  const bool convert = c.k_type != DType::f32 || c.v_type != DType::f32;
  const auto qkv = random_values(static_cast<size_t>(kEnd * width), 123, -1.0f, 1.0f);
  {
    Graph g;
    RopeKvCache r = g.rope_kv_cache(g.input("qkv", {1, kEnd, width}), static_cast<int>(H), static_cast<int>(c.Hkv),
                                    g.external("k", ck), g.external("v", cv), g.input("position", {1}, DType::i32), ro,
                                    {}, KvRotation{convert ? c.rotation : 0, 0});
    g.output("q", r.q);
    Executor ex(dev, g);
    ex.run({{"qkv", HostTensor::from_f32({1, kEnd, width}, qkv)},
            {"position", HostTensor::from_i32({1}, std::vector<int32_t>{0})}});
  }
  const HostTensor k0 = dev.download(ck), v0 = dev.download(cv);
  {
    Graph g;
    Tensor shift = g.input("shift", {3}, DType::i32);
    g.output("k", g.rope_shift(g.external("k", ck), shift, ro, c.rotation));
    g.output("v", g.rope_shift(g.external("v", cv), shift, std::nullopt));
    Executor ex(dev, g);
    ex.run({{"shift", HostTensor::from_i32({3}, std::vector<int32_t>{kKeep, kDiscard, kEnd})}});
  }
  for (const auto& m : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
  const HostTensor k1 = dev.download(ck), v1 = dev.download(cv);
  const size_t krow = static_cast<size_t>(dtype_bytes(c.k_type, c.D)), vrow = static_cast<size_t>(dtype_bytes(c.v_type, c.D));
  for (int64_t g = 0; g < c.Hkv; ++g) {
    for (int64_t r = 0; r < kEnd - kDiscard; ++r) {
      SCOPED_TRACE("kv head " + std::to_string(g) + " row " + std::to_string(r));
      const size_t at = static_cast<size_t>(g * T + r), from = static_cast<size_t>(g * T + (r < kKeep ? r : r + kDiscard));
      // Values: the bytes of the row they came from; keys below keep: untouched.
      ASSERT_EQ(0, std::memcmp(v1.data() + at * vrow, v0.data() + from * vrow, vrow));
      if (r < kKeep) {
        ASSERT_EQ(0, std::memcmp(k1.data() + at * krow, k0.data() + at * krow, krow));
        continue;
      }
      const std::vector<double> got = dequantize(c.k_type, k1.data() + at * krow, static_cast<size_t>(c.D));
      // Directly at the new position r: rope(r, k) (then the rotation), from the input in double.
      std::vector<double> raw(qkv.begin() + (r + kDiscard) * width + (H + g) * c.D,
                              qkv.begin() + (r + kDiscard) * width + (H + g + 1) * c.D);
      const std::vector<double> direct = hadamard_blocks(rope(raw, f, factors, static_cast<double>(r)), c.rotation);
      // The exact re-rotation of what was stored.
      const std::vector<double> stored = dequantize(c.k_type, k0.data() + from * krow, static_cast<size_t>(c.D));
      const std::vector<double> exact =
          hadamard_blocks(rope(hadamard_blocks(stored, c.rotation), f, factors, -static_cast<double>(kDiscard)), c.rotation);
      double amax = 0.0;
      for (double v : direct) amax = std::max(amax, std::abs(v));
      for (int64_t e = 0; e < c.D; ++e) {
        const size_t i = static_cast<size_t>(e);
        const double step_new = step_at(c.k_type, k1.data() + at * krow, i, got[i]);
        const double step_old = step_at(c.k_type, k0.data() + from * krow, i, stored[i]);
        // q4_0's top code is clamped (x / d + 8.5 can reach 16.5): one step, not half.
        const double rounding = c.k_type == DType::q4_0 ? 1.0 : 0.5;
        // Codes are rounded against the unrounded scale and multiplied by the f16 one: up to the
        // largest code (127, 8) times f16's relative rounding more.
        const double codes = c.k_type == DType::q8_0 ? 127.0 : c.k_type == DType::q4_0 ? 8.0 : 0.0;
        ASSERT_NEAR(got[i], exact[i], 1e-5 * amax + (rounding + codes * std::ldexp(1.0, -11) + 1e-3) * step_new)
            << "element " << e << ": the re-rotation of the stored key";
        double direct_bound = 1e-5 * amax;
        if (c.k_type == DType::f16) direct_bound += step_new + step_old;
        // The first write's error (up to a step) turned and rotated, spread over the row, and
        // the second's.
        if (is_quantized(c.k_type)) direct_bound += (rounding + 0.5) * (step_new + step_old) * (c.rotation ? 2.0 : 1.0);
        ASSERT_NEAR(got[i], direct[i], direct_bound) << "element " << e << ": the key written at position " << r;
      }
    }
  }
}

const Family kLlama{"llama (interleaved)", RopeOptions::Style::interleaved, 10000.0, 1.0, -1, false};
const Family kLlama3{"llama3 (freq factors)", RopeOptions::Style::interleaved, 500000.0, 1.0, -1, true};
const Family kNeox{"qwen2 (neox)", RopeOptions::Style::neox, 1000000.0, 1.0, -1, false};
const Family kGemmaGlobal{"gemma3 global (neox, 1e6, scale 1/8)", RopeOptions::Style::neox, 1000000.0, 0.125, -1, false};
const Family kGemmaSliding{"gemma3 sliding (neox, 1e4)", RopeOptions::Style::neox, 10000.0, 1.0, -1, false};
const Family kPartial{"partial rope (32 of 64 dims)", RopeOptions::Style::neox, 10000.0, 1.0, 32, false};

TEST_F(DeviceTest, ShiftedKeysEqualKeysWrittenAtTheirNewPositions) {
  const ShiftCase cases[] = {
      {kLlama, 2, 64, DType::f32, DType::f32, 0},        {kLlama, 2, 64, DType::f16, DType::f16, 0},
      {kLlama, 2, 64, DType::q8_0, DType::q8_0, 64},     {kLlama3, 1, 64, DType::q8_0, DType::f16, 0},
      {kNeox, 2, 64, DType::f16, DType::q4_0, 0},        {kNeox, 1, 64, DType::q4_0, DType::q4_0, 64},
      {kGemmaGlobal, 1, 256, DType::q8_0, DType::q8_0, 256}, {kGemmaSliding, 1, 256, DType::f16, DType::f16, 0},
      {kPartial, 1, 64, DType::q8_0, DType::q8_0, 0},
      {kLlama, 2, 8, DType::f32, DType::f32, 0},  // the family models' head dim (one pair a lane)
  };
  for (const ShiftCase& c : cases) check_shift(device(), c);
}

// One item's shift (shift = i32 [4] {keep, discard, end, item}: a server's slot,
// BatchedLanguageModel::shift): caches [3 items, Hkv, 16, 64] of random bytes, item 1 shifted by
// {3, 5, 14}. Item 1's moved keys equal the exact re-rotation of their stored bytes in double
// (within 1e-5 of the row's largest value plus the final rounding, as above), its values move
// byte for byte, its rows below keep and from end on stay; items 0 and 2 stay bit for bit, and
// an item outside [0, 3) moves nothing. One dispatch per cache, or one per window where the cache
// spans several bindings (VKFORMER_MAX_BINDING_BYTES=4096: f32 slices of 4096 bytes, one a
// window; q8_0 slices of 1088 bytes, three a window, so item 1's two heads lie in two windows).
// The keys are random valid bytes, not written by rope_kv_cache: the turn is checked against the
// bytes it read, as the test above's "exact re-rotation".

// Bytes of `rows` rows of D elements of a cache type, random but valid (finite scales).
std::vector<std::byte> random_rows(DType type, int64_t rows, int64_t D, uint32_t seed) {
  const std::vector<float> x = random_values(static_cast<size_t>(rows * D), seed, -1.0f, 1.0f);
  if (!is_quantized(type)) {
    const HostTensor h = HostTensor::from_f32({rows * D}, x, type);
    return {h.data(), h.data() + h.nbytes()};
  }
  // q8_0 blocks: an f16 scale from 0.004 to 0.012, codes in [-127, 127].
  std::vector<std::byte> out;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    const uint16_t d = float_to_half(0.008f + 0.004f * x[32 * b]);
    out.push_back(static_cast<std::byte>(d & 0xff));
    out.push_back(static_cast<std::byte>(d >> 8));
    for (size_t i = 0; i < 32; ++i)
      out.push_back(static_cast<std::byte>(static_cast<int8_t>(std::lround(127.0f * x[32 * b + i]))));
  }
  return out;
}

void check_item_shift(Device& dev, DType k_type, int rotation, int64_t Hkv, size_t dispatches) {
  SCOPED_TRACE(std::string("k ") + std::string(dtype_name(k_type)) + " rotation " + std::to_string(rotation) + " Hkv " +
               std::to_string(Hkv));
  constexpr int64_t B = 3, T = 16, D = 64;
  constexpr int32_t keep = 3, discard = 5, end = 14, item = 1;
  const Shape shape{B, Hkv, T, D};
  const std::vector<std::byte> k0 = random_rows(k_type, B * Hkv * T, D, 7), v0 = random_rows(DType::f16, B * Hkv * T, D, 8);
  const size_t krow = static_cast<size_t>(dtype_bytes(k_type, D)), vrow = static_cast<size_t>(dtype_bytes(DType::f16, D));
  RopeOptions ro;
  ro.style = RopeOptions::Style::neox;
  const Family f{"neox", RopeOptions::Style::neox, 10000.0, 1.0, -1, false};
  for (const int32_t which : {item, -1, static_cast<int32_t>(B)}) {
    SCOPED_TRACE("item " + std::to_string(which));
    DeviceTensor ck = dev.upload(HostTensor::from_bytes(shape, k_type, k0));
    DeviceTensor cv = dev.upload(HostTensor::from_bytes(shape, DType::f16, v0));
    Graph g;
    Tensor shift = g.input("shift", {4}, DType::i32);
    g.output("k", g.rope_shift(g.external("k", ck), shift, ro, rotation));
    g.output("v", g.rope_shift(g.external("v", cv), shift, std::nullopt));
    Executor ex(dev, g);
    EXPECT_EQ(ex.stats().dispatches, dispatches);
    ex.run({{"shift", HostTensor::from_i32({4}, std::vector<int32_t>{keep, discard, end, which})}});
    for (const auto& m : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
    const HostTensor k1 = dev.download(ck), v1 = dev.download(cv);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t r = 0; r < T; ++r) {
          SCOPED_TRACE("item " + std::to_string(b) + " head " + std::to_string(h) + " row " + std::to_string(r));
          const size_t at = static_cast<size_t>((b * Hkv + h) * T + r);
          const bool moved = b == which && r >= keep && r < end - discard;
          if (!moved) {
            if (b == which && r >= end - discard && r < end) continue;  // left as they were, or not: no one reads them
            ASSERT_EQ(0, std::memcmp(k1.data() + at * krow, k0.data() + at * krow, krow));
            ASSERT_EQ(0, std::memcmp(v1.data() + at * vrow, v0.data() + at * vrow, vrow));
            continue;
          }
          const size_t from = at + discard;
          ASSERT_EQ(0, std::memcmp(v1.data() + at * vrow, v0.data() + from * vrow, vrow));
          const std::vector<double> got = dequantize(k_type, k1.data() + at * krow, D);
          const std::vector<double> stored = dequantize(k_type, k0.data() + from * krow, D);
          const std::vector<double> exact =
              hadamard_blocks(rope(hadamard_blocks(stored, rotation), f, {}, -static_cast<double>(discard)), rotation);
          double amax = 0.0;
          for (double v : exact) amax = std::max(amax, std::abs(v));
          for (size_t e = 0; e < static_cast<size_t>(D); ++e) {
            const double step = step_at(k_type, k1.data() + at * krow, e, got[e]);
            // Half a step of the rounding, plus the codes' rounding against the unrounded scale.
            const double codes = k_type == DType::q8_0 ? 127.0 : 0.0;
            ASSERT_NEAR(got[e], exact[e], 1e-5 * amax + (0.5 + codes * std::ldexp(1.0, -11) + 1e-3) * step)
                << "element " << e;
          }
        }
  }
}

TEST_F(DeviceTest, OneItemShiftMovesThatItemsRowsAlone) {
  check_item_shift(device(), DType::f32, 0, 3, 2);
  check_item_shift(device(), DType::q8_0, 64, 2, 2);
  Device windowed = open_test_device_with_env({{"VKFORMER_MAX_BINDING_BYTES", "4096"}});
  // K: 9 slices of 4096 bytes, a window each; V: f16 slices of 2048 bytes, 2 a window (5).
  check_item_shift(windowed, DType::f32, 0, 3, 9 + 5);
  // K: 6 slices of 1088 bytes, 3 a window (2); V: 6 of 2048 bytes, 2 a window (3).
  check_item_shift(windowed, DType::q8_0, 64, 2, 2 + 3);
}

TEST_F(DeviceTest, RopeShiftRejectsWhatItCannotShift) {
  Device& dev = device();
  DeviceTensor c48 = dev.allocate({1, 1, 8, 48}, DType::q8_0), c64 = dev.allocate({1, 1, 8, 64}, DType::f16);
  Graph g;
  Tensor shift = g.input("shift", {3}, DType::i32);
  EXPECT_TRUE(fails_with([&] { g.rope_shift(g.external("c48", c48), shift, RopeOptions{}); }, ErrorCode::shape_mismatch,
                         "rows of an even head dim (whole blocks of 32 quantized)"));
  EXPECT_TRUE(fails_with([&] { g.rope_shift(g.external("c64", c64), g.input("two", {2}, DType::i32), RopeOptions{}); },
                         ErrorCode::shape_mismatch, "expected i32 [3] (keep, discard, end)"));
  EXPECT_TRUE(fails_with([&] { g.rope_shift(g.external("c64c", c64), g.input("five", {5}, DType::i32), RopeOptions{}); },
                         ErrorCode::shape_mismatch, "or [4] (keep, discard, end, item)"));
  EXPECT_TRUE(fails_with([&] { g.rope_shift(g.external("c64b", c64), shift, std::nullopt, 64); },
                         ErrorCode::shape_mismatch, "rotation is 64: expected 0, or with rope"));
}

// The family models (tests/golden_families): tokens [0, 30) appended, [6, 17) forgotten by a
// shift, then two tokens decoded; a fresh model fed the kept tokens and the same two gives the
// same logits. Exactly so only where every kept row's deeper keys and values never saw a
// forgotten token: a shift re-rotates the stored rows but cannot recompute what layer 2 and up
// derived from attention over the forgotten ones (llama.cpp's shift neither). Mistral
// (interleaved rope, grouped KV heads) and Phi-3 (NeoX) slide a window of 6 on every layer, so
// the decoded rows see original rows 25..29, whose whole history (rows 20..29) is kept; with f32
// caches the logits agree to fp32 rounding (1e-4 of the largest). Elsewhere (global layers) the
// shift is the op test's per key, not this.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  return diff / std::max(scale, 1e-30);
}

TEST_F(DeviceTest, ShiftedModelsDecodeAsIfOnlyTheKeptTokensRan) {
  for (const char* family : {"mistral", "phi3"}) {
    SCOPED_TRACE(family);
    const std::string path = std::string(VKF_FAMILIES_GOLDEN_DIR) + "/" + family + ".f32.gguf";
    LanguageModelOptions o;
    o.context = 48;
    LanguageModel shifted = LanguageModel::load(device(), path, o), fresh = LanguageModel::load(device(), path, o);
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 30; ++i) tokens.push_back((i * 37 + 11) % static_cast<int32_t>(shifted.config().vocab_size));
    shifted.append(tokens);
    shifted.shift(6, 11);
    EXPECT_EQ(shifted.position(), 19);
    std::vector<int32_t> kept(tokens.begin(), tokens.begin() + 6);
    kept.insert(kept.end(), tokens.begin() + 17, tokens.end());
    fresh.append(kept);
    for (int32_t t : {5, 9}) {
      const std::vector<int32_t> one{t};
      EXPECT_LE(relative_error(shifted.append(one), fresh.append(one)), 1e-4) << "token " << t;
    }
    EXPECT_TRUE(fails_with([&] { shifted.shift(20, 2); }, ErrorCode::invalid_argument,
                           "keep 20 and discard 2 must have keep >= 0, discard >= 1 and keep + discard <= 21"));
  }
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

}  // namespace
}  // namespace vkformer::testing
