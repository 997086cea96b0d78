#include "memory_planner.hpp"

#include <algorithm>
#include <numeric>

namespace vkformer {

namespace {
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
}  // namespace

MemoryPlan plan_memory(const std::vector<Lifetime>& buffers, uint64_t alignment, bool reuse) {
  MemoryPlan plan;
  plan.offsets.assign(buffers.size(), 0);
  if (!reuse) {
    for (size_t i = 0; i < buffers.size(); ++i) {
      plan.offsets[i] = plan.total;
      plan.total += align_up(std::max<uint64_t>(buffers[i].bytes, 1), alignment);
    }
    return plan;
  }
  std::vector<size_t> order(buffers.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (buffers[a].bytes != buffers[b].bytes) return buffers[a].bytes > buffers[b].bytes;
    return buffers[a].first < buffers[b].first;
  });
  struct Placed {
    uint64_t offset, size;
    uint32_t first, last;
  };
  std::vector<Placed> placed;
  for (size_t i : order) {
    const Lifetime& b = buffers[i];
    uint64_t size = align_up(std::max<uint64_t>(b.bytes, 1), alignment);
    // Ranges taken by buffers alive at the same time, by offset.
    std::vector<const Placed*> live;
    for (const auto& p : placed)
      if (p.first <= b.last && b.first <= p.last) live.push_back(&p);
    std::sort(live.begin(), live.end(),
              [](const Placed* x, const Placed* y) { return x->offset < y->offset; });
    // The smallest gap that fits; else after the last live range.
    uint64_t best = UINT64_MAX, best_gap = UINT64_MAX, cursor = 0;
    for (const Placed* p : live) {
      if (p->offset >= cursor + size && p->offset - cursor < best_gap) {
        best = cursor;
        best_gap = p->offset - cursor;
      }
      cursor = std::max(cursor, p->offset + p->size);
    }
    if (best == UINT64_MAX) best = cursor;
    plan.offsets[i] = best;
    plan.total = std::max(plan.total, best + size);
    placed.push_back({best, size, b.first, b.last});
  }
  return plan;
}

ArenaPlan plan_arenas(const std::vector<Lifetime>& buffers, uint64_t alignment, bool reuse,
                      uint64_t cap) {
  ArenaPlan out;
  out.offsets.assign(buffers.size(), 0);
  out.arena.assign(buffers.size(), 0);
  std::vector<size_t> left(buffers.size());
  std::iota(left.begin(), left.end(), 0);
  while (!left.empty()) {
    std::vector<Lifetime> subset;
    for (size_t i : left) subset.push_back(buffers[i]);
    const MemoryPlan plan = plan_memory(subset, alignment, reuse);
    const uint32_t arena = static_cast<uint32_t>(out.totals.size());
    std::vector<size_t> later;
    uint64_t total = 0;
    for (size_t j = 0; j < left.size(); ++j) {
      const uint64_t end = plan.offsets[j] + align_up(std::max<uint64_t>(subset[j].bytes, 1), alignment);
      if (end <= cap) {
        out.offsets[left[j]] = plan.offsets[j];
        out.arena[left[j]] = arena;
        total = std::max(total, end);
      } else {
        later.push_back(left[j]);
      }
    }
    if (total == 0) {  // nothing fits below the cap: the largest buffer alone
      const size_t big = *std::max_element(later.begin(), later.end(), [&](size_t a, size_t b) {
        return buffers[a].bytes < buffers[b].bytes;
      });
      out.arena[big] = arena;
      out.offsets[big] = 0;
      total = align_up(std::max<uint64_t>(buffers[big].bytes, 1), alignment);
      later.erase(std::find(later.begin(), later.end(), big));
    }
    out.totals.push_back(total);
    left = std::move(later);
  }
  return out;
}

}  // namespace vkformer
