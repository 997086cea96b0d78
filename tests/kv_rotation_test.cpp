// The attention rotation of quantized KV caches (KvRotation, llama.cpp PR 21038): Graph::hadamard
// against the Walsh-Hadamard product in double, and the whole chain — rope_kv_cache storing q, k
// and v rotated, attention over the caches, the output rotated back — against attention in
// double without any rotation: the rotation must not change what attention computes (float
// caches: only their rounding), and with q4_0 keys of an outlier channel it must lose less than
// the same keys stored unrotated. (The stored blocks themselves: kv_quant_test's
// RopeKvCacheRotatesBeforeItQuantizes.)
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kv_layouts.hpp"
#include "test_device.hpp"
#include "test_util.hpp"

namespace vkformer::testing {
namespace {

TEST_F(DeviceTest, HadamardMatchesTheDoubleReference) {
  Device& dev = device();
  for (DType dt : {DType::f32, DType::f16})
    for (int block : {2, 64, 256}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " block " + std::to_string(block));
      const Shape s{3, 5, 512};
      const auto x = random_values(static_cast<size_t>(s.numel()), 7 + static_cast<uint32_t>(block), -2.0f, 2.0f);
      Graph g;
      Tensor in = g.input("x", s, dt);
      Tensor once = g.hadamard(in, block);
      g.output("once", once);
      g.output("twice", g.hadamard(once, block));  // H·H = I
      Executor ex(dev, g);
      auto out = ex.run({{"x", make_tensor(s, x, dt)}});
      for (const auto& m : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
      const std::vector<double> xs = stored(x, dt), want = hadamard_blocks(xs, block);
      // fp32 sums of `block` terms of up to 2 (f32); f16 rounds the output (2^-11), twice.
      const Tolerance tol = dt == DType::f32 ? Tolerance{1e-5, 1e-5} : Tolerance{4e-3, 2e-3};
      EXPECT_TRUE(all_close(out.at("once"), want, tol));
      EXPECT_TRUE(all_close(out.at("twice"), xs, Tolerance{2 * tol.atol, 2 * tol.rtol}));
    }
}

TEST_F(DeviceTest, HadamardRejectsBlocksItCannotTake) {
  Graph g;
  Tensor x = g.input("x", {2, 96});
  EXPECT_TRUE(fails_with([&] { g.hadamard(x, 64); }, ErrorCode::shape_mismatch,
                         "block is 64 for x [2,96] f32: expected a power of two from 2 to 1024 dividing the last dim"));
  EXPECT_TRUE(fails_with([&] { g.hadamard(x, 48); }, ErrorCode::shape_mismatch, "block is 48"));
  // A rotation needs the converting write: caches in the activations' own type are refused.
  // rope_kv_cache of one head of `D` into caches of `type` with `rotation`, refused with `needle`.
  auto refused = [&](int64_t D, DType type, KvRotation rotation, const std::string& needle) {
    Graph w;
    DeviceTensor ck = device().allocate({1, 1, 8, D}, type), cv = device().allocate({1, 1, 8, D}, type);
    EXPECT_TRUE(fails_with(
        [&] {
          w.rope_kv_cache(w.input("qkv", {1, 1, 3 * D}), 1, 1, w.external("k", ck), w.external("v", cv),
                          w.input("pos", {1}, DType::i32), RopeOptions{}, {}, rotation);
        },
        ErrorCode::shape_mismatch, needle));
  };
  refused(64, DType::f32, KvRotation{64, 0}, "rotation.k: a rotation needs caches in another type than q's f32");
  refused(96, DType::q8_0, KvRotation{0, 64},
          "rotation.v is 64: expected 0 or a power of two from 2 to 1024 dividing the head dim 96");
}

// Rope in double: x (D values) rotated to `pos` (every dim; interleaved pairs or NeoX halves).
std::vector<double> rope_ref(const double* x, int64_t D, bool neox, int64_t pos) {
  return rope_row(std::vector<double>(x, x + D), static_cast<double>(pos), {.neox = neox});
}

struct ChainCase {
  int64_t H, Hkv, S, D;
  bool neox;
  DType act, k_type, v_type;
  KvRotation rot;
};

struct ChainRun {
  HostTensor got;            // [1, S, H·D]
  std::vector<double> want;  // causal attention in double, no rotation, no quantization
};

// qkv [1, S, (H + 2 Hkv) D] through rope_kv_cache (with c.rot) into caches of S + 3 rows at
// position 0, causal attention up to key_length S, concat_heads and, with c.rot.v, the way back.
// `outlier`: key channel 5 of every head 8 times larger (a model's outlier channel).
ChainRun run_chain(Device& dev, const ChainCase& c, bool outlier) {
  const int64_t width = (c.H + 2 * c.Hkv) * c.D, T = c.S + 3;
  auto qkv = random_values(static_cast<size_t>(c.S * width), 90, -1.0f, 1.0f);
  if (outlier)
    for (int64_t s = 0; s < c.S; ++s)
      for (int64_t g = 0; g < c.Hkv; ++g) qkv[static_cast<size_t>(s * width + (c.H + g) * c.D + 5)] *= 8.0f;
  DeviceTensor ck = dev.allocate({1, c.Hkv, T, c.D}, c.k_type), cv = dev.allocate({1, c.Hkv, T, c.D}, c.v_type);
  Graph g;
  RopeOptions rope;
  rope.style = c.neox ? RopeOptions::Style::neox : RopeOptions::Style::interleaved;
  RopeKvCache r = g.rope_kv_cache(g.input("qkv", {1, c.S, width}, c.act), static_cast<int>(c.H),
                                  static_cast<int>(c.Hkv), g.external("k", ck), g.external("v", cv),
                                  g.input("position", {1}, DType::i32), rope, {}, c.rot);
  AttentionOptions o;
  o.causal = true;
  o.causal_at_key_length = true;
  o.key_length = g.input("key_length", {1}, DType::i32);
  Tensor a = g.concat_heads(g.attention(r.q, r.k_cache, r.v_cache, o));
  if (c.rot.v > 0) a = g.hadamard(a, c.rot.v);
  g.output("y", a);
  Executor ex(dev, g);
  ChainRun run;
  run.got = ex.run({{"qkv", make_tensor({1, c.S, width}, qkv, c.act)},
                    {"position", HostTensor::from_i32({1}, std::vector<int32_t>{0})},
                    {"key_length", HostTensor::from_i32({1}, std::vector<int32_t>{static_cast<int32_t>(c.S)})}})["y"];
  for (const auto& m : dev.take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
  const std::vector<double> xs = stored(qkv, c.act);
  run.want.assign(static_cast<size_t>(c.S * c.H * c.D), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
  for (int64_t h = 0; h < c.H; ++h) {
    const int64_t kvh = h / (c.H / c.Hkv);
    for (int64_t i = 0; i < c.S; ++i) {
      const std::vector<double> q = rope_ref(xs.data() + i * width + h * c.D, c.D, c.neox, i);
      std::vector<double> p(static_cast<size_t>(i + 1));
      double mx = -1e300, sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        const std::vector<double> k = rope_ref(xs.data() + j * width + (c.H + kvh) * c.D, c.D, c.neox, j);
        double dot = 0.0;
        for (int64_t e = 0; e < c.D; ++e) dot += q[static_cast<size_t>(e)] * k[static_cast<size_t>(e)];
        p[static_cast<size_t>(j)] = dot * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      for (double& v : p) sum += (v = std::exp(v - mx));
      for (int64_t j = 0; j <= i; ++j)
        for (int64_t e = 0; e < c.D; ++e)
          run.want[static_cast<size_t>((i * c.H + h) * c.D + e)] +=
              p[static_cast<size_t>(j)] / sum * xs[static_cast<size_t>(j * width + (c.H + c.Hkv + kvh) * c.D + e)];
    }
  }
  return run;
}

// Float caches under the rotation: the same attention as without one, to the caches' rounding
// (f16 keys and values rounded in the rotated basis; f16 activations round q and the output).
// Interleaved and NeoX rope, grouped heads, q/k blocks of the whole head (64, 128: llama.cpp's
// rule, the largest power of two dividing it), v blocks of 64, and q/k rotated alone.
TEST_F(DeviceTest, RotatedAttentionEqualsTheUnrotated) {
  const ChainCase cases[] = {
      {4, 2, 9, 64, false, DType::f32, DType::f16, DType::f16, {64, 64}},
      {4, 1, 6, 128, true, DType::f32, DType::f16, DType::f16, {128, 64}},
      {3, 1, 4, 64, true, DType::f16, DType::f32, DType::f32, {64, 0}},  // q/k only: no way back
  };
  for (const ChainCase& c : cases) {
    SCOPED_TRACE("H" + std::to_string(c.H) + "/" + std::to_string(c.Hkv) + " S" + std::to_string(c.S) + " D" +
                 std::to_string(c.D) + (c.neox ? " neox" : " interleaved") + " act " + std::string(dtype_name(c.act)) +
                 " rot " + std::to_string(c.rot.k) + "/" + std::to_string(c.rot.v));
    const ChainRun r = run_chain(device(), c, false);
    // f16 rounding (2^-11 relative) of keys, values or q and the output, over values up to ~1.
    EXPECT_TRUE(all_close(r.got, r.want, Tolerance{3e-3, 3e-3}));
  }
}

// What the rotation is for: q4_0 keys with an outlier channel. Unrotated, the channel sets the
// scale of its block of 32 and the other 31 keys lose most of their bits; rotated, it is spread
// over the whole head. The attention output's largest error against double, both ways in one run
// (lavapipe: 0.039 rotated against 0.088 unrotated; a channel 8 times the others, q8_0 values).
TEST_F(DeviceTest, RotationShrinksTheErrorOfQ40KeysWithAnOutlierChannel) {
  double err[2];
  for (int rotated = 0; rotated < 2; ++rotated) {
    const ChainCase c{4, 2, 24, 64, false, DType::f32, DType::q4_0, DType::q8_0,
                      rotated ? KvRotation{64, 64} : KvRotation{}};
    const ChainRun r = run_chain(device(), c, true);
    err[rotated] = max_abs_error(r.got, r.want);
  }
  ::testing::Test::RecordProperty("unrotated_max_abs_error", sci(err[0]));
  ::testing::Test::RecordProperty("rotated_max_abs_error", sci(err[1]));
  EXPECT_LT(err[1], 0.6 * err[0]) << "rotated " << err[1] << ", unrotated " << err[0];
}

}  // namespace
}  // namespace vkformer::testing
