// layer_norm over the last dim, one workgroup per row (see shaders/layer_norm.comp).
#include <algorithm>
#include <cstdlib>
#include <string>

#include "op_common.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct LayerNormPush {
  uint32_t rows;
  uint32_t d;
  float eps;
};

// The largest power of two <= v (v >= 1).
uint32_t floor_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

void lower_layer_norm(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  const int64_t d = x.shape.back();
  const int64_t rows = x.shape.numel() / d;

  // The tuned reduction size, a power of two (the shared-memory tree needs one). Short rows
  // get a smaller workgroup, but not below one subgroup (32 where the device reports less):
  // a workgroup per row of D = 8 should not keep 248 idle invocations.
  uint32_t wg = floor_pow2(std::max<uint32_t>(1, l.tuning().reduction_workgroup));
  const uint32_t floor_wg = std::min(wg, floor_pow2(std::max<uint32_t>(32, l.info().subgroup_size)));
  while (wg / 2 >= floor_wg && static_cast<int64_t>(wg / 2) >= d) wg /= 2;

  const bool subgroups = l.tuning().use_subgroup_reductions &&
                         l.supported(Kernel::layer_norm_subgroup, x.dtype);
  LayerNormPush p{static_cast<uint32_t>(rows), static_cast<uint32_t>(d),
                  attrs<LayerNormAttrs>(l).eps};
  l.dispatch(subgroups ? Kernel::layer_norm_subgroup : Kernel::layer_norm, x.dtype,
             {{l.input(0)}, {l.input(1)}, {l.input(2)}, {l.output(), true}}, PushBlock::of(p),
             l.rows_grid(static_cast<uint64_t>(rows)), {wg});
}

}  // namespace

Tensor Graph::layer_norm(Tensor x, Tensor gamma, Tensor beta, float eps) {
  const std::string op = "layer_norm";
  ops::require_float(*impl_, op, "x", x);
  ops::require_rank(*impl_, op, "x", x, 1, 4);
  ops::require_dtype(*impl_, op, "gamma", gamma, x.dtype);
  ops::require_dtype(*impl_, op, "beta", beta, x.dtype);
  const Shape want{x.shape.back()};
  if (gamma.shape != want || beta.shape != want)
    shape_error(impl_->label(op), "x is " + describe(x) + ": gamma and beta must be " +
                                      want.str() + ", got gamma " + gamma.shape.str() +
                                      " and beta " + beta.shape.str());
  if (!(eps >= 0.0f))
    throw Error(ErrorCode::invalid_argument,
                impl_->label(op) + ": eps must be >= 0, got " + std::to_string(eps));
  return impl_->add_node(OpKind::layer_norm, op, {x.id, gamma.id, beta.id}, LayerNormAttrs{eps},
                         x.shape, x.dtype);
}

void register_layer_norm_ops(OpRegistry& r) { r.add(OpKind::layer_norm, lower_layer_norm); }

}  // namespace vkformer
