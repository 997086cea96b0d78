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

// An operand of an op over independent rows: bindings[index] holds `row_bytes` per row.
struct RowOperand {
  size_t index;
  uint64_t row_bytes;
};

// For ops over `rows` independent rows (layer norm, elementwise ops with rows of one element):
// calls emit(span, bindings) once per window of rows, with the `windowed` operands bound as that
// span's rows and the other bindings whole. One call with `whole` when everything fits.
template <class Emit>
void for_row_windows(Lowering& l, uint64_t rows, const std::vector<Binding>& whole,
                     const std::vector<RowOperand>& windowed, const std::string& what,
                     Emit&& emit) {
  std::vector<uint64_t> bytes;
  for (const RowOperand& o : windowed) bytes.push_back(o.row_bytes);
  const std::vector<Span> spans = split_spans(rows, bytes, l.tuning().max_binding_bytes,
                                              window_alignment(l.info()), what);
  for (const Span& s : spans) {
    std::vector<Binding> bindings = whole;
    if (spans.size() > 1)
      for (const RowOperand& o : windowed)
        bindings[o.index] = window(whole[o.index].value, whole[o.index].write,
                                   s.first * o.row_bytes, s.count * o.row_bytes);
    emit(s, std::move(bindings));
  }
}

}  // namespace vkformer::ops
