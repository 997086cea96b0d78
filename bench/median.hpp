#pragma once
// The median of a set of timings, for the bench tools (runner.cpp's benchmarks and the
// stand-alone ones: kv_cache_speed, greedy_step, verify_rows), which each had a copy.
#include <algorithm>
#include <vector>

namespace vkformer::bench {

// The middle value, or the mean of the two middle ones; 0 for no values.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace vkformer::bench
