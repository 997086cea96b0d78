// Elementwise ops: add (broadcasting), scale, relu, gelu, cast.
#include "op_common.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct UnaryPush {
  uint32_t n;
  float alpha;
};

struct AddPush {
  uint32_t n;
  uint32_t dims[4];
  uint32_t a_stride[4];
  uint32_t b_stride[4];
};

void lower_unary(Lowering& l, float alpha, Activation act) {
  const ValueDesc& x = l.value(l.input(0));
  uint32_t n = static_cast<uint32_t>(x.shape.numel());
  l.dispatch(Kernel::unary, x.dtype, {{l.input(0)}, {l.output(), true}},
             PushBlock::of(UnaryPush{n, alpha}), ops::elementwise_grid(l, n),
             {ops::kElementwiseWorkgroup, static_cast<uint32_t>(act)});
}

void lower_scale(Lowering& l) { lower_unary(l, attrs<ScaleAttrs>(l).alpha, Activation::none); }

void lower_activation(Lowering& l) { lower_unary(l, 1.0f, attrs<ActivationAttrs>(l).activation); }

// Strides of `in` (right-aligned into rank 4) when broadcast to `out`; 0 where it repeats.
void broadcast_strides(const Shape& in, const Shape& out, uint32_t* strides) {
  int offset = 4 - out.rank();
  int in_offset = 4 - in.rank();
  uint32_t s = 1;
  for (int d = 3; d >= 0; --d) {
    int64_t od = d >= offset ? out[d - offset] : 1;
    int64_t id = d >= in_offset ? in[d - in_offset] : 1;
    strides[d] = (id == 1 && od != 1) ? 0 : s;
    s *= static_cast<uint32_t>(id);
  }
}

void lower_add(Lowering& l) {
  const ValueDesc& a = l.value(l.input(0));
  const ValueDesc& b = l.value(l.input(1));
  const ValueDesc& o = l.value(l.output());
  AddPush p{};
  p.n = static_cast<uint32_t>(o.shape.numel());
  int offset = 4 - o.shape.rank();
  for (int d = 0; d < 4; ++d) p.dims[d] = d >= offset ? static_cast<uint32_t>(o.shape[d - offset]) : 1;
  broadcast_strides(a.shape, o.shape, p.a_stride);
  broadcast_strides(b.shape, o.shape, p.b_stride);
  l.dispatch(Kernel::add, o.dtype, {{l.input(0)}, {l.input(1)}, {l.output(), true}},
             PushBlock::of(p), ops::elementwise_grid(l, p.n), {ops::kElementwiseWorkgroup});
}

void lower_cast(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  uint32_t n = static_cast<uint32_t>(x.shape.numel());
  l.dispatch(Kernel::cast, x.dtype, {{l.input(0)}, {l.output(), true}}, PushBlock::of(n),
             ops::elementwise_grid(l, n), {ops::kElementwiseWorkgroup});
}

}  // namespace

Tensor Graph::add(Tensor a, Tensor b) {
  const std::string op = "add";
  ops::require_float(*impl_, op, "a", a);
  ops::require_float(*impl_, op, "b", b);
  if (a.dtype != b.dtype)
    shape_error(impl_->label(op), "dtypes differ: a is " + describe(a) + ", b is " + describe(b));
  Shape out;
  if (!broadcast_shapes(a.shape, b.shape, &out))
    shape_error(impl_->label(op), "a " + a.shape.str() + " and b " + b.shape.str() +
                                      " do not broadcast");
  return impl_->add_node(OpKind::add, op, {a.id, b.id}, {}, out, a.dtype);
}

Tensor Graph::scale(Tensor x, float alpha) {
  const std::string op = "scale";
  ops::require_float(*impl_, op, "x", x);
  return impl_->add_node(OpKind::scale, op, {x.id}, ScaleAttrs{alpha}, x.shape, x.dtype);
}

Tensor Graph::copy(Tensor x) {
  const std::string op = "copy";
  ops::require_float(*impl_, op, "x", x);
  // Multiplying by exactly 1 reproduces every f32/f16 value bit for bit.
  return impl_->add_node(OpKind::scale, op, {x.id}, ScaleAttrs{1.0f}, x.shape, x.dtype);
}

static Tensor activation_node(GraphImpl& g, const std::string& op, Tensor x, Activation act) {
  ops::require_float(g, op, "x", x);
  return g.add_node(OpKind::activation, op, {x.id}, ActivationAttrs{act}, x.shape, x.dtype);
}

Tensor Graph::relu(Tensor x) { return activation_node(*impl_, "relu", x, Activation::relu); }
Tensor Graph::gelu(Tensor x) { return activation_node(*impl_, "gelu", x, Activation::gelu); }

Tensor Graph::cast(Tensor x, DType to) {
  const std::string op = "cast";
  ops::require_float(*impl_, op, "x", x);
  if (!is_float(to))
    shape_error(impl_->label(op), "can only cast to f32 or f16, not " + std::string(dtype_name(to)));
  if (to == x.dtype) return x;
  return impl_->add_node(OpKind::cast, op, {x.id}, CastAttrs{to}, x.shape, to);
}

void register_elementwise_ops(OpRegistry& r) {
  r.add(OpKind::add, lower_add);
  r.add(OpKind::scale, lower_scale);
  r.add(OpKind::activation, lower_activation);
  r.add(OpKind::cast, lower_cast);
}

}  // namespace vkformer
