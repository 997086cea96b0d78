// Sentence-embedding heads: pool (mean, CLS or max over the kept tokens) and l2_normalize, so a
// sentence encoder's whole output is computed on the device.
#include <string>

#include "op_common.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct PoolPush {
  uint32_t n;  // B * D
  uint32_t s;
  uint32_t d;
};

struct L2NormalizePush {
  uint32_t rows;
  uint32_t d;
  float eps;
};

void lower_pool(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  const PoolPush p{static_cast<uint32_t>(x.shape[0] * x.shape[2]), static_cast<uint32_t>(x.shape[1]),
                   static_cast<uint32_t>(x.shape[2])};
  l.dispatch(Kernel::pool, x.dtype, {{l.input(0)}, {l.input(1)}, {l.output(), true}},
             PushBlock::of(p), ops::elementwise_grid(l, p.n),
             {ops::kElementwiseWorkgroup, static_cast<uint32_t>(attrs<PoolAttrs>(l).mode)});
}

void lower_l2_normalize(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  const int64_t d = x.shape.back();
  const L2NormalizePush p{static_cast<uint32_t>(x.shape.numel() / d), static_cast<uint32_t>(d),
                          attrs<L2NormalizeAttrs>(l).eps};
  // Small workgroups: each invocation walks a whole row, and there are few rows.
  l.dispatch(Kernel::l2_normalize, x.dtype, {{l.input(0)}, {l.output(), true}}, PushBlock::of(p),
             {ceil_div(p.rows, 32), 1, 1}, {32});
}

}  // namespace

Tensor Graph::pool(Tensor x, Tensor attention_mask, PoolMode mode) {
  const std::string op = "pool";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 3, 3);
  ops::require_dtype(impl(), op, "attention_mask", attention_mask, DType::i32);
  if (attention_mask.shape != Shape{x.shape[0], x.shape[1]})
    shape_error(impl().label(op), "attention_mask is " + describe(attention_mask) + ", x is " +
                                      describe(x) + ": the mask must be [batch, seq] of x");
  if (x.shape[1] == 0) shape_error(impl().label(op), "x is " + describe(x) + ": no tokens to pool");
  if (static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(impl().label(op), "x is " + describe(x) + ": more than 2^32 elements");
  if (mode != PoolMode::mean && mode != PoolMode::cls && mode != PoolMode::max)
    throw Error(ErrorCode::invalid_argument, impl().label(op) + ": unknown pooling mode " +
                                                 std::to_string(static_cast<int>(mode)));
  return impl().add_node(OpKind::pool, op, {x.id, attention_mask.id}, PoolAttrs{mode},
                         Shape{x.shape[0], x.shape[2]}, x.dtype);
}

Tensor Graph::l2_normalize(Tensor x, float eps) {
  const std::string op = "l2_normalize";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 1, 4);
  ops::require_finite(impl(), op, "eps", eps);
  if (!(eps > 0.0f))
    throw Error(ErrorCode::invalid_argument, impl().label(op) + ": eps must be positive, got " +
                                                 std::to_string(eps));
  if (x.shape.numel() == 0 || static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(impl().label(op), "x is " + describe(x) + ": needs 1 to 2^32 elements");
  return impl().add_node(OpKind::l2_normalize, op, {x.id}, L2NormalizeAttrs{eps}, x.shape, x.dtype);
}

void register_pooling_ops(OpRegistry& r) {
  r.add(OpKind::pool, lower_pool);
  r.add(OpKind::l2_normalize, lower_l2_normalize);
}

}  // namespace vkformer
