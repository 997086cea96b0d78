// rope_shift: the context shift of a KV cache, in place (shaders/rope_shift.comp): rows
// [keep + discard, end) of every (batch, head) slice move down to [keep, end - discard), and a
// key cache's moved keys are turned by the position change (rope by -discard; a quantized cache's
// keys dequantized, out of and back into the attention rotation, quantized again), so that each
// equals the key written directly at its new position. keep, discard and end are read at run time
// from an i32 [3] tensor, so one recorded graph shifts by any amount; an i32 [4] adds the batch
// item (a server's slot) whose heads alone move, also read at run time, in one dispatch.
#include <algorithm>
#include <string>

#include "kv_cache_types.hpp"
#include "op_common.hpp"
#include "rope.hpp"
#include "windows.hpp"

namespace vkformer {

using ops::attrs;
using kernels::Kernel;

namespace {

struct RopeShiftPush {
  uint32_t t, d, half_dims;
  uint32_t heads;   // 0: every slice; else the slices of the item shift[3]
  uint32_t items;   // batch items of the cache
  uint32_t first;   // the binding's first slice
  uint32_t slices;  // the binding's slices
};
static_assert(sizeof(RopeShiftPush) <= 128);

void lower_rope_shift(Lowering& l) {
  const RopeShiftAttrs a = attrs<RopeShiftAttrs>(l);  // a copy: constant() grows the tables
  const uint32_t cache = l.input(0), shift = l.input(1);
  const ValueDesc& c = l.value(cache);
  const int64_t slices = c.shape[0] * c.shape[1], T = c.shape[2], D = c.shape[3];
  const bool one_item = l.value(shift).shape.numel() == 4;
  // Without rope the table is a placeholder that the kernel does not read.
  const uint32_t table = l.constant(a.has_rope ? ops::rope_inv_freq(a.dims, a.freq_base, a.freq_scale, a.freq_factors)
                                               : ops::rope_inv_freq(2, 10000.0));
  RopeShiftPush p{static_cast<uint32_t>(T),
                  static_cast<uint32_t>(D),
                  static_cast<uint32_t>(a.has_rope ? a.dims / 2 : 0),
                  static_cast<uint32_t>(one_item ? c.shape[1] : 0),
                  static_cast<uint32_t>(c.shape[0]),
                  0,
                  0};
  const uint32_t sg = std::max<uint32_t>(l.info().subgroup_size, 1);
  const uint64_t pairs = (static_cast<uint64_t>(D) + 1) / 2, wg = (pairs + sg - 1) / sg * sg;
  if (wg > l.info().max_workgroup_invocations || wg > l.info().max_workgroup_size[0])
    throw Error(ErrorCode::unsupported, l.node().label + ": head dim " + std::to_string(D) + " needs " +
                                            std::to_string(pairs) + " invocations, more than a workgroup of device '" +
                                            l.info().name + "' holds");
  const uint64_t slice_bytes = dtype_bytes(c.dtype, T * D);
  const std::vector<ops::Span> spans =
      ops::split_spans(static_cast<uint64_t>(slices), {slice_bytes}, l.tuning().max_binding_bytes,
                       ops::window_alignment(l.info()), l.node().label + ": (batch, head) slices of the cache");
  for (const ops::Span& s : spans) {
    Binding b{cache, true};
    if (spans.size() > 1) b = ops::window(cache, true, s.first * slice_bytes, s.count * slice_bytes);
    p.first = static_cast<uint32_t>(s.first);
    p.slices = static_cast<uint32_t>(s.count);
    // One item's shift: a workgroup per head, each finding its slice from the item at run time
    // (those outside this window do nothing).
    const int64_t groups = one_item ? c.shape[1] : static_cast<int64_t>(s.count);
    l.dispatch(Kernel::rope_shift, DType::f32, {b, {table}, {shift}}, PushBlock::of(p), l.grid(groups, 1, 1),
               {static_cast<uint32_t>(wg), a.style == RopeOptions::Style::neox ? 1u : 0u, ops::kv_type_code(c.dtype),
                a.has_rope ? 1u : 0u, static_cast<uint32_t>(a.rotation), static_cast<uint32_t>(2 * wg)});
  }
}

}  // namespace

Tensor Graph::rope_shift(Tensor cache, Tensor shift, const std::optional<RopeOptions>& rope, int rotation) {
  const std::string op = "rope_shift";
  GraphImpl& g = impl();
  g.check(cache, op, "cache");
  g.check(shift, op, "shift");
  ops::require_rank(g, op, "cache", cache, 4, 4);
  ops::require_dtype(g, op, "shift", shift, DType::i32);
  if (!g.externals.count(cache.id)) shape_error(g.label(op), "the cache must be a tensor made by Graph::external");
  if (!ops::is_kv_cache_type(cache.dtype))
    shape_error(g.label(op), "cache is " + describe(cache) + ": a KV cache holds f32, f16, q8_0 or q4_0");
  const int64_t D = cache.shape[3];
  if (D % 2 != 0 || (is_quantized(cache.dtype) && D % 32 != 0))
    shape_error(g.label(op), "cache is " + describe(cache) + ": rows of an even head dim (whole blocks of 32 quantized)");
  if (shift.shape.rank() != 1 || (shift.shape.numel() != 3 && shift.shape.numel() != 4))
    shape_error(g.label(op), "shift is " + describe(shift) + ": expected i32 [3] (keep, discard, end) or [4] (keep, discard, end, item)");
  if (rotation != 0 && (!rope || rotation < 2 || rotation > 1024 || (rotation & (rotation - 1)) != 0 || D % rotation != 0))
    shape_error(g.label(op), "rotation is " + std::to_string(rotation) + ": expected 0, or with rope a power of two from 2 to 1024 dividing the head dim " +
                                 std::to_string(D));
  RopeShiftAttrs at;
  at.rotation = rotation;
  if (rope) {
    if (rope->offset_tensor || rope->offset != 0)
      throw Error(ErrorCode::invalid_argument, g.label(op) + ": rope.offset must be 0 (the shift is a position change)");
    at.has_rope = true;
    at.style = rope->style;
    at.dims = ops::check_rope(g, op, "the cache's rows of " + std::to_string(D), D, 1, *rope);
    at.freq_base = rope->freq_base;
    at.freq_scale = rope->freq_scale;
    at.freq_factors = rope->freq_factors;
  }
  return g.add_node(OpKind::rope_shift, op, {cache.id, shift.id}, at, cache.shape, cache.dtype);
}

void register_rope_shift_ops(OpRegistry& r) { r.add(OpKind::rope_shift, lower_rope_shift); }

}  // namespace vkformer
