// matmul and linear: out = activation(alpha * a·b + bias) with numpy-broadcast batch dims, one
// tiled kernel (shaders/matmul.comp) whose tiling comes from kernels::Tuning::matmul.
#include "matmul.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "op_common.hpp"
#include "windows.hpp"

namespace vkformer {

using kernels::Kernel;
using ops::attrs;

namespace ops {

namespace {

// Matches the push block of shaders/matmul_reduce.comp.
struct ReducePush {
  uint32_t total, mn, n, splits;
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

// What every matmul dispatch shares: the operands (whole, or this dispatch's windows of them)
// and the batch count.
struct Grid {
  const MatmulCall& call;
  DType dtype;
  uint64_t batch;  // grid z: batches (times splits for matmul_split)
  // a, b, bias and out as the kernels bind them. The bias binding must name a buffer even
  // without a bias (a's); the kernels then never read it.
  std::vector<Binding> operands;
};

uint32_t act(const MatmulCall& c) { return static_cast<uint32_t>(c.activation); }

// Dispatches x_tiles x y_tiles x z workgroups, as several dispatches where y or z exceed the
// device's grid limits (many rows come from folding a batch into M on small tiles); the kernels
// add y_base and z_base.
void dispatch_tiles(Lowering& l, Kernel kernel, DType dtype, const std::vector<Binding>& bindings,
                    MatmulPush p, uint64_t x_tiles, uint64_t y_tiles, uint64_t z,
                    const std::vector<uint32_t>& spec) {
  const uint64_t max_y = std::max<uint32_t>(l.info().max_workgroup_count[1], 1);
  const uint64_t max_z = std::max<uint32_t>(l.info().max_workgroup_count[2], 1);
  for (uint64_t zb = 0; zb < z; zb += max_z)
    for (uint64_t y = 0; y < y_tiles; y += max_y) {
      p.y_base = static_cast<uint32_t>(y);
      p.z_base = static_cast<uint32_t>(zb);
      l.dispatch(kernel, dtype, bindings, PushBlock::of(p),
                 l.grid(x_tiles, std::min(max_y, y_tiles - y), std::min(max_z, z - zb)), spec);
    }
}

[[noreturn]] void bad_tiling(Lowering& l, const std::string& what) {
  throw Error(ErrorCode::internal,
              l.node().label + ": emit_matmul: tuning gives an invalid " + what);
}

// shaders/matmul.comp with the device's tiling; with plan.splits > 1, matmul_split writes fp32
// partial sums of K ranges to a temporary and matmul_reduce adds them.
void emit_general(Lowering& l, const Grid& g, const kernels::MatmulTuning& tuning,
                  const kernels::MatmulPlan& plan, MatmulPush p) {
  const kernels::MatmulTiles& t = tuning.tiles;
  const DeviceInfo& info = l.info();
  if (t.tm == 0 || t.tn == 0 || t.bk == 0 || t.bm % t.tm || t.bn % t.tn || t.invocations() == 0 ||
      t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bad_tiling(l, "matmul tiling " + std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" +
                      std::to_string(t.bk) + " / " + std::to_string(t.tm) + "x" +
                      std::to_string(t.tn));
  const MatmulCall& c = g.call;
  const bool vec4 = plan.vec4 && (c.transpose_b || t.bn % 4 == 0);
  std::vector<uint32_t> spec = {static_cast<uint32_t>(t.invocations()),
                                t.bm,
                                t.bn,
                                t.shared_memory ? t.bk : 1u,
                                t.tm,
                                t.tn,
                                t.shared_memory ? 1u : 0u,
                                c.transpose_b ? 1u : 0u,
                                c.bias != kNoValue ? 1u : 0u,
                                act(c),
                                vec4 ? 1u : 0u};
  const uint64_t x_tiles = ceil_div(p.n, t.bn), y_tiles = ceil_div(p.m, t.bm);
  // Split K only where the fp32 partial sums fit one binding.
  uint64_t splits = plan.splits;
  const uint64_t mn = uint64_t(p.m) * p.n;
  while (splits > 1 && g.batch * splits * mn * 4 > l.tuning().max_binding_bytes) --splits;
  if (splits <= 1) {
    dispatch_tiles(l, Kernel::matmul, g.dtype, g.operands, p, x_tiles, y_tiles, g.batch, spec);
    return;
  }
  // Whole BK slices per split, and no empty split.
  const uint64_t slices = ceil_div(p.k, t.bk);
  p.k_split = static_cast<uint32_t>(ceil_div(slices, splits) * t.bk);
  p.splits = ceil_div(p.k, p.k_split);
  uint32_t part = l.temp(Shape{static_cast<int64_t>(g.batch * p.splits),
                               static_cast<int64_t>(p.m), static_cast<int64_t>(p.n)},
                         DType::f32);
  dispatch_tiles(l, Kernel::matmul_split, g.dtype,
                 {g.operands[0], g.operands[1], g.operands[0], {part, true}}, p, x_tiles, y_tiles,
                 g.batch * p.splits, spec);

  ReducePush r{};
  const uint64_t total = g.batch * mn;
  r.total = static_cast<uint32_t>(total);
  r.mn = static_cast<uint32_t>(mn);
  r.n = p.n;
  r.splits = p.splits;
  r.alpha = p.alpha;
  const uint32_t wg = std::min<uint32_t>(256, info.max_workgroup_invocations);
  l.dispatch(Kernel::matmul_reduce, g.dtype,
             {{part}, c.bias != kNoValue ? g.operands[2] : Binding{part}, g.operands[3]},
             PushBlock::of(r),
             l.rows_grid(ceil_div(total, wg)), {wg, c.bias != kNoValue ? 1u : 0u, act(c)});
}

// Matches the push block of shaders/matmul_transpose.comp.
struct TransposePush {
  uint32_t k4, n4, blocks;
};

// shaders/matmul_texel.comp: A and B as texel buffers, one subgroup per workgroup; B [K, N]
// first transposed to [N, K] (a temporary) where the plan says so.
void emit_texel(Lowering& l, const Grid& g, const kernels::MatmulTuning& tuning,
                const kernels::MatmulPlan& plan, const MatmulPush& p) {
  const uint32_t sg = tuning.texel_tiles.subgroup;
  MatmulCall c = g.call;
  const bool transposed = c.transpose_b || plan.transpose_b_first;
  if (sg == 0 || sg > l.info().max_workgroup_size[0] || plan.tm == 0 || plan.tn == 0 ||
      plan.qb == 0 || (!transposed && plan.tn % 4))
    bad_tiling(l, "texel tiling " + std::to_string(plan.tm) + "x" + std::to_string(plan.tn) +
                      "x" + std::to_string(plan.qb));
  if (!c.transpose_b && plan.transpose_b_first) {
    const ValueDesc& b = l.value(c.b);
    auto dims = b.shape.dims();
    std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
    const uint32_t bt = l.temp(Shape(dims), b.dtype);
    TransposePush t{};
    t.k4 = p.k / 4;
    t.n4 = p.n / 4;
    const uint64_t blocks = static_cast<uint64_t>(b.shape.numel()) / 16;
    t.blocks = static_cast<uint32_t>(blocks);
    const uint32_t wg = std::min<uint32_t>(64, l.info().max_workgroup_invocations);
    l.dispatch(Kernel::matmul_transpose, g.dtype, {g.operands[1], {bt, true}}, PushBlock::of(t),
               l.rows_grid(ceil_div(blocks, wg)), {wg});
    c.b = bt;
    c.transpose_b = true;  // the element strides of B's matrices stay K * N
  }
  std::vector<Binding> operands = g.operands;
  if (c.b != g.call.b) operands[1] = {c.b};
  std::vector<uint32_t> spec = {sg,     plan.tm, plan.tn, plan.qb, c.transpose_b ? 1u : 0u,
                                c.bias != kNoValue ? 1u : 0u, act(c)};
  dispatch_tiles(l, Kernel::matmul_texel, g.dtype, operands, p,
                 ceil_div(p.n, uint64_t(sg) * plan.tn), ceil_div(p.m, plan.tm), g.batch, spec);
}

// shaders/matmul_gemv.comp: all M <= gemv_m rows at once, B streamed once.
void emit_gemv(Lowering& l, const Grid& g, const kernels::MatmulTuning& tuning,
               const kernels::MatmulPlan& plan, const MatmulPush& p) {
  const kernels::MatmulGemvTiles& t = tuning.gemv_tiles;
  const MatmulCall& c = g.call;
  // A power of two within the workgroup limits whose reduction buffer (gemv_m floats per
  // invocation and column it owns) fits in shared memory.
  const uint32_t per_invocation = plan.gemv_m * (c.transpose_b ? t.columns : 1) * 4;
  uint32_t wg = 1;
  while (wg * 2 <= t.workgroup && wg * 2 <= l.info().max_workgroup_invocations &&
         wg * 2 <= l.info().max_workgroup_size[0] &&
         uint64_t(wg) * 2 * per_invocation <= l.info().shared_memory_bytes)
    wg *= 2;
  // Without transposition, columns_nn (a power of 2) columns split the workgroup.
  const uint32_t columns = c.transpose_b ? t.columns : std::min(t.columns_nn, wg);
  if (plan.gemv_m == 0 || columns == 0 || (!c.transpose_b && wg % columns) ||
      uint64_t(wg) * per_invocation > l.info().shared_memory_bytes)
    bad_tiling(l, "gemv tiling m " + std::to_string(plan.gemv_m) + " columns " +
                      std::to_string(columns));
  const bool vec4 = c.transpose_b && p.k % 4 == 0;
  std::vector<uint32_t> spec = {wg,     plan.gemv_m, columns, c.transpose_b ? 1u : 0u,
                                c.bias != kNoValue ? 1u : 0u, act(c), vec4 ? 1u : 0u};
  dispatch_tiles(l, Kernel::matmul_gemv, g.dtype, g.operands, p, ceil_div(p.n, columns),
                 1, g.batch, spec);
}

// The specialization constants of shaders/matmul_coopmat.comp, in constant_id order.
struct CoopmatSpec {
  uint32_t workgroup;  // subgroup * warps_m * warps_n
  uint32_t subgroup;
  uint32_t m, n, k;    // the MMA shape
  uint32_t warps_m, warps_n;
  uint32_t tiles_m, tiles_n;
  uint32_t bk_tiles;
  uint32_t transpose_b;
  uint32_t has_bias;
  uint32_t activation;
  uint32_t vec8;       // K, and N unless B is transposed, multiples of 8: 16-byte loads
  uint32_t has_residual;
  std::vector<uint32_t> values() const {
    std::vector<uint32_t> v(sizeof(*this) / 4);
    std::memcpy(v.data(), this, sizeof(*this));
    return v;
  }
};
static_assert(sizeof(CoopmatSpec) == 15 * 4 && std::is_trivially_copyable_v<CoopmatSpec>);

}  // namespace

void emit_coopmat(Lowering& l, Kernel kernel, const MatmulCall& c, DType dtype, uint64_t batch,
                  std::vector<Binding> operands, const MatmulPush& p) {
  const kernels::MatmulCoopmatTiles& t = l.tuning().matmul.coopmat_tiles;
  const DeviceInfo& info = l.info();
  if (!t.usable() || t.invocations() > info.max_workgroup_invocations ||
      t.invocations() > info.max_workgroup_size[0] || t.shared_bytes() > info.shared_memory_bytes)
    bad_tiling(l, std::string(vk::coopmat_api_name(t.api)) + " cooperative-matrix tiling " +
                      t.str());
  const kernels::CoopmatConfig& f = t.config;
  const CoopmatSpec spec{static_cast<uint32_t>(t.invocations()),
                         t.subgroup,
                         t.m,
                         t.n,
                         t.k,
                         f.warps_m,
                         f.warps_n,
                         f.tiles_m,
                         f.tiles_n,
                         f.bk_tiles,
                         c.transpose_b ? 1u : 0u,
                         c.bias != kNoValue ? 1u : 0u,
                         act(c),
                         p.k % 8 == 0 && (c.transpose_b || p.n % 8 == 0) ? 1u : 0u,
                         c.residual != kNoValue ? 1u : 0u};
  if (operands.size() == 4) operands.push_back(operands[0]);  // no residual
  if (operands.size() != 5 || c.gated || c.norm != kNoValue)
    bad_tiling(l, "cooperative-matrix product: operands a, b, bias, out and residual, no other fusion");
  dispatch_tiles(l, kernel, dtype, operands, p, ceil_div(p.n, t.bn()), ceil_div(p.m, t.bm()),
                 batch, spec.values());
}

namespace {

// A matmul whose a, b or out is larger than one binding may span: the product is computed in
// windows (src/ops/windows.hpp). With a batch of matrices, whole matrices per window; with one
// matrix, rows of a and out, and rows of a transposed b (columns of out, written with out's row
// stride). `emit` computes one window's product.
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
      emit(p, s.count, ops, true);
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
      emit(q, 1, ops, n_spans.size() == 1);
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
  problem.texel_fits = static_cast<uint64_t>(a.numel()) / 4 <= info.max_texel_buffer_elements &&
                       static_cast<uint64_t>(b.numel()) / 4 <= info.max_texel_buffer_elements;
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

namespace {

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

kernels::MatmulKernels kernels_for(Lowering& l, DType dtype) {
  kernels::MatmulKernels kernels;
  kernels.texel = l.supported(Kernel::matmul_texel, dtype);
  kernels.gemv = l.supported(Kernel::matmul_gemv, dtype);
  kernels.split = l.supported(Kernel::matmul_split, dtype) && l.supported(Kernel::matmul_reduce, dtype);
  kernels.coopmat = l.tuning().matmul.coopmat_tiles.api != vk::CoopmatApi::none &&
                    l.supported(vk::coopmat_matmul_kernel(l.tuning().matmul.coopmat_tiles.api), dtype);
  kernels.transpose = l.supported(Kernel::matmul_transpose, dtype);
  return kernels;
}

// The plan of one product of q.m x q.n over `batch` matrices with `operands` bound.
kernels::MatmulPlan plan_of(Lowering& l, const MatmulCall& c, const MatmulPush& q, uint64_t batch,
                       const std::vector<Binding>& operands) {
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const uint64_t es = dtype_size(a.dtype);
  kernels::MatmulProblem problem;
  problem.m = q.m;
  problem.n = q.n;
  problem.k = q.k;
  problem.batch = batch;
  problem.transpose_b = c.transpose_b;
  problem.dtype = a.dtype;
  const uint64_t texels = l.info().max_texel_buffer_elements;
  problem.texel_fits = operands[0].bytes(a) / es / 4 <= texels && operands[1].bytes(b) / es / 4 <= texels;
  return kernels::plan_matmul(l.tuning().matmul, problem, kernels_for(l, a.dtype));
}

}  // namespace

bool emit_matmul_with_residual(Lowering& l, const MatmulCall& c) {
  if (c.gated || c.norm != kNoValue || c.residual == kNoValue) return false;
  const ValueDesc& a = l.value(c.a);
  const ValueDesc& b = l.value(c.b);
  const ValueDesc& o = l.value(c.out);
  const ValueDesc& r = l.value(c.residual);
  const uint64_t limit = l.tuning().max_binding_bytes;
  if (a.bytes() > limit || b.bytes() > limit || o.bytes() > limit || r.bytes() > limit ||
      r.dtype != o.dtype || r.shape.numel() != o.shape.numel())
    return false;
  if (b.dtype != a.dtype) return emit_matmul_weights_with_residual(l, c);
  const Folded f = fold(a.shape, b.shape, c.transpose_b);
  const MatmulPush p = push_of(f, c);
  const std::vector<Binding> operands = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}, {c.residual}};
  if (plan_of(l, c, p, f.batch, operands).path != kernels::MatmulPath::coopmat) return false;
  emit_coopmat(l, vk::coopmat_matmul_kernel(l.tuning().matmul.coopmat_tiles.api), c, a.dtype,
               f.batch, operands, p);
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
  const kernels::MatmulTuning& tuning = l.tuning().matmul;

  // One product of q.m x q.n over `batch` matrices, with `operands` bound (whole or windows).
  auto emit = [&](const MatmulPush& q, uint64_t batch, const std::vector<Binding>& operands,
                  bool may_split_k) {
    kernels::MatmulPlan plan = plan_of(l, c, q, batch, operands);
    if (!may_split_k) plan.splits = 1;  // matmul_reduce writes rows of n, not of ldo
    Grid grid{c, a.dtype, batch, operands};
    switch (plan.path) {
      case kernels::MatmulPath::texel: emit_texel(l, grid, tuning, plan, q); break;
      case kernels::MatmulPath::gemv: emit_gemv(l, grid, tuning, plan, q); break;
      case kernels::MatmulPath::coopmat:
        emit_coopmat(l, vk::coopmat_matmul_kernel(tuning.coopmat_tiles.api), c, a.dtype, batch,
                     operands, q);
        break;
      case kernels::MatmulPath::general: emit_general(l, grid, tuning, plan, q); break;
    }
  };

  const std::vector<Binding> whole = {
      {c.a}, {c.b}, {c.bias != kNoValue ? c.bias : c.a}, {c.out, true}};
  const uint64_t limit = l.tuning().max_binding_bytes;
  if (a.bytes() <= limit && b.bytes() <= limit && o.bytes() <= limit) {
    emit(p, f.batch, whole, true);
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
