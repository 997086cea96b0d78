// The sampler chain of vkformer/sampling.hpp: penalty, top-k, top-p, min-p, temperature, draw.
// Every result is the one a full sort of the vocabulary gives (tests/sampling_reference_test.cpp
// keeps that sort as its reference: same tokens, same order, bit-identical probabilities, same
// draws), but a token costs only what its options need (issue 35: the full sort was ~30 ms of
// CPU per token for Gemma 3's 262,144 entries, where a GPU decodes a token in ~2 ms): greedy is
// one pass, top-k a heap of k, min-p alone a cut at its floor, and top-p and the draw sort only
// the share of the ranking they reach, with the exact full sort where rounding leaves a decision
// in doubt.
#include "vkformer/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "token_draw.hpp"
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

namespace {

[[noreturn]] void all_unusable(int64_t n) {
  throw Error(ErrorCode::invalid_argument,
              "sampling: all " + std::to_string(n) + " logits are NaN or -inf: no token can be chosen");
}

void check_size(std::span<const float> logits) {
  if (logits.empty()) throw Error(ErrorCode::invalid_argument, "sampling: the logits are empty");
  const auto n = static_cast<int64_t>(logits.size());
  if (n > std::numeric_limits<int32_t>::max())
    throw Error(ErrorCode::invalid_argument, "sampling: " + std::to_string(n) + " logits are more than token ids can number");
}

// A logit with NaN read as -inf and the repetition penalty applied.
double penalize(double l, double r) { return l > 0 ? l / r : l * r; }

// The distinct recent tokens inside the vocabulary with their penalized logits, by token id.
std::vector<Candidate> penalized(std::span<const float> logits, const std::vector<int32_t>& history, float penalty) {
  std::vector<Candidate> out;
  if (penalty == 1.0f) return out;
  const auto n = static_cast<int64_t>(logits.size());
  std::vector<int32_t> seen;
  for (int32_t t : history)
    if (t >= 0 && t < n) seen.push_back(t);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
  for (int32_t t : seen) {
    const double l = logits[static_cast<size_t>(t)];
    out.push_back({t, penalize(std::isnan(l) ? -std::numeric_limits<double>::infinity() : l, penalty)});
  }
  return out;
}

// Calls f(i, logit) for every token in order, with the penalized logit where `pen` (by token id)
// has one; NaN stays NaN (every caller drops it with -inf: !(l > -inf)).
template <class F>
void for_each_logit(std::span<const float> logits, const std::vector<Candidate>& pen, F&& f) {
  size_t next = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    double l = logits[i];
    if (next < pen.size() && static_cast<size_t>(pen[next].token) == i) l = pen[next++].logit;
    f(i, l);
  }
}

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Bound on how far a running sum of probabilities computed with the softmax's sum in another
// order (and the draw's total taken as 1) can stand from the sorted-order one (softmax, sample):
// two sums of n positive terms each within (n - 1) units of rounding, a division, and the
// running sum's own roundings; 8(n + 8) units covers them with room to spare. A decision
// closer to its threshold than this is left to the full sort.
double order_error_bound(size_t n) { return 8.0 * (static_cast<double>(n) + 8.0) * 0x1.0p-53; }

// The candidates that outlive steps 1-4, as a ranking that is sorted only as far as asked:
// c[0, sorted) are the first `sorted` of the ranking, in order, and every later one ranks after
// them. The draw and top-p rarely need more than a small share of a 262k vocabulary ranked.
struct Ranking {
  std::vector<Candidate> c;
  size_t sorted = 0;

  void sort_all() {  // the rest all rank after the sorted prefix: sorting it alone is enough
    std::sort(c.begin() + static_cast<std::ptrdiff_t>(sorted), c.end(), ranks_before);
    sorted = c.size();
  }
  bool all_sorted() const { return sorted == c.size(); }
  void keep(size_t n) {  // only the first n of the ranking (n <= sorted)
    c.resize(n);
    sorted = std::min(sorted, n);
  }
  double top() {  // the first of the ranking: one scan where nothing is sorted yet
    if (sorted == 0) {
      std::iter_swap(c.begin(), std::min_element(c.begin(), c.end(), ranks_before));
      sorted = 1;
    }
    return c.front().logit;
  }
};

// The softmax's weights exp(logit / t - top) of an unsorted ranking, summed in the candidates'
// order, and summed again per bucket of the distance below the top (1/16 wide; the last takes
// everything from 128 down): enough to find how far down the ranking a given share of the
// probability lies without sorting.
struct Weights {
  static constexpr size_t kBuckets = 2048;
  static constexpr double kPerUnit = 16.0;
  double t, top;  // top: the largest logit / t, finite
  double sum = 0;
  size_t sure = 0;  // weights >= 2^-1000: their probability is > 0 for any sum <= 2^31
  std::vector<double> mass = std::vector<double>(kBuckets, 0.0);
  std::vector<size_t> count = std::vector<size_t>(kBuckets, 0);

  size_t bucket(double logit) const {
    const double d = (top - logit / t) * kPerUnit;  // >= 0: division by t > 0 keeps the order
    return d < static_cast<double>(kBuckets - 1) ? static_cast<size_t>(d) : kBuckets - 1;
  }
  double weight(double logit) const { return std::exp(logit / t - top); }

  Weights(const Ranking& r, double temperature, double top_logit) : t(temperature), top(top_logit / temperature) {
    for (const auto& x : r.c) {
      const double e = weight(x.logit);  // the softmax's own exp(logit / t - top), bit for bit
      sum += e;
      if (e >= 0x1.0p-1000) ++sure;
      const size_t b = bucket(x.logit);
      mass[b] += e;
      ++count[b];
    }
  }

  // Sorts the first of the ranking up to the bucket where the weights reach `share` of the sum:
  // those candidates are moved ahead (a bucket is a range of logits, so they are the first of the
  // ranking) and sorted alone.
  void sort_to_share(Ranking& r, double share) const {
    const double need = share * sum;
    double cum = 0;
    size_t last = 0, m = 0;
    for (; last < kBuckets; ++last) {
      cum += mass[last];
      m += count[last];
      if (cum >= need) break;
    }
    if (last >= kBuckets - 1 || m >= r.c.size()) return r.sort_all();
    std::partition(r.c.begin(), r.c.end(), [&](const Candidate& x) { return bucket(x.logit) <= last; });
    std::sort(r.c.begin(), r.c.begin() + static_cast<std::ptrdiff_t>(m), ranks_before);
    r.sorted = m;
  }
};

// Step 3 where the ranking is not all sorted (no top-k): the softmax's sum taken in the
// candidates' order, the running sum walked over as much of the ranking as the buckets say it
// needs. Returns how many to keep, or 0 where a running sum came closer to top_p than
// order_error_bound (the caller then sorts all and does it exactly).
size_t top_p_keep_unsorted(Ranking& r, double top_p) {
  const double top = r.top();
  if (std::isinf(top)) return 0;  // +inf logits: rare enough for the exact path
  const Weights w(r, 1.0, top);
  const auto& c = r.c;
  const double err = order_error_bound(c.size());
  w.sort_to_share(r, top_p + 2 * err);
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == r.sorted) return 0;  // past what the buckets promised (rounding): the exact path
    cum += w.weight(c[i].logit) / w.sum;
    if (cum >= top_p + err) return i + 1;
    if (!(cum < top_p - err)) return 0;
  }
  return c.size();  // every running sum below top_p: all are kept, as the exact loop would
}

// Steps 1-4 (penalty, top-k, top-p, min-p) as the ranking of what is left; greedy never comes here.
Ranking filter(std::span<const float> logits, const SamplingOptions& o, const std::vector<int32_t>& history) {
  const auto n = static_cast<int64_t>(logits.size());
  Ranking r;
  auto& c = r.c;
  // 1. Repetition penalty, once per distinct recent token; ids outside the vocabulary are ignored.
  // -inf (and NaN) candidates can never be drawn: they are left out before any filter sees them.
  const auto pen = penalized(logits, history, o.repeat_penalty);
  if (o.top_k > 0 && static_cast<size_t>(o.top_k) < logits.size()) {
    // 2. top-k while reading them: a heap of the k best so far, its worst on top, which most
    // candidates fail to beat with one comparison; then those k sorted.
    const auto k = static_cast<size_t>(o.top_k);
    c.reserve(k);
    for_each_logit(logits, pen, [&](size_t i, double l) {
      if (!(l > kNegInf)) return;  // NaN or -inf
      const Candidate x{static_cast<int32_t>(i), l};
      if (c.size() < k) {
        c.push_back(x);
        std::push_heap(c.begin(), c.end(), ranks_before);
      } else if (ranks_before(x, c.front())) {
        std::pop_heap(c.begin(), c.end(), ranks_before);
        c.back() = x;
        std::push_heap(c.begin(), c.end(), ranks_before);
      }
    });
    std::sort_heap(c.begin(), c.end(), ranks_before);
    r.sorted = c.size();
  } else {
    // With min-p the only cut (no top-p before it), only the candidates above its floor are
    // taken: a scan for the largest logit first. An infinite one leaves min-p off.
    double floor = kNegInf;
    if (o.min_p > 0.0f && o.top_p >= 1.0f) {
      double top = kNegInf;
      for_each_logit(logits, pen, [&](size_t, double l) { top = l > top ? l : top; });
      if (!std::isinf(top)) floor = top + std::log(static_cast<double>(o.min_p));
    }
    c.reserve(floor > kNegInf ? 1024 : logits.size());
    for_each_logit(logits, pen, [&](size_t i, double l) {
      if (l > kNegInf && l >= floor) c.push_back({static_cast<int32_t>(i), l});  // not NaN, -inf
    });
  }
  if (c.empty()) all_unusable(n);

  // 3. top-p: the smallest prefix whose probability reaches top_p.
  if (o.top_p < 1.0f) {
    size_t keep = r.all_sorted() ? 0 : top_p_keep_unsorted(r, o.top_p);
    if (keep == 0) {  // the exact loop over the whole sorted ranking
      r.sort_all();
      const auto p = softmax(c);
      double cum = 0;
      keep = c.size();
      for (size_t i = 0; i < c.size(); ++i) {
        cum += p[i];
        if (cum >= o.top_p) {
          keep = i + 1;
          break;
        }
      }
    }
    r.keep(keep);  // keep <= sorted: the fast walk stops inside the sorted prefix
  }

  // 4. min-p, on the logits as llama.cpp does: logit >= max + log(min_p). The largest always
  // passes, and what passes is a prefix of the ranking, so unsorted candidates are cut in place.
  if (o.min_p > 0.0f && !std::isinf(r.top())) {
    const double floor = r.top() + std::log(static_cast<double>(o.min_p));
    if (r.all_sorted()) {
      size_t keep = 1;
      while (keep < c.size() && c[keep].logit >= floor) ++keep;
      r.keep(keep);
    } else {
      std::erase_if(c, [&](const Candidate& x) { return !(x.logit >= floor); });
      // The sorted prefix's survivors are the first of the ranking, in order, still ahead of the rest.
      r.sorted = std::min(r.sorted, c.size());
    }
  }
  return r;
}

// Step 5 over the whole sorted ranking: temperature, softmax, the candidates with probability > 0.
std::vector<TokenProbability> finish(Ranking& r, float temperature) {
  r.sort_all();
  auto& c = r.c;
  for (auto& x : c)  // an infinite logit stays infinite and keeps all of the probability
    if (!std::isinf(x.logit)) x.logit /= temperature;
  const auto p = softmax(c);
  std::vector<TokenProbability> out;
  out.reserve(c.size());
  for (size_t i = 0; i < c.size(); ++i)
    if (p[i] > 0) out.push_back({c[i].token, p[i]});
  return out;
}

// 53 random bits: a double uniform in [0, 1) the same on every platform.
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }


// sample() for a large ranking left unsorted (temperature alone, the server's default): the
// softmax's sum in the candidates' order and the draw's total taken as 1, the running sum walked
// over a sorted prefix that grows as needed. Returns the token, or nothing where the exact path
// must decide: a running sum within order_error_bound of the target, or fewer than two
// candidates sure to have a probability > 0 (the exact path then draws nothing). `u` is the
// uniform number once drawn, for the exact path to use.
std::optional<int32_t> draw_unsorted(Ranking& r, float temperature, std::mt19937_64& rng, std::optional<double>& u) {
  const Weights w(r, temperature, r.top());  // finite: the caller checks
  if (w.sure < 2) return std::nullopt;
  u = uniform(rng);
  const auto& c = r.c;
  const double err = order_error_bound(c.size());
  w.sort_to_share(r, *u + 2 * err);
  double cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    if (i == r.sorted) return std::nullopt;  // past what the buckets promised (rounding): the exact path
    cum += w.weight(c[i].logit) / w.sum;
    if (cum > *u + err) return c[i].token;
    if (!(cum < *u - err)) return std::nullopt;
  }
  return std::nullopt;
}

// Greedy: one pass for the largest logit (ties: the lower id, as ranks_before ranks them).
int32_t argmax(std::span<const float> logits, const std::vector<Candidate>& pen) {
  if (pen.empty()) {
    // The largest value, then its first position. NaN never wins (the comparison is false), so
    // the largest is the same whatever the order: 8 running maxima, one per lane of a vector
    // the compiler can use (a single one would be a chain of dependent scalar steps).
    constexpr size_t kLanes = 8;
    float lane[kLanes];
    std::fill(lane, lane + kLanes, -std::numeric_limits<float>::infinity());
    const float* v = logits.data();
    const size_t n = logits.size(), whole = n - n % kLanes;
    for (size_t i = 0; i < whole; i += kLanes)
      for (size_t j = 0; j < kLanes; ++j) lane[j] = v[i + j] > lane[j] ? v[i + j] : lane[j];
    for (size_t i = whole; i < n; ++i) lane[0] = v[i] > lane[0] ? v[i] : lane[0];
    float top = lane[0];
    for (size_t j = 1; j < kLanes; ++j) top = lane[j] > top ? lane[j] : top;
    if (!(top > -std::numeric_limits<float>::infinity())) all_unusable(static_cast<int64_t>(n));
    return static_cast<int32_t>(std::find(logits.begin(), logits.end(), top) - logits.begin());
  }
  int32_t best = -1;
  double best_logit = kNegInf;
  for_each_logit(logits, pen, [&](size_t i, double l) {
    if (l > best_logit) {  // false for NaN and -inf
      best = static_cast<int32_t>(i);
      best_logit = l;
    }
  });
  if (best < 0) all_unusable(static_cast<int64_t>(logits.size()));
  return best;
}

}  // namespace

std::vector<TokenProbability> Sampler::distribution(std::span<const float> logits) const {
  check_size(logits);
  if (options_.temperature == 0.0f)
    return {{argmax(logits, penalized(logits, history_, options_.repeat_penalty)), 1.0}};
  Ranking r = filter(logits, options_, history_);
  return finish(r, options_.temperature);
}

int32_t Sampler::sample(std::span<const float> logits) {
  check_size(logits);
  if (options_.temperature == 0.0f)  // greedy draws nothing: the sequence is kept
    return argmax(logits, penalized(logits, history_, options_.repeat_penalty));
  Ranking r = filter(logits, options_, history_);
  // Few candidates left (the usual case with top-k, top-p or min-p): the whole distribution.
  constexpr size_t kSortAll = 1024;
  std::optional<double> u;
  if (r.c.size() > kSortAll && !std::isinf(r.top()))
    if (auto token = draw_unsorted(r, options_.temperature, rng_, u)) return *token;
  const auto dist = finish(r, options_.temperature);
  if (dist.size() == 1) return dist.front().token;  // one candidate draws nothing: the sequence is kept
  return models::draw_token(dist, u ? *u : uniform(rng_));
}

}  // namespace vkformer
