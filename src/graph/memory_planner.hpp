#pragma once
#include <cstdint>
#include <vector>

namespace vkformer {

// A buffer that must exist from step `first` to step `last` (inclusive).
struct Lifetime {
  uint64_t bytes = 0;
  uint32_t first = 0;
  uint32_t last = 0;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // per request
  uint64_t total = 0;             // arena size
};

// Places every buffer at an aligned offset so that buffers whose lifetimes overlap never share
// bytes. With reuse, buffers are placed largest first at the lowest offset that fits (greedy
// best-fit by size, as in TFLite's arena planner); without it each gets its own range.
MemoryPlan plan_memory(const std::vector<Lifetime>& buffers, uint64_t alignment, bool reuse);

}  // namespace vkformer
