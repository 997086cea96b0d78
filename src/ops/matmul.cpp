// matmul and linear: out = activation(alpha * a·b + bias) with numpy-broadcast batch dims. Here:
// the shapes, folding a shared B's batch into M, windows where a tensor exceeds a binding, and the
// problem each product is; which kernel computes it and how it is launched the matmul path table
// says (src/kernels/matmul_paths*.cpp).
#include "matmul.hpp"

#include <algorithm>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;

namespace ops {

namespace {
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

// A matmul as its kernels see it: out = a·b over `batch` matrices of m x n, with out's batch dims
// d (right-aligned) and the element strides of a and b per batch dim (0 where they broadcast).
struct Folded {
  uint64_t m, n, k, batch;
  uint64_t d[2], as[2], bs[2];
};

Folded fold(const Shape& a, const Shape& b, bool transpose_b) {
  Folded f;
  f.m = static_cast<uint64_t>(a[-2]);
  f.k = static_cast<uint64_t>(a[-1]);
  f.n = static_cast<uint64_t>(transpose_b ? b[-2] : b[-1]);
  Shape batch_shape;
  broadcast_shapes(leading(a), leading(b), &batch_shape);
  f.d[0] = f.d[1] = 1;
  for (int i = 0; i < batch_shape.rank(); ++i) f.d[2 - batch_shape.rank() + i] = batch_shape[i];
  bool a_broadcast = batch_strides(leading(a), f.d, f.m * f.k, f.as);
  batch_strides(leading(b), f.d, f.k * f.n, f.bs);
  f.batch = f.d[0] * f.d[1];
  // One B for every batch and A contiguous over the batch ([B,S,D]x[D,N], linear layers): the
  // batch is just more rows, which fills tiles better than one small matmul per batch.
  if (f.batch > 1 && f.bs[0] == 0 && f.bs[1] == 0 && !a_broadcast) {
    f.m *= f.batch;
    f.batch = 1;
    f.d[0] = f.d[1] = 1;
    f.as[0] = f.as[1] = 0;
  }
  return f;
}

// The push block of a folded product (whole bindings; windows adjust it).
MatmulPush push_of(const Folded& f, const MatmulCall& c) {
  MatmulPush p{};
  p.m = static_cast<uint32_t>(f.m);
  p.n = static_cast<uint32_t>(f.n);
  p.k = static_cast<uint32_t>(f.k);
  p.batch1 = static_cast<uint32_t>(f.d[1]);
  p.a_stride0 = static_cast<uint32_t>(f.as[0]);
  p.a_stride1 = static_cast<uint32_t>(f.as[1]);
  p.b_stride0 = static_cast<uint32_t>(f.bs[0]);
  p.b_stride1 = static_cast<uint32_t>(f.bs[1]);
  p.alpha = c.alpha;
  p.splits = 1;
  p.k_split = p.k;
  p.ldo = p.n;
  return p;
}

// The problem of one product of q.m x q.n over `batch` matrices with `operands` (a, b, ...) bound.
kernels::MatmulProblem problem_of(const Lowering& l, const MatmulCall& c, const MatmulPush& q,
                                  uint64_t batch, const std::vector<Binding>& operands) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const uint64_t limit = l.tuning().max_binding_bytes;
  kernels::MatmulProblem p;
  p.m = q.m;
  p.n = q.n;
  p.k = q.k;
  p.batch = batch;
  p.transpose_b = c.transpose_b;
  p.dtype = a.dtype;
  if (b.dtype != a.dtype) p.weight = b.dtype;
  p.bias = c.bias != kNoValue;
  p.activation = c.activation;
  p.norm_eps = c.norm_eps;
  p.fusions = {c.norm != kNoValue, c.gated, c.residual != kNoValue};
  p.a_bytes = operands[0].bytes(a);
  p.b_bytes = operands[1].bytes(b);
  p.residual_bytes = c.residual != kNoValue ? l.value(c.residual).bytes() : 0;
  p.max_texels = l.info().max_texel_buffer_elements;
  p.whole = a.bytes() <= limit && b.bytes() <= limit && l.value(c.out).bytes() <= limit;
  // Windows as bound here (emit_matmul_weights'), each within a binding; not the whole values.
  p.one_row_windows = !p.whole && q.m == 1 && batch == 1 && a.bytes() <= limit && p.b_bytes <= limit &&
                      operands[3].bytes(l.value(c.out)) <= limit;
  return p;
}

kernels::KernelSupport support_of(const Lowering& l) {
  return [&l](kernels::Kernel k, DType dtype) { return l.supported(k, dtype); };
}

// Emits `plan` with the operands a, b, bias, out (whole or windows), the residual and the norm's
// weight (absent ones bound as a).
void emit_plan(Lowering& l, const MatmulCall& c, const kernels::MatmulQuery& query,
               const kernels::MatmulPlan& plan, const MatmulPush& q, std::vector<Binding> operands) {
  operands.push_back(c.residual != kNoValue ? Binding{c.residual} : operands[0]);
  operands.push_back(c.norm != kNoValue ? Binding{c.norm} : operands[0]);
  plan.entry->emit(l, {query, plan, std::move(operands), q});
}

}  // namespace

void emit_matmul_path(Lowering& l, const MatmulCall& c, const MatmulPush& q, uint64_t batch,
                      const std::vector<Binding>& operands) {
  const kernels::MatmulProblem problem = problem_of(l, c, q, batch, operands);
  const kernels::KernelSupport supported = support_of(l);
  const kernels::MatmulQuery query{l.tuning().matmul, problem, supported};
  emit_plan(l, c, query, kernels::plan_matmul(query.tuning, problem, supported), q, operands);
}

bool matmul_path_fuses(Lowering& l, const MatmulCall& c, const MatmulPush& q, uint64_t batch,
                       const std::vector<Binding>& operands) {
  const kernels::MatmulProblem problem = problem_of(l, c, q, batch, operands);
  const kernels::KernelSupport supported = support_of(l);
  const kernels::MatmulQuery query{l.tuning().matmul, problem, supported};
  const kernels::MatmulPlan plan = kernels::plan_matmul(query.tuning, problem, supported);
  return plan.entry->fuses && plan.entry->fuses(query);
}

MatmulPush weight_push(uint64_t m, uint64_t n, uint64_t k, float alpha) {
  MatmulPush p{};
  p.m = static_cast<uint32_t>(m);
  p.n = static_cast<uint32_t>(n);
  p.k = static_cast<uint32_t>(k);
  p.batch1 = 1;
  p.alpha = alpha;
  p.splits = 1;
  p.k_split = p.k;
  p.ldo = p.n;
  return p;
}

bool emit_matmul_fusing(Lowering& l, const MatmulCall& c) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  MatmulPush p;
  uint64_t batch = 1;
  if (b.dtype != a.dtype) {  // a weight [N, K] (a gated one holds gate and up rows, [2N, K])
    const uint64_t k = static_cast<uint64_t>(b.shape[1]);
    p = weight_push(static_cast<uint64_t>(a.shape.numel()) / k,
                    static_cast<uint64_t>(b.shape[0]) / (c.gated ? 2 : 1), k, c.alpha);
  } else {
    const Folded f = fold(a.shape, b.shape, c.transpose_b);
    p = push_of(f, c);
    batch = f.batch;
  }
  const std::vector<Binding> operands = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  const kernels::MatmulProblem problem = problem_of(l, c, p, batch, operands);
  const kernels::KernelSupport supported = support_of(l);
  const kernels::MatmulQuery query{l.tuning().matmul, problem, supported};
  const kernels::MatmulPlan plan = kernels::plan_matmul(query.tuning, problem, supported);
  if (!plan.entry->fuses || !plan.entry->fuses(query)) return false;
  emit_plan(l, c, query, plan, p, operands);
  return true;
}

namespace {

// A matmul whose a, b or out is larger than one binding may span: the product is computed in
// windows (src/ops/windows.hpp). With a batch of matrices, whole matrices per window; with one
// matrix, rows of a and out, and rows of a transposed b (columns of out, written with out's row
// stride; the kernels split K only where out's rows are whole). `emit` computes one window's
// product.
template <class Emit>
void emit_matmul_windows(Lowering& l, const MatmulCall& c, const Folded& f, const MatmulPush& p,
                         const std::vector<Binding>& whole, Emit&& emit) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const uint64_t es = dtype_size(a.dtype);
  const uint64_t limit = l.tuning().max_binding_bytes;
  const uint64_t align = window_alignment(l.info());
  const std::string& what = l.node().label;
  auto unsupported = [&](const std::string& why) {
    throw Error(ErrorCode::unsupported,
                what + ": a " + a.shape.str() + " · b " + b.shape.str() + " " +
                    std::string(dtype_name(a.dtype)) + " spans more than the " +
                    std::to_string(limit) + " bytes one binding may (maxStorageBufferRange of '" +
                    l.info().name + "'), and " + why);
  };
  auto bias_or_a = [&](std::vector<Binding>& ops) {
    if (c.bias == kNoValue) ops[2] = ops[0];
  };

  if (f.batch > 1) {
    // Each operand's matrices follow each other (z * matrix), or one matrix serves all.
    auto repeated = [](const uint64_t s[2]) { return s[0] == 0 && s[1] == 0; };
    auto consecutive = [&](const uint64_t s[2], uint64_t matrix) {
      return s[1] == matrix && (s[0] == f.d[1] * matrix || f.d[0] == 1);
    };
    const uint64_t am = f.m * f.k, bm = f.k * f.n, om = f.m * f.n;
    if ((!repeated(f.as) && !consecutive(f.as, am)) || (!repeated(f.bs) && !consecutive(f.bs, bm)))
      unsupported("its batch broadcasts in a way the windows cannot follow");
    if ((repeated(f.as) && a.bytes() > limit) || (repeated(f.bs) && b.bytes() > limit))
      unsupported("one matrix that every batch uses is itself larger than that");
    const uint64_t a_item = repeated(f.as) ? 0 : am * es, b_item = repeated(f.bs) ? 0 : bm * es;
    for (const Span& s :
         split_spans(f.batch, {a_item, b_item, om * es}, limit, align, what + ": matmul batches")) {
      std::vector<Binding> ops = whole;
      if (a_item) ops[0] = window(c.a, false, s.first * a_item, s.count * a_item);
      if (b_item) ops[1] = window(c.b, false, s.first * b_item, s.count * b_item);
      ops[3] = window(c.out, true, s.first * om * es, s.count * om * es);
      bias_or_a(ops);
      emit(p, s.count, ops);
    }
    return;
  }

  const uint64_t m = f.m, n = f.n, k = f.k;
  std::vector<Span> n_spans = {{0, n}};
  if (b.bytes() > limit) {
    if (!c.transpose_b)
      unsupported("b is split into windows only when transposed (linear's [out, in] weight)");
    // Rows of b, and the matching elements of bias and of out's rows (where out's window starts).
    n_spans = split_spans(n, {k * es, es}, limit, align, what + ": rows of b");
  }
  const std::vector<Span> m_spans =
      split_spans(m, {k * es, n * es}, limit, align, what + ": rows of a");
  for (const Span& ms : m_spans)
    for (const Span& ns : n_spans) {
      std::vector<Binding> ops = whole;
      if (m_spans.size() > 1) ops[0] = window(c.a, false, ms.first * k * es, ms.count * k * es);
      if (n_spans.size() > 1) {
        ops[1] = window(c.b, false, ns.first * k * es, ns.count * k * es);
        if (c.bias != kNoValue) ops[2] = window(c.bias, false, ns.first * es, ns.count * es);
      }
      ops[3] = window(c.out, true, (ms.first * n + ns.first) * es,
                      ((ms.count - 1) * n + ns.count) * es);
      bias_or_a(ops);
      MatmulPush q = p;
      q.m = static_cast<uint32_t>(ms.count);
      q.n = static_cast<uint32_t>(ns.count);
      q.ldo = static_cast<uint32_t>(n);
      emit(q, 1, ops);
    }
}

}  // namespace

kernels::MatmulProblem matmul_problem(const Shape& a, const Shape& b, bool transpose_b, DType dtype,
                                      const DeviceInfo& info) {
  const Folded f = fold(a, b, transpose_b);
  kernels::MatmulProblem problem;
  problem.m = f.m;
  problem.n = f.n;
  problem.k = f.k;
  problem.batch = f.batch;
  problem.transpose_b = transpose_b;
  problem.dtype = dtype;
  problem.a_bytes = dtype_bytes(dtype, a.numel());
  problem.b_bytes = dtype_bytes(dtype, b.numel());
  problem.max_texels = info.max_texel_buffer_elements;
  return problem;
}

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
  if (c.fused()) {
    emit_matmul_fused(l, c);
    return;
  }
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const ValueDesc& o = l.value(c.out);
  if (b.dtype != a.dtype && is_weight_type(b.dtype)) {
    emit_matmul_weights(l, c);
    return;
  }
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

  const Folded f = fold(a.shape, b.shape, c.transpose_b);
  const MatmulPush p = push_of(f, c);
  // One product of q.m x q.n over `batch` matrices, with `operands` bound (whole or windows).
  auto emit = [&](const MatmulPush& q, uint64_t batch, const std::vector<Binding>& operands) {
    emit_matmul_path(l, c, q, batch, operands);
  };
  const std::vector<Binding> whole = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  const uint64_t limit = l.tuning().max_binding_bytes;
  if (a.bytes() <= limit && b.bytes() <= limit && o.bytes() <= limit) {
    emit(p, f.batch, whole);
    return;
  }
  emit_matmul_windows(l, c, f, p, whole, emit);
}

}  // namespace ops

namespace {

// matmul and linear nodes; arg_a / arg_b name the operands in errors ("a"/"b", "x"/"weight").
// `fusions` (linear only) adds the pre-norm, gated pair and residual.
Tensor matmul_node(GraphImpl& g, const std::string& op, const char* arg_a, const char* arg_b,
                   Tensor a, Tensor b, const MatmulOptions& options,
                   const LinearOptions* fusions = nullptr) {
  const std::string label = g.label(op);
  ops::require_float(g, op, arg_a, a);
  g.check(b, op, arg_b);
  if (!is_weight_type(b.dtype))
    shape_error(label, std::string(arg_b) + " must be " + weight_type_names() + ", got " +
                           describe(b));
  const bool gated = fusions && fusions->gated;
  Shape out;
  std::string why;
  if (!ops::matmul_output_shape(a.shape, b.shape, options.transpose_b, &out, &why, arg_a, arg_b))
    shape_error(label, why);
  // The product's columns: out's, or twice as many when gated.
  const int64_t columns = out[-1];
  if (gated) {
    if (columns % 2)
      shape_error(label, std::string(arg_b) + " is " + describe(b) +
                             ": a gated linear's weight holds the gate and the up rows, an even "
                             "number of rows");
    auto dims = out.dims();
    dims.back() /= 2;
    out = Shape(dims);
  }
  // A weight in another dtype than the activations (quantized, bf16, or the other float type)
  // is read by its own kernels, which take linear's layout: [N, K], transposed.
  if (a.dtype != b.dtype) {
    if (!options.transpose_b || b.shape.rank() != 2)
      shape_error(label, std::string(arg_b) + " is " + describe(b) + " and " + arg_a + " is " +
                             describe(a) + ": a weight in another dtype than " + arg_a +
                             " must be a rank-2 [N, K] matrix used transposed (transpose_b, as "
                             "linear does)");
    if (is_quantized(b.dtype) && b.shape[1] % dtype_block_elements(b.dtype) != 0)
      shape_error(label, std::string(arg_b) + " is " + describe(b) + ": its rows must be whole " +
                             "blocks of " + std::to_string(dtype_block_elements(b.dtype)) +
                             " elements");
  }
  std::vector<uint32_t> inputs = {a.id, b.id};
  if (options.bias) {
    const Tensor& bias = *options.bias;
    g.check(bias, op, "bias");
    if (bias.shape != Shape{columns} || bias.dtype != a.dtype)
      shape_error(label, "bias must be [" + std::to_string(columns) + "] " +
                             ops::name(a.dtype) + " (" + arg_a + " " + a.shape.str() + " · " +
                             arg_b + " " + b.shape.str() + " is " + out.str() +
                             (gated ? ", gate and up" : "") + "), got " + describe(bias));
    inputs.push_back(bias.id);
  }
  ops::require_finite(g, op, "alpha", options.alpha);
  MatmulAttrs at;
  at.transpose_b = options.transpose_b;
  at.has_bias = options.bias.has_value();
  at.alpha = options.alpha;
  at.activation = options.activation;
  if (fusions) {
    if (fusions->norm) {
      const Tensor& norm = *fusions->norm;
      ops::require_dtype(g, op, "norm", norm, a.dtype);
      if (norm.shape != Shape{a.shape[-1]})
        shape_error(label, "norm must be [" + std::to_string(a.shape[-1]) + "] (" + arg_a + " is " +
                               describe(a) + "), got " + describe(norm));
      ops::require_finite(g, op, "norm_eps", fusions->norm_eps);
      if (!(fusions->norm_eps >= 0.0f))
        throw Error(ErrorCode::invalid_argument,
                    label + ": norm_eps must be >= 0, got " + std::to_string(fusions->norm_eps));
      inputs.push_back(norm.id);
      at.has_norm = true;
      at.norm_eps = fusions->norm_eps;
    }
    at.gated = gated;
    if (fusions->residual) {
      const Tensor& r = *fusions->residual;
      g.check(r, op, "residual");
      if (r.shape != out || r.dtype != a.dtype)
        shape_error(label, "residual must be " + out.str() + " " + ops::name(a.dtype) +
                               " (the output's shape and dtype), got " + describe(r));
      inputs.push_back(r.id);
      at.has_residual = true;
    }
  }
  return g.add_node(OpKind::matmul, op, std::move(inputs), at, out, a.dtype);
}

void lower_matmul(Lowering& l) {
  const auto& at = attrs<MatmulAttrs>(l);
  ops::MatmulCall c;
  size_t next = 0;
  c.a = l.input(next++);
  c.b = l.input(next++);
  c.out = l.output();
  c.bias = at.has_bias ? l.input(next++) : kNoValue;
  c.transpose_b = at.transpose_b;
  c.alpha = at.alpha;
  c.activation = at.activation;
  c.norm = at.has_norm ? l.input(next++) : kNoValue;
  c.norm_eps = at.norm_eps;
  c.gated = at.gated;
  c.residual = at.has_residual ? l.input(next++) : kNoValue;
  ops::emit_matmul(l, c);
}

}  // namespace

Tensor Graph::matmul(Tensor a, Tensor b, const MatmulOptions& options) {
  return matmul_node(impl(), "matmul", "a", "b", a, b, options);
}

Tensor Graph::linear(Tensor x, Tensor weight, std::optional<Tensor> bias, Activation activation) {
  LinearOptions options;
  options.bias = bias;
  options.activation = activation;
  return linear(x, weight, options);
}

Tensor Graph::linear(Tensor x, Tensor weight, const LinearOptions& fusions) {
  ops::require_rank(impl(), "linear", "weight", weight, 2, 2);
  MatmulOptions options;
  options.transpose_b = true;
  options.bias = fusions.bias;
  options.activation = fusions.activation;
  return matmul_node(impl(), "linear", "x", "weight", x, weight, options, &fusions);
}

void register_matmul_ops(OpRegistry& r) { r.add(OpKind::matmul, lower_matmul); }

}  // namespace vkformer

