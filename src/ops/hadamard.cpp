// hadamard: x times the orthonormal Walsh-Hadamard matrix per block of `block` consecutive
// elements (shaders/hadamard.comp). The attention rotation of quantized KV caches (KvRotation,
// llama.cpp PR 21038) stores v rotated, so the attention output comes out rotated: this op,
// its own inverse, turns it back.
#include <cmath>
#include <cstdint>
#include <string>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct HadamardPush {
  uint32_t n, block;
  float norm;
};
static_assert(sizeof(HadamardPush) <= 128);

void lower_hadamard(Lowering& l) {
  const HadamardAttrs& a = attrs<HadamardAttrs>(l);
  const ValueDesc& x = l.value(l.input(0));
  const uint64_t block = static_cast<uint64_t>(a.block);
  const uint64_t row_bytes = dtype_size(x.dtype) * block;
  // Windows of whole blocks where x is beyond one binding.
  ops::for_row_windows(
      l, static_cast<uint64_t>(x.shape.numel()) / block, {{l.input(0)}, {l.output(), true}},
      {{0, row_bytes}, {1, row_bytes}}, l.node().label + ": blocks of " + std::to_string(block),
      [&](const ops::Span& s, std::vector<Binding> bindings) {
        const uint32_t n = static_cast<uint32_t>(s.count * block);
        HadamardPush p{n, static_cast<uint32_t>(block), static_cast<float>(1.0 / std::sqrt(static_cast<double>(block)))};
        // One invocation per block (shaders/hadamard.comp); the block is a specialization
        // constant, the size of the invocation's array.
        l.dispatch(Kernel::hadamard, x.dtype, std::move(bindings), PushBlock::of(p),
                   ops::elementwise_grid(l, s.count), {ops::kElementwiseWorkgroup, static_cast<uint32_t>(block)});
      });
}

}  // namespace

Tensor Graph::hadamard(Tensor x, int block) {
  const std::string op = "hadamard";
  ops::require_float(impl(), op, "x", x);
  const int64_t last = x.shape.rank() > 0 ? x.shape[x.shape.rank() - 1] : 0;
  if (block < 2 || block > 1024 || (block & (block - 1)) != 0 || last % block != 0)
    shape_error(impl().label(op), "block is " + std::to_string(block) + " for x " + describe(x) +
                                      ": expected a power of two from 2 to 1024 dividing the last dim");
  if (static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX) shape_error(impl().label(op), "more than 2^32 elements");
  return impl().add_node(OpKind::hadamard, op, {x.id}, HadamardAttrs{block}, x.shape, x.dtype);
}

void register_hadamard_ops(OpRegistry& r) { r.add(OpKind::hadamard, lower_hadamard); }

}  // namespace vkformer
