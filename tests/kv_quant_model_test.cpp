// Whole models with KV caches in their own types (issue 37): the per-sequence slots of
// BatchedLanguageModel (rope_kv_cache_quant.comp and the rows kernel reading each row's slot)
// against LanguageModel, one sequence alone, with the same q8_0 / q4_0 caches, on the k-quant
// tiny llama (head dims of 64); and the allocations' bytes per token. Both write the same
// blocks (the same keys, quantized the same way), so the logits agree to fp32 rounding, as the
// float caches' do in batched_llm_test.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "llm/weights.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/batched_llm.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

const std::string kKquant = std::string(VKF_LLAMA_GOLDEN_DIR) + "/tiny/tiny_llama_kquant.gguf";

TEST_F(DeviceTest, BatchedSlotsWithQuantizedCachesEqualTheSequenceAlone) {
  const DType k = DType::q8_0, v = DType::q4_0;
  LanguageModelOptions o;
  o.context = 64;
  o.cache_type_k = k;
  o.cache_type_v = v;
  LanguageModel alone = LanguageModel::load(device(), kKquant, o);
  BatchedLanguageModelOptions bo;
  bo.context = 64;
  bo.slots = 2;
  bo.cache_type_k = k;
  bo.cache_type_v = v;
  BatchedLanguageModel batched = BatchedLanguageModel::load(device(), kKquant, bo);
  EXPECT_EQ(alone.kv_cache().bytes_per_token, 2u * 2u * (68u + 36u));  // 2 layers, 2 KV heads of 64
  EXPECT_EQ(batched.kv_cache().bytes_per_token, alone.kv_cache().bytes_per_token);
  const std::vector<int32_t> prompt{1, 17, 42, 99, 7, 250, 3, 64, 128, 11};
  const std::vector<int32_t> other{5, 6, 7, 8, 9, 10, 300};
  std::vector<float> want = alone.append(prompt);
  batched.append(1, other);  // another sequence in the other slot
  std::vector<float> got = batched.append(0, prompt);
  EXPECT_LE(relative_error(got, want), 1e-4);
  // Decoding steps of both slots together: slot 0's rows equal the sequence alone.
  const size_t vocab = want.size();
  for (int32_t token : {33, 77, 5}) {
    want = alone.append(std::vector<int32_t>{token});
    const std::vector<BatchedLanguageModel::Next> step{{1, 12}, {0, token}};
    const std::vector<float> rows = batched.decode(step);
    EXPECT_LE(relative_error(std::span(rows).subspan(vocab, vocab), want), 1e-4) << "token " << token;
  }
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

// The attention rotation (LanguageModelOptions::kv_rotation, on by default as in llama.cpp): where
// it applies (quantized caches, head dims that are multiples of 64: K by the largest power of two
// dividing the head dim, V by 64), and that a model under it computes what it computes with f32
// caches, to the blocks' rounding: the prompt's and a decoded token's logits against those of the
// same model with f32 caches (q8_0: 1% of the largest logit), rotation on and off alike.
TEST_F(DeviceTest, QuantizedCachesRotateByDefaultAndKeepTheLogits) {
  LanguageModelOptions f32;
  f32.context = 64;
  LanguageModel exact = LanguageModel::load(device(), kKquant, f32);
  EXPECT_EQ(exact.kv_cache().rotation_k, 0);
  EXPECT_EQ(exact.kv_cache().rotation_v, 0);
  const std::vector<int32_t> prompt{1, 17, 42, 99, 7, 250, 3, 64, 128, 11};
  const std::vector<float> want = exact.append(prompt), want_next = exact.append(std::vector<int32_t>{33});
  for (bool rotate : {true, false}) {
    SCOPED_TRACE(rotate ? "rotated" : "not rotated");
    LanguageModelOptions o = f32;
    o.cache_type_k = o.cache_type_v = DType::q8_0;
    o.kv_rotation = rotate;
    LanguageModel lm = LanguageModel::load(device(), kKquant, o);
    EXPECT_EQ(lm.kv_cache().rotation_k, rotate ? 64 : 0);  // head dim 64
    EXPECT_EQ(lm.kv_cache().rotation_v, rotate ? 64 : 0);
    EXPECT_LE(relative_error(lm.append(prompt), want), 1e-2);
    EXPECT_LE(relative_error(lm.append(std::vector<int32_t>{33}), want_next), 1e-2);
  }
  LanguageModelOptions k_only = f32;
  k_only.cache_type_k = DType::q4_0;  // V stays f32: only q and k rotate
  LanguageModel lm = LanguageModel::load(device(), kKquant, k_only);
  EXPECT_EQ(lm.kv_cache().rotation_k, 64);
  EXPECT_EQ(lm.kv_cache().rotation_v, 0);
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

// The key scaling of quantized K caches (models::llm::scale_key_channels, Gemma 3): against s
// computed in double from its definition (the pair gains' ratio, clamped to [1/16, 16], its root),
// for NeoX pairs (i, i + 4) and interleaved ones (2i, 2i + 1) of 8 rope dims in a head of 10 (the
// last two channels unroped: each its own pair), gains that clamp both ways included. What makes
// it safe: q_norm · k_norm is unchanged per channel (so q · k is), and s is equal on a rope pair
// (so rope, and the context shift's turn of the stored keys, commute with it).
TEST(KeyScaling, ScalesKeysByThePairGainsAndKeepsScores) {
  const std::vector<float> q0{1.0f, 0.5f, 2.0f, 0.6f, 1.5f, 0.05f, 2.4f, 0.6f, 0.9f, 3.0f},
      k0{2.0f, 9.0f, 1.0f, 6.9f, 0.3f, 8.0f, 3.3f, 9.1f, 1.2f, 0.01f};
  for (RopeStyle style : {RopeStyle::neox, RopeStyle::interleaved}) {
    SCOPED_TRACE(style == RopeStyle::neox ? "neox" : "interleaved");
    std::vector<float> q = q0, k = k0;
    models::llm::scale_key_channels(q, k, 8, style);
    for (size_t i = 0; i < q0.size(); ++i) {
      const size_t j = i >= 8 ? i : style == RopeStyle::neox ? (i + 4) % 8 : i ^ 1;
      const double ratio = std::sqrt((double{q0[i]} * q0[i] + double{q0[j]} * q0[j]) /
                                     (double{k0[i]} * k0[i] + double{k0[j]} * k0[j]));
      const double s = std::sqrt(std::min(std::max(ratio, 1.0 / 16), 16.0));
      EXPECT_NEAR(k[i], k0[i] * s, 1e-6 * std::abs(k0[i] * s)) << "channel " << i;
      EXPECT_NEAR(q[i], q0[i] / s, 1e-6 * std::abs(q0[i] / s)) << "channel " << i;
      EXPECT_NEAR(double{q[i]} * k[i], double{q0[i]} * k0[i], 1e-6 * std::abs(double{q0[i]} * k0[i]));
      EXPECT_NEAR(k[i] / k0[i], k[j] / k0[j], 1e-6) << "channels " << i << " and " << j << " of a pair";
    }
  }
  std::vector<float> q(4), k(6);
  EXPECT_TRUE(fails_with([&] { models::llm::scale_key_channels(q, k, 4, RopeStyle::neox); },
                         ErrorCode::invalid_argument, "q_norm of 4 and k_norm of 6 values with rope dims 4"));
}

}  // namespace
}  // namespace vkformer::testing
