// Sampler::distribution and Sampler::sample against the straightforward chain they replaced
// (issue 35): every candidate ranked by one full std::sort, then the filters in turn. The fast
// sampler argmaxes for greedy, selects for top-k, cuts at min-p's floor, and sorts only as much of
// the ranking as top-p and the draw reach; it must give the same tokens in the same order with
// bit-identical probabilities, and the same draws from the same seed, for every option set: on
// random logits with ties, NaN and +-inf, a repetition penalty, vocabularies from 1 to 20,000.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "vkformer/error.hpp"
#include "vkformer/sampling.hpp"

namespace vkformer::testing {
namespace {

// ---- The reference: the sampler as it was before issue 35, a full sort per token. ----
struct Candidate {
  int32_t token;
  double logit;
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.token < b.token;
}

std::vector<double> softmax(const std::vector<Candidate>& c) {
  std::vector<double> p(c.size(), 0.0);
  const double top = c.front().logit;
  if (std::isinf(top) && top > 0) {
    size_t n = 0;
    while (n < c.size() && c[n].logit == top) ++n;
    for (size_t i = 0; i < n; ++i) p[i] = 1.0 / static_cast<double>(n);
    return p;
  }
  double sum = 0;
  for (size_t i = 0; i < c.size(); ++i) sum += p[i] = std::exp(c[i].logit - top);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<TokenProbability> reference_distribution(const SamplingOptions& o, const std::vector<int32_t>& history,
                                                     std::span<const float> logits) {
  const auto n = static_cast<int64_t>(logits.size());
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i];
    c[i] = {static_cast<int32_t>(i), std::isnan(l) ? -std::numeric_limits<double>::infinity() : l};
  }
  if (o.repeat_penalty != 1.0f) {
    const double r = o.repeat_penalty;
    std::unordered_set<int32_t> seen;
    for (int32_t t : history) {
      if (t < 0 || t >= n || !seen.insert(t).second) continue;
      double& l = c[static_cast<size_t>(t)].logit;
      l = l > 0 ? l / r : l * r;
    }
  }
  std::sort(c.begin(), c.end(), ranks_before);
  if (std::isinf(c.front().logit) && c.front().logit < 0)
    throw Error(ErrorCode::invalid_argument,
                "sampling: all " + std::to_string(n) + " logits are NaN or -inf: no token can be chosen");
  while (std::isinf(c.back().logit) && c.back().logit < 0) c.pop_back();
  if (o.temperature == 0.0f) return {{c.front().token, 1.0}};
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < c.size()) c.resize(o.top_k);
  if (o.top_p < 1.0f) {
    const auto p = softmax(c);
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += p[i];
      if (cum >= o.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }
  if (o.min_p > 0.0f && !std::isinf(c.front().logit)) {
    const double floor = c.front().logit + std::log(static_cast<double>(o.min_p));
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= floor) ++keep;
    c.resize(keep);
  }
  for (auto& x : c)
    if (!std::isinf(x.logit)) x.logit /= o.temperature;
  const auto p = softmax(c);
  std::vector<TokenProbability> out;
  for (size_t i = 0; i < c.size(); ++i)
    if (p[i] > 0) out.push_back({c[i].token, p[i]});
  return out;
}

int32_t reference_sample(const SamplingOptions& o, const std::vector<int32_t>& history, std::span<const float> logits,
                         std::mt19937_64& rng) {
  const auto dist = reference_distribution(o, history, logits);
  if (dist.size() == 1) return dist.front().token;
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  double total = 0;
  for (const auto& d : dist) total += d.probability;
  const double target = u * total;
  double cum = 0;
  for (const auto& d : dist) {
    cum += d.probability;
    if (target < cum) return d.token;
  }
  return dist.back().token;
}

// ---- Logits that make the orderings hard. ----
enum class Kind { ties, peaked, specials, flat, mostly_unusable };

std::vector<float> make_logits(size_t n, Kind kind, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> l(n);
  for (float& v : l) {
    switch (kind) {
      case Kind::ties: v = static_cast<float>(static_cast<int>(rng() % 7) - 3); break;  // many equal logits
      case Kind::peaked: v = normal(rng); break;
      case Kind::specials: {
        const float r = unit(rng);
        v = r < 0.05f ? nan : r < 0.10f ? -inf : r < 0.101f ? inf : normal(rng);
        break;
      }
      case Kind::flat: v = 0.05f * normal(rng); break;  // top-p and the draw reach deep
      case Kind::mostly_unusable: v = unit(rng) < 0.9f ? (rng() % 2 ? nan : -inf) : normal(rng); break;
    }
  }
  if (kind == Kind::peaked)
    for (int i = 0; i < 5 && n > 0; ++i) l[rng() % n] = 8.0f + static_cast<float>(i);
  return l;
}

// The candidates must be the same tokens in the same order, with bit-identical probabilities.
void expect_same(const std::vector<TokenProbability>& got, const std::vector<TokenProbability>& want,
                 const std::string& where) {
  ASSERT_EQ(got.size(), want.size()) << where;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].token, want[i].token) << where << ", candidate " << i;
    ASSERT_EQ(got[i].probability, want[i].probability) << where << ", candidate " << i;
  }
}

std::string describe(const SamplingOptions& o, size_t n, Kind kind, uint64_t seed) {
  return "vocab " + std::to_string(n) + ", logits kind " + std::to_string(static_cast<int>(kind)) + ", seed " +
         std::to_string(seed) + ", temperature " + std::to_string(o.temperature) + ", top_k " + std::to_string(o.top_k) +
         ", top_p " + std::to_string(o.top_p) + ", min_p " + std::to_string(o.min_p) + ", repeat_penalty " +
         std::to_string(o.repeat_penalty);
}

// One option set on `rounds` logit vectors: distribution() and sample() (with accept(), so the
// penalty's history moves) against the reference, the reference's own generator in step.
void check(const SamplingOptions& o, size_t n, Kind kind, int rounds, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Sampler s(o);
  std::mt19937_64 ref_rng(o.seed);
  for (int i = 0; i < 12; ++i) {  // recent tokens, some outside the vocabulary
    const auto t = static_cast<int32_t>(rng() % (n + 3)) - 1;
    s.accept(t);
  }
  for (int round = 0; round < rounds; ++round) {
    const auto logits = make_logits(n, kind, rng);
    const std::string where = describe(o, n, kind, seed) + ", round " + std::to_string(round);
    std::optional<std::vector<TokenProbability>> want;
    std::string want_error;
    try {
      want = reference_distribution(o, s.history(), logits);
    } catch (const Error& e) {
      want_error = e.what();
    }
    if (!want) {
      try {
        (void)s.distribution(logits);
        ADD_FAILURE() << where << ": distribution() did not throw " << want_error;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()), want_error) << where;
      }
      EXPECT_THROW((void)s.sample(logits), Error) << where;
      continue;
    }
    expect_same(s.distribution(logits), *want, where);
    const int32_t want_token = reference_sample(o, s.history(), logits, ref_rng);
    const int32_t token = s.sample(logits);
    ASSERT_EQ(token, want_token) << where;
    s.accept(token);
  }
}

// Every option set (4 temperatures x 4 top-k x 4 top-p x 3 min-p x 3 penalties) on three
// vocabulary sizes and logit kinds drawn for it.
TEST(SamplingReference, EveryOptionSetGivesTheFullSortsDistributionAndDraws) {
  const float temperatures[] = {0.0f, 0.25f, 1.0f, 2.5f};
  const int32_t top_ks[] = {0, 1, 5, 700};
  const float top_ps[] = {1.0f, 0.3f, 0.9f, 0.999f};
  const float min_ps[] = {0.0f, 0.02f, 0.5f};
  const float penalties[] = {1.0f, 1.5f, 0.8f};
  const size_t sizes[] = {1, 2, 7, 64, 1000, 1025, 3000};
  std::mt19937_64 pick(35);
  uint64_t seed = 0;
  for (float t : temperatures)
    for (int32_t k : top_ks)
      for (float p : top_ps)
        for (float m : min_ps)
          for (float r : penalties)
            for (int i = 0; i < 3; ++i) {
              const SamplingOptions o{.temperature = t, .top_k = k, .top_p = p, .min_p = m, .repeat_penalty = r,
                                      .repeat_last_n = 8, .seed = seed};
              check(o, sizes[pick() % std::size(sizes)], static_cast<Kind>(pick() % 5), 2, ++seed);
              if (HasFatalFailure()) return;
            }
}

// The paths that sort only part of a large ranking, many draws each: temperature alone (the
// server's default), top-p alone, min-p alone, at sizes where the draw walks past the first
// sorted share (flat logits) and where it stops early (peaked).
TEST(SamplingReference, LargeVocabulariesSortOnlyWhatTheDrawAndTopPReach) {
  const SamplingOptions sets[] = {
      {.temperature = 1.0f},
      {.temperature = 0.7f, .repeat_penalty = 1.3f},
      {.temperature = 1.0f, .top_p = 0.95f},
      {.temperature = 1.3f, .top_p = 0.5f, .repeat_penalty = 0.9f},
      {.temperature = 1.0f, .min_p = 0.05f},
      {.temperature = 1.0f, .top_p = 0.9f, .min_p = 0.1f},
      {.temperature = 0.001f},  // peaked: every probability but the top's underflows, nothing is drawn
  };
  uint64_t seed = 1000;
  for (const auto& set : sets)
    for (Kind kind : {Kind::peaked, Kind::flat, Kind::ties, Kind::specials}) {
      SamplingOptions o = set;
      o.seed = ++seed;
      check(o, 20000, kind, 5, seed);
      if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace vkformer::testing
