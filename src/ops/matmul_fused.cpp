// linear's fusions (Graph::LinearOptions: pre-norm, gated pair, residual): in the product's kernel
// itself where the path the matmul path table chooses takes them (quantized weights on CPU
// devices: all of them for one row, the gated pair and the residual after a separate rms_norm for
// more; the residual alone in the cooperative-matrix GEMMs), otherwise as the kernels that
// compute them apart: rms_norm into a temporary, the product, then shaders/linear_epilogue.comp
// for the gate and the residual. Both give the same values up to fp32 rounding (the fused pre-norm
// also keeps the normalized row in fp32 where the separate one stores it in the activations'
// type).
#include "matmul.hpp"
#include "op_common.hpp"
#include "rms_norm.hpp"
#include "windows.hpp"

namespace vkformer::ops {

using kernels::Kernel;

namespace {

// Matches the push block of shaders/linear_epilogue.comp.
struct EpiloguePush {
  uint32_t total, n;
};

}  // namespace

void emit_matmul_fused(Lowering& l, const MatmulCall& c) {
  if (emit_matmul_fusing(l, c)) return;
  const ValueDesc& a = l.value(c.a);
  // A weight beyond one binding (a large vocabulary's output projection, read in windows of its
  // rows) under the pre-norm alone: each window's mat-vec normalizes the row itself.
  if (c.norm != kNoValue && !c.gated && c.residual == kNoValue && l.value(c.b).dtype != a.dtype &&
      emit_matmul_weights(l, c, true))
    return;
  const DType dtype = a.dtype;
  MatmulCall plain = c;
  plain.norm = kNoValue;
  plain.gated = false;
  plain.residual = kNoValue;
  if (c.norm != kNoValue) {
    const Shape a_shape = a.shape;  // a copy: temp() grows the value table
    plain.a = l.temp(a_shape, dtype);
    emit_rms_norm(l, c.a, c.norm, plain.a, c.norm_eps);
  }
  if (!c.gated && c.residual == kNoValue) {
    emit_matmul(l, plain);
    return;
  }
  if (c.norm != kNoValue) {  // the gate and the residual in the product's kernel, where it takes them
    MatmulCall normed = c;
    normed.a = plain.a;
    normed.norm = kNoValue;
    if (emit_matmul_fusing(l, normed)) return;
  }
  // The product without the epilogue, then the epilogue.
  const Shape out_shape = l.value(c.out).shape;
  const int64_t n = out_shape.back(), rows = out_shape.numel() / n;
  // out's leading dims: emit_matmul checks them against a's ([B, 1, K] is not [B, K]).
  plain.out = l.temp(out_shape.with_last(c.gated ? 2 * n : n), dtype);
  if (c.gated) plain.activation = Activation::none;
  emit_matmul(l, plain);
  const uint64_t es = dtype_size(dtype);
  const uint32_t residual = c.residual != kNoValue ? c.residual : plain.out;
  for_row_windows(
      l, static_cast<uint64_t>(rows), {{plain.out}, {residual}, {c.out, true}},
      {{0, (c.gated ? 2 : 1) * n * es}, {1, (c.residual != kNoValue ? 1 : c.gated ? 2 : 1) * n * es},
       {2, n * es}},
      l.node().label + ": rows", [&](const Span& s, std::vector<Binding> bindings) {
        const EpiloguePush p{static_cast<uint32_t>(s.count * n), static_cast<uint32_t>(n)};
        l.dispatch(Kernel::linear_epilogue, dtype, std::move(bindings), PushBlock::of(p),
                   elementwise_grid(l, p.total),
                   {kElementwiseWorkgroup, c.gated ? 1u : 0u, static_cast<uint32_t>(c.activation),
                    c.residual != kNoValue ? 1u : 0u});
      });
}

}  // namespace vkformer::ops
