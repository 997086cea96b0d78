// The parts of speculative decoding that need no device (src/models/llm/speculative.hpp):
//   - the speculative sampling rule (judge_proposal) keeps the target distribution: 20,000
//     draws at a vocabulary of 8 with a deliberately bad draft distribution, chi-square against
//     the target at p > 0.01 (the 0.99 quantile of chi-square with 7 degrees of freedom);
//   - prompt lookup's proposals (the longest, latest earlier n-gram);
//   - the adaptive draft length.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <random>
#include <vector>

#include "llm/speculative.hpp"

namespace vkformer::testing {
namespace {

using models::llm::DraftBudget;
using models::llm::judge_proposal;
using models::llm::propose_ngram;

constexpr int kVocab = 8;
// The 0.99 quantile of chi-square with kVocab - 1 = 7 degrees of freedom: a statistic below it
// has p > 0.01.
constexpr double kChiSquare99 = 18.475;

std::vector<TokenProbability> as_distribution(const std::array<double, kVocab>& probs) {
  std::vector<TokenProbability> d;
  for (int i = 0; i < kVocab; ++i)
    if (probs[static_cast<size_t>(i)] > 0) d.push_back({i, probs[static_cast<size_t>(i)]});
  return d;
}

// Draws a draft from q, judges it against p and counts the tokens kept or drawn; returns the
// chi-square statistic of the counts against p (and the share of drafts kept).
double chi_square_of_speculative_draws(const std::array<double, kVocab>& p, const std::array<double, kVocab>& q,
                                       int draws, double* kept_share) {
  std::mt19937_64 rng(1234);
  auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const auto pd = as_distribution(p), qd = as_distribution(q);
  std::array<int, kVocab> counts{};
  int kept = 0;
  for (int n = 0; n < draws; ++n) {
    double u = uniform(), cum = 0;
    int32_t draft = qd.back().token;
    for (const auto& t : qd)
      if (u < (cum += t.probability)) {
        draft = t.token;
        break;
      }
    const double ua = uniform(), ur = uniform();
    const auto v = judge_proposal(pd, qd, draft, ua, ur);
    EXPECT_EQ(v.accepted, v.token == draft && v.accepted);
    kept += v.accepted ? 1 : 0;
    ++counts[static_cast<size_t>(v.token)];
  }
  double chi = 0;
  for (int i = 0; i < kVocab; ++i) {
    const double want = p[static_cast<size_t>(i)] * draws;
    if (want == 0) {
      EXPECT_EQ(counts[static_cast<size_t>(i)], 0) << "token " << i << " has probability 0";
      continue;
    }
    chi += (counts[static_cast<size_t>(i)] - want) * (counts[static_cast<size_t>(i)] - want) / want;
  }
  if (kept_share) *kept_share = static_cast<double>(kept) / draws;
  return chi;
}

// A draft that puts most of its mass where the target puts little (and some where the target
// puts none): the kept and resampled tokens together are still distributed as the target.
TEST(SpeculativeSampling, ABadDraftKeepsTheTargetDistribution) {
  const std::array<double, kVocab> p = {0.30, 0.20, 0.15, 0.10, 0.10, 0.08, 0.07, 0.0};
  const std::array<double, kVocab> q = {0.02, 0.03, 0.05, 0.05, 0.05, 0.10, 0.30, 0.40};
  double kept = 0;
  const double chi = chi_square_of_speculative_draws(p, q, 20000, &kept);
  std::printf("bad draft: chi-square %.2f (7 dof, p > 0.01 below %.3f), %.1f%% of drafts kept\n", chi,
              kChiSquare99, 100 * kept);
  EXPECT_LT(chi, kChiSquare99);
  // sum over tokens of min(p, q): the share the rule keeps.
  EXPECT_NEAR(kept, 0.02 + 0.03 + 0.05 + 0.05 + 0.05 + 0.08 + 0.07, 0.01);
}

// A deterministic proposer (q is 1 on its token, as prompt lookup's and the greedy draft
// model's are) and a draft equal to the target (nothing is ever rejected).
TEST(SpeculativeSampling, DeterministicAndPerfectDraftsKeepTheTargetDistribution) {
  const std::array<double, kVocab> p = {0.05, 0.25, 0.20, 0.10, 0.15, 0.05, 0.12, 0.08};
  const std::array<double, kVocab> one_hot = {0, 0, 0, 0, 0, 0, 1, 0};
  double kept = 0;
  EXPECT_LT(chi_square_of_speculative_draws(p, one_hot, 20000, &kept), kChiSquare99);
  EXPECT_NEAR(kept, 0.12, 0.01);
  EXPECT_LT(chi_square_of_speculative_draws(p, p, 20000, &kept), kChiSquare99);
  EXPECT_DOUBLE_EQ(kept, 1.0);
}

// Greedy: p is 1 on the argmax; a one-hot draft is kept exactly when it is that token.
TEST(SpeculativeSampling, GreedyKeepsOnlyTheArgmax) {
  const std::vector<TokenProbability> p = {{5, 1.0}};
  const std::vector<TokenProbability> q5 = {{5, 1.0}}, q3 = {{3, 1.0}};
  for (double u : {0.0, 0.5, 0.999999}) {
    EXPECT_TRUE(judge_proposal(p, q5, 5, u, u).accepted);
    const auto v = judge_proposal(p, q3, 3, u, u);
    EXPECT_FALSE(v.accepted);
    EXPECT_EQ(v.token, 5);
  }
}

TEST(PromptLookup, ProposesWhatFollowedTheLongestLatestEarlierNgram) {
  // "7 8 9" occurred at 0 (followed by 1 2) and "8 9" at 5 (followed by 3): the 3-gram wins.
  const std::vector<int32_t> c = {7, 8, 9, 1, 2, 8, 9, 3, 4, 7, 8, 9};
  EXPECT_EQ(propose_ngram(c, 4), (std::vector<int32_t>{1, 2, 8, 9}));
  EXPECT_EQ(propose_ngram(c, 2), (std::vector<int32_t>{1, 2}));
  // Only "9" recurs, latest at 6 (followed by 3 4 9): a 1-gram, taken only where asked for.
  const std::vector<int32_t> d = {9, 0, 0, 0, 0, 0, 9, 3, 4, 9};
  EXPECT_TRUE(propose_ngram(d, 3).empty());
  EXPECT_EQ(propose_ngram(d, 3, 4, 1), (std::vector<int32_t>{3, 4, 9}));
  // Proposals stop at the end of the context.
  const std::vector<int32_t> e = {1, 2, 1, 2};
  EXPECT_EQ(propose_ngram(e, 8), (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, 8).empty());
  EXPECT_TRUE(propose_ngram(std::vector<int32_t>{5}, 8).empty());
  EXPECT_TRUE(propose_ngram(c, 0).empty());
}

// A verification pass runs a graph of exactly its tokens' rows up to 16 (lavapipe computes every
// row: a 3-token pass padded to 4 rows paid a third more), padded to 32 or 64 past that.
TEST(VerifyGraphRows, PassesOfUpTo16TokensRunExactlyTheirRows) {
  EXPECT_EQ(LanguageModel::verify_graph_rows(1), 1);  // the decode graph
  for (int64_t n = 2; n <= 16; ++n) EXPECT_EQ(LanguageModel::verify_graph_rows(n), n) << n;
  EXPECT_EQ(LanguageModel::verify_graph_rows(17), 32);
  EXPECT_EQ(LanguageModel::verify_graph_rows(32), 32);
  EXPECT_EQ(LanguageModel::verify_graph_rows(33), 64);
  EXPECT_EQ(LanguageModel::verify_graph_rows(LanguageModel::kMaxVerifyTokens), 64);
}

// A device where a pass of r rows takes 1 + row_cost · (r - 1): five one-token passes, then
// passes of 1, 3, 7 and 15 proposals (2, 4, 8, 16 rows), every proposal kept.
void time_passes(DraftBudget& b, double row_cost) {
  for (int i = 0; i < 5; ++i) b.on_plain_step(1.0);
  for (int64_t k : {1, 3, 7, 15}) {
    const int64_t rows = LanguageModel::verify_graph_rows(k + 1);
    b.on_verified(k, k, 1.0 + row_cost * static_cast<double>(rows - 1));
  }
}

// Rows nearly free (a GPU: 2% of a pass each): the fitted line gives 16 rows 1.3, and with
// acceptance (kept + 1) / (kept + rejected + 2) = 0.96 all 15 proposals at hand pay most; with
// only 5 at hand all 5.
TEST(DraftBudget, WhereRowsAreCheapEveryProposalIsVerified) {
  DraftBudget b(15);
  time_passes(b, 0.02);
  EXPECT_GT(b.acceptance(), 0.95);
  EXPECT_EQ(b.choose(15), 15);
  EXPECT_EQ(b.choose(5), 5);
}

// Rows costing half a pass each (a CPU device such as lavapipe; 16 rows: 8.5): 6 proposals in a
// 7-row graph (6.1 tokens per 4.0) beat 15 in 16 (13.0 per 8.5); of 5 at hand, all 5 in a 6-row
// graph (5.6 per 3.5: no padding to 8 rows). Every proposal then rejected for a while (a about 0.1): plain
// passes, with a one-proposal probe every 16th.
TEST(DraftBudget, WhereRowsCostItVerifiesFewAndNoneWhenTheyAreRejected) {
  DraftBudget b(15);
  time_passes(b, 0.5);
  EXPECT_EQ(b.choose(15), 6);
  EXPECT_EQ(b.choose(5), 5);
  for (int i = 0; i < 40; ++i) b.on_verified(1, 0, 1.5);
  EXPECT_LT(b.acceptance(), 0.15);
  int probes = 0;
  for (int i = 0; i < 32; ++i) probes += b.choose(8) > 0 ? 1 : 0;
  EXPECT_EQ(probes, 2);
  EXPECT_EQ(b.choose(0), 0);
}

// Before any pass of several rows, a row is guessed at 5% of a pass (so proposals get tried and
// measured): at the even prior (a = 1/2) 3 proposals (1.875 tokens for 1.15) promise the most.
TEST(DraftBudget, UntilMeasuredRowsAreGuessedCheap) {
  DraftBudget b(16);
  b.on_plain_step(1.0);
  EXPECT_EQ(b.choose(16), 3);
}

}  // namespace
}  // namespace vkformer::testing
