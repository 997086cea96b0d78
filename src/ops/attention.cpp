// Scaled dot-product attention: a fused flash-attention kernel (shaders/attention.comp), or the
// unfused chain matmul(q, kᵀ) -> masked softmax -> matmul(p, v) through temporaries.
#include <algorithm>
#include <cmath>
#include <string>

#include "matmul.hpp"
#include "op_common.hpp"
#include "softmax.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;
using Path = AttentionOptions::Path;

namespace {

// Largest head dims (D of q/k, Dv of v) the fused kernel takes; beyond, automatic picks the
// unfused path. The kernel keeps BR x D of q and BC x max(D, Dv) of k/v in shared memory.
constexpr int64_t kFusedMaxHeadDim = 256;

struct AttentionPush {
  uint32_t sq;
  uint32_t sk;
  uint32_t heads;
  uint32_t q_blocks;
  uint32_t groups;
  float scale;
  uint32_t d;
  uint32_t dv;
  uint32_t kv_stride;
  uint32_t mask_stride[4];
};

// The fused kernel's workgroup shape for one problem (specialization constants 0-5). Head dims
// are rounded up to capacities (multiples of 32) so that one pipeline serves nearby sizes.
struct FusedTiles {
  uint32_t wg = 128;  // invocations
  uint32_t br = 16;   // query rows per workgroup
  uint32_t bc = 32;   // keys per tile
  uint32_t d_cap = 0, dv_cap = 0, kv_cap = 0;
  uint64_t shared_bytes() const {
    return 4ull * (br * d_cap + bc * kv_cap + br * bc + 3 * br);
  }
};

uint32_t next_pow2(uint64_t v) {
  uint32_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Tiles that fit the device's shared memory and workgroup limits, or false.
bool fused_tiles(const Lowering& l, int64_t sq, int64_t d, int64_t dv, FusedTiles* out) {
  if (d > kFusedMaxHeadDim || dv > kFusedMaxHeadDim) return false;
  const DeviceInfo& info = l.info();
  FusedTiles t;
  t.wg = std::min<uint32_t>({128, l.tuning().reduction_workgroup, info.max_workgroup_invocations,
                             info.max_workgroup_size[0]});
  if (l.tuning().cpu_device) t.bc = 16;
  t.br = std::min<uint32_t>({t.br, next_pow2(static_cast<uint64_t>(sq)), t.wg});
  t.d_cap = ceil_div(d, 32) * 32;
  t.dv_cap = ceil_div(dv, 32) * 32;
  t.kv_cap = std::max(t.d_cap, t.dv_cap) + 1;
  while (t.shared_bytes() > info.shared_memory_bytes) {
    if (t.bc > 8) t.bc /= 2;
    else if (t.br > 1) t.br /= 2;
    else if (t.bc > 1) t.bc /= 2;
    else return false;
  }
  *out = t;
  return true;
}

struct Operands {
  uint32_t q, k, v, mask = kNoValue, key_padding = kNoValue, key_length = kNoValue;
};

Operands operands(const Lowering& l) {
  const auto& a = attrs<AttentionAttrs>(l);
  Operands o;
  size_t next = 0;
  o.q = l.input(next++);
  o.k = l.input(next++);
  o.v = l.input(next++);
  if (a.has_mask) o.mask = l.input(next++);
  if (a.has_key_padding_mask) o.key_padding = l.input(next++);
  if (a.has_key_length) o.key_length = l.input(next++);
  return o;
}

void lower_fused(Lowering& l, const Operands& in, const FusedTiles& t) {
  const auto& a = attrs<AttentionAttrs>(l);
  const ValueDesc& q = l.value(in.q);
  const Shape& qs = q.shape;
  const int64_t B = qs[0], H = qs[1], Sq = qs[2], D = qs[3];
  const int64_t Sk = l.value(in.k).shape[2], Dv = l.value(in.v).shape[3];
  AttentionPush p{};
  p.sq = static_cast<uint32_t>(Sq);
  p.sk = static_cast<uint32_t>(Sk);
  p.heads = static_cast<uint32_t>(H);
  p.q_blocks = ceil_div(Sq, t.br);
  const uint64_t groups = static_cast<uint64_t>(B * H) * p.q_blocks;
  p.groups = static_cast<uint32_t>(groups);
  p.scale = a.scale;
  p.d = static_cast<uint32_t>(D);
  p.dv = static_cast<uint32_t>(Dv);
  p.kv_stride = static_cast<uint32_t>(std::max(D, Dv)) + 1;
  if (in.mask != kNoValue) ops::broadcast_strides4(l.value(in.mask).shape, {B, H, Sq, Sk}, p.mask_stride);
  const uint32_t dummy = in.q;  // bound where an optional input is absent, never read
  l.dispatch(Kernel::attention, q.dtype,
             {{in.q},
              {in.k},
              {in.v},
              {in.mask != kNoValue ? in.mask : dummy},
              {in.key_padding != kNoValue ? in.key_padding : dummy},
              {in.key_length != kNoValue ? in.key_length : dummy},
              {l.output(), true}},
             PushBlock::of(p), l.rows_grid(groups),
             {t.wg, t.br, t.bc, t.d_cap, t.dv_cap, t.kv_cap,
              in.mask != kNoValue, in.key_padding != kNoValue, in.key_length != kNoValue,
              a.causal});
}

void lower_unfused(Lowering& l, const Operands& in) {
  const auto& a = attrs<AttentionAttrs>(l);
  const ValueDesc& q = l.value(in.q);
  const Shape& qs = q.shape;
  const Shape scores_shape{qs[0], qs[1], qs[2], l.value(in.k).shape[2]};
  uint32_t scores = l.temp(scores_shape, q.dtype);
  uint32_t probs = l.temp(scores_shape, q.dtype);
  ops::MatmulCall qk;
  qk.a = in.q;
  qk.b = in.k;
  qk.out = scores;
  qk.transpose_b = true;
  qk.alpha = a.scale;
  ops::emit_matmul(l, qk);
  ops::SoftmaxCall sm;
  sm.x = scores;
  sm.out = probs;
  sm.mask = in.mask;
  sm.key_padding_mask = in.key_padding;
  sm.key_length = in.key_length;
  sm.causal = a.causal;
  ops::emit_softmax(l, sm);
  ops::MatmulCall pv;
  pv.a = probs;
  pv.b = in.v;
  pv.out = l.output();
  ops::emit_matmul(l, pv);
}

void lower_attention(Lowering& l) {
  const auto& a = attrs<AttentionAttrs>(l);
  Operands in = operands(l);
  const Shape& qs = l.value(in.q).shape;
  const int64_t D = qs[3], Dv = l.value(in.v).shape[3];
  if (in.key_length != kNoValue)
    l.require_index_bound(in.key_length, l.value(in.k).shape[2] + 1);  // 0 <= key_length <= Sk
  FusedTiles tiles;
  bool fused_ok = fused_tiles(l, qs[2], D, Dv, &tiles) && l.supported(Kernel::attention, l.value(in.q).dtype);
  if (a.path == Path::unfused || (a.path == Path::automatic && !fused_ok)) {
    lower_unfused(l, in);
    return;
  }
  if (!fused_ok) {
    if (D > kFusedMaxHeadDim || Dv > kFusedMaxHeadDim)
      throw Error(ErrorCode::unsupported,
                  l.node().label + ": the fused attention kernel takes head dims up to " +
                      std::to_string(kFusedMaxHeadDim) + ", got D = " + std::to_string(D) +
                      ", Dv = " + std::to_string(Dv) + "; use the unfused or automatic path");
    l.variant(Kernel::attention, l.value(in.q).dtype);  // throws, saying what the device lacks
    throw Error(ErrorCode::unsupported,
                l.node().label + ": the fused attention kernel for D = " + std::to_string(D) +
                    ", Dv = " + std::to_string(Dv) + " does not fit the shared memory of device '" +
                    l.info().name + "' (" + std::to_string(l.info().shared_memory_bytes) +
                    " bytes); use the unfused or automatic path");
  }
  lower_fused(l, in, tiles);
}

}  // namespace

Tensor Graph::attention(Tensor q, Tensor k, Tensor v, const AttentionOptions& options) {
  const std::string op = "attention";
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    ops::require_float(*impl_, op, name, *t);
    ops::require_rank(*impl_, op, name, *t, 4, 4);
  }
  if (k.dtype != q.dtype || v.dtype != q.dtype)
    shape_error(impl_->label(op), "q, k and v must share a dtype: q is " + describe(q) + ", k is " +
                                      describe(k) + ", v is " + describe(v));
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const int64_t Sk = k.shape[2];
  if (k.shape[0] != B || k.shape[1] != H || k.shape[3] != D)
    shape_error(impl_->label(op), "k " + k.shape.str() + " must be [B, H, Sk, D] = [" +
                                      std::to_string(B) + "," + std::to_string(H) + ",Sk," +
                                      std::to_string(D) + "] for q " + q.shape.str());
  if (v.shape[0] != B || v.shape[1] != H || v.shape[2] != Sk)
    shape_error(impl_->label(op), "v " + v.shape.str() + " must be [B, H, Sk, Dv] = [" +
                                      std::to_string(B) + "," + std::to_string(H) + "," +
                                      std::to_string(Sk) + ",Dv] for k " + k.shape.str());
  const Shape scores{B, H, Sq, Sk};
  std::vector<uint32_t> inputs{q.id, k.id, v.id};
  AttentionAttrs a;
  a.scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(D));
  a.causal = options.causal;
  a.path = options.path;
  if (options.mask) {
    const Tensor& m = *options.mask;
    ops::require_float(*impl_, op, "mask", m);
    if (m.dtype != q.dtype)
      shape_error(impl_->label(op), "mask " + describe(m) + " must have q's dtype; q is " +
                                        describe(q));
    Shape b;
    if (!broadcast_shapes(m.shape, scores, &b) || b != scores)
      shape_error(impl_->label(op), "mask " + m.shape.str() +
                                        " does not broadcast to the scores [B, H, Sq, Sk] = " +
                                        scores.str());
    inputs.push_back(m.id);
    a.has_mask = true;
  }
  if (options.key_padding_mask) {
    const Tensor& kp = *options.key_padding_mask;
    ops::require_dtype(*impl_, op, "key_padding_mask", kp, DType::i32);
    if (kp.shape.rank() != 2 || kp.shape[0] != B || kp.shape[1] != Sk)
      shape_error(impl_->label(op), "key padding mask " + kp.shape.str() + " must be [B, Sk] = [" +
                                        std::to_string(B) + "," + std::to_string(Sk) + "]");
    inputs.push_back(kp.id);
    a.has_key_padding_mask = true;
  }
  if (options.key_length) {
    const Tensor& kl = *options.key_length;
    ops::require_dtype(*impl_, op, "key_length", kl, DType::i32);
    if (kl.shape.numel() != 1)
      shape_error(impl_->label(op), "key_length must hold one value ([1]), got " + kl.shape.str());
    inputs.push_back(kl.id);
    a.has_key_length = true;
  }
  if (options.path == Path::fused && (D > kFusedMaxHeadDim || v.shape[3] > kFusedMaxHeadDim))
    throw Error(ErrorCode::unsupported,
                impl_->label(op) + ": the fused attention kernel takes head dims up to " +
                    std::to_string(kFusedMaxHeadDim) + ", got D = " + std::to_string(D) +
                    ", Dv = " + std::to_string(v.shape[3]) + "; use the unfused or automatic path");
  return impl_->add_node(OpKind::attention, op, std::move(inputs), a, {B, H, Sq, v.shape[3]},
                         q.dtype);
}

void register_attention_ops(OpRegistry& r) { r.add(OpKind::attention, lower_attention); }

}  // namespace vkformer
