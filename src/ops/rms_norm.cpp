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

}  // namespace

namespace ops {

void emit_rms_norm(Lowering& l, uint32_t x_value, uint32_t weight, uint32_t out, float eps) {
  const ValueDesc& x = l.value(x_value);
  const int64_t d = x.shape.back();
  const int64_t rows = x.shape.numel() / d;
  const uint64_t row_bytes = static_cast<uint64_t>(d) * dtype_size(x.dtype);
  // Tensors beyond one binding go in windows of rows (src/ops/windows.hpp).
  auto windows = [&](std::vector<Binding> whole, auto emit) {
    const std::vector<ops::RowOperand> windowed{{0, row_bytes}, {whole.size() - 1, row_bytes}};
    ops::for_row_windows(l, static_cast<uint64_t>(rows), whole, windowed,
                         l.node().label + ": rows", emit);
  };
  const ops::RowKernel rk =
      ops::row_kernel(l, Kernel::rms_norm_rows, Kernel::rms_norm_rows_subgroup, x, rows, d);
  if (rk.use) {
    // Bindings x, gamma, beta (the weight again, unread), y.
    windows({{x_value}, {weight}, {weight}, {out, true}},
            [&](const ops::Span& s, std::vector<Binding> bindings) {
              const RmsNormPush p{static_cast<uint32_t>(s.count), static_cast<uint32_t>(d), eps};
              const ops::RowKernel w =
                  ops::row_kernel(l, Kernel::rms_norm_rows, Kernel::rms_norm_rows_subgroup, x,
                                  static_cast<int64_t>(s.count), d);
              l.dispatch(w.kernel, x.dtype, std::move(bindings), PushBlock::of(p),
                         l.rows_grid(w.groups), {w.lanes, w.cap, w.rows_per_group});
            });
    return;
  }
  const bool subgroups = ops::use_subgroup_reduction(l, Kernel::rms_norm_subgroup, x.dtype);
  // CPU devices run a workgroup on one thread: a small one (one SIMD vector) takes up to 64 rows
  // so that the per-workgroup cost is shared, as the other row kernels do (softmax.cpp's
  // row_kernel), while leaving >= 128 workgroups to spread over threads. GPUs: the tuned
  // reduction size, a power of two, shrunk for short rows but not below one subgroup.
  uint32_t wg, rows_per_group = 1;
  if (l.tuning().cpu_device) {
    wg = std::bit_floor(std::clamp<uint32_t>(l.info().subgroup_size, 1, 64));
    wg = std::min(wg, std::bit_floor(l.info().max_workgroup_size[0]));
    rows_per_group = static_cast<uint32_t>(std::clamp<int64_t>(rows / 128, 1, 64));
  } else {
    wg = std::bit_floor(std::max<uint32_t>(1, std::min(l.tuning().reduction_workgroup,
                                                        l.info().max_workgroup_size[0])));
    const uint32_t floor_wg = std::min(wg, std::bit_floor(std::max<uint32_t>(32, l.info().subgroup_size)));
    while (wg / 2 >= floor_wg && static_cast<int64_t>(wg / 2) >= d) wg /= 2;
  }
  windows({{x_value}, {weight}, {out, true}},
          [&](const ops::Span& s, std::vector<Binding> bindings) {
            const RmsNormPush p{static_cast<uint32_t>(s.count), static_cast<uint32_t>(d), eps};
            l.dispatch(subgroups ? Kernel::rms_norm_subgroup : Kernel::rms_norm, x.dtype,
                       std::move(bindings), PushBlock::of(p),
                       l.rows_grid((s.count + rows_per_group - 1) / rows_per_group),
                       {wg, rows_per_group});
          });
}

}  // namespace ops

namespace {

void lower_rms_norm(Lowering& l) {
  ops::emit_rms_norm(l, l.input(0), l.input(1), l.output(), attrs<LayerNormAttrs>(l).eps);
}

}  // namespace

Tensor Graph::rms_norm(Tensor x, Tensor weight, float eps) {
  const std::string op = "rms_norm";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 1, 4);
  ops::require_dtype(impl(), op, "weight", weight, x.dtype);
  if (weight.shape != Shape{x.shape.back()})
    shape_error(impl().label(op), "x is " + describe(x) + ": weight must be [" +
                                      std::to_string(x.shape.back()) + "], got " +
                                      weight.shape.str());
  if (x.shape.numel() == 0 || static_cast<uint64_t>(x.shape.numel()) > UINT32_MAX)
    shape_error(impl().label(op), "x is " + describe(x) + ": needs 1 to 2^32 elements");
  ops::require_finite(impl(), op, "eps", eps);
  if (!(eps >= 0.0f))
    throw Error(ErrorCode::invalid_argument,
                impl().label(op) + ": eps must be >= 0, got " + std::to_string(eps));
  return impl().add_node(OpKind::rms_norm, op, {x.id, weight.id}, LayerNormAttrs{eps}, x.shape,
                         x.dtype);
}

void register_rms_norm_ops(OpRegistry& r) { r.add(OpKind::rms_norm, lower_rms_norm); }

}  // namespace vkformer
