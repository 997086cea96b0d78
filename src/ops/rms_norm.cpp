// rms_norm: x * rsqrt(mean(x^2) + eps) * weight over the last dim (Llama's RMSNorm), one
// dispatch: on CPU devices layer norm's row kernel in its RMS form (shaders/layer_norm_rows.comp:
// texel reads, the row in registers, several rows per workgroup) where rows are whole texels,
// otherwise shaders/rms_norm.comp (a workgroup per row on GPUs, one SIMD vector taking several
// rows on CPU devices).
#include <algorithm>
#include <bit>
#include <string>

#include "op_common.hpp"
#include "rms_norm.hpp"
#include "softmax.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct RmsNormPush {
  uint32_t rows;
  uint32_t d;
  float eps;
};

// shaders/rms_norm.comp with HEADS: two more words.
struct RmsNormHeadsPush {
  uint32_t rows;
  uint32_t d;
  float eps;
  uint32_t q_heads, kv_heads;
};

// rms_norm.comp's workgroup: invocations and rows each takes.
struct RmsNormGroups {
  uint32_t wg, rows = 1;
};

// CPU devices run a workgroup on one thread: a small one (one SIMD vector) takes up to 64 rows
// so that the per-workgroup cost is shared, as the other row kernels do (softmax.cpp's
// row_kernel), while leaving >= 128 workgroups to spread over threads. GPUs: the tuned
// reduction size, a power of two, shrunk for short rows but not below one subgroup.
RmsNormGroups rms_norm_groups(const Lowering& l, int64_t rows, int64_t d) {
  RmsNormGroups g;
  if (l.tuning().cpu_device) {
    g.wg = std::bit_floor(std::clamp<uint32_t>(l.info().subgroup_size, 1, 64));
    g.wg = std::min(g.wg, std::bit_floor(l.info().max_workgroup_size[0]));
    g.rows = static_cast<uint32_t>(std::clamp<int64_t>(rows / 128, 1, 64));
  } else {
    g.wg = std::bit_floor(std::max<uint32_t>(1, std::min(l.tuning().reduction_workgroup,
                                                     l.info().max_workgroup_size[0])));
    const uint32_t floor_wg = std::min(g.wg, std::bit_floor(std::max<uint32_t>(32, l.info().subgroup_size)));
    while (g.wg / 2 >= floor_wg && static_cast<int64_t>(g.wg / 2) >= d) g.wg /= 2;
  }
  return g;
}

}  // namespace

namespace ops {

void emit_rms_norm(Lowering& l, uint32_t x_value, uint32_t weight, uint32_t out, float eps, uint32_t residual) {
  const ValueDesc& x = l.value(x_value);
  const bool add = residual != kNoValue;
  const int64_t d = x.shape.back();
  const int64_t rows = x.shape.numel() / d;
  const uint64_t row_bytes = static_cast<uint64_t>(d) * dtype_size(x.dtype);
  // Tensors beyond one binding go in windows of rows (src/ops/windows.hpp).
  // The residual, where there is one, is the last binding and out the one before it.
  auto windows = [&](std::vector<Binding> whole, auto emit) {
    std::vector<ops::RowOperand> windowed{{0, row_bytes}, {whole.size() - 1, row_bytes}};
    if (add) windowed.push_back({whole.size() - 2, row_bytes});
    ops::for_row_windows(l, static_cast<uint64_t>(rows), whole, windowed,
                         l.node().label + ": rows", emit);
  };
  const Kernel rows_plain = add ? Kernel::rms_norm_rows_residual : Kernel::rms_norm_rows;
  const Kernel rows_subgroup = add ? Kernel::rms_norm_rows_residual_subgroup : Kernel::rms_norm_rows_subgroup;
  const ops::RowKernel rk = ops::row_kernel(l, rows_plain, rows_subgroup, x, rows, d);
  if (rk.use) {
    // Bindings x, gamma, beta (the weight again, unread), y, and the residual at 4.
    std::vector<Binding> whole{{x_value}, {weight}, {weight}, {out, true}};
    if (add) whole.push_back({residual});
    windows(std::move(whole),
            [&](const ops::Span& s, std::vector<Binding> bindings) {
              const RmsNormPush p{static_cast<uint32_t>(s.count), static_cast<uint32_t>(d), eps};
              const ops::RowKernel w =
                  ops::row_kernel(l, rows_plain, rows_subgroup, x, static_cast<int64_t>(s.count), d);
              l.dispatch(w.kernel, x.dtype, std::move(bindings), PushBlock::of(p),
                         l.rows_grid(w.groups), {w.lanes, w.cap, w.rows_per_group});
            });
    return;
  }
  const Kernel plain = add ? Kernel::rms_norm_residual : Kernel::rms_norm;
  const Kernel subgroup = add ? Kernel::rms_norm_residual_subgroup : Kernel::rms_norm_subgroup;
  const bool subgroups = ops::use_subgroup_reduction(l, subgroup, x.dtype);
  const RmsNormGroups groups = rms_norm_groups(l, rows, d);
  const uint32_t wg = groups.wg, rows_per_group = groups.rows;
  std::vector<Binding> whole{{x_value}, {weight}, {out, true}};
  if (add) whole.push_back({residual});  // binding 3
  windows(std::move(whole),
          [&](const ops::Span& s, std::vector<Binding> bindings) {
            const RmsNormPush p{static_cast<uint32_t>(s.count), static_cast<uint32_t>(d), eps};
            l.dispatch(subgroups ? subgroup : plain, x.dtype,
                       std::move(bindings), PushBlock::of(p),
                       l.rows_grid((s.count + rows_per_group - 1) / rows_per_group),
                       {wg, rows_per_group});
          });
}

}  // namespace ops

namespace {

// rms_norm_qk: one workgroup size for all rows (heads), windows of whole tokens.
void emit_rms_norm_qk(Lowering& l, const LayerNormAttrs& a) {
  const ValueDesc& x = l.value(l.input(0));
  const int64_t period = a.heads + 2 * a.kv_heads, d = x.shape.back() / period;
  const int64_t tokens = x.shape.numel() / (period * d);
  const Kernel kernel = ops::use_subgroup_reduction(l, Kernel::rms_norm_qk_subgroup, x.dtype)
                            ? Kernel::rms_norm_qk_subgroup
                            : Kernel::rms_norm_qk;
  const RmsNormGroups groups = rms_norm_groups(l, tokens * period, d);
  const uint64_t token_bytes = static_cast<uint64_t>(period * d) * dtype_size(x.dtype);
  // Bindings qkv, the query weight, out, the key weight.
  ops::for_row_windows(
      l, static_cast<uint64_t>(tokens), {{l.input(0)}, {l.input(1)}, {l.output(), true}, {l.input(2)}},
      {{0, token_bytes}, {2, token_bytes}}, l.node().label + ": tokens",
      [&](const ops::Span& s, std::vector<Binding> bindings) {
        const RmsNormHeadsPush p{static_cast<uint32_t>(s.count * period), static_cast<uint32_t>(d), a.eps,
                                 static_cast<uint32_t>(a.heads), static_cast<uint32_t>(a.kv_heads)};
        l.dispatch(kernel, x.dtype, std::move(bindings), PushBlock::of(p),
                   l.rows_grid((p.rows + groups.rows - 1) / groups.rows), {groups.wg, groups.rows});
      });
}

// Inputs x, weight and, for rms_norm_add, the residual; rms_norm_qk's are its own.
void lower_rms_norm(Lowering& l) {
  const LayerNormAttrs& a = attrs<LayerNormAttrs>(l);
  if (a.heads > 0) return emit_rms_norm_qk(l, a);
  ops::emit_rms_norm(l, l.input(0), l.input(1), l.output(), a.eps,
                     l.node().inputs.size() > 2 ? l.input(2) : kNoValue);
}

Tensor add_rms_norm_node(GraphImpl& g, const std::string& op, Tensor x, Tensor weight, float eps,
                         const std::optional<Tensor>& residual) {
  ops::require_float(g, op, "x", x);
  ops::require_rank(g, op, "x", x, 1, 4);
  ops::require_dtype(g, op, "weight", weight, x.dtype);
  if (weight.shape != Shape{x.shape.back()})
    shape_error(g.label(op), "x is " + describe(x) + ": weight must be [" +
                                      std::to_string(x.shape.back()) + "], got " +
                                      weight.shape.str());
  if (x.shape.numel() == 0 || static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(g.label(op), "x is " + describe(x) + ": needs 1 to 2^32 elements");
  ops::require_finite(g, op, "eps", eps);
  if (!(eps >= 0.0f))
    throw Error(ErrorCode::invalid_argument,
                g.label(op) + ": eps must be >= 0, got " + std::to_string(eps));
  std::vector<uint32_t> inputs{x.id, weight.id};
  if (residual) {
    ops::require_dtype(g, op, "residual", *residual, x.dtype);
    if (residual->shape != x.shape)
      shape_error(g.label(op), "x is " + describe(x) + ": residual must have its shape, got " +
                                   residual->shape.str());
    inputs.push_back(residual->id);
  }
  return g.add_node(OpKind::rms_norm, op, std::move(inputs), LayerNormAttrs{eps}, x.shape, x.dtype);
}

}  // namespace

Tensor Graph::rms_norm(Tensor x, Tensor weight, float eps) {
  return add_rms_norm_node(impl(), "rms_norm", x, weight, eps, std::nullopt);
}

Tensor Graph::rms_norm_add(Tensor x, Tensor weight, Tensor residual, float eps) {
  return add_rms_norm_node(impl(), "rms_norm_add", x, weight, eps, residual);
}

Tensor Graph::rms_norm_qk(Tensor qkv, int heads, int kv_heads, Tensor q_weight, Tensor k_weight, float eps) {
  const std::string op = "rms_norm_qk";
  GraphImpl& g = impl();
  ops::require_float(g, op, "qkv", qkv);
  ops::require_rank(g, op, "qkv", qkv, 1, 4);
  ops::require_dtype(g, op, "q_weight", q_weight, qkv.dtype);
  ops::require_dtype(g, op, "k_weight", k_weight, qkv.dtype);
  if (heads < 1 || kv_heads < 1)
    throw Error(ErrorCode::invalid_argument, g.label(op) + ": heads and kv_heads must be >= 1, got " +
                                                 std::to_string(heads) + " and " + std::to_string(kv_heads));
  const int64_t d = q_weight.shape.rank() == 1 ? q_weight.shape[0] : 0;
  if (d < 1 || k_weight.shape != q_weight.shape || qkv.shape.back() != (heads + 2 * kv_heads) * d)
    shape_error(g.label(op), "qkv is " + describe(qkv) + " for " + std::to_string(heads) + " + 2 x " +
                                 std::to_string(kv_heads) + " heads: q_weight and k_weight must be [D] with the " +
                                 "last dim (H + 2 Hkv) D, got " + q_weight.shape.str() + " and " +
                                 k_weight.shape.str());
  if (static_cast<uint64_t>(qkv.shape.numel()) > UINT32_MAX)
    shape_error(g.label(op), "qkv is " + describe(qkv) + ": needs at most 2^32 elements");
  ops::require_finite(g, op, "eps", eps);
  if (!(eps >= 0.0f))
    throw Error(ErrorCode::invalid_argument, g.label(op) + ": eps must be >= 0, got " + std::to_string(eps));
  LayerNormAttrs a{eps};
  a.heads = heads;
  a.kv_heads = kv_heads;
  return g.add_node(OpKind::rms_norm, op, {qkv.id, q_weight.id, k_weight.id}, a, qkv.shape, qkv.dtype);
}

void register_rms_norm_ops(OpRegistry& r) { r.add(OpKind::rms_norm, lower_rms_norm); }

}  // namespace vkformer
