#pragma once
// The matmul kernel as a building block for other lowerings (attention's unfused path runs
// Q·Kᵀ and P·V through it): emit one matmul dispatch on values a lowering already has.
#include <string>

#include "lowering.hpp"
#include "matmul_paths.hpp"

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

using kernels::MatmulPush;

// Adds the dispatches to the program. Throws ErrorCode::internal (naming the node) if the values'
// shapes or dtypes do not fit: callers build their temporaries with matmul_output_shape.
void emit_matmul(Lowering& l, const MatmulCall& call);

// The weight path of emit_matmul (b's dtype differs from a's), reading b's rows in its own layout:
// windows where a tensor exceeds a binding, each product as the matmul path table's weight list
// chooses (src/kernels/matmul_paths_weights.cpp). Without fusions (call.fused() false), or with
// `fusing`: only where every window's kernel takes call's fusions (else nothing is emitted and
// it returns false).
bool emit_matmul_weights(Lowering& l, const MatmulCall& call, bool fusing = false);

// One product of q.m x q.n over `batch` matrices with `operands` (a, b, bias or a, out; whole or
// windows) bound, on the path the table chooses for it (call's fusions included, where it takes
// them).
void emit_matmul_path(Lowering& l, const MatmulCall& call, const MatmulPush& q, uint64_t batch,
                      const std::vector<Binding>& operands);

// Whether the path the table chooses for that product also does call's fusions.
bool matmul_path_fuses(Lowering& l, const MatmulCall& call, const MatmulPush& q, uint64_t batch,
                       const std::vector<Binding>& operands);

// Emits `call` with all its fusions in one kernel where the path the table chooses for it takes
// them (whole bindings), and returns true; false (nothing emitted) otherwise.
bool emit_matmul_fusing(Lowering& l, const MatmulCall& call);

// A matmul with fusions (call.fused()): in one kernel where emit_matmul_fusing can, else the
// pre-norm apart (rms_norm), then the rest in one kernel where one takes it, else the product and
// shaders/linear_epilogue.comp (src/ops/matmul_fused.cpp).
void emit_matmul_fused(Lowering& l, const MatmulCall& call);

// The push block of a weight product [m, k]·[n, k]ᵀ into a dense [m, n]: no batch, no split of K.
MatmulPush weight_push(uint64_t m, uint64_t n, uint64_t k, float alpha);

// The output shape of a·b (transpose_b as in MatmulCall), or false with an error detail such as
// "a is [2,3,5], b is [4,6]: inner dims 5 != 4" in *why (if not null) when the shapes do not fit;
// a_name / b_name name the operands in it.
bool matmul_output_shape(const Shape& a, const Shape& b, bool transpose_b, Shape* out,
                         std::string* why, const char* a_name = "a", const char* b_name = "b");

// The matmul of a·b (shapes that matmul_output_shape accepts) as the kernels see it, with a
// shared B's batch folded into M: what kernels::plan_matmul decides the path from. Tests use it
// to know which path a shape takes.
kernels::MatmulProblem matmul_problem(const Shape& a, const Shape& b, bool transpose_b, DType dtype,
                                      const DeviceInfo& info);

}  // namespace vkformer::ops
