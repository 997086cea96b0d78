// The speculative sampling rule (speculative.hpp: judge_proposal, choose_after_proposal) and the
// adaptive draft length.
#include <algorithm>

#include "llm/speculative.hpp"
#include "token_draw.hpp"

namespace vkformer::models::llm {

namespace {

double probability_of(std::span<const TokenProbability> d, int32_t token) {
  for (const TokenProbability& t : d)
    if (t.token == token) return t.probability;
  return 0.0;
}


}  // namespace

Verdict judge_proposal(std::span<const TokenProbability> p, std::span<const TokenProbability> q, int32_t draft,
                       double u_accept, double u_resample) {
  const double pd = probability_of(p, draft), qd = probability_of(q, draft);
  if (qd > 0 && u_accept < std::min(1.0, pd / qd)) return {draft, true};
  std::vector<TokenProbability> residual;
  residual.reserve(p.size());
  for (const TokenProbability& t : p) {
    const double r = t.probability - probability_of(q, t.token);
    if (r > 0) residual.push_back({t.token, r});
  }
  if (residual.empty()) residual.assign(p.begin(), p.end());  // p == q: nothing left over
  return {draw_token(residual, u_resample), false};
}

Verdict choose_after_proposal(Sampler& sampler, std::span<const float> row, int32_t draft, std::mt19937_64& rng) {
  if (draft < 0 || sampler.options().temperature == 0.0f) {
    const int32_t t = sampler.sample(row);
    return {t, t == draft};
  }
  const auto uniform = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const std::vector<TokenProbability> p = sampler.distribution(row);
  const TokenProbability q[1] = {{draft, 1.0}};
  const double u_accept = uniform(), u_resample = uniform();
  return judge_proposal(p, q, draft, u_accept, u_resample);
}

namespace {

constexpr double kDecay = 0.9;        // per pass: the last ~10 passes' acceptance counts
constexpr double kTimeDecay = 0.97;   // per pass: the last ~30 passes' times fit the cost line
constexpr int64_t kProbeEvery = 16;   // plain passes between probes where proposing does not pay
// A pass with proposals must promise this much more than a plain one: timings on a loaded
// machine are noisy, and a wrong bet costs more than a missed one gains.
constexpr double kMargin = 1.1;

}  // namespace

// A pass's time on the fitted line. Until passes of two sizes have run, a row is guessed to cost
// 5% of a one-token pass (optimistic, so that proposals are tried and the line gets measured).
double DraftBudget::seconds_for(int64_t rows) const {
  const double x = static_cast<double>(rows);
  if (n_ <= 0) return 1.0 + 0.05 * (x - 1.0);
  const double mean_x = sx_ / n_, mean_y = sy_ / n_, var = sxx_ / n_ - mean_x * mean_x;
  if (var < 1e-9) return mean_y * (1.0 + 0.05 * (x - mean_x));
  const double slope = std::max(0.0, (sxy_ / n_ - mean_x * mean_y) / var);
  const double at = mean_y + slope * (x - mean_x);
  return std::max(at, 1e-9);
}

void DraftBudget::record(int64_t rows, double seconds) {
  const double x = static_cast<double>(rows);
  n_ = n_ * kTimeDecay + 1.0;
  sx_ = sx_ * kTimeDecay + x;
  sy_ = sy_ * kTimeDecay + seconds;
  sxx_ = sxx_ * kTimeDecay + x * x;
  sxy_ = sxy_ * kTimeDecay + x * seconds;
}

int64_t DraftBudget::choose(int64_t available) {
  const int64_t most = std::min(available, max_);
  if (most <= 0) return 0;
  const double a = acceptance();
  int64_t best = 0;
  double best_rate = kMargin / seconds_for(1);
  double tokens = 1.0, power = 1.0;
  for (int64_t k = 1; k <= most; ++k) {
    power *= a;
    tokens += power;
    const double rate = tokens / seconds_for(LanguageModel::verify_graph_rows(k + 1));
    if (rate > best_rate) best = k, best_rate = rate;
  }
  if (best == 0 && ++plain_streak_ >= kProbeEvery) best = 1;
  if (best > 0) plain_streak_ = 0;
  return best;
}

void DraftBudget::on_plain_step(double seconds) { record(1, seconds); }

void DraftBudget::on_verified(int64_t proposed, int64_t accepted, double seconds) {
  record(LanguageModel::verify_graph_rows(proposed + 1), seconds);
  kept_ = kept_ * kDecay + static_cast<double>(accepted);
  rejected_ = rejected_ * kDecay + (accepted < proposed ? 1.0 : 0.0);
}

}  // namespace vkformer::models::llm
