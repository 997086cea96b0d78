// The sampler chain (vkformer/sampling.hpp) on small logit vectors, against probabilities worked
// out here in double: each filter alone, their composition, seeds, a chi-square check of the
// draws, NaN/inf logits and every invalid option.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "test_util.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::testing {
namespace {

constexpr double kTol = 1e-12;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

// softmax(values / t), in double.
std::vector<double> softmax(const std::vector<double>& values, double t = 1.0) {
  double top = -1e300;
  for (double v : values) top = std::max(top, v / t);
  std::vector<double> p;
  double sum = 0;
  for (double v : values) sum += p.emplace_back(std::exp(v / t - top));
  for (double& v : p) v /= sum;
  return p;
}

// The distribution must be exactly these tokens in this order with these probabilities.
void expect_distribution(const std::vector<TokenProbability>& got, const std::vector<int32_t>& tokens,
                         const std::vector<double>& probs) {
  ASSERT_EQ(got.size(), tokens.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].token, tokens[i]) << "candidate " << i;
    EXPECT_NEAR(got[i].probability, probs[i], kTol) << "candidate " << i;
  }
}

const std::vector<float> kLogits = {1.0f, 2.0f, 3.0f, 4.0f, 0.5f};

TEST(Sampling, GreedyIsTheDefaultAndTakesTheLargestLogit) {
  Sampler s;
  EXPECT_EQ(s.sample(kLogits), 3);
  expect_distribution(s.distribution(kLogits), {3}, {1.0});
  // An exact tie goes to the lower id.
  EXPECT_EQ(s.sample(std::vector<float>{0.0f, 7.0f, 7.0f, -1.0f}), 1);
  // Greedy ignores the other filters (they never remove the largest logit).
  Sampler g({.temperature = 0.0f, .top_k = 2, .top_p = 0.1f, .min_p = 0.9f});
  EXPECT_EQ(g.sample(kLogits), 3);
}

TEST(Sampling, TemperatureScalesTheLogits) {
  Sampler s({.temperature = 0.5f});
  const auto p = softmax({4, 3, 2, 1, 0.5}, 0.5);
  expect_distribution(s.distribution(kLogits), {3, 2, 1, 0, 4}, p);
  Sampler hot({.temperature = 2.0f});
  expect_distribution(hot.distribution(kLogits), {3, 2, 1, 0, 4}, softmax({4, 3, 2, 1, 0.5}, 2.0));
}

TEST(Sampling, TopKKeepsTheKLargest) {
  Sampler s({.temperature = 1.0f, .top_k = 2});
  expect_distribution(s.distribution(kLogits), {3, 2}, softmax({4, 3}));
  Sampler one({.temperature = 1.0f, .top_k = 1});
  expect_distribution(one.distribution(kLogits), {3}, {1.0});
  Sampler more({.temperature = 1.0f, .top_k = 50});  // more than the vocabulary: all
  EXPECT_EQ(more.distribution(kLogits).size(), 5u);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  // Probabilities of 4, 3, 2, 1, 0.5: 0.632, 0.232, 0.085, 0.031, 0.019 (rounded).
  const auto full = softmax({4, 3, 2, 1, 0.5});
  Sampler a({.temperature = 1.0f, .top_p = 0.5f});  // the first alone reaches 0.5
  expect_distribution(a.distribution(kLogits), {3}, {1.0});
  Sampler b({.temperature = 1.0f, .top_p = 0.8f});  // 0.632 < 0.8 <= 0.864: two
  expect_distribution(b.distribution(kLogits), {3, 2}, softmax({4, 3}));
  Sampler c({.temperature = 1.0f, .top_p = 0.9f});  // 0.864 < 0.9 <= 0.949: three
  expect_distribution(c.distribution(kLogits), {3, 2, 1}, softmax({4, 3, 2}));
  EXPECT_LT(full[0] + full[1], 0.9);
  EXPECT_GE(full[0] + full[1] + full[2], 0.9);
}

TEST(Sampling, MinPKeepsTokensWithinAFactorOfTheBest) {
  // min_p 0.3: logit >= 4 + ln 0.3 = 2.796: tokens 3 and 2.
  Sampler a({.temperature = 1.0f, .min_p = 0.3f});
  expect_distribution(a.distribution(kLogits), {3, 2}, softmax({4, 3}));
  // min_p 0.1: >= 1.697: three tokens; 0.01: >= -0.605: all five.
  Sampler b({.temperature = 1.0f, .min_p = 0.1f});
  expect_distribution(b.distribution(kLogits), {3, 2, 1}, softmax({4, 3, 2}));
  Sampler c({.temperature = 1.0f, .min_p = 0.01f});
  EXPECT_EQ(c.distribution(kLogits).size(), 5u);
  Sampler d({.temperature = 1.0f, .min_p = 1.0f});  // only the best (and its ties)
  expect_distribution(d.distribution(std::vector<float>{5, 1, 5}), {0, 2}, {0.5, 0.5});
}

TEST(Sampling, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<float> logits = {-1.0f, 2.0f, 3.0f, 4.0f};
  Sampler s({.temperature = 1.0f, .repeat_penalty = 2.0f});
  s.accept(std::vector<int32_t>{3, 0, 3, 3});  // each distinct token is penalized once
  // 4 -> 2, -1 -> -2.
  expect_distribution(s.distribution(logits), {2, 1, 3, 0}, softmax({3, 2, 2, -2}));
  Sampler g({.repeat_penalty = 2.0f});
  g.accept(3);
  EXPECT_EQ(g.sample(logits), 2);  // greedy sees the penalty
  // Only the last repeat_last_n accepted tokens count.
  Sampler last({.temperature = 1.0f, .repeat_penalty = 2.0f, .repeat_last_n = 1});
  last.accept(std::vector<int32_t>{3, 0});
  expect_distribution(last.distribution(logits), {3, 2, 1, 0}, softmax({4, 3, 2, -2}));
  Sampler none({.temperature = 1.0f, .repeat_penalty = 2.0f, .repeat_last_n = 0});
  none.accept(3);
  expect_distribution(none.distribution(logits), {3, 2, 1, 0}, softmax({4, 3, 2, -1}));
  // Ids outside the vocabulary in the history are ignored; reset forgets the history.
  s.accept(99);
  s.reset();
  EXPECT_TRUE(s.history().empty());
  expect_distribution(s.distribution(logits), {3, 2, 1, 0}, softmax({4, 3, 2, -1}));
}

TEST(Sampling, FiltersComposeInLlamaCppOrder) {
  // Logits 0..9 = {0.1, 2.5, 2.0, 1.0, 3.0, -1.0, 2.9, 0.0, 1.5, 2.2}; token 4 was seen.
  const std::vector<float> logits = {0.1f, 2.5f, 2.0f, 1.0f, 3.0f, -1.0f, 2.9f, 0.0f, 1.5f, 2.2f};
  Sampler s({.temperature = 0.7f, .top_k = 5, .top_p = 0.8f, .min_p = 0.5f, .repeat_penalty = 1.5f});
  s.accept(4);
  // 1. penalty: token 4: 3.0 -> 2.0. Ranking: 6 (2.9), 1 (2.5), 9 (2.2), 2 (2.0), 4 (2.0), ...
  // 2. top-k 5: {6, 1, 9, 2, 4} (2 before 4: equal logits, lower id first).
  // 3. top-p 0.8 at temperature 1 over those five.
  const double l6 = logits[6], l1 = logits[1], l9 = logits[9];  // the float values
  const std::vector<double> five = {l6, l1, l9, 2.0, 2.0};
  const auto p5 = softmax(five);
  size_t keep = 0;
  for (double cum = 0; keep < 5 && cum < 0.8; ++keep) cum += p5[keep];
  ASSERT_EQ(keep, 4u);  // 0.336, 0.560, 0.727, 0.863: the fourth crosses 0.8
  // 4. min-p 0.5: logit >= 2.9 + ln 0.5 = 2.207: tokens 6 and 1 (2.2 is just below).
  // 5. temperature 0.7 over {2.9, 2.5}.
  expect_distribution(s.distribution(logits), {6, 1}, softmax({l6, l1}, 0.7f));
}

TEST(Sampling, NaNAndInfiniteLogits) {
  Sampler g;
  EXPECT_EQ(g.sample(std::vector<float>{kNaN, 1.0f, 0.0f}), 1);  // NaN counts as -inf
  EXPECT_EQ(g.sample(std::vector<float>{kNaN, -kInf, -5.0f}), 2);
  Sampler t({.temperature = 1.0f});
  expect_distribution(t.distribution(std::vector<float>{kNaN, 1.0f, 0.0f, -kInf}), {1, 2},
                      softmax({1, 0}));
  // +inf logits share the probability; the finite ones get none.
  expect_distribution(t.distribution(std::vector<float>{kInf, 1.0f, kInf}), {0, 2}, {0.5, 0.5});
  Sampler p({.temperature = 1.0f, .top_p = 0.9f, .min_p = 0.2f, .repeat_penalty = 1.3f});
  p.accept(0);
  expect_distribution(p.distribution(std::vector<float>{kInf, 1.0f, 3e38f}), {0}, {1.0});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(t.sample(std::vector<float>{-kInf, kNaN, kInf}), 2);
  // Huge finite logits do not overflow the softmax.
  expect_distribution(t.distribution(std::vector<float>{3e38f, 3e38f}), {0, 1}, {0.5, 0.5});
  EXPECT_TRUE(fails_with([&] { t.sample(std::vector<float>{kNaN, kNaN, -kInf}); },
                         ErrorCode::invalid_argument, "all 3 logits are NaN or -inf"));
  EXPECT_TRUE(fails_with([&] { g.sample(std::vector<float>{}); }, ErrorCode::invalid_argument,
                         "logits are empty"));
}

TEST(Sampling, SeedsAreReproducible) {
  const auto logits = random_values(1000, 7, -3.0f, 3.0f);
  const SamplingOptions o{.temperature = 1.0f, .top_k = 100, .top_p = 0.95f, .seed = 1234};
  auto draw = [&](const SamplingOptions& opts) {
    Sampler s(opts);
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) out.push_back(s.sample(logits));
    return out;
  };
  const auto a = draw(o);
  EXPECT_EQ(a, draw(o));
  auto other = o;
  other.seed = 1235;
  EXPECT_NE(a, draw(other));
  // reset() starts the same sequence again.
  Sampler s(o);
  for (int i = 0; i < 10; ++i) s.sample(logits);
  s.reset();
  for (int i = 0; i < 200; ++i) ASSERT_EQ(s.sample(logits), a[i]) << "draw " << i;
  // The engine is the standard's mt19937_64, whose output the standard fixes: its 10000th value
  // from the default seed is 9981545732273789042 everywhere, so the draws are too.
  std::mt19937_64 engine;
  engine.discard(9999);
  EXPECT_EQ(engine(), 9981545732273789042ull);
  // Seed 42 over four equally likely tokens: u = (x >> 11) 2^-53 and token floor(4u), computed
  // here from the engine's raw outputs.
  std::mt19937_64 raw(42);
  Sampler four({.temperature = 1.0f, .seed = 42});
  for (int i = 0; i < 64; ++i) {
    const double u = static_cast<double>(raw() >> 11) * 0x1.0p-53;
    ASSERT_EQ(four.sample(std::vector<float>{0, 0, 0, 0}), static_cast<int32_t>(u * 4)) << i;
  }
}

TEST(Sampling, DrawsFollowTheDistribution) {
  // Chi-square goodness of fit of 40,000 draws with a fixed seed against the probabilities of
  // logits {0, 1, 2, ln 3, -1} at temperature 1 with min_p 0.1 (which removes the -1: its
  // probability is 0.05 of the best's).
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, static_cast<float>(std::log(3.0)), -1.0f};
  Sampler s({.temperature = 1.0f, .min_p = 0.1f, .seed = 2024});
  const auto p = softmax({0.0, 1.0, 2.0, static_cast<double>(logits[3])});
  std::map<int32_t, int> counts;
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
  EXPECT_EQ(counts.count(4), 0u);
  double chi2 = 0;
  for (int t = 0; t < 4; ++t) {
    const double expected = n * p[t];
    chi2 += (counts[t] - expected) * (counts[t] - expected) / expected;
  }
  // 3 degrees of freedom: P(chi2 > 16.27) = 0.001.
  EXPECT_LT(chi2, 16.27) << "counts " << counts[0] << " " << counts[1] << " " << counts[2] << " " << counts[3];
  RecordProperty("chi2", sci(chi2));
}

TEST(Sampling, InvalidOptionsNameTheOptionAndItsRange) {
  auto bad = [](SamplingOptions o, const char* needle) {
    return fails_with([&] { Sampler s(o); }, ErrorCode::invalid_argument, needle);
  };
  EXPECT_TRUE(bad({.temperature = -0.1f}, "temperature must be a finite number >= 0 (0: greedy), got -0.1"));
  EXPECT_TRUE(bad({.temperature = kNaN}, "temperature must be a finite number >= 0"));
  EXPECT_TRUE(bad({.temperature = kInf}, "temperature"));
  EXPECT_TRUE(bad({.top_k = -1}, "top_k must be >= 0 (0: off), got -1"));
  EXPECT_TRUE(bad({.top_p = 0.0f}, "top_p must be in (0, 1] (1: off), got 0"));
  EXPECT_TRUE(bad({.top_p = 1.5f}, "top_p must be in (0, 1]"));
  EXPECT_TRUE(bad({.top_p = kNaN}, "top_p must be in (0, 1] (1: off), got nan"));
  EXPECT_TRUE(bad({.min_p = -0.5f}, "min_p must be in [0, 1] (0: off), got -0.5"));
  EXPECT_TRUE(bad({.min_p = 1.01f}, "min_p must be in [0, 1]"));
  EXPECT_TRUE(bad({.min_p = kNaN}, "min_p"));
  EXPECT_TRUE(bad({.repeat_penalty = 0.0f}, "repeat_penalty must be a finite number > 0 (1: off), got 0"));
  EXPECT_TRUE(bad({.repeat_penalty = -1.0f}, "repeat_penalty"));
  EXPECT_TRUE(bad({.repeat_penalty = kNaN}, "repeat_penalty"));
  EXPECT_TRUE(bad({.repeat_last_n = -2}, "repeat_last_n must be >= 0, got -2"));
  EXPECT_NO_THROW(validate({.temperature = 0.0f, .top_k = 0, .top_p = 1.0f, .min_p = 1.0f}));
}

}  // namespace
}  // namespace vkformer::testing
