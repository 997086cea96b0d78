// Speculative decoding's verification step and rollback (LanguageModel::verify, ::rollback) on
// every decoder-only family's tiny model (tests/golden_families, tools/make_family_models.py),
// against transformers' float32 logits at every position of the 40-token prompt: a verify pass
// returns each of its rows' logits as the one-token decode path does, and decoding after a
// rollback of rejected tokens goes on as if they had never been appended (positions, the causal
// masks, the sliding windows of 6 rows of mistral, gemma2, gemma3 and phi3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "family_goldens.hpp"
#include "test_device.hpp"
#include "vkformer/error.hpp"
#include "vkformer/io.hpp"
#include "vkformer/llm.hpp"

namespace vkformer::testing {
namespace {

using json = nlohmann::json;

LanguageModel load_f32(const std::string& family) {
  LanguageModelOptions o;
  o.context = 128;
  return LanguageModel::load(test_device(), family_gguf(family), o);
}

// The golden's rows [first, first + n) against `got` [n × vocab]: max |got - want| as a
// fraction of max |want| over those rows (the tolerance llm_families_test's decode test uses).
double relative_error(const std::vector<float>& got, const std::vector<float>& golden, int64_t first,
                      int64_t n, int64_t vocab) {
  EXPECT_EQ(static_cast<int64_t>(got.size()), n * vocab);
  double e = 0, m = 0;
  for (int64_t i = 0; i < std::min<int64_t>(static_cast<int64_t>(got.size()), n * vocab); ++i) {
    const double want = golden[static_cast<size_t>(first * vocab + i)];
    e = std::max(e, std::abs(got[static_cast<size_t>(i)] - want));
    m = std::max(m, std::abs(want));
  }
  return e / m;
}

class Verify : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const json& p = families_manifest()[GetParam()]["prompts"]["long"];
    ids = p["ids"].get<std::vector<int32_t>>();
    golden = read_npy(family_file(p["logits"])).to_f32();
  }
  std::vector<int32_t> ids;   // 40 tokens
  std::vector<float> golden;  // transformers' logits after each [40 × vocab]
};

// Verification passes of 2, 3, 5 and 9 rows (graphs of exactly those rows: verify_graph_rows)
// after a 5-token prompt, then single tokens: every row as transformers' logits at that
// position, and as the same tokens decoded one by one.
TEST_P(Verify, EveryRowMatchesTransformersAndTheDecodePath) {
  LanguageModel lm = load_f32(GetParam());
  const int64_t vocab = lm.config().vocab_size;
  lm.append(std::span<const int32_t>(ids).first(5));
  int64_t at = 5;
  for (int64_t n : {2, 3, 5, 9, 1}) {
    const std::vector<float> got = lm.verify(std::span<const int32_t>(ids).subspan(static_cast<size_t>(at), static_cast<size_t>(n)));
    EXPECT_EQ(lm.position(), at + n);
    const double e = relative_error(got, golden, at, n, vocab);
    EXPECT_LE(e, 1e-4) << GetParam() << ": verify of " << n << " tokens at " << at;
    std::printf("%s verify %lld at %lld: %.2e\n", GetParam().c_str(), static_cast<long long>(n),
                static_cast<long long>(at), e);
    at += n;
  }
  // The same rows decoded one token at a time by a second model.
  LanguageModel one = load_f32(GetParam());
  one.append(std::span<const int32_t>(ids).first(5));
  lm.rollback(lm.position() - 5);
  const std::vector<float> verified = lm.verify(std::span<const int32_t>(ids).subspan(5, 9));
  std::vector<float> decoded;
  for (size_t i = 5; i < 14; ++i) {
    const std::vector<float> row = one.append(std::span<const int32_t>(ids).subspan(i, 1));
    decoded.insert(decoded.end(), row.begin(), row.end());
  }
  const double e = relative_error(verified, decoded, 0, 9, vocab);
  EXPECT_LE(e, 1e-4) << GetParam() << ": verify against decode";
}

// Proposals partly rejected: verify the right next tokens followed by wrong ones, roll the wrong
// ones back, and decode on through the rest of the prompt (past the sliding window) — every
// logit as transformers' for the prompt without the rejected tokens.
TEST_P(Verify, DecodingAfterARollbackIgnoresTheRejectedTokens) {
  LanguageModel lm = load_f32(GetParam());
  const int64_t vocab = lm.config().vocab_size;
  lm.append(std::span<const int32_t>(ids).first(4));
  std::vector<float> got;
  int64_t at = 4;
  // Each round: 1 + accepted right tokens, then `wrong` wrong ones (ids the prompt does not have there).
  for (auto [right, wrong] : {std::pair<int64_t, int64_t>{3, 4}, {1, 1}, {6, 7}, {2, 1}}) {
    std::vector<int32_t> proposal(ids.begin() + at, ids.begin() + at + right);
    for (int64_t j = 0; j < wrong; ++j) proposal.push_back(static_cast<int32_t>((ids[static_cast<size_t>(at + right + j)] + 7 + j) % vocab));
    const std::vector<float> rows = lm.verify(proposal);
    lm.rollback(wrong);
    ASSERT_EQ(lm.position(), at + right);
    got.insert(got.end(), rows.begin(), rows.begin() + right * vocab);
    at += right;
  }
  for (; at < static_cast<int64_t>(ids.size()); ++at) {
    const std::vector<float> row = lm.append(std::span<const int32_t>(ids).subspan(static_cast<size_t>(at), 1));
    got.insert(got.end(), row.begin(), row.end());
  }
  const int64_t n = static_cast<int64_t>(ids.size()) - 4;
  const double e = relative_error(got, golden, 4, n, vocab);
  EXPECT_LE(e, 1e-4) << GetParam();
  std::printf("%s after rollbacks: %.2e\n", GetParam().c_str(), e);
}

TEST(VerifyArguments, TooManyTokensAndBadRollbacksAreInvalidArguments) {
  LanguageModel lm = load_f32("llama2");
  std::vector<int32_t> many(static_cast<size_t>(LanguageModel::kMaxVerifyTokens + 1), 5);
  try {
    lm.verify(many);
    FAIL() << "verify of " << many.size() << " tokens";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("65 tokens, at most 64"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lm.position(), 0);
  lm.append(std::vector<int32_t>{1, 2, 3});
  try {
    lm.rollback(4);
    FAIL() << "rollback of 4 of 3 tokens";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("count is 4, expected 0..3"), std::string::npos) << e.what();
  }
  EXPECT_EQ(lm.position(), 3);
}

INSTANTIATE_TEST_SUITE_P(Golden, Verify, ::testing::ValuesIn(family_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace vkformer::testing
