// rope_kv_cache: RoPE on a decoder step's queries and keys and the KV-cache write of its keys and
// values, one dispatch (shaders/rope_kv_cache.comp) where rope, split_heads and two update_cache
// take four to six. The op's node yields the rotated queries; each cache after the write is a
// cache_after node, whose value is the cache's bytes (like update_cache's result) and which
// lowers to nothing.
#include <algorithm>
#include <string>

#include "kv_cache_types.hpp"
#include "op_common.hpp"
#include "rope.hpp"
#include "rope_kv_cache.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct RopeKvCachePush {
  uint32_t s, d, half_dims, heads, kv_heads, group, t;
  uint32_t q_stride, k_stride, v_stride;
  uint32_t q_off, k_off, v_off;
  uint32_t slice_base;
  int32_t base;
  uint32_t cache_batches;  // per-sequence slots: batches of the caches
};
static_assert(sizeof(RopeKvCachePush) <= 128);

}  // namespace

void ops::require_rope_kv_position(Lowering& l, const RopeKvCacheAttrs& a, uint32_t position, int64_t S,
                                   int64_t T) {
  l.require_index_bound(position, 0, T - S + 1,
                        "the position of " + std::to_string(S) + " new row(s) in a cache of " +
                            std::to_string(T) + " rows");
  l.require_index_bound(position, -a.offset, ops::kMaxPosition - a.offset - S + 1,
                        "offset " + std::to_string(a.offset) + " + position + " + std::to_string(S) +
                            " rows must keep positions within [0, 2^24]");
}

void ops::emit_rope_kv_cache(Lowering& l, const RopeKvCacheAttrs& attributes, const RopeKvOperands& in) {
  const RopeKvCacheAttrs a = attributes;  // a copy: constant() grows the tables
  const uint32_t q = in.q, k = in.k, v = in.v, cache_k = in.cache_k, cache_v = in.cache_v,
                 position = in.position, cache_slot = in.cache_slot;
  const Shape cache = l.value(cache_k).shape;  // [Bc, Hkv, T, D]
  const DType dtype = l.value(q).dtype;
  const DType k_type = l.value(cache_k).dtype, v_type = l.value(cache_v).dtype;
  // Caches in another type than the activations: the kernel that converts (quantizes) rows.
  const bool convert = ops::kv_converted(dtype, k_type, v_type);
  const Shape qs = l.value(q).shape;           // [B, S, C]
  const int64_t B = qs[0], Hkv = cache[1], T = cache[2], D = cache[3], S = qs[1];
  const int64_t group = a.heads / a.kv_heads;
  const uint32_t table = l.constant(ops::rope_inv_freq(a.dims, a.freq_base, a.freq_scale, a.freq_factors));
  ops::require_rope_kv_position(l, a, position, S, T);
  RopeKvCachePush p{};
  p.s = static_cast<uint32_t>(S);
  p.d = static_cast<uint32_t>(D);
  p.half_dims = static_cast<uint32_t>(a.dims / 2);
  p.heads = static_cast<uint32_t>(a.heads);
  p.kv_heads = static_cast<uint32_t>(Hkv);
  p.group = static_cast<uint32_t>(group);
  p.t = static_cast<uint32_t>(T);
  p.q_stride = static_cast<uint32_t>(qs[2]);
  p.k_stride = static_cast<uint32_t>(l.value(k).shape[2]);
  p.v_stride = static_cast<uint32_t>(l.value(v).shape[2]);
  p.q_off = static_cast<uint32_t>(a.q_offset);
  p.k_off = static_cast<uint32_t>(a.k_offset);
  p.v_off = static_cast<uint32_t>(a.v_offset);
  p.base = static_cast<int32_t>(a.offset);
  p.cache_batches = static_cast<uint32_t>(cache[0]);
  if (cache_slot != kNoValue)
    l.require_index_bound(cache_slot, 0, cache[0],
                          "a slot of the caches' " + std::to_string(cache[0]) + " batches");
  // Caches beyond one binding: windows of whole (b, g) slices of T rows, one dispatch each, with
  // the queries of those KV heads.
  const uint64_t slice_k = dtype_bytes(k_type, T * D), slice_v = dtype_bytes(v_type, T * D);
  std::vector<ops::Span> spans = ops::split_spans(
      static_cast<uint64_t>(B * Hkv), {slice_k, slice_v}, l.tuning().max_binding_bytes,
      ops::window_alignment(l.info()), l.node().label + ": (batch, head) slices of the caches");
  // A workgroup per (chunk of `rows` rows, slice) of ceil(D / 2) invocations (whole subgroups),
  // each writing a column pair of every head. CPU devices take 16 rows per workgroup
  // (shaders/rope_kv_cache.comp says why), GPUs one.
  const uint64_t rows = l.tuning().cpu_device ? std::min<int64_t>(S, 16) : 1;
  const uint64_t chunks = (static_cast<uint64_t>(S) + rows - 1) / rows;
  const uint32_t sg = std::max<uint32_t>(l.info().subgroup_size, 1);
  const uint64_t pairs = (static_cast<uint64_t>(D) + 1) / 2;
  const uint64_t wg = (pairs + sg - 1) / sg * sg;
  if (wg > l.info().max_workgroup_invocations || wg > l.info().max_workgroup_size[0])
    throw Error(ErrorCode::unsupported, l.node().label + ": head dim " + std::to_string(D) + " needs " +
                                            std::to_string(pairs) + " invocations, more than a workgroup of device '" +
                                            l.info().name + "' holds");
  // Per-sequence slots write anywhere in the caches: they must be bound whole (one dispatch).
  if (cache_slot != kNoValue &&
      static_cast<uint64_t>(cache[0] * Hkv) * std::max(slice_k, slice_v) > l.tuning().max_binding_bytes)
    throw Error(ErrorCode::unsupported,
                l.node().label + ": caches of " + std::to_string(cache[0] * Hkv * T * D) +
                    " elements with per-sequence slots exceed one binding of device '" +
                    l.info().name + "' (" + std::to_string(l.tuning().max_binding_bytes) +
                    " bytes): fewer slots or a shorter context");
  if (cache_slot != kNoValue) spans = {ops::Span{0, static_cast<uint64_t>(B * Hkv)}};
  for (const ops::Span& s : spans) {
    p.slice_base = static_cast<uint32_t>(s.first);
    Binding ck{cache_k, true}, cv{cache_v, true};
    if (spans.size() > 1) {
      ck = ops::window(cache_k, true, s.first * slice_k, s.count * slice_k);
      cv = ops::window(cache_v, true, s.first * slice_v, s.count * slice_v);
    }
    std::vector<uint32_t> spec{static_cast<uint32_t>(wg), a.style == RopeOptions::Style::neox ? 1u : 0u,
                               cache_slot != kNoValue ? 1u : 0u, static_cast<uint32_t>(rows)};
    if (convert)  // shaders/rope_kv_cache_quant.comp: the types, its shared row of 2 wg, the
                  // rotation's blocks and the query rows it holds in shared memory to rotate
      spec.insert(spec.end(), {ops::kv_type_code(k_type), ops::kv_type_code(v_type),
                               static_cast<uint32_t>(2 * wg), static_cast<uint32_t>(a.rotate_k),
                               static_cast<uint32_t>(a.rotate_v),
                               static_cast<uint32_t>(a.rotate_k > 0 ? group : 1)});
    l.dispatch(convert ? Kernel::rope_kv_cache_quant : Kernel::rope_kv_cache, dtype,
               {{q}, {k}, {v}, {table}, {position}, {in.q_out, true}, ck, cv,
                {cache_slot != kNoValue ? cache_slot : position}},
               PushBlock::of(p), l.grid(chunks, s.count, 1), std::move(spec));
  }
}

namespace {

void lower_rope_kv_cache(Lowering& l) {
  const RopeKvCacheAttrs& a = attrs<RopeKvCacheAttrs>(l);
  if (a.in_attention) return;  // the attention's dispatch does it (AttentionAttrs::rope_kv)
  ops::RopeKvOperands in;
  in.q = l.input(0);
  in.k = l.input(1);
  in.v = l.input(2);
  in.cache_k = l.input(3);
  in.cache_v = l.input(4);
  in.position = l.input(5);
  if (a.has_cache_slot) in.cache_slot = l.input(6);
  in.q_out = l.output();
  ops::emit_rope_kv_cache(l, a, in);
}

// A cache after rope_kv_cache's write: the cache's own bytes (ExecutorImpl::build_program).
void lower_cache_after(Lowering&) {}

}  // namespace

RopeKvCache Graph::rope_kv_cache(Tensor qkv, int heads, int kv_heads, Tensor cache_k,
                                 Tensor cache_v, Tensor position, const RopeOptions& rope,
                                 std::optional<Tensor> cache_slot, const KvRotation& rotation) {
  impl().check(qkv, "rope_kv_cache", "qkv");
  if (qkv.shape.rank() != 3 || heads < 1 || kv_heads < 1 ||
      qkv.shape[2] % (int64_t{heads} + 2 * int64_t{kv_heads}) != 0)
    shape_error(impl().label("rope_kv_cache"),
                "qkv is " + describe(qkv) + ": expected [B, S, (H + 2 Hkv) D] with H = " +
                    std::to_string(heads) + ", Hkv = " + std::to_string(kv_heads));
  const int64_t d = qkv.shape[2] / (int64_t{heads} + 2 * int64_t{kv_heads});
  return impl().rope_kv_cache(qkv, qkv, qkv, heads, kv_heads, 0, heads * d, (heads + kv_heads) * d,
                              cache_k, cache_v, position, rope, cache_slot, rotation);
}

RopeKvCache Graph::rope_kv_cache(Tensor q, Tensor k, Tensor v, int heads, int kv_heads,
                                 Tensor cache_k, Tensor cache_v, Tensor position,
                                 const RopeOptions& rope, std::optional<Tensor> cache_slot,
                                 const KvRotation& rotation) {
  return impl().rope_kv_cache(q, k, v, heads, kv_heads, 0, 0, 0, cache_k, cache_v, position, rope,
                              cache_slot, rotation);
}

RopeKvCache GraphImpl::rope_kv_cache(Tensor q, Tensor k, Tensor v, int heads, int kv_heads,
                                     int64_t q_off, int64_t k_off, int64_t v_off, Tensor cache_k,
                                     Tensor cache_v, Tensor position, const RopeOptions& rope,
                                     const std::optional<Tensor>& cache_slot,
                                     const KvRotation& rotation) {
  const std::string op = "rope_kv_cache";
  ops::require_float(*this, op, "q", q);
  ops::require_float(*this, op, "k", k);
  ops::require_float(*this, op, "v", v);
  ops::require_rank(*this, op, "cache_k", cache_k, 4, 4);
  ops::require_rank(*this, op, "cache_v", cache_v, 4, 4);
  ops::require_dtype(*this, op, "position", position, DType::i32);
  for (const Tensor* c : {&cache_k, &cache_v})
    if (!externals.count(c->id))
      shape_error(label(op), "the caches must be tensors made by Graph::external");
  if (cache_slot) {
    check(*cache_slot, op, "cache_slot");
    ops::require_dtype(*this, op, "cache_slot", *cache_slot, DType::i32);
  }
  if (heads < 1 || kv_heads < 1 || heads % kv_heads != 0)
    shape_error(label(op), "heads " + std::to_string(heads) + " must be a multiple of kv_heads " +
                               std::to_string(kv_heads) + " (both >= 1)");
  const Shape& cs = cache_k.shape;  // [B, Hkv, T, D]
  if (cache_v.shape != cs || cs[1] != kv_heads)
    shape_error(label(op), "cache_k " + describe(cache_k) + " and cache_v " + describe(cache_v) +
                               " must both be [B, " + std::to_string(kv_heads) + ", T, D]");
  // Each cache in its own type: the activations' (q's), or another that the write converts to.
  for (const Tensor* c : {&cache_k, &cache_v}) {
    const char* name = c == &cache_k ? "cache_k" : "cache_v";
    if (!ops::is_kv_cache_type(c->dtype))
      shape_error(label(op), std::string(name) + " is " + describe(*c) +
                                 ": a KV cache holds f32, f16, q8_0 or q4_0");
    if (is_quantized(c->dtype) && cs[3] % 32 != 0)
      shape_error(label(op), std::string(name) + " is " + describe(*c) +
                                 ": a quantized cache needs a head dim that is a multiple of 32 "
                                 "(whole blocks per row)");
  }
  const int64_t B = cache_slot ? q.shape.rank() == 3 ? q.shape[0] : 0 : cs[0], T = cs[2], D = cs[3];
  if (cache_slot && (cache_slot->shape.rank() != 1 || cache_slot->shape[0] != B ||
                     position.shape.rank() != 1 || position.shape[0] != B))
    shape_error(label(op), "with per-sequence slots, cache_slot " + describe(*cache_slot) +
                               " and position " + describe(position) +
                               " must both be i32 [B] with B = " + std::to_string(B) +
                               " (q's batches)");
  if (!cache_slot && position.shape.numel() != 1)
    shape_error(label(op), "position must hold one value, got " + describe(position));
  const int64_t widths[3] = {heads * D, kv_heads * D, kv_heads * D};
  const int64_t offsets[3] = {q_off, k_off, v_off};
  const Tensor* parts[3] = {&q, &k, &v};
  const char* names[3] = {"q", "k", "v"};
  const int64_t S = q.shape.rank() == 3 ? q.shape[1] : 0;
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = *parts[i];
    if (t.dtype != q.dtype || t.shape.rank() != 3 || t.shape[0] != B || t.shape[1] != S ||
        t.shape[2] < offsets[i] + widths[i] || S < 1 || S > T)
      shape_error(label(op), std::string(names[i]) + " is " + describe(t) + ": expected [" +
                                 std::to_string(B) + ", S <= " + std::to_string(T) + ", " +
                                 std::to_string(widths[i]) + "] columns from " +
                                 std::to_string(offsets[i]) + " in q's dtype (caches " +
                                 describe(cache_k) + ")");
  }
  // The rotation: a Hadamard block of at most one workgroup's row (shaders/rope_kv_cache_quant.comp
  // rotates in shared memory), written by the kernel that converts rows (rope_kv_cache.comp
  // stores the activations' type unrotated: the caches must be in another type).
  for (const auto& [block, name] : {std::pair{rotation.k, "rotation.k"}, {rotation.v, "rotation.v"}}) {
    if (block == 0) continue;
    if (block < 2 || block > 1024 || (block & (block - 1)) != 0 || D % block != 0)
      shape_error(label(op), std::string(name) + " is " + std::to_string(block) +
                                 ": expected 0 or a power of two from 2 to 1024 dividing the head dim " +
                                 std::to_string(D));
    if (!ops::kv_converted(q.dtype, cache_k.dtype, cache_v.dtype))
      shape_error(label(op), std::string(name) + ": a rotation needs caches in another type than q's " +
                                 std::string(dtype_name(q.dtype)) + " (cache_k " + describe(cache_k) +
                                 ", cache_v " + describe(cache_v) + ")");
  }
  if (rope.offset_tensor)
    throw Error(ErrorCode::invalid_argument,
                label(op) + ": rope.offset_tensor must be empty (the rows rotate at position + offset)");
  const int64_t dims = ops::check_rope(*this, op, "the caches' rows of " + std::to_string(D), D, S, rope);
  if (static_cast<uint64_t>(B * kv_heads * S * (heads / kv_heads + 2) * D) > UINT32_MAX)
    shape_error(label(op), "more than 2^32 elements to write");
  RopeKvCacheAttrs at;
  at.heads = heads;
  at.kv_heads = kv_heads;
  at.q_offset = q_off;
  at.k_offset = k_off;
  at.v_offset = v_off;
  at.style = rope.style;
  at.dims = dims;
  at.freq_base = rope.freq_base;
  at.freq_scale = rope.freq_scale;
  at.freq_factors = rope.freq_factors;
  at.offset = rope.offset;
  at.has_cache_slot = cache_slot.has_value();
  at.rotate_k = rotation.k;
  at.rotate_v = rotation.v;
  std::vector<uint32_t> inputs{q.id, k.id, v.id, cache_k.id, cache_v.id, position.id};
  if (cache_slot) inputs.push_back(cache_slot->id);
  RopeKvCache r;
  r.q = add_node(OpKind::rope_kv_cache, op, std::move(inputs), at, Shape{B, heads, S, D}, q.dtype);
  r.k_cache = add_node(OpKind::cache_after, op + ":k", {r.q.id, cache_k.id}, {}, cache_k.shape,
                       cache_k.dtype);
  r.v_cache = add_node(OpKind::cache_after, op + ":v", {r.q.id, cache_v.id}, {}, cache_v.shape,
                       cache_v.dtype);
  return r;
}

void register_rope_kv_cache_ops(OpRegistry& r) {
  r.add(OpKind::rope_kv_cache, lower_rope_kv_cache);
  r.add(OpKind::cache_after, lower_cache_after);
}

}  // namespace vkformer
