// Softmax and log-softmax over the last dim, with scale, causal, additive and key-padding masks.
#include "softmax.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <string>

#include "op_common.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace ops {

bool use_subgroup_reduction(const Lowering& l, Kernel kernel, DType dtype) {
  return l.tuning().use_subgroup_reductions && l.supported(kernel, dtype);
}

RowKernel row_kernel(const Lowering& l, Kernel plain, Kernel subgroup, const ValueDesc& x,
                     int64_t rows, int64_t row_len) {
  RowKernel r;
  const DeviceInfo& info = l.info();
  // Texel reads need rows of whole texels and the tensor within the device's texel-view limit.
  const uint64_t texels = static_cast<uint64_t>(rows) * static_cast<uint64_t>(row_len) / 4;
  if (!l.tuning().cpu_device || row_len % 4 != 0 || rows < 1 || texels == 0 ||
      texels > info.max_texel_buffer_elements)
    return r;
  const uint32_t sg = info.subgroup_size;
  const bool fixed = sg >= 4 && sg <= 64 && info.min_subgroup_size == info.max_subgroup_size;
  if (fixed && use_subgroup_reduction(l, subgroup, x.dtype)) {
    r.kernel = subgroup;
    r.lanes = sg;
  } else if (l.supported(plain, x.dtype)) {
    r.kernel = plain;
    r.lanes = std::min<uint32_t>(8, info.max_workgroup_size[0]);
  } else {
    return r;
  }
  // Rows of up to lanes * 32 texels stay in registers (32 texels = 128 floats per invocation);
  // the capacity is 1, 2, 4 or a multiple of 4, so that nearby lengths share a pipeline. Longer
  // rows take two passes, and a capacity of 1 keeps the unused single-pass code small.
  constexpr uint32_t kMaxCap = 32;
  const uint64_t per_lane = (texels / rows + r.lanes - 1) / r.lanes;
  r.cap = 1;
  while (r.cap < per_lane && r.cap < 4) r.cap *= 2;
  if (per_lane > 4) r.cap = static_cast<uint32_t>((per_lane + 3) / 4 * 4);
  if (r.cap > kMaxCap) r.cap = 1;
  // Measured on lavapipe: a workgroup costs about 0.8 us, as much as moving 8 KiB (one row of
  // 512 per workgroup: 1.6x the time of 64 rows), so each takes up to 64 rows, leaving at least
  // 128 workgroups to spread over the CPU's threads.
  r.rows_per_group = static_cast<uint32_t>(std::clamp<int64_t>(rows / 128, 1, 64));
  r.groups = (static_cast<uint64_t>(rows) + r.rows_per_group - 1) / r.rows_per_group;
  r.use = true;
  return r;
}

namespace {

struct SoftmaxPush {
  uint32_t rows;
  uint32_t sk;
  uint32_t sq;
  uint32_t d1;
  float scale;
  uint32_t mask_stride[4];
  uint32_t rows_per_batch;
  uint32_t causal_at_length;  // SoftmaxCall::causal_at_key_length
};

}  // namespace

void emit_softmax(Lowering& l, const SoftmaxCall& call) {
  const ValueDesc& x = l.value(call.x);
  const Shape& s = x.shape;
  const int r = s.rank();
  SoftmaxPush p{};
  p.sk = static_cast<uint32_t>(s[-1]);
  p.rows = static_cast<uint32_t>(s.numel() / s[-1]);
  p.sq = r >= 2 ? static_cast<uint32_t>(s[-2]) : 1;
  p.d1 = r >= 3 ? static_cast<uint32_t>(s[-3]) : 1;
  p.scale = call.scale;
  p.rows_per_batch = p.rows;
  p.causal_at_length = call.causal_at_key_length;
  const bool has_mask = call.mask != kNoValue;
  const bool has_padding = call.key_padding_mask != kNoValue;
  const bool has_length = call.key_length != kNoValue;
  if (has_mask) broadcast_strides4(l.value(call.mask).shape, s, p.mask_stride);
  if (has_padding) {
    const Shape& kp = l.value(call.key_padding_mask).shape;
    if (kp.rank() != 2 || r < 3 || kp[0] != s[0] || kp[1] != s[-1])
      throw Error(ErrorCode::internal, l.node().label + ": key padding mask " + kp.str() +
                                           " does not fit softmax input " + s.str());
    p.rows_per_batch = static_cast<uint32_t>(p.rows / s[0]);
  }

  const uint32_t dummy = call.x;  // bound where an optional input is absent, never read
  // A mask contiguous along keys whose rows start on whole texels is read as texels too.
  const bool mask_texels = has_mask && p.mask_stride[3] == 1 && p.mask_stride[2] % 4 == 0 &&
                           p.mask_stride[1] % 4 == 0 && p.mask_stride[0] % 4 == 0 &&
                           l.value(call.mask).shape.numel() % 4 == 0;
  const RowKernel rk =
      mask_texels ? row_kernel(l, Kernel::softmax_rows_mask4, Kernel::softmax_rows_mask4_subgroup, x,
                               p.rows, p.sk)
                  : row_kernel(l, Kernel::softmax_rows, Kernel::softmax_rows_subgroup, x, p.rows, p.sk);
  if (rk.use) {
    l.dispatch(rk.kernel, x.dtype,
               {{call.x},
                {has_mask ? call.mask : dummy},
                {has_padding ? call.key_padding_mask : dummy},
                {has_length ? call.key_length : dummy},
                {call.out, true}},
               PushBlock::of(p), l.rows_grid(rk.groups),
               {rk.lanes, rk.cap, rk.rows_per_group, has_mask, has_padding, has_length,
                call.causal, call.log});
    return;
  }

  const bool subgroup = ops::use_subgroup_reduction(l, Kernel::softmax_subgroup, x.dtype);
  // A power of two (the shared-memory tree needs one), shrunk for short rows.
  uint32_t wg = std::bit_floor(std::max<uint32_t>(1, std::min(l.tuning().reduction_workgroup,
                                                           l.info().max_workgroup_size[0])));
  while (wg > 32 && wg / 2 >= p.sk) wg /= 2;

  l.dispatch(subgroup ? Kernel::softmax_subgroup : Kernel::softmax, x.dtype,
             {{call.x},
              {has_mask ? call.mask : dummy},
              {has_padding ? call.key_padding_mask : dummy},
              {has_length ? call.key_length : dummy},
              {call.out, true}},
             PushBlock::of(p), l.rows_grid(p.rows),
             {wg, has_mask, has_padding, has_length, call.causal, call.log});
}

}  // namespace ops

namespace {

void lower_softmax(Lowering& l) {
  const auto& a = attrs<SoftmaxAttrs>(l);
  ops::SoftmaxCall call;
  size_t next = 0;
  call.x = l.input(next++);
  if (a.has_mask) call.mask = l.input(next++);
  if (a.has_key_padding_mask) call.key_padding_mask = l.input(next++);
  call.out = l.output();
  call.scale = a.scale;
  call.causal = a.causal;
  call.log = a.log;
  ops::emit_softmax(l, call);
}

}  // namespace

Tensor Graph::softmax(Tensor x, const SoftmaxOptions& options) {
  const std::string op = options.log ? "log_softmax" : "softmax";
  ops::require_float(impl(), op, "x", x);
  ops::require_rank(impl(), op, "x", x, 1, 4);
  std::vector<uint32_t> inputs{x.id};
  ops::require_finite(impl(), op, "scale", options.scale);
  SoftmaxAttrs a;
  a.scale = options.scale;
  a.causal = options.causal;
  a.log = options.log;
  if (options.mask) {
    const Tensor& m = *options.mask;
    ops::require_additive_mask(impl(), op, m, "x", x, x.shape, "x " + x.shape.str());
    inputs.push_back(m.id);
    a.has_mask = true;
  }
  if (options.key_padding_mask) {
    const Tensor& kp = *options.key_padding_mask;
    ops::require_dtype(impl(), op, "key_padding_mask", kp, DType::i32);
    if (x.shape.rank() < 3)
      shape_error(impl().label(op), "a key padding mask needs x as [B, Sq, Sk] or [B, H, Sq, Sk], "
                                    "x is " + x.shape.str());
    if (kp.shape.rank() != 2 || kp.shape[0] != x.shape[0] || kp.shape[1] != x.shape[-1])
      shape_error(impl().label(op), "key padding mask " + kp.shape.str() + " must be [B, Sk] = [" +
                                        std::to_string(x.shape[0]) + "," +
                                        std::to_string(x.shape[-1]) + "] for x " + x.shape.str());
    inputs.push_back(kp.id);
    a.has_key_padding_mask = true;
  }
  return impl().add_node(OpKind::softmax, op, std::move(inputs), a, x.shape, x.dtype);
}

void register_softmax_ops(OpRegistry& r) { r.add(OpKind::softmax, lower_softmax); }

}  // namespace vkformer
