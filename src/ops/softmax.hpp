#pragma once
// The softmax kernel as a building block for other lowerings (attention's unfused path runs
// its masked softmax through it): emit one softmax dispatch on values a lowering already has.
#include "lowering.hpp"

namespace vkformer::ops {

// out = softmax (or log-softmax) over the last dim of x * scale + mask, with keys hidden by the
// boolean masks. x and out share shape (rank 1 to 4) and a float dtype.
//   mask              same dtype as x, broadcast against x (numpy rules); additive
//   key_padding_mask  i32 [B, Sk], x [B, Sq, Sk] or [B, H, Sq, Sk]; nonzero hides key j
//   key_length        i32 [1] read at run time; keys j >= key_length are hidden
// Optional values are kNoValue when absent.
struct SoftmaxCall {
  uint32_t x = kNoValue;
  uint32_t out = kNoValue;
  uint32_t mask = kNoValue;
  uint32_t key_padding_mask = kNoValue;
  uint32_t key_length = kNoValue;
  float scale = 1.0f;
  bool causal = false;  // key j hidden for query i when j > i + (Sk - Sq), rows = x's dim -2
  bool log = false;
};

void emit_softmax(Lowering& l, const SoftmaxCall& call);

// Whether reductions in this lowering may use subgroup arithmetic kernels of `kernel`.
bool use_subgroup_reduction(const Lowering& l, kernels::Kernel kernel, DType dtype);

// Strides of `in` right-aligned into rank 4 when broadcast against `out`; 0 where it repeats.
void broadcast_strides4(const Shape& in, const Shape& out, uint32_t strides[4]);

}  // namespace vkformer::ops
