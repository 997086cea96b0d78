#pragma once
// Mean and sample standard deviation of repeated timings (`bench --model`, `bench --draft`
// report tokens/s as mean ± stddev over their rounds, as llama-bench does).
#include <cmath>
#include <vector>

namespace vkformer::cli {

inline double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

// With n - 1 in the denominator (the rounds are a sample); 0 for fewer than two values.
inline double sample_stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

}  // namespace vkformer::cli
