// The sampler chain of vkformer/sampling.hpp: penalty, top-k, top-p, min-p, temperature, draw.
#include "vkformer/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <unordered_set>

#include "vkformer/error.hpp"

namespace vkformer {

namespace {

std::string show(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

[[noreturn]] void out_of_range(const char* name, const char* range, double got) {
  throw Error(ErrorCode::invalid_argument, std::string("sampling: ") + name + " must be " + range +
                                               ", got " + show(got));
}

struct Candidate {
  int32_t token;
  double logit;  // NaN already replaced by -inf
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.token < b.token;
}

// Probabilities of the candidates (sorted, largest first) by a softmax in double. +inf logits
// share everything; -inf ones get 0.
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

}  // namespace

void validate(const SamplingOptions& o) {
  if (!(o.temperature >= 0.0f) || std::isinf(o.temperature))
    out_of_range("temperature", "a finite number >= 0 (0: greedy)", o.temperature);
  if (o.top_k < 0) out_of_range("top_k", ">= 0 (0: off)", o.top_k);
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) out_of_range("top_p", "in (0, 1] (1: off)", o.top_p);
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) out_of_range("min_p", "in [0, 1] (0: off)", o.min_p);
  if (!(o.repeat_penalty > 0.0f) || std::isinf(o.repeat_penalty))
    out_of_range("repeat_penalty", "a finite number > 0 (1: off)", o.repeat_penalty);
  if (o.repeat_last_n < 0) out_of_range("repeat_last_n", ">= 0", o.repeat_last_n);
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {
  validate(options_);
}

void Sampler::reset() {
  history_.clear();
  rng_.seed(options_.seed);
}

void Sampler::accept(int32_t token) {
  history_.push_back(token);
  const size_t keep = static_cast<size_t>(options_.repeat_last_n);
  if (history_.size() > keep) history_.erase(history_.begin(), history_.end() - keep);
}

void Sampler::accept(std::span<const int32_t> tokens) {
  for (int32_t t : tokens) accept(t);
}

std::vector<TokenProbability> Sampler::distribution(std::span<const float> logits) const {
  if (logits.empty()) throw Error(ErrorCode::invalid_argument, "sampling: the logits are empty");
  const auto n = static_cast<int64_t>(logits.size());
  if (n > std::numeric_limits<int32_t>::max())
    throw Error(ErrorCode::invalid_argument, "sampling: " + std::to_string(n) + " logits are more than token ids can number");

  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    const double l = logits[i];
    c[i] = {static_cast<int32_t>(i), std::isnan(l) ? -std::numeric_limits<double>::infinity() : l};
  }

  // 1. Repetition penalty, once per distinct recent token; ids outside the vocabulary are ignored.
  if (options_.repeat_penalty != 1.0f) {
    const double r = options_.repeat_penalty;
    std::unordered_set<int32_t> seen;
    for (int32_t t : history_) {
      if (t < 0 || t >= n || !seen.insert(t).second) continue;
      double& l = c[static_cast<size_t>(t)].logit;
      l = l > 0 ? l / r : l * r;
    }
  }

  std::sort(c.begin(), c.end(), ranks_before);
  if (std::isinf(c.front().logit) && c.front().logit < 0)
    throw Error(ErrorCode::invalid_argument,
                "sampling: all " + std::to_string(n) + " logits are NaN or -inf: no token can be chosen");

  // -inf candidates can never be drawn: drop them first so every filter sees real ones.
  while (std::isinf(c.back().logit) && c.back().logit < 0) c.pop_back();

  if (options_.temperature == 0.0f) return {{c.front().token, 1.0}};

  // 2. top-k
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < c.size()) c.resize(options_.top_k);

  // 3. top-p: the smallest prefix whose probability reaches top_p.
  if (options_.top_p < 1.0f) {
    const auto p = softmax(c);
    double cum = 0;
    size_t keep = c.size();
    for (size_t i = 0; i < c.size(); ++i) {
      cum += p[i];
      if (cum >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
    c.resize(keep);
  }

  // 4. min-p, on the logits as llama.cpp does: logit >= max + log(min_p).
  if (options_.min_p > 0.0f && !std::isinf(c.front().logit)) {
    const double floor = c.front().logit + std::log(static_cast<double>(options_.min_p));
    size_t keep = 1;
    while (keep < c.size() && c[keep].logit >= floor) ++keep;
    c.resize(keep);
  }

  // 5. temperature (an infinite logit stays infinite and keeps all of the probability).
  for (auto& x : c)
    if (!std::isinf(x.logit)) x.logit /= options_.temperature;
  const auto p = softmax(c);
  std::vector<TokenProbability> out;
  out.reserve(c.size());
  for (size_t i = 0; i < c.size(); ++i)
    if (p[i] > 0) out.push_back({c[i].token, p[i]});
  return out;
}

int32_t Sampler::sample(std::span<const float> logits) {
  const auto dist = distribution(logits);
  if (dist.size() == 1) return dist.front().token;  // greedy draws nothing: the sequence is kept
  // 53 random bits: a double uniform in [0, 1) the same on every platform.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  double total = 0;
  for (const auto& d : dist) total += d.probability;
  const double target = u * total;
  double cum = 0;
  for (const auto& d : dist) {
    cum += d.probability;
    if (target < cum) return d.token;
  }
  return dist.back().token;  // rounding left the target at the very end
}

}  // namespace vkformer
