// BatchedLanguageModel::shift (a server's --context-shift, one slot) against LanguageModel::shift
// (chat's, itself checked per key against fp64 and against a fresh model fed the kept tokens in
// kv_shift_test): three slots, the middle one shifted while the one below decodes beside it in
// the same steps and the one above idles. After the shift the shifted slot's logits equal the
// sequence alone shifted by the same amounts, and the other two slots' logits equal their
// sequences alone, never shifted: the shift moved the rows of the right slot, and only those.
// On the k-quant tiny llama with f32 caches and with q8_0 K (the attention rotation) over f16 V,
// and on the tiny Gemma 3 (its sliding layers' own rope base, windows of 6).
//
// Tolerance: max |logit difference| <= 1e-4 x max|logit| of the row with f32 caches, as
// batched_llm_test: the same kernels (the shift's included) read the same numbers; only the
// matmuls' accumulation order differs between one row and a batch (~1e-6). With q8_0 keys that
// ~1e-6 can round a key to the neighbouring code in one run and not the other (a step of 1/127
// of its block's largest value): seen up to 1.4e-4 at single tokens, so 1e-3 there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "fed_token_ids.hpp"
#include "test_device.hpp"
#include "test_util.hpp"
#include "vkformer/batched_llm.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kContext = 48;

struct ShiftCase {
  std::string name;
  fs::path model;
  std::optional<DType> cache_k, cache_v;
  double tolerance() const { return cache_k && is_quantized(*cache_k) ? 1e-3 : 1e-4; }
};

// The case's model of kContext tokens with its cache types, batched in `slots` slots and alone.
struct Models {
  BatchedLanguageModel lm;
  LanguageModel alone;
  int64_t vocab;
};

class BatchedShift : public DeviceTestWithParam<ShiftCase> {
 protected:
  Models load(int slots) {
    const ShiftCase& c = GetParam();
    BatchedLanguageModelOptions bo;
    bo.slots = slots;
    bo.context = kContext;
    bo.cache_type_k = c.cache_k;
    bo.cache_type_v = c.cache_v;
    LanguageModelOptions lo;
    lo.context = kContext;
    lo.cache_type_k = c.cache_k;
    lo.cache_type_v = c.cache_v;
    LanguageModel alone = LanguageModel::load(device(), c.model, lo);
    const int64_t vocab = alone.config().vocab_size;
    return {BatchedLanguageModel::load(device(), c.model, bo), std::move(alone), vocab};
  }
};

// Slot 0 (B): a prompt of 20 tokens, then a token each step, beside slot 1. Slot 1 (A): a prompt
// of 30, 10 tokens decoded, then shifted by keep 5, discard 17 (position 40 -> 23), then 8 more.
// Slot 2 (C): a prompt of 12, idle until A's shift is done, then 4 tokens.
TEST_P(BatchedShift, OnlyTheShiftedSlotMovesAndItEqualsTheSequenceAloneShifted) {
  const ShiftCase& c = GetParam();
  auto [lm, alone, vocab] = load(3);
  const std::vector<int32_t> a_prompt = ids(30, vocab, 1), a_tokens = ids(18, vocab, 2);
  const std::vector<int32_t> b_prompt = ids(20, vocab, 3), b_tokens = ids(18, vocab, 4);
  const std::vector<int32_t> c_prompt = ids(12, vocab, 5), c_tokens = ids(4, vocab, 6);
  constexpr int64_t keep = 5, discard = 17, before = 10;

  // Alone: A shifted after its first `before` tokens; B and C never shifted.
  std::vector<std::vector<float>> a_want, b_want, c_want;
  alone.reset();
  alone.append(a_prompt);
  for (size_t t = 0; t < a_tokens.size(); ++t) {
    if (t == before) {
      alone.shift(keep, discard);
      ASSERT_EQ(alone.position(), 30 + before - discard);
    }
    a_want.push_back(alone.append({&a_tokens[t], 1}));
  }
  alone.reset();
  alone.append(b_prompt);
  for (int32_t t : b_tokens) b_want.push_back(alone.append({&t, 1}));
  alone.reset();
  alone.append(c_prompt);
  for (int32_t t : c_tokens) c_want.push_back(alone.append({&t, 1}));

  lm.append(0, b_prompt);
  lm.append(1, a_prompt);
  lm.append(2, c_prompt);
  double worst = 0;
  auto check = [&](std::span<const float> got, const std::vector<float>& want, const std::string& what) {
    const double err = relative_error(got, want);
    EXPECT_LE(err, c.tolerance()) << c.name << ": " << what;
    worst = std::max(worst, err);
  };
  const size_t v = static_cast<size_t>(vocab);
  for (size_t t = 0; t < a_tokens.size(); ++t) {
    if (t == before) {
      lm.shift(1, keep, discard);
      EXPECT_EQ(lm.position(1), 30 + before - discard);
      EXPECT_EQ(lm.position(0), 20 + static_cast<int64_t>(t));
      EXPECT_EQ(lm.position(2), 12);
    }
    const std::vector<BatchedLanguageModel::Next> batch{{0, b_tokens[t]}, {1, a_tokens[t]}};
    const std::vector<float> out = lm.decode(batch);
    check(std::span(out).first(v), b_want[t], "slot 0 (beside the shifted slot), token " + std::to_string(t));
    check(std::span(out).subspan(v, v), a_want[t], "slot 1 (shifted after 10 tokens), token " + std::to_string(t));
  }
  for (size_t t = 0; t < c_tokens.size(); ++t)
    check(lm.decode(std::vector<BatchedLanguageModel::Next>{{2, c_tokens[t]}}), c_want[t],
          "slot 2 (idle during the shift), token " + std::to_string(t));
  std::printf("%s: worst max|dlogit| / max|logit| %.2e\n", c.name.c_str(), worst);
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

// A slot shifted twice (as a long generation is) goes on as the sequence alone shifted twice.
TEST_P(BatchedShift, TwoShiftsEqualTheSequenceAloneShiftedTwice) {
  const ShiftCase& c = GetParam();
  auto [lm, alone, vocab] = load(2);
  const std::vector<int32_t> prompt = ids(44, vocab, 7), tokens = ids(30, vocab, 8);
  alone.append(prompt);
  lm.append(1, prompt);
  double worst = 0;
  int shifts = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (alone.position() + 1 >= kContext) {  // llama-server's test, and its amounts (n_keep 3)
      const int64_t left = alone.position() - 3;
      alone.shift(3, left / 2);
      lm.shift(1, 3, left / 2);
      ++shifts;
    }
    ASSERT_EQ(lm.position(1), alone.position());
    const std::vector<float> want = alone.append({&tokens[t], 1});
    const double err = relative_error(lm.decode(std::vector<BatchedLanguageModel::Next>{{1, tokens[t]}}), want);
    EXPECT_LE(err, c.tolerance()) << c.name << ": token " << t << " at position " << alone.position() - 1;
    worst = std::max(worst, err);
  }
  EXPECT_EQ(shifts, 2);  // at 47 tokens, twice: 44 after n_keep, 22 of them discarded
  EXPECT_EQ(lm.position(1), 30);  // 44 + 3 tokens, -22, + 22, -22, + 5
  std::printf("%s, two shifts: worst max|dlogit| / max|logit| %.2e\n", c.name.c_str(), worst);
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

INSTANTIATE_TEST_SUITE_P(
    Models, BatchedShift,
    ::testing::Values(
        ShiftCase{"llama_f32", fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_kquant.gguf", {}, {}},
        ShiftCase{"llama_q8_0_k", fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_kquant.gguf", DType::q8_0,
                  DType::f16},
        ShiftCase{"gemma3_f32", fs::path(VKF_FAMILIES_GOLDEN_DIR) / "gemma3.f32.gguf", {}, {}}),
    [](const ::testing::TestParamInfo<ShiftCase>& info) { return info.param.name; });

class BatchedShiftArgs : public DeviceTest {};

TEST_F(BatchedShiftArgs, BadShiftsAreRefusedByName) {
  BatchedLanguageModelOptions bo;
  bo.slots = 2;
  bo.context = 16;
  BatchedLanguageModel lm =
      BatchedLanguageModel::load(device(), fs::path(VKF_LLAMA_GOLDEN_DIR) / "tiny" / "tiny_llama_kquant.gguf", bo);
  lm.append(1, std::vector<int32_t>(10, 1));
  EXPECT_TRUE(fails_with([&] { lm.shift(1, -1, 2); }, ErrorCode::invalid_argument,
                         "keep -1 and discard 2 must have keep >= 0, discard >= 1 and keep + discard <= 10 (slot 1's tokens)"));
  EXPECT_TRUE(fails_with([&] { lm.shift(1, 3, 0); }, ErrorCode::invalid_argument, "keep 3 and discard 0"));
  EXPECT_TRUE(fails_with([&] { lm.shift(1, 4, 7); }, ErrorCode::invalid_argument, "keep + discard <= 10"));
  EXPECT_TRUE(fails_with([&] { lm.shift(0, 0, 1); }, ErrorCode::invalid_argument, "keep + discard <= 0 (slot 0's"));
  EXPECT_TRUE(fails_with([&] { lm.shift(2, 0, 1); }, ErrorCode::invalid_argument, "slot 2 is outside [0, 2)"));
  EXPECT_EQ(lm.position(1), 10);  // a refused shift moves nothing
  lm.shift(1, 4, 6);
  EXPECT_EQ(lm.position(1), 4);
  for (const auto& m : device().take_validation_messages()) ADD_FAILURE() << "Vulkan validation: " << m.text;
}

}  // namespace
}  // namespace vkformer::testing
