#pragma once
// Variable-size inputs without compiling per size: sizes are rounded up to a few buckets, one
// executor is compiled per bucket the first time it is needed, and later inputs of any size in
// that bucket are padded to it and replay the same recording. Not specific to one model family:
// anything whose graph depends on a batch size or a sequence length can use it.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "vkformer/device.hpp"
#include "vkformer/executor.hpp"
#include "vkformer/graph.hpp"

namespace vkformer::models {

// Sequence lengths: 8, 16, 32, 64, then multiples of 64 (padding stays under half the work
// for short inputs and under 64 tokens for long ones), never above `cap`. n must be in [1, cap].
int64_t bucket_length(int64_t n, int64_t cap);
// Batch sizes: powers of two, never above `cap`. n must be in [1, cap].
int64_t bucket_batch(int64_t n, int64_t cap);

// Executors by bucket key, compiled on first use.
class ExecutorCache {
 public:
  explicit ExecutorCache(Device device) : device_(std::move(device)) {}
  Executor& get(const std::string& key, const std::function<Graph()>& build);
  size_t compiled() const { return executors_.size(); }

 private:
  Device device_;
  std::map<std::string, std::unique_ptr<Executor>> executors_;
};

}  // namespace vkformer::models
