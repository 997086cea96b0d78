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

// A plan over several arenas of at most `cap` bytes each (the device's largest allocation).
struct ArenaPlan {
  std::vector<uint64_t> offsets;  // per request, within its arena
  std::vector<uint32_t> arena;    // per request
  std::vector<uint64_t> totals;   // per arena
};

// As plan_memory, but buffers that would end beyond `cap` are planned again among themselves
// into a further arena, and so on. A buffer larger than `cap` gets an arena of its own (which
// the allocator then refuses, naming its size).
ArenaPlan plan_arenas(const std::vector<Lifetime>& buffers, uint64_t alignment, bool reuse,
                      uint64_t cap);

}  // namespace vkformer
