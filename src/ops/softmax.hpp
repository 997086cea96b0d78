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
  bool causal_at_key_length = false;  // ... when j > i + (key_length - Sq) instead
  bool log = false;
};

void emit_softmax(Lowering& l, const SoftmaxCall& call);

// Whether reductions in this lowering may use subgroup arithmetic kernels of `kernel`.
bool use_subgroup_reduction(const Lowering& l, kernels::Kernel kernel, DType dtype);

// The row kernels of CPU devices (shaders/softmax_rows.comp, layer_norm_rows.comp): a workgroup
// of `lanes` invocations (one SIMD vector) per row, `rows_per_group` rows one after another, the
// row read once as texels of 4 and kept in registers (`cap` texels per invocation) when it fits.
struct RowKernel {
  bool use = false;
  kernels::Kernel kernel{};
  uint32_t lanes = 0;
  uint32_t cap = 0;             // texels of a row per invocation kept in registers
  uint32_t rows_per_group = 0;  // rows per workgroup (amortizes the cost of a workgroup)
  uint64_t groups = 0;
};

// The row kernel for `rows` rows of `row_len` elements of `x`, or use = false where the device
// prefers the workgroup-per-row kernels (GPUs) or the rows are not whole texels. `plain` uses
// shared memory for its reductions, `subgroup` subgroup arithmetic.
RowKernel row_kernel(const Lowering& l, kernels::Kernel plain, kernels::Kernel subgroup,
                     const ValueDesc& x, int64_t rows, int64_t row_len);


}  // namespace vkformer::ops
