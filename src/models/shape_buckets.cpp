#include "shape_buckets.hpp"

#include "vkformer/error.hpp"

namespace vkformer::models {

int64_t bucket_length(int64_t n, int64_t cap) {
  if (n < 1 || n > cap)
    throw Error(ErrorCode::internal, "bucket_length: " + std::to_string(n) + " outside [1, " +
                                         std::to_string(cap) + "]");
  int64_t b = 8;
  while (b < n && b < 64) b *= 2;
  if (b < n) b = (n + 63) / 64 * 64;
  return std::min(b, cap);
}

int64_t bucket_batch(int64_t n, int64_t cap) {
  if (n < 1 || n > cap)
    throw Error(ErrorCode::internal, "bucket_batch: " + std::to_string(n) + " outside [1, " +
                                         std::to_string(cap) + "]");
  int64_t b = 1;
  while (b < n) b *= 2;
  return std::min(b, cap);
}

Executor& ExecutorCache::get(const std::string& key, const std::function<Graph()>& build) {
  auto it = executors_.find(key);
  if (it != executors_.end()) return *it->second;
  Graph g = build();
  return *(executors_[key] = std::make_unique<Executor>(device_, g));
}

}  // namespace vkformer::models
