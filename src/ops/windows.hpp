#pragma once
// Ops over tensors larger than one binding may span (maxStorageBufferRange, 128 MiB on lavapipe)
// bind a window of each large operand per dispatch and split their work to match: matmul by
// batches, rows of A or rows of a transposed B; embedding by rows of the table. A window starts
// where a storage or texel binding may start on the device, so that the kernels need no base
// offsets: each dispatch sees its window as a whole tensor.
#include <cstdint>
#include <string>
#include <vector>

#include "lowering.hpp"

namespace vkformer::ops {

// Items [first, first + count) of a split dimension.
struct Span {
  uint64_t first = 0, count = 0;
};

// Where a window may start: a multiple of this many bytes.
uint64_t window_alignment(const DeviceInfo& info);

// Splits `count` items into consecutive spans such that, for every operand i with
// item_bytes[i] > 0, a span's items take at most `limit` bytes and its first item starts on a
// multiple of `align` bytes. One span when everything fits. Throws unsupported naming `what`
// when even the smallest aligned span is over the limit.
std::vector<Span> split_spans(uint64_t count, const std::vector<uint64_t>& item_bytes,
                              uint64_t limit, uint64_t align, const std::string& what);

// The binding of bytes [offset, offset + bytes) of `value`.
Binding window(uint32_t value, bool write, uint64_t offset, uint64_t bytes);

}  // namespace vkformer::ops
