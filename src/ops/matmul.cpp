// matmul and linear: out = activation(alpha * a·b + bias) with numpy-broadcast batch dims, one
// tiled kernel (shaders/matmul.comp) whose tiling comes from vk::Tuning::matmul.
#include "matmul.hpp"

#include <algorithm>

#include "op_common.hpp"

namespace vkformer {

using kernels::Kernel;
using ops::attrs;

namespace ops {

namespace {

// Matches the push block of shaders/matmul.comp.
struct MatmulPush {
  uint32_t m, n, k;
  uint32_t batch1;
  uint32_t a_stride0, a_stride1;
  uint32_t b_stride0, b_stride1;
  uint32_t y_base, z_base;
  float alpha;
};

std::string name(DType t) { return std::string(dtype_name(t)); }

Shape leading(const Shape& s) {  // all but the last two dims
  auto d = s.dims();
  d.resize(d.size() - 2);
  return Shape(d);
}

// Element strides of the batch dims of a tensor with batch shape `in` (matrices of `matrix`
// elements) broadcast to out's batch dims `out` (padded to 2, right-aligned); 0 where it repeats.
// Returns whether any dim repeats.
bool batch_strides(const Shape& in, const uint64_t out[2], uint64_t matrix, uint64_t strides[2]) {
  bool broadcast = false;
  uint64_t s = matrix;
  for (int d = 1; d >= 0; --d) {
    int i = in.rank() - 2 + d;
    uint64_t dim = i >= 0 ? static_cast<uint64_t>(in[i]) : 1;
    strides[d] = dim == 1 ? 0 : s;
    broadcast |= dim != out[d];
    s *= dim;
  }
  return broadcast;
}

}  // namespace

bool matmul_output_shape(const Shape& a, const Shape& b, bool transpose_b, Shape* out,
                         std::string* why, const char* a_name, const char* b_name) {
  auto fail = [&](const std::string& detail) {
    if (why)
      *why = std::string(a_name) + " is " + a.str() + ", " + b_name + " is " + b.str() +
             (transpose_b ? " (transposed)" : "") + ": " + detail;
    return false;
  };
  if (a.rank() < 2 || a.rank() > 4) return fail(std::string(a_name) + " must have rank 2 to 4");
  if (b.rank() < 2 || b.rank() > 4) return fail(std::string(b_name) + " must have rank 2 to 4");
  int64_t m = a[-2], k = a[-1];
  int64_t kb = transpose_b ? b[-1] : b[-2];
  int64_t n = transpose_b ? b[-2] : b[-1];
  if (k != kb)
    return fail("inner dims " + std::to_string(k) + " != " + std::to_string(kb));
  Shape batch;
  if (!broadcast_shapes(leading(a), leading(b), &batch))
    return fail("batch dims " + leading(a).str() + " and " + leading(b).str() +
                " do not broadcast");
  auto dims = batch.dims();
  dims.push_back(m);
  dims.push_back(n);
  *out = Shape(dims);
  return true;
}

void emit_matmul(Lowering& l, const MatmulCall& c) {
  auto bug = [&](const std::string& what) {
    throw Error(ErrorCode::internal, l.node().label + ": emit_matmul: " + what);
  };
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const ValueDesc& o = l.value(c.out);
  Shape want;
  std::string why;
  if (!matmul_output_shape(a.shape, b.shape, c.transpose_b, &want, &why)) bug(why);
  if (o.shape.rank() < 2 || o.shape[-2] != want[-2] || o.shape[-1] != want[-1] ||
      o.shape.numel() != want.numel())
    bug("out is " + o.shape.str() + ", a·b is " + want.str());
  if (!is_float(a.dtype) || b.dtype != a.dtype || o.dtype != a.dtype)
    bug("dtypes a " + name(a.dtype) + ", b " + name(b.dtype) + ", out " + name(o.dtype) +
        " must be one float dtype");
  if (c.bias != kNoValue) {
    const ValueDesc& bias = l.value(c.bias);
    if (bias.shape != Shape{want[-1]} || bias.dtype != a.dtype)
      bug("bias is " + bias.shape.str() + " " + name(bias.dtype) + ", expected [" +
          std::to_string(want[-1]) + "] " + name(a.dtype));
  }

  uint64_t m = static_cast<uint64_t>(want[-2]), n = static_cast<uint64_t>(want[-1]);
  uint64_t k = static_cast<uint64_t>(a.shape[-1]);
  Shape batch_shape = leading(want);
  uint64_t d[2] = {1, 1};  // out's batch dims, right-aligned
  for (int i = 0; i < batch_shape.rank(); ++i) d[2 - batch_shape.rank() + i] = batch_shape[i];
  uint64_t as[2], bs[2];
  bool a_broadcast = batch_strides(leading(a.shape), d, m * k, as);
  batch_strides(leading(b.shape), d, k * n, bs);
  uint64_t batch = d[0] * d[1];
  // One B for every batch and A contiguous over the batch ([B,S,D]x[D,N], linear layers): the
  // batch is just more rows, which fills tiles better than one small matmul per batch.
  if (batch > 1 && bs[0] == 0 && bs[1] == 0 && !a_broadcast) {
    m *= batch;
    batch = 1;
    d[0] = d[1] = 1;
    as[0] = as[1] = 0;
  }

  const vk::MatmulTiles& t = l.tuning().matmul;
  if (t.tm == 0 || t.tn == 0 || t.bk == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() == 0 ||
      t.invocations() > l.info().max_workgroup_invocations ||
      t.invocations() > l.info().max_workgroup_size[0] ||
      t.shared_bytes() > l.info().shared_memory_bytes)
    bug("tuning gives an invalid matmul tiling " + std::to_string(t.bm) + "x" +
        std::to_string(t.bn) + "x" + std::to_string(t.bk) + " / " + std::to_string(t.tm) + "x" +
        std::to_string(t.tn));
  std::vector<uint32_t> spec = {t.invocations(),
                                t.bm,
                                t.bn,
                                t.shared_memory ? t.bk : 1u,
                                t.tm,
                                t.tn,
                                t.shared_memory ? 1u : 0u,
                                c.transpose_b ? 1u : 0u,
                                c.bias != kNoValue ? 1u : 0u,
                                static_cast<uint32_t>(c.activation)};

  MatmulPush p{};
  p.m = static_cast<uint32_t>(m);
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  p.batch1 = static_cast<uint32_t>(d[1]);
  p.a_stride0 = static_cast<uint32_t>(as[0]);
  p.a_stride1 = static_cast<uint32_t>(as[1]);
  p.b_stride0 = static_cast<uint32_t>(bs[0]);
  p.b_stride1 = static_cast<uint32_t>(bs[1]);
  p.alpha = c.alpha;
  // The bias binding must name a buffer even without a bias; the kernel then never reads it.
  std::vector<Binding> bindings = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  // Row tiles and batches beyond the device's grid limits go in further dispatches (many rows
  // come from folding a batch into M on small CPU tiles).
  const uint64_t x_tiles = ceil_div(n, t.bn), y_tiles = ceil_div(m, t.bm);
  const uint64_t max_y = std::max<uint32_t>(l.info().max_workgroup_count[1], 1);
  const uint64_t max_z = std::max<uint32_t>(l.info().max_workgroup_count[2], 1);
  for (uint64_t z = 0; z < batch; z += max_z)
    for (uint64_t y = 0; y < y_tiles; y += max_y) {
      p.y_base = static_cast<uint32_t>(y);
      p.z_base = static_cast<uint32_t>(z);
      l.dispatch(Kernel::matmul, a.dtype, bindings, PushBlock::of(p),
                 l.grid(x_tiles, std::min(max_y, y_tiles - y), std::min(max_z, batch - z)), spec);
    }
}

}  // namespace ops

namespace {

// matmul and linear nodes; arg_a / arg_b name the operands in errors ("a"/"b", "x"/"weight").
Tensor matmul_node(GraphImpl& g, const std::string& op, const char* arg_a, const char* arg_b,
                   Tensor a, Tensor b, const MatmulOptions& options) {
  const std::string label = g.label(op);
  ops::require_float(g, op, arg_a, a);
  ops::require_float(g, op, arg_b, b);
  Shape out;
  std::string why;
  if (!ops::matmul_output_shape(a.shape, b.shape, options.transpose_b, &out, &why, arg_a, arg_b))
    shape_error(label, why);
  if (a.dtype != b.dtype)
    shape_error(label, std::string("dtypes differ: ") + arg_a + " is " + describe(a) + ", " +
                           arg_b + " is " + describe(b));
  std::vector<uint32_t> inputs = {a.id, b.id};
  if (options.bias) {
    const Tensor& bias = *options.bias;
    g.check(bias, op, "bias");
    if (bias.shape != Shape{out[-1]} || bias.dtype != a.dtype)
      shape_error(label, "bias must be [" + std::to_string(out[-1]) + "] " +
                             ops::name(a.dtype) + " (" + arg_a + " " + a.shape.str() + " · " +
                             arg_b + " " + b.shape.str() + " is " + out.str() + "), got " +
                             describe(bias));
    inputs.push_back(bias.id);
  }
  MatmulAttrs at;
  at.transpose_b = options.transpose_b;
  at.has_bias = options.bias.has_value();
  at.alpha = options.alpha;
  at.activation = options.activation;
  return g.add_node(OpKind::matmul, op, std::move(inputs), at, out, a.dtype);
}

void lower_matmul(Lowering& l) {
  const auto& at = attrs<MatmulAttrs>(l);
  ops::MatmulCall c;
  c.a = l.input(0);
  c.b = l.input(1);
  c.out = l.output();
  c.bias = at.has_bias ? l.input(2) : kNoValue;
  c.transpose_b = at.transpose_b;
  c.alpha = at.alpha;
  c.activation = at.activation;
  ops::emit_matmul(l, c);
}

}  // namespace

Tensor Graph::matmul(Tensor a, Tensor b, const MatmulOptions& options) {
  return matmul_node(*impl_, "matmul", "a", "b", a, b, options);
}

Tensor Graph::linear(Tensor x, Tensor weight, std::optional<Tensor> bias, Activation activation) {
  ops::require_rank(*impl_, "linear", "weight", weight, 2, 2);
  MatmulOptions options;
  options.transpose_b = true;
  options.bias = bias;
  options.activation = activation;
  return matmul_node(*impl_, "linear", "x", "weight", x, weight, options);
}

void register_matmul_ops(OpRegistry& r) { r.add(OpKind::matmul, lower_matmul); }

}  // namespace vkformer
