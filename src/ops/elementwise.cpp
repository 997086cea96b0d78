// Elementwise ops: add and mul (broadcasting), swiglu, scale, soft_cap, relu, gelu, silu, cast.
#include <cmath>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct UnaryPush {
  uint32_t n;
  float alpha;
  float beta;
};

// unary.comp's ACT beyond vkformer::Activation's values (shaders/activations.glsl).
constexpr uint32_t kActTanh = 5;

struct AddPush {
  uint32_t n;
  uint32_t dims[4];
  uint32_t a_stride[4];
  uint32_t b_stride[4];
};

// Tensors beyond one binding go in windows of elements (src/ops/windows.hpp).
// y = beta * act(alpha * x); act is a vkformer::Activation or kActTanh.
void lower_unary(Lowering& l, float alpha, uint32_t act, float beta = 1.0f) {
  const ValueDesc& x = l.value(l.input(0));
  const uint64_t es = dtype_size(x.dtype);
  ops::for_row_windows(
      l, static_cast<uint64_t>(x.shape.numel()), {{l.input(0)}, {l.output(), true}},
      {{0, es}, {1, es}}, l.node().label + ": elements",
      [&](const ops::Span& s, std::vector<Binding> bindings) {
        uint32_t n = static_cast<uint32_t>(s.count);
        // Four elements per invocation where they come in whole vec4s.
        const bool vec4 = n % 4 == 0;
        if (vec4) n /= 4;
        l.dispatch(vec4 ? Kernel::unary_vec4 : Kernel::unary, x.dtype, std::move(bindings),
                   PushBlock::of(UnaryPush{n, alpha, beta}), ops::elementwise_grid(l, n),
                   {ops::kElementwiseWorkgroup, act});
      });
}

void lower_scale(Lowering& l) {
  const ScaleAttrs& a = attrs<ScaleAttrs>(l);
  if (a.cap > 0.0f)
    lower_unary(l, 1.0f / a.cap, kActTanh, a.cap);
  else
    lower_unary(l, a.alpha, static_cast<uint32_t>(Activation::none));
}

void lower_activation(Lowering& l) {
  lower_unary(l, 1.0f, static_cast<uint32_t>(attrs<ActivationAttrs>(l).activation));
}

// A reshape is a view of its input, except where the input lives in an external that the graph
// writes later (see ExecutorImpl::build_program): then it is a copy, made at its place.
void lower_reshape_copy(Lowering& l) { lower_unary(l, 1.0f, static_cast<uint32_t>(Activation::none)); }

// How add reads b relative to a (MODE, shaders/add.comp): the two cases residual connections
// and biases need, without the per-element index arithmetic of general broadcasting.
enum AddMode : uint32_t { kAddGeneral = 0, kAddSameShape = 1, kAddRowBroadcast = 2 };

// What add.comp computes (OP): a + b, a * b, or silu(a) * b.
enum BinaryOp : uint32_t { kOpAdd = 0, kOpMul = 1, kOpSwiglu = 2 };

void lower_binary(Lowering& l, BinaryOp op) {
  const ValueDesc& a = l.value(l.input(0));
  const ValueDesc& b = l.value(l.input(1));
  const ValueDesc& o = l.value(l.output());
  AddPush p{};
  p.n = static_cast<uint32_t>(o.shape.numel());
  int offset = 4 - o.shape.rank();
  for (int d = 0; d < 4; ++d) p.dims[d] = d >= offset ? static_cast<uint32_t>(o.shape[d - offset]) : 1;
  uint32_t mode = kAddGeneral;
  uint32_t inputs[2] = {l.input(0), l.input(1)};
  const ValueDesc* full = &a;
  const ValueDesc* other = &b;
  // a + b = b + a (and a * b = b * a): put the full operand first. swiglu's operands have the
  // same shape, so it never swaps.
  if (b.shape == o.shape && a.shape != o.shape) {
    std::swap(inputs[0], inputs[1]);
    std::swap(full, other);
  }
  if (full->shape == o.shape) {
    if (other->shape == o.shape) mode = kAddSameShape;
    else if (other->shape.numel() == o.shape.back() && other->shape.back() == o.shape.back())
      mode = kAddRowBroadcast;  // [.., D] + [D] (or [1, D], ...)
  }
  ops::broadcast_strides4(full->shape, o.shape, p.a_stride);
  ops::broadcast_strides4(other->shape, o.shape, p.b_stride);
  // The two fast modes take four elements per invocation where rows come in whole vec4s.
  const bool vec4 = mode != kAddGeneral && o.shape.back() % 4 == 0;
  if (vec4) p.dims[3] /= 4;
  // Beyond one binding, windows of rows (src/ops/windows.hpp): b is windowed with a and out
  // when it has the same shape, bound whole when it is one row; general broadcasting is not
  // split (the executor names the op).
  const uint64_t d = static_cast<uint64_t>(o.shape.back()), es = dtype_size(o.dtype);
  std::vector<ops::RowOperand> windowed{{0, d * es}, {2, d * es}};
  if (mode == kAddSameShape) windowed.push_back({1, d * es});
  if (mode == kAddGeneral) windowed.clear();
  ops::for_row_windows(
      l, static_cast<uint64_t>(o.shape.numel()) / d, {{inputs[0]}, {inputs[1]}, {l.output(), true}},
      windowed, l.node().label + ": rows", [&](const ops::Span& s, std::vector<Binding> bindings) {
        AddPush q = p;
        if (mode != kAddGeneral) q.n = static_cast<uint32_t>(s.count * d / (vec4 ? 4 : 1));
        l.dispatch(vec4 ? Kernel::add_vec4 : Kernel::add, o.dtype, std::move(bindings),
                   PushBlock::of(q), ops::elementwise_grid(l, q.n),
                   {ops::kElementwiseWorkgroup, mode, op});
      });
}

void lower_add(Lowering& l) { lower_binary(l, kOpAdd); }
void lower_mul(Lowering& l) { lower_binary(l, kOpMul); }
void lower_swiglu(Lowering& l) { lower_binary(l, kOpSwiglu); }

void lower_cast(Lowering& l) {
  const ValueDesc& x = l.value(l.input(0));
  ops::for_row_windows(
      l, static_cast<uint64_t>(x.shape.numel()), {{l.input(0)}, {l.output(), true}},
      {{0, dtype_size(x.dtype)}, {1, dtype_size(l.value(l.output()).dtype)}},
      l.node().label + ": elements", [&](const ops::Span& s, std::vector<Binding> bindings) {
        uint32_t n = static_cast<uint32_t>(s.count);
        const bool vec4 = n % 4 == 0;
        if (vec4) n /= 4;
        l.dispatch(vec4 ? Kernel::cast_vec4 : Kernel::cast, x.dtype, std::move(bindings),
                   PushBlock::of(n), ops::elementwise_grid(l, n), {ops::kElementwiseWorkgroup});
      });
}

}  // namespace

static Tensor broadcast_binary(GraphImpl& g, OpKind kind, const std::string& op, Tensor a,
                               Tensor b) {
  ops::require_float(g, op, "a", a);
  ops::require_float(g, op, "b", b);
  if (a.dtype != b.dtype)
    shape_error(g.label(op), "dtypes differ: a is " + describe(a) + ", b is " + describe(b));
  Shape out;
  if (!broadcast_shapes(a.shape, b.shape, &out))
    shape_error(g.label(op), "a " + a.shape.str() + " and b " + b.shape.str() + " do not broadcast");
  return g.add_node(kind, op, {a.id, b.id}, {}, out, a.dtype);
}

Tensor Graph::mul(Tensor a, Tensor b) { return broadcast_binary(impl(), OpKind::mul, "mul", a, b); }

Tensor Graph::swiglu(Tensor gate, Tensor up) {
  const std::string op = "swiglu";
  ops::require_float(impl(), op, "gate", gate);
  ops::require_float(impl(), op, "up", up);
  if (gate.dtype != up.dtype || gate.shape != up.shape)
    shape_error(impl().label(op), "gate " + describe(gate) + " and up " + describe(up) +
                                      " must have the same shape and dtype");
  return impl().add_node(OpKind::swiglu, op, {gate.id, up.id}, {}, gate.shape, gate.dtype);
}

Tensor Graph::add(Tensor a, Tensor b) { return broadcast_binary(impl(), OpKind::add, "add", a, b); }

Tensor Graph::scale(Tensor x, float alpha) {
  const std::string op = "scale";
  ops::require_float(impl(), op, "x", x);
  ops::require_finite(impl(), op, "alpha", alpha);
  return impl().add_node(OpKind::scale, op, {x.id}, ScaleAttrs{alpha}, x.shape, x.dtype);
}

Tensor Graph::soft_cap(Tensor x, float cap) {
  const std::string op = "soft_cap";
  ops::require_float(impl(), op, "x", x);
  if (!std::isfinite(cap) || !(cap > 0.0f))
    throw Error(ErrorCode::invalid_argument, impl().label(op) + ": cap must be a finite number > 0, got " +
                                                 std::to_string(cap));
  ScaleAttrs a;
  a.cap = cap;
  return impl().add_node(OpKind::scale, op, {x.id}, a, x.shape, x.dtype);
}

Tensor Graph::copy(Tensor x) {
  const std::string op = "copy";
  ops::require_float(impl(), op, "x", x);
  // Multiplying by exactly 1 reproduces every f32/f16 value bit for bit.
  return impl().add_node(OpKind::scale, op, {x.id}, ScaleAttrs{1.0f}, x.shape, x.dtype);
}

static Tensor activation_node(GraphImpl& g, const std::string& op, Tensor x, Activation act) {
  ops::require_float(g, op, "x", x);
  return g.add_node(OpKind::activation, op, {x.id}, ActivationAttrs{act}, x.shape, x.dtype);
}

Tensor Graph::relu(Tensor x) { return activation_node(impl(), "relu", x, Activation::relu); }
Tensor Graph::gelu(Tensor x) { return activation_node(impl(), "gelu", x, Activation::gelu); }
Tensor Graph::silu(Tensor x) { return activation_node(impl(), "silu", x, Activation::silu); }

Tensor Graph::cast(Tensor x, DType to) {
  const std::string op = "cast";
  ops::require_float(impl(), op, "x", x);
  if (!is_float(to))
    shape_error(impl().label(op), "can only cast to f32 or f16, not " + std::string(dtype_name(to)));
  if (to == x.dtype) return x;
  return impl().add_node(OpKind::cast, op, {x.id}, CastAttrs{to}, x.shape, to);
}

void register_elementwise_ops(OpRegistry& r) {
  r.add(OpKind::add, lower_add);
  r.add(OpKind::mul, lower_mul);
  r.add(OpKind::swiglu, lower_swiglu);
  r.add(OpKind::scale, lower_scale);
  r.add(OpKind::activation, lower_activation);
  r.add(OpKind::cast, lower_cast);
  r.add(OpKind::reshape, lower_reshape_copy);
}

}  // namespace vkformer
