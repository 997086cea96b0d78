// Scaled dot-product attention: fused kernels, or the unfused chain matmul(q, kᵀ) -> masked
// softmax -> matmul(p, v) through temporaries. The fused paths, in order: split-K flash decoding
// for few query rows and flash attention on cooperative matrices where they fit
// (src/ops/attention_flash.cpp), else the scalar flash-attention kernels (shaders/attention.comp
// on GPUs, shaders/attention_rows.comp on CPU devices; kernels::AttentionTiles picks).
// Grouped-query attention (k and v with Hkv heads, H % Hkv == 0): query head h reads KV head
// h / (H / Hkv) in place, never through copies of K and V. The fused kernels map the head; the
// unfused chain views the group's query heads, which are consecutive, as one matrix per KV head.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "attention_flash.hpp"
#include "kv_cache_types.hpp"
#include "matmul.hpp"
#include "op_common.hpp"
#include "softmax.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;
using Path = AttentionOptions::Path;

namespace {

constexpr int64_t kFusedMaxHeadDim = kernels::kFusedAttentionMaxHeadDim;
using kernels::AttentionLaunch;
using FusedKernel = kernels::AttentionTiles::Kernel;

// Push constants of both fused kernels, shaders/attention.comp (tiles) and attention_rows.comp.
struct AttentionPush {
  uint32_t sq;
  uint32_t sk;
  uint32_t heads;
  uint32_t q_blocks;
  uint32_t groups;
  float scale;
  uint32_t d;
  uint32_t dv;
  uint32_t kv_stride;  // tiled kernel only (shaders/attention_rows.comp ignores it)
  uint32_t mask_stride[4];
  uint32_t bh_base;  // the first (b, h) of a dispatch over windows of q, k, v and out
  uint32_t group;    // query heads per KV head
  uint32_t kv_batches;  // batches of k and v (per-sequence slots: more than q's)
  float softcap;        // AttentionOptions::softcap, read where the SOFT_CAP constant is set
  uint32_t causal_at_length;  // AttentionOptions::causal_at_key_length
};
static_assert(sizeof(AttentionPush) <= 128);

// The kernel variant a launch runs (kv_quant: k or v in another type than q, read by the
// KV_QUANT variants).
Kernel fused_kernel(const AttentionLaunch& t, bool kv_quant = false) {
  if (kv_quant && t.kernel == FusedKernel::rows)
    return t.shuffle ? Kernel::attention_rows_kvq_shuffle : Kernel::attention_rows_kvq;
  if (t.kernel == FusedKernel::tiles) return kv_quant ? Kernel::attention_kvq : Kernel::attention;
  if (t.texel) return Kernel::attention_rows_texel;
  return t.shuffle ? Kernel::attention_rows_shuffle : Kernel::attention_rows;
}

using Operands = ops::AttentionOperands;

// A path that cannot read k or v in their types: the error names the options that set them.
[[noreturn]] void throw_kv_path_error(const Lowering& l, const std::string& path) {
  throw Error(ErrorCode::unsupported,
              l.node().label + ": " + path + " cannot read a KV cache of k " +
                  std::string(dtype_name(l.value(l.input(1)).dtype)) + ", v " +
                  std::string(dtype_name(l.value(l.input(2)).dtype)) + " with " +
                  std::string(dtype_name(l.value(l.input(0)).dtype)) +
                  " activations on device '" + l.info().name +
                  "'; use --cache-type-k/--cache-type-v (LoadOptions::cache_type_k/v) f16 or the "
                  "activations' type");
}

Operands operands(Lowering& l) {
  const auto& a = attrs<AttentionAttrs>(l);
  Operands o;
  size_t next = 0;
  o.q = l.input(next++);
  o.k = l.input(next++);
  o.v = l.input(next++);
  if (a.has_mask) o.mask = l.input(next++);
  if (a.has_key_padding_mask) o.key_padding = l.input(next++);
  if (a.has_key_length) o.key_length = l.input(next++);
  if (a.has_kv_slot) o.kv_slot = l.input(next++);
  if (a.rope_kv) {
    o.rope = &*a.rope_kv;
    o.rope_in.q = l.input(next++);
    o.rope_in.k = l.input(next++);
    o.rope_in.v = l.input(next++);
    o.rope_in.cache_k = l.input(next++);
    o.rope_in.cache_v = l.input(next++);
    o.rope_in.position = l.input(next++);
    o.rope_in.q_out = o.q;
  }
  o.out = l.output();
  if (a.out_proj) {  // the attention's rows become a temporary that the projection reads
    o.proj_weight = l.input(next++);
    o.proj_residual = l.input(next++);
    o.proj_y = o.out;
    const Shape& qs = l.value(o.q).shape;
    o.out = l.temp({qs[0], qs[1], qs[2], l.value(o.v).shape[3]}, l.value(o.q).dtype);
  }
  o.causal = a.causal;
  o.causal_at_key_length = a.causal_at_key_length;
  return o;
}

// The fused kernels' variant that rotates a decoding step's q and k and writes the caches
// itself: the texel rows kernel (CPU devices) only.
bool rows_take_rope(const Lowering& l, const Operands& in, const AttentionLaunch& t, bool kv_quant, size_t windows) {
  return in.rope && !kv_quant && windows == 1 && t.kernel == FusedKernel::rows && t.texel &&
         l.supported(Kernel::attention_rows_texel_rope, l.value(in.q).dtype);
}

// Matches the push block of attention_rows.comp's OUT_PROJ variants.
struct OutProjPush {
  AttentionPush attention;
  ops::RopeKvPush rope;
  uint32_t out_n;  // W_O's rows
};
static_assert(sizeof(OutProjPush) <= 128);

// The most rounds of x blocks a lane keeps for the projection (as matmul.wq_rows.max_rounds).
constexpr uint64_t kOutProjMaxRounds = 16;

// The OUT_PROJ variant of the texel rows kernel with the rope inside, where it takes the output
// projection: W_O quantized (a variant for its type), one query block per KV head of one
// sequence (a grouped decoding step), whole bindings, each workgroup's slice of W_O's columns
// whole 32-element blocks within kOutProjMaxRounds, and at least the tuning's
// out_proj_min_workgroups (and 2): the projection is spread over the attention's workgroups, one
// per KV head (Gemma 3 270M's one KV head keeps the linear apart).
std::optional<Kernel> out_proj_kernel(const Lowering& l, const Operands& in, uint64_t groups, uint32_t q_blocks,
                                      uint32_t lanes) {
  if (in.proj_weight == kNoValue) return std::nullopt;
  const ValueDesc& w = l.value(in.proj_weight);
  const Shape& qs = l.value(in.q).shape;
  const int64_t slice = qs[2] * l.value(in.v).shape[3];  // Sq * DV: one KV head's query heads
  const std::optional<Kernel> k = kernels::weight_kernel(kernels::WeightKernel::attention_rows_texel_rope_wo, w.dtype);
  const uint32_t min_groups = l.tuning().attention.out_proj_min_workgroups;
  if (!k || !l.supported(*k, l.value(in.q).dtype) || qs[0] != 1 || q_blocks != 1 || min_groups == 0 ||
      groups < std::max(min_groups, 2u) || slice % 32 != 0 ||
      w.shape.rank() != 2 || w.shape[1] != qs[1] * slice || w.bytes() > l.tuning().max_binding_bytes ||
      (w.bytes() + 15) / 16 > l.info().max_texel_buffer_elements)
    return std::nullopt;
  const uint64_t kb = static_cast<uint64_t>(slice / 32), ro = lanes / std::gcd<uint64_t>(kb, lanes);
  if ((ro * kb + lanes - 1) / lanes > kOutProjMaxRounds) return std::nullopt;
  return k;
}

void lower_fused(Lowering& l, Operands& in, const AttentionLaunch& t) {
  const auto& a = attrs<AttentionAttrs>(l);
  const ValueDesc& q = l.value(in.q);
  const Shape& qs = q.shape;
  const int64_t B = qs[0], H = qs[1], Sq = qs[2], D = qs[3];
  const int64_t Sk = l.value(in.k).shape[2], Dv = l.value(in.v).shape[3];
  const int64_t group = H / l.value(in.k).shape[1];
  const uint32_t q_blocks = ceil_div(Sq, t.rows);
  uint32_t mask_stride[4] = {};
  if (in.mask != kNoValue) ops::broadcast_strides4(l.value(in.mask).shape, {B, H, Sq, Sk}, mask_stride);
  const uint32_t dummy = in.q;  // bound where an optional input is absent, never read
  std::vector<Binding> whole{{in.q},
                                   {in.k},
                                   {in.v},
                                   {in.mask != kNoValue ? in.mask : dummy},
                                   {in.key_padding != kNoValue ? in.key_padding : dummy},
                                   {in.key_length != kNoValue ? in.key_length : dummy},
                                   {in.out, true},
                                   {in.kv_slot != kNoValue ? in.kv_slot : dummy}};
  const uint32_t has_mask = in.mask != kNoValue, has_padding = in.key_padding != kNoValue,
                 has_length = in.key_length != kNoValue, per_sequence = in.kv_slot != kNoValue;
  struct {
    AttentionPush attention;
    ops::RopeKvPush rope;
  } push{};
  static_assert(sizeof(push) <= 128);
  AttentionPush& p = push.attention;
  p.sq = static_cast<uint32_t>(Sq);
  p.sk = static_cast<uint32_t>(Sk);
  p.heads = static_cast<uint32_t>(H);
  p.q_blocks = q_blocks;
  p.scale = a.scale;
  p.d = static_cast<uint32_t>(D);
  p.dv = static_cast<uint32_t>(Dv);
  p.kv_stride = static_cast<uint32_t>(std::max(D, Dv)) + 1;
  p.group = static_cast<uint32_t>(group);
  p.kv_batches = static_cast<uint32_t>(l.value(in.k).shape[0]);
  p.softcap = a.softcap;
  p.causal_at_length = in.causal_at_key_length;
  const uint32_t soft_cap = a.softcap > 0.0f;
  std::copy(mask_stride, mask_stride + 4, p.mask_stride);
  // Long caches or many heads beyond one binding: windows of whole (b, KV head) slices of k and
  // v with their `group` query heads of q and out (src/ops/windows.hpp); the kernels find the
  // mask and key padding rows from bh_base.
  const uint64_t es = dtype_size(q.dtype);
  // With KV slots, k and v are [slots, ...] whatever q's batch, bound whole (require_whole_kv)
  // and read at each row's slot: only q and out are counted by (b, KV head).
  const uint64_t per_kv = in.kv_slot != kNoValue ? 0 : 1;
  const DType k_type = l.value(in.k).dtype, v_type = l.value(in.v).dtype;
  const bool kv_quant = ops::kv_converted(q.dtype, k_type, v_type);
  const uint64_t item[4] = {static_cast<uint64_t>(group * Sq * D) * es,
                            dtype_bytes(k_type, Sk * D) * per_kv,
                            dtype_bytes(v_type, Sk * Dv) * per_kv,
                            static_cast<uint64_t>(group * Sq * Dv) * es};
  const std::vector<ops::Span> spans = ops::split_spans(
      static_cast<uint64_t>(B * H / group), {item[0], item[1], item[2], item[3]},
      l.tuning().max_binding_bytes, ops::window_alignment(l.info()),
      l.node().label + ": heads of q, k, v");
  ops::require_whole_kv(l, in, spans.size(), "fused attention");
  const bool rope = rows_take_rope(l, in, t, kv_quant, spans.size());
  if (in.rope && !rope) ops::emit_rope_apart(l, in);
  std::vector<Binding> rope_bindings;
  if (rope) {  // the kernel rotates q itself
    push.rope = ops::rope_kv_push(l, in);
    rope_bindings = ops::rope_kv_inputs(l, in);  // bindings 8-12
    rope_bindings.push_back({in.k, true});        // 13, 14: the caches' new rows
    rope_bindings.push_back({in.v, true});
    for (Binding& b : whole)  // the rotated q is never written: bind the unrotated rows instead
      if (b.value == in.q) b.value = in.rope_in.q;
  }
  for (const ops::Span& s : spans) {
    std::vector<Binding> bindings = whole;
    bindings.insert(bindings.end(), rope_bindings.begin(), rope_bindings.end());
    if (spans.size() > 1) {
      const size_t at[4] = {0, 1, 2, 6};  // q, k, v, out among the bindings
      for (size_t i = 0; i < 4; ++i)
        bindings[at[i]] = ops::window(whole[at[i]].value, whole[at[i]].write,
                                      s.first * item[i], s.count * item[i]);
    }
    const uint64_t groups = s.count * group * q_blocks;
    p.groups = static_cast<uint32_t>(groups);
    p.bh_base = static_cast<uint32_t>(s.first * group);
    if (t.kernel == FusedKernel::rows) {
      // Exact head dims in vec4 chunks: the kernel unrolls over them (one pipeline per head dim).
      const bool vec4 = D % 4 == 0 && Dv % 4 == 0;
      std::vector<uint32_t> spec{t.invocations, t.rows_per_lane, ceil_div(D, 4), ceil_div(Dv, 4), vec4,
                                 has_mask, has_padding, has_length, in.causal, per_sequence, soft_cap};
      if (kv_quant) spec.insert(spec.end(), {ops::kv_type_code(k_type), ops::kv_type_code(v_type)});
      const std::optional<Kernel> proj =
          rope && spans.size() == 1 ? out_proj_kernel(l, in, groups, q_blocks, t.invocations) : std::nullopt;
      if (proj) {
        // Bindings 15-19: W_O, the residual, y, the workgroups' partial rows and their counter
        // (zero between runs: the last workgroup resets it).
        const uint32_t kb = static_cast<uint32_t>(Sq * Dv / 32);
        const uint32_t n = static_cast<uint32_t>(l.value(in.proj_weight).shape[0]);
        spec.insert(spec.end(), {kb, t.invocations / std::gcd(kb, t.invocations)});
        bindings.insert(bindings.end(), {{in.proj_weight},
                                         {in.proj_residual},
                                         {in.proj_y, true},
                                         {l.temp({static_cast<int64_t>(groups), n}, DType::f32), true},
                                         {l.constant(HostTensor::from_i32({1}, std::vector<int32_t>{0})), true}});
        l.dispatch(*proj, q.dtype, std::move(bindings), PushBlock::of(OutProjPush{p, push.rope, n}),
                   l.rows_grid(groups), std::move(spec));
        in.proj_weight = kNoValue;
        continue;
      }
      l.dispatch(rope ? Kernel::attention_rows_texel_rope : fused_kernel(t, kv_quant), q.dtype,
                 std::move(bindings), rope ? PushBlock::of(push) : PushBlock::of(p), l.rows_grid(groups),
                 std::move(spec));
    } else {
      std::vector<uint32_t> spec{t.invocations, t.rows, t.bc, t.d_cap, t.dv_cap, t.kv_cap, has_mask, has_padding,
                                 has_length, in.causal, t.sr, t.sc, t.or_, t.od, per_sequence, soft_cap};
      if (kv_quant) spec.insert(spec.end(), {ops::kv_type_code(k_type), ops::kv_type_code(v_type)});
      l.dispatch(fused_kernel(t, kv_quant), q.dtype, std::move(bindings), PushBlock::of(p),
                 l.rows_grid(groups), std::move(spec));
    }
  }
}

void lower_unfused(Lowering& l, const Operands& in) {
  const auto& a = attrs<AttentionAttrs>(l);
  // Copies: temp() and view() grow the value table.
  const Shape qs = l.value(in.q).shape;
  const DType dtype = l.value(in.q).dtype;
  const int64_t B = qs[0], H = qs[1], Sq = qs[2], Hkv = l.value(in.k).shape[1];
  const int64_t Sk = l.value(in.k).shape[2], Dv = l.value(in.v).shape[3];
  const Shape scores_shape{B, H, Sq, Sk};
  uint32_t scores = l.temp(scores_shape, dtype);
  uint32_t probs = l.temp(scores_shape, dtype);
  // Grouped-query attention: the group's query heads (consecutive) as the rows of one matrix
  // per KV head, [B, Hkv, group * Sq, .], for both products; the softmax sees [B, H, Sq, Sk].
  uint32_t q_rows = in.q, scores_rows = scores, probs_rows = probs, out_rows = in.out;
  if (Hkv != H) {
    const int64_t rows = H / Hkv * Sq;
    q_rows = l.view(in.q, {B, Hkv, rows, qs[3]});
    scores_rows = l.view(scores, {B, Hkv, rows, Sk});
    probs_rows = l.view(probs, {B, Hkv, rows, Sk});
    out_rows = l.view(in.out, {B, Hkv, rows, Dv});
  }
  ops::MatmulCall qk;
  qk.a = q_rows;
  qk.b = in.k;
  qk.out = scores_rows;
  qk.transpose_b = true;
  qk.alpha = a.scale;
  ops::emit_matmul(l, qk);
  ops::SoftmaxCall sm;
  sm.x = scores;
  sm.out = probs;
  sm.mask = in.mask;
  sm.key_padding_mask = in.key_padding;
  sm.key_length = in.key_length;
  sm.causal = in.causal;
  sm.causal_at_key_length = in.causal_at_key_length;
  ops::emit_softmax(l, sm);
  ops::MatmulCall pv;
  pv.a = probs_rows;
  pv.b = in.v;
  pv.out = out_rows;
  ops::emit_matmul(l, pv);
}

// A decoding step of grouped-query attention (one query per head) as the same problem with the
// group's query heads as the rows of one query block per KV head: q [B, H, 1, D] and out are
// [B, Hkv, group, .] over the same bytes, so a fused workgroup computes `group` rows instead of
// one (on lavapipe, SmolLM2's 9/3 heads over 1024 keys: 250 us instead of 1030 fused or 465
// unfused). Exact where the mask, if any, is the same for every head (its query dim is 1: there
// is one query); causal hides nothing from the one query (it sees all Sk keys), and the stacked
// rows must not be masked as if they were later queries.
void stack_grouped_decode(Lowering& l, Operands& in) {
  const Shape qs = l.value(in.q).shape;
  const int64_t B = qs[0], H = qs[1], Sq = qs[2], D = qs[3], Hkv = l.value(in.k).shape[1];
  if (Sq != 1 || Hkv == H) return;
  if (in.mask != kNoValue) {
    const Shape& m = l.value(in.mask).shape;
    if (m.rank() >= 3 && m[m.rank() - 3] != 1) return;  // a head dim that is not broadcast
  }
  const int64_t Dv = l.value(in.out).shape[3];
  in.q = l.view(in.q, {B, Hkv, H / Hkv, D});
  in.out = l.view(in.out, {B, Hkv, H / Hkv, Dv});
  in.causal = false;
  in.causal_at_key_length = false;
}

void emit_attention(Lowering& l, Operands& in) {
  const auto& a = attrs<AttentionAttrs>(l);
  stack_grouped_decode(l, in);
  const Shape& qs = l.value(in.q).shape;
  const int64_t D = qs[3], Dv = l.value(in.v).shape[3];
  if (in.key_length != kNoValue)
    l.require_index_bound(in.key_length, 0, l.value(in.k).shape[2] + 1,
                          "key_length counts keys of the " + std::to_string(l.value(in.k).shape[2]) +
                              " that k holds");
  const kernels::AttentionTiles& tuned = l.tuning().attention;
  const uint64_t score_bytes = static_cast<uint64_t>(qs[0] * qs[1] * qs[2]) *
                               static_cast<uint64_t>(l.value(in.k).shape[2]) *
                               dtype_size(l.value(in.q).dtype);
  const bool unfused_fits = score_bytes <= l.tuning().max_binding_bytes;
  // What the tuning leaves to the unfused chain whatever fused kernel there is.
  // Per-sequence KV slots are read by the fused kernels only (the chain's matmuls index k by
  // q's batch).
  const bool per_sequence = in.kv_slot != kNoValue;
  if (per_sequence)
    l.require_index_bound(in.kv_slot, 0, l.value(in.k).shape[0],
                          "kv_slot names one of the " + std::to_string(l.value(in.k).shape[0]) +
                              " batches of k and v");
  // Soft-capped scores too: the chain's matmul -> softmax has no step for them.
  const bool soft_capped = a.softcap > 0.0f;
  if (soft_capped && a.path == Path::unfused)
    throw Error(ErrorCode::unsupported,
                l.node().label + ": soft-capped attention (softcap) needs a fused attention path");
  // Caches in another type than q: only the fused kernels' KV_QUANT variants read them.
  const bool kv_quant = ops::kv_converted(l.value(in.q).dtype, l.value(in.k).dtype,
                                          l.value(in.v).dtype);
  if (kv_quant && a.path == Path::unfused)
    throw_kv_path_error(l, "the unfused attention path (matmul, softmax, matmul)");
  const bool fused_only = per_sequence || soft_capped || kv_quant;
  const bool tuned_unfused = !fused_only && a.path == Path::automatic &&
                             (qs[2] <= tuned.automatic_unfused_max_queries ||
                              (tuned.automatic_unfused_where_it_fits && unfused_fits));
  if (per_sequence && a.path == Path::unfused)
    throw Error(ErrorCode::unsupported,
                l.node().label + ": per-sequence KV slots (kv_slot) need a fused attention path");
  if (a.path == Path::unfused || tuned_unfused) {
    ops::emit_rope_apart(l, in);
    lower_unfused(l, in);
    return;
  }
  // Split-K decoding or flash attention where the device takes them for this problem.
  if (ops::emit_flash_paths(l, in)) return;
  AttentionLaunch launch;
  const kernels::AttentionProblem problem{qs[0], qs[1], qs[2], l.value(in.k).shape[2], D, Dv};
  bool fused_ok = kernels::attention_launch_for(tuned, l.info(), problem, &launch) &&
                  l.supported(fused_kernel(launch, kv_quant), l.value(in.q).dtype);
  if (a.path == Path::automatic && !fused_ok && !fused_only) {
    ops::emit_rope_apart(l, in);
    lower_unfused(l, in);
    return;
  }
  if (!fused_ok) {
    if (D > kFusedMaxHeadDim || Dv > kFusedMaxHeadDim)
      throw Error(ErrorCode::unsupported,
                  l.node().label + ": the fused attention kernel takes head dims up to " +
                      std::to_string(kFusedMaxHeadDim) + ", got D = " + std::to_string(D) +
                      ", Dv = " + std::to_string(Dv) + "; use the unfused or automatic path");
    l.variant(fused_kernel(launch, kv_quant), l.value(in.q).dtype);  // throws, saying what the device lacks
    throw Error(ErrorCode::unsupported,
                l.node().label + ": the fused attention kernel for D = " + std::to_string(D) +
                    ", Dv = " + std::to_string(Dv) + " does not fit the shared memory of device '" +
                    l.info().name + "' (" + std::to_string(l.info().shared_memory_bytes) +
                    " bytes); use the unfused or automatic path");
  }
  lower_fused(l, in, launch);
}

void lower_attention(Lowering& l) {
  Operands in = operands(l);
  const uint32_t heads = in.out;  // [B, H, Sq, DV] before any restacking
  emit_attention(l, in);
  if (in.proj_weight == kNoValue) return;
  // The output projection that no kernel took: linear(concat_heads(heads), W_O, residual), of
  // one query row, so the heads' rows are already concatenated.
  const Shape& hs = l.value(heads).shape;
  ops::MatmulCall c;
  c.a = l.view(heads, {hs[0], hs[2], hs[1] * hs[3]});
  c.b = in.proj_weight;
  c.transpose_b = true;
  c.residual = in.proj_residual;
  c.out = in.proj_y;
  ops::emit_matmul(l, c);
}

}  // namespace

Tensor Graph::attention(Tensor q, Tensor k, Tensor v, const AttentionOptions& options) {
  const std::string op = "attention";
  ops::require_float(impl(), op, "q", q);
  for (auto [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) {
    impl().check(*t, op, name);
    ops::require_rank(impl(), op, name, *t, 4, 4);
  }
  // k and v in q's dtype, or (a KV cache) each in a type of ops::is_kv_cache_type, read by the
  // fused kernels' KV_QUANT variants, with head dims of whole 32-element blocks.
  for (auto [t, name] : {std::pair{&k, "k"}, {&v, "v"}}) {
    if (t->dtype == q.dtype) continue;
    if (!ops::is_kv_cache_type(t->dtype))
      shape_error(impl().label(op), std::string(name) + " is " + describe(*t) + ": k and v must be q's dtype (" +
                                        std::string(dtype_name(q.dtype)) +
                                        ") or a KV cache type (f32, f16, q8_0, q4_0)");
    if (t->shape[3] % 32 != 0)  // whole 32-value blocks per row, read 4 values at a time
      shape_error(impl().label(op), std::string(name) + " is " + describe(*t) + ": k and v in another dtype than q's (" +
                                        std::string(dtype_name(q.dtype)) +
                                        ") need a head dim that is a multiple of 32");
  }
  const int64_t B = q.shape[0], H = q.shape[1], Sq = q.shape[2], D = q.shape[3];
  const int64_t Sk = k.shape[2], Hkv = k.shape[1];
  // With per-sequence KV slots k and v hold one batch per slot, any number of them.
  const int64_t Bk = options.kv_slot ? k.shape[0] : B;
  // k may have fewer heads than q (grouped-query attention): Hkv dividing H.
  if (k.shape[0] != Bk || Hkv < 1 || H % Hkv != 0 || k.shape[3] != D)
    shape_error(impl().label(op), "k " + k.shape.str() + " must be [B, Hkv, Sk, D] = [" +
                                      std::to_string(B) + ",Hkv,Sk," + std::to_string(D) +
                                      "] with Hkv dividing H = " + std::to_string(H) + " for q " +
                                      q.shape.str());
  if (v.shape[0] != Bk || v.shape[1] != Hkv || v.shape[2] != Sk)
    shape_error(impl().label(op), "v " + v.shape.str() + " must be [B, Hkv, Sk, Dv] = [" +
                                      std::to_string(Bk) + "," + std::to_string(Hkv) + "," +
                                      std::to_string(Sk) + ",Dv] for k " + k.shape.str());
  const Shape scores{B, H, Sq, Sk};
  std::vector<uint32_t> inputs{q.id, k.id, v.id};
  AttentionAttrs a;
  ops::require_finite(impl(), op, "scale", options.scale);
  a.scale = options.scale != 0.0f ? options.scale : 1.0f / std::sqrt(static_cast<float>(D));
  a.causal = options.causal;
  a.causal_at_key_length = options.causal_at_key_length;
  if (options.causal_at_key_length && (!options.causal || !options.key_length || options.kv_slot))
    throw Error(ErrorCode::invalid_argument,
                impl().label(op) + ": causal_at_key_length needs causal and key_length, without kv_slot");
  a.path = options.path;
  if (options.mask) {
    const Tensor& m = *options.mask;
    ops::require_additive_mask(impl(), op, m, "q", q, scores,
                               "the scores [B, H, Sq, Sk] = " + scores.str());
    inputs.push_back(m.id);
    a.has_mask = true;
  }
  if (options.key_padding_mask) {
    const Tensor& kp = *options.key_padding_mask;
    ops::require_dtype(impl(), op, "key_padding_mask", kp, DType::i32);
    if (kp.shape.rank() != 2 || kp.shape[0] != B || kp.shape[1] != Sk)
      shape_error(impl().label(op), "key padding mask " + kp.shape.str() + " must be [B, Sk] = [" +
                                        std::to_string(B) + "," + std::to_string(Sk) + "]");
    inputs.push_back(kp.id);
    a.has_key_padding_mask = true;
  }
  if (options.key_length) {
    const Tensor& kl = *options.key_length;
    ops::require_dtype(impl(), op, "key_length", kl, DType::i32);
    if (!options.kv_slot && kl.shape.numel() != 1)
      shape_error(impl().label(op), "key_length must hold one value ([1]), got " + kl.shape.str());
    if (options.kv_slot && (kl.shape.rank() != 1 || kl.shape[0] != B))
      shape_error(impl().label(op), "with kv_slot, key_length must hold one value per batch ([" +
                                        std::to_string(B) + "]), got " + kl.shape.str());
    inputs.push_back(kl.id);
    a.has_key_length = true;
  }
  if (options.kv_slot) {
    const Tensor& ks = *options.kv_slot;
    impl().check(ks, op, "kv_slot");
    ops::require_dtype(impl(), op, "kv_slot", ks, DType::i32);
    if (ks.shape.rank() != 1 || ks.shape[0] != B || !options.key_length)
      shape_error(impl().label(op), "kv_slot " + ks.shape.str() + " must be i32 [B] = [" +
                                        std::to_string(B) + "], with key_length [B]");
    inputs.push_back(ks.id);
    a.has_kv_slot = true;
  }
  if (!std::isfinite(options.softcap) || options.softcap < 0.0f)
    throw Error(ErrorCode::invalid_argument, impl().label(op) + ": softcap must be a finite number >= 0 (0: none), got " +
                                                 std::to_string(options.softcap));
  a.softcap = options.softcap;
  if (options.path == Path::fused && (D > kFusedMaxHeadDim || v.shape[3] > kFusedMaxHeadDim))
    throw Error(ErrorCode::unsupported,
                impl().label(op) + ": the fused attention kernel takes head dims up to " +
                    std::to_string(kFusedMaxHeadDim) + ", got D = " + std::to_string(D) +
                    ", Dv = " + std::to_string(v.shape[3]) + "; use the unfused or automatic path");
  return impl().add_node(OpKind::attention, op, std::move(inputs), a, {B, H, Sq, v.shape[3]},
                         q.dtype);
}

void register_attention_ops(OpRegistry& r) { r.add(OpKind::attention, lower_attention); }

}  // namespace vkformer
