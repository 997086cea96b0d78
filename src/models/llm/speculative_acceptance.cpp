// The speculative sampling rule (speculative.hpp: judge_proposal) and the adaptive draft length.
#include <algorithm>

#include "llm/speculative.hpp"

namespace vkformer::models::llm {

namespace {

double probability_of(std::span<const TokenProbability> d, int32_t token) {
  for (const TokenProbability& t : d)
    if (t.token == token) return t.probability;
  return 0.0;
}

// The token where the running sum of `weights` passes u × their total (the sampler's draw).
int32_t draw(const std::vector<TokenProbability>& weights, double u) {
  double total = 0;
  for (const auto& w : weights) total += w.probability;
  const double target = u * total;
  double cum = 0;
  for (const auto& w : weights) {
    cum += w.probability;
    if (target < cum) return w.token;
  }
  return weights.back().token;
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
  return {draw(residual, u_resample), false};
}

namespace {

constexpr double kDecay = 0.9;        // per pass: the last ~10 passes count
constexpr int64_t kProbeEvery = 16;   // plain passes between probes where proposing does not pay
// A pass with proposals must promise this much more than a plain one: timings on a loaded
// machine are noisy, and a wrong bet costs more than a missed one gains.
constexpr double kMargin = 1.1;

void record(std::vector<double>& seconds, int64_t rows, double s) {
  if (static_cast<int64_t>(seconds.size()) <= rows) seconds.resize(static_cast<size_t>(rows + 1), 0.0);
  double& m = seconds[static_cast<size_t>(rows)];
  m = m == 0 ? s : 0.7 * m + 0.3 * s;
}

}  // namespace

// A pass's time: measured, or where this graph has not run yet, guessed from the one-token pass
// (a row costs 5% of it: optimistic, so that a graph is tried and then measured).
double DraftBudget::seconds_for(int64_t rows) const {
  if (rows < static_cast<int64_t>(seconds_.size()) && seconds_[static_cast<size_t>(rows)] > 0)
    return seconds_[static_cast<size_t>(rows)];
  const double one = seconds_.size() > 1 && seconds_[1] > 0 ? seconds_[1] : 1.0;
  return one * (1.0 + 0.05 * static_cast<double>(rows));
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

void DraftBudget::on_plain_step(double seconds) { record(seconds_, 1, seconds); }

void DraftBudget::on_verified(int64_t proposed, int64_t accepted, double seconds) {
  record(seconds_, LanguageModel::verify_graph_rows(proposed + 1), seconds);
  kept_ = kept_ * kDecay + static_cast<double>(accepted);
  rejected_ = rejected_ * kDecay + (accepted < proposed ? 1.0 : 0.0);
}

}  // namespace vkformer::models::llm
