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

void DraftBudget::on_verified(int64_t proposed, int64_t accepted) {
  if (accepted > 0) {
    misses_ = 0;
    pause_length_ = 8;
    if (accepted == proposed) limit_ = std::min(max_, limit_ * 2);
    return;
  }
  limit_ = std::max<int64_t>(1, limit_ / 2);
  if (++misses_ >= 2) {
    pause_ = pause_length_;
    pause_length_ = std::min<int64_t>(256, pause_length_ * 2);
    misses_ = 0;
  }
}

}  // namespace vkformer::models::llm
