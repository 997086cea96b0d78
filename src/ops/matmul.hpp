#pragma once
// The matmul kernel as a building block for other lowerings (attention's unfused path runs
// Q·Kᵀ and P·V through it): emit one matmul dispatch on values a lowering already has.
#include <string>

#include "lowering.hpp"
#include "tuning_matmul.hpp"

namespace vkformer::ops {

// out = activation(alpha * a·b + bias) on program values.
//   a    [..., M, K]            rank 2 to 4
//   b    [..., K, N]            or [..., N, K] with transpose_b; rank 2 to 4
//   bias [N]                    optional (kNoValue for none)
//   out  [batch..., M, N]       batch dims of a and b broadcast numpy-style (each equal or 1,
//                               missing leading dims are 1); out's rank may be any rank >= 2 whose
//                               batch dims multiply out to the same batch shape
// a, bias and out share one float dtype (f32 or f16); accumulation is fp32. b has that dtype
// too, or is a weight [N, K] (rank 2, transpose_b) in another weight dtype (bf16, a quantized
// type, the other float type; K whole blocks when quantized): see emit_matmul_weights.
struct MatmulCall {
  uint32_t a = kNoValue;
  uint32_t b = kNoValue;
  uint32_t out = kNoValue;
  uint32_t bias = kNoValue;
  bool transpose_b = false;
  float alpha = 1.0f;
  Activation activation = Activation::none;
  // Linear's fusions (transpose_b; see Graph::LinearOptions): a is RMS-normalized with weight
  // `norm` [K] first; b is [2N, K] gate and up rows with out = activation(gate) * up; residual
  // (out's shape) is added last.
  uint32_t norm = kNoValue;
  float norm_eps = 0.0f;
  bool gated = false;
  uint32_t residual = kNoValue;
  bool fused() const { return norm != kNoValue || gated || residual != kNoValue; }
};

// The push block of every kernel that includes shaders/matmul_base.glsl, in its layout.
struct MatmulPush {
  uint32_t m, n, k;
  uint32_t batch1;
  uint32_t a_stride0, a_stride1;
  uint32_t b_stride0, b_stride1;
  uint32_t y_base, z_base;
  float alpha;
  uint32_t splits;   // matmul_split: K ranges per batch
  uint32_t k_split;  // matmul_split: K per range
  uint32_t ldo;      // out's row stride: n, or more when out is a window of columns
};
static_assert(sizeof(MatmulPush) == 14 * 4);

// Adds the dispatch to the program. Throws ErrorCode::internal (naming the node) if the values'
// shapes or dtypes do not fit: callers build their temporaries with matmul_output_shape.
void emit_matmul(Lowering& l, const MatmulCall& call);

// The weight path of emit_matmul (b's dtype differs from a's): shaders/matmul_wq.comp, or
// matmul_wq_gemv.comp for M <= the tuning's gemv_max_m, reading b's rows in its own layout.
// Without fusions (call.fused() false).
void emit_matmul_weights(Lowering& l, const MatmulCall& call);

// Emits `call` with its fusions in the weight kernel itself where one takes them (quantized
// weights on CPU devices, whole bindings: shaders/matmul_wq_vec.comp every fusion of one row,
// matmul_wq_texel.comp the gated pair and the residual of more rows, without a pre-norm) and
// returns true; false (nothing emitted) otherwise.
bool emit_matmul_weights_fused(Lowering& l, const MatmulCall& call);

// out = a·b (+ bias, activation) + call.residual in one shaders/matmul_coopmat.comp dispatch, where
// the product takes cooperative matrices with whole bindings (the f16 GEMM, or the weight dtype's
// matmul_wq_coopmat_* kernel) and call has no other fusion; returns false (nothing emitted)
// otherwise.
bool emit_matmul_with_residual(Lowering& l, const MatmulCall& call);
bool emit_matmul_weights_with_residual(Lowering& l, const MatmulCall& call);
// shaders/matmul_coopmat.comp on the tuning's cooperative matrices with `kernel` (the f16 GEMM of
// the tuning's API, or a weight dtype's matmul_wq_coopmat_*): operands a, b, bias, out and
// optionally residual (absent ones bound to a), over `batch` matrices (grid z).
void emit_coopmat(Lowering& l, kernels::Kernel kernel, const MatmulCall& call, DType dtype,
                  uint64_t batch, std::vector<Binding> operands, const MatmulPush& p);
// A matmul with fusions (call.fused()): in one kernel where emit_matmul_weights_fused can, else
// as rms_norm, the product and shaders/linear_epilogue.comp (src/ops/matmul_fused.cpp).
void emit_matmul_fused(Lowering& l, const MatmulCall& call);

// The output shape of a·b (transpose_b as in MatmulCall), or false with an error detail such as
// "a is [2,3,5], b is [4,6]: inner dims 5 != 4" in *why (if not null) when the shapes do not fit;
// a_name / b_name name the operands in it.
bool matmul_output_shape(const Shape& a, const Shape& b, bool transpose_b, Shape* out,
                         std::string* why, const char* a_name = "a", const char* b_name = "b");

// The matmul of a·b (shapes that matmul_output_shape accepts) as the kernels see it, with a
// shared B's batch folded into M: what kernels::plan_matmul decides the path from. Tests use it to
// know which path a shape takes.
kernels::MatmulProblem matmul_problem(const Shape& a, const Shape& b, bool transpose_b, DType dtype,
                                 const DeviceInfo& info);

}  // namespace vkformer::ops
