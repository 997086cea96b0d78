// layer_norm and add_layer_norm (layer_norm(a + b), the post-norm residual in one dispatch) over
// the last dim: a workgroup per row on GPUs (shaders/layer_norm.comp), one SIMD vector per row
// with the row in registers on CPU devices (shaders/layer_norm_rows.comp).
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

#include "op_common.hpp"
#include "windows.hpp"
#include "softmax.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct LayerNormPush {
  uint32_t rows;
  uint32_t d;
  float eps;
};

void dispatch_rows(Lowering& l, bool add, const ValueDesc& x, int64_t rows, int64_t d,
                   std::vector<Binding> bindings);

// Inputs x (or a, b), gamma, beta; the fused add when `add`.
void lower(Lowering& l, bool add) {
  const ValueDesc& x = l.value(l.input(0));
  const int64_t d = x.shape.back();
  const int64_t rows = x.shape.numel() / d;
  const uint32_t gamma = l.input(add ? 2 : 1), beta = l.input(add ? 3 : 2);
  // Bindings: x (or a), gamma, beta, y, and b for the fused add. Tensors beyond one binding go
  // in windows of rows (src/ops/windows.hpp).
  std::vector<Binding> whole{{l.input(0)}, {gamma}, {beta}, {l.output(), true}};
  if (add) whole.push_back({l.input(1)});
  const uint64_t row_bytes = static_cast<uint64_t>(d) * dtype_size(x.dtype);
  std::vector<ops::RowOperand> windowed{{0, row_bytes}, {3, row_bytes}};
  if (add) windowed.push_back({4, row_bytes});
  ops::for_row_windows(l, static_cast<uint64_t>(rows), whole, windowed,
                       l.node().label + ": rows", [&](const ops::Span& s, std::vector<Binding> b) {
                         dispatch_rows(l, add, x, static_cast<int64_t>(s.count), d, std::move(b));
                       });
}

// One dispatch over `rows` rows of length d with `bindings` (whole tensors or windows).
void dispatch_rows(Lowering& l, bool add, const ValueDesc& x, int64_t rows, int64_t d,
                   std::vector<Binding> bindings) {
  LayerNormPush p{static_cast<uint32_t>(rows), static_cast<uint32_t>(d),
                  attrs<LayerNormAttrs>(l).eps};

  const ops::RowKernel rk =
      add ? ops::row_kernel(l, Kernel::layer_norm_rows_add, Kernel::layer_norm_rows_add_subgroup,
                            x, rows, d)
          : ops::row_kernel(l, Kernel::layer_norm_rows, Kernel::layer_norm_rows_subgroup, x, rows,
                            d);
  if (rk.use) {
    l.dispatch(rk.kernel, x.dtype, std::move(bindings), PushBlock::of(p), l.rows_grid(rk.groups),
               {rk.lanes, rk.cap, rk.rows_per_group});
    return;
  }

  // The tuned reduction size, a power of two (the shared-memory tree needs one). Short rows
  // get a smaller workgroup, but not below one subgroup (32 where the device reports less):
  // a workgroup per row of D = 8 should not keep 248 idle invocations.
  uint32_t wg = std::bit_floor(std::max<uint32_t>(1, l.tuning().reduction_workgroup));
  const uint32_t floor_wg = std::min(wg, std::bit_floor(std::max<uint32_t>(32, l.info().subgroup_size)));
  while (wg / 2 >= floor_wg && static_cast<int64_t>(wg / 2) >= d) wg /= 2;

  const Kernel plain = add ? Kernel::layer_norm_add : Kernel::layer_norm;
  const Kernel subgroup = add ? Kernel::layer_norm_add_subgroup : Kernel::layer_norm_subgroup;
  const bool subgroups = ops::use_subgroup_reduction(l, subgroup, x.dtype);
  l.dispatch(subgroups ? subgroup : plain, x.dtype, std::move(bindings), PushBlock::of(p),
             l.rows_grid(static_cast<uint64_t>(rows)), {wg});
}

void lower_layer_norm(Lowering& l) { lower(l, false); }
void lower_add_layer_norm(Lowering& l) { lower(l, true); }

void check_affine(GraphImpl& g, const std::string& op, const Tensor& x, const Tensor& gamma,
                  const Tensor& beta, float eps) {
  ops::require_dtype(g, op, "gamma", gamma, x.dtype);
  ops::require_dtype(g, op, "beta", beta, x.dtype);
  const Shape want{x.shape.back()};
  if (gamma.shape != want || beta.shape != want)
    shape_error(g.label(op), "x is " + describe(x) + ": gamma and beta must be " + want.str() +
                                 ", got gamma " + gamma.shape.str() + " and beta " +
                                 beta.shape.str());
  if (!(eps >= 0.0f))
    throw Error(ErrorCode::invalid_argument,
                g.label(op) + ": eps must be >= 0, got " + std::to_string(eps));
}

}  // namespace

Tensor Graph::layer_norm(Tensor x, Tensor gamma, Tensor beta, float eps) {
  const std::string op = "layer_norm";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 1, 4);
  check_affine(impl(), op, x, gamma, beta, eps);
  return impl().add_node(OpKind::layer_norm, op, {x.id, gamma.id, beta.id}, LayerNormAttrs{eps},
                         x.shape, x.dtype);
}

Tensor Graph::add_layer_norm(Tensor a, Tensor b, Tensor gamma, Tensor beta, float eps) {
  const std::string op = "add_layer_norm";
  ops::require_float(impl(), op, "a", a);
  ops::require_rank(impl(), op, "a", a, 1, 4);
  ops::require_dtype(impl(), op, "b", b, a.dtype);
  if (b.shape != a.shape)
    shape_error(impl().label(op), "a " + describe(a) + " and b " + describe(b) +
                                      " must have the same shape (no broadcasting)");
  check_affine(impl(), op, a, gamma, beta, eps);
  return impl().add_node(OpKind::add_layer_norm, op, {a.id, b.id, gamma.id, beta.id},
                         LayerNormAttrs{eps}, a.shape, a.dtype);
}

void register_layer_norm_ops(OpRegistry& r) {
  r.add(OpKind::layer_norm, lower_layer_norm);
  r.add(OpKind::add_layer_norm, lower_add_layer_norm);
}

}  // namespace vkformer
