#include "windows.hpp"

#include <algorithm>
#include <numeric>

namespace vkformer::ops {

uint64_t window_alignment(const DeviceInfo& info) {
  // 16 bytes at least: kernels read 4-wide vectors from the start of their bindings.
  return std::max<uint64_t>({16, info.min_storage_buffer_offset_alignment,
                             info.min_texel_buffer_offset_alignment});
}

std::vector<Span> split_spans(uint64_t count, const std::vector<uint64_t>& item_bytes,
                              uint64_t limit, uint64_t align, const std::string& what) {
  uint64_t widest = 0, quantum = 1;
  for (uint64_t b : item_bytes) {
    if (b == 0) continue;
    widest = std::max(widest, b);
    // Items per aligned step for this operand; the span sizes must be a multiple of all of them.
    quantum = std::lcm(quantum, align / std::gcd(b, align));
  }
  if (widest == 0 || count * widest <= limit) return {{0, count}};
  const uint64_t per = limit / widest / quantum * quantum;
  if (per == 0)
    throw Error(ErrorCode::unsupported,
                what + ": " + std::to_string(quantum) + " item(s) of " + std::to_string(widest) +
                    " bytes (the fewest whose windows start aligned to " + std::to_string(align) +
                    " bytes) take more than the " + std::to_string(limit) +
                    " bytes one binding may span");
  std::vector<Span> spans;
  for (uint64_t first = 0; first < count; first += per)
    spans.push_back({first, std::min(per, count - first)});
  return spans;
}

Binding window(uint32_t value, bool write, uint64_t offset, uint64_t bytes) {
  Binding b;
  b.value = value;
  b.write = write;
  b.window_offset = offset;
  b.window_bytes = bytes;
  return b;
}

}  // namespace vkformer::ops
